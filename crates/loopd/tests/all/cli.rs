//! The `loopd` binary, run as a process: the demo, chat from a script, from standard input and
//! over HTTP, resuming a session, and the errors a person gets for bad flags and files.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use testkit::ScriptServer;

fn loopd(args: &[&str], stdin: &str) -> Output {
    loopd_with(args, stdin, &[])
}

/// `loopd` with these environment variables set.
pub(super) fn loopd_with(args: &[&str], stdin: &str, env: &[(&str, &Path)]) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_loopd"))
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(stdin.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

pub(super) fn text(output: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn json_lines(output: &Output) -> Vec<serde_json::Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn state(dir: &Path) -> String {
    dir.join("state").display().to_string()
}

/// The folders a demo could write to, all inside `dir`: home, the XDG state folder, boxmaker's
/// state folder and the temporary folder.
fn demo_env(dir: &Path) -> Vec<(&'static str, std::path::PathBuf)> {
    let env = vec![
        ("HOME", dir.join("home")),
        ("XDG_STATE_HOME", dir.join("xdg-state")),
        ("BOXMAKER_STATE_DIR", dir.join("state")),
        ("TMPDIR", dir.join("tmp")),
    ];
    std::fs::create_dir(dir.join("tmp")).unwrap();
    env
}

fn demo(args: &[&str], dir: &Path) -> Output {
    let env = demo_env(dir);
    let env: Vec<(&str, &Path)> = env.iter().map(|(k, v)| (*k, v.as_path())).collect();
    let output = loopd_with(args, "", &env);
    // Nothing is left behind: no state folder, and the temporary folder is removed.
    for (_, path) in &env {
        let left: Vec<_> = std::fs::read_dir(path)
            .map(|entries| entries.map(|e| e.unwrap().path()).collect())
            .unwrap_or_default();
        assert!(left.is_empty(), "the demo left {left:?}");
    }
    assert!(!dir.join("state").exists() && !dir.join("xdg-state").exists());
    output
}

#[test]
fn the_demo_finds_calls_meets_a_denial_and_answers() {
    let dir = testkit::temp_dir();
    let output = demo(&["demo", "--var", "workspace=/ws"], dir.path());
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}\n{err}");
    assert!(
        out.contains("call   find_tool {\"query\":\"repeat text\"}"),
        "{out}"
    );
    assert!(
        out.contains("result Every tool call passes one gate."),
        "{out}"
    );
    assert!(
        out.contains("denied read_file: Denied: no grant allows this call."),
        "{out}"
    );
    assert!(out.contains("/ws/notes.txt"), "{out}");
    assert!(out.contains("call   clock {}"), "{out}");
    assert!(
        out.contains("in a temporary folder, now removed: 3 turn(s) answered, 0 failed"),
        "{out}"
    );
}

#[test]
fn the_demo_in_json_gives_one_event_per_line() {
    let dir = testkit::temp_dir();
    let output = demo(&["demo", "--json"], dir.path());
    assert!(output.status.success());
    let events = json_lines(&output);
    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "turn_done").count(), 3);
    assert!(events.iter().any(|e| e["type"] == "tool_denied"
        && e["name"] == "read_file"
        && e["reason"] == "no_grant"));
    let end = events.last().unwrap();
    assert_eq!(end["type"], "chat_end");
    assert_eq!(end["removed"], true);
    assert!(
        end["dir"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{}/loopd-demo-", dir.path().join("tmp").display()))
    );
    assert!(!Path::new(end["dir"].as_str().unwrap()).exists());
}

#[test]
fn chat_without_a_port_is_refused_rather_than_falling_back() {
    let output = loopd(&["chat", "--model", "script:x.json"], "");
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(err.contains("--port"), "{err}");
}

#[test]
fn chat_with_an_unknown_port_or_model_says_what_exists() {
    let output = loopd(&["chat", "--port", "mcp", "--model", "script:x.json"], "");
    assert_eq!(output.status.code(), Some(2));
    let (_, err) = text(&output);
    assert!(
        err.contains("--port \"mcp\" is not a port; use \"broker\"") && err.contains("\"fake\""),
        "{err}"
    );
    let output = loopd(&["chat", "--port", "fake", "--model", "ftp://x"], "");
    assert_eq!(output.status.code(), Some(2));
    assert!(
        text(&output)
            .1
            .contains("neither an http(s) URL nor script:FILE")
    );
}

#[test]
fn chat_plays_a_script_file_with_its_own_user_messages_and_placeholders() {
    let dir = testkit::temp_dir();
    let script = dir.path().join("s.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"user":"echo {word}","replies":[
            {"call":[{"name":"call_tool","arguments":{"name":"echo","arguments":{"text":"{word}"}}}]},
            {"say":"said {word}"}]}]}"#,
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    let output = loopd(
        &[
            "chat",
            "--port",
            "fake",
            "--model",
            &model,
            "--var",
            "word=bonjour",
            "--json",
            "--state-dir",
            &state(dir.path()),
        ],
        "",
    );
    assert!(output.status.success(), "{:?}", text(&output));
    let events = json_lines(&output);
    assert_eq!(
        events[0],
        serde_json::json!({"type":"user","text":"echo bonjour"})
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_result" && e["content"] == "bonjour")
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "turn_done" && e["text"] == "said bonjour")
    );
}

#[test]
fn a_bad_script_is_refused_with_its_file_and_place() {
    let dir = testkit::temp_dir();
    let script = dir.path().join("bad.json");
    std::fs::write(&script, r#"{"turns":[{"replies":[{}]}]}"#).unwrap();
    let model = format!("script:{}", script.display());
    let output = loopd(&["chat", "--port", "fake", "--model", &model], "");
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(
        err.contains("bad.json") && err.contains("turn 1 reply 1"),
        "{err}"
    );
    let output = loopd(
        &[
            "chat",
            "--port",
            "fake",
            "--model",
            "script:/nonexistent.json",
        ],
        "",
    );
    assert!(
        text(&output)
            .1
            .contains("cannot read script /nonexistent.json")
    );
}

#[test]
fn chat_reads_messages_from_standard_input_over_http_and_resumes_the_session() {
    let dir = testkit::temp_dir();
    let server = ScriptServer::from_json(
        r#"{"turns":[{"replies":[{"say":"one"}]},{"replies":[{"say":"two"}]},{"replies":[{"say":"three"}]}]}"#,
    );
    let url = server.base_url();
    let state_dir = state(dir.path());
    let output = loopd(
        &[
            "chat",
            "--port",
            "fake",
            "--model",
            &url,
            "--json",
            "--state-dir",
            &state_dir,
        ],
        "first\n\nsecond\n",
    );
    assert!(output.status.success(), "{:?}", text(&output));
    let events = json_lines(&output);
    let answers: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "turn_done")
        .map(|e| e["text"].as_str().unwrap())
        .collect();
    assert_eq!(answers, ["one", "two"]);
    let session = events.last().unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();

    let output = loopd(
        &[
            "chat",
            "--port",
            "fake",
            "--model",
            &url,
            "--session",
            &session,
            "-m",
            "third",
            "--state-dir",
            &state_dir,
        ],
        "",
    );
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}{err}");
    assert!(out.contains("assistant> three"), "{out}");
    let users = server.last_contents("user");
    assert_eq!(users, ["first", "second", "third"]);
    // --state-dir is boxmaker's state folder: the conversation is in its sessions/.
    let folder = Path::new(&state_dir).join("sessions").join(&session);
    assert!(
        folder.join("messages.jsonl").is_file(),
        "{}",
        folder.display()
    );
}

/// A loopback URL nothing listens on.
fn closed_url() -> String {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    format!("http://127.0.0.1:{port}/v1")
}

/// The session folders under `state`.
fn session_folders(state: &Path) -> Vec<std::path::PathBuf> {
    match std::fs::read_dir(state.join("sessions")) {
        Ok(entries) => entries.map(|e| e.unwrap().path()).collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_server_that_is_down_fails_the_turn_says_what_to_do_and_leaves_no_session_folder() {
    let dir = testkit::temp_dir();
    let url = closed_url();
    for json in [false, true] {
        let mut args = vec!["chat", "--port", "fake", "--model", &url];
        args.extend(["-m", "hello", "-m", "again"]);
        let state_dir = state(dir.path());
        args.extend(["--state-dir", &state_dir]);
        if json {
            args.push("--json");
        }
        let output = loopd(&args, "");
        let (out, _) = text(&output);
        assert_eq!(output.status.code(), Some(1));
        assert!(out.contains("cannot be reached"), "{out}");
        assert!(
            out.contains("start one there") && out.contains("--model URL"),
            "{out}"
        );
        if json {
            assert!(out.contains(r#""removed":true"#), "{out}");
        } else {
            assert!(out.contains("0 turn(s) answered, 2 failed"), "{out}");
            assert!(out.contains("no turn reached the model server"), "{out}");
        }
        assert_eq!(
            session_folders(&dir.path().join("state")),
            Vec::<std::path::PathBuf>::new()
        );
    }
}

#[test]
fn a_session_that_reached_a_model_before_keeps_its_folder_when_the_server_is_down() {
    let dir = testkit::temp_dir();
    let script = dir.path().join("s.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"user":"hi","replies":[{"say":"x"}]}]}"#,
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    let state_dir = state(dir.path());
    let output = loopd(
        &[
            "chat",
            "--port",
            "fake",
            "--model",
            &model,
            "--state-dir",
            &state_dir,
        ],
        "",
    );
    assert!(output.status.success(), "{:?}", text(&output));
    let folders = session_folders(&dir.path().join("state"));
    assert_eq!(folders.len(), 1);
    let id = folders[0]
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    // Resumed against a server that is down: its turn fails, its folder stays.
    let url = closed_url();
    let output = loopd(
        &[
            "chat",
            "--port",
            "fake",
            "--model",
            &url,
            "--session",
            &id,
            "-m",
            "more",
            "--state-dir",
            &state_dir,
        ],
        "",
    );
    let (out, _) = text(&output);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("cannot be reached"), "{out}");
    assert_eq!(session_folders(&dir.path().join("state")), folders);
}

#[test]
fn resuming_a_session_that_does_not_exist_is_an_error_not_a_new_session() {
    let dir = testkit::temp_dir();
    let script = dir.path().join("s.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"user":"hi","replies":[{"say":"x"}]}]}"#,
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    let output = loopd(
        &[
            "chat",
            "--port",
            "fake",
            "--model",
            &model,
            "--session",
            "local-missing",
            "--state-dir",
            &state(dir.path()),
        ],
        "",
    );
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2));
    assert!(err.contains("no session local-missing"), "{err}");
}

#[test]
fn loopd_is_non_dumpable_so_a_process_of_the_same_user_cannot_read_its_environment() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt};
    use std::os::unix::process::CommandExt;
    // Both sides run as nobody: a process without capabilities, of the same user, is what a
    // tool's command would be; only loopd's own PR_SET_DUMPABLE keeps it out. loopd runs from a
    // copy nobody can reach wherever the checkout is.
    let dir = testkit::temp_dir();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let loopd = testkit::RunnableCopy::of(Path::new(env!("CARGO_BIN_EXE_loopd")));
    let mut child = loopd
        .command_as(testkit::NOBODY)
        .args(["chat", "--port", "fake", "--model", "http://127.0.0.1:9/v1"])
        .args(["--state-dir", &state(dir.path())])
        .env("BOXMAKER_TEST_SECRET", "hunter2")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let environ = format!("/proc/{}/environ", child.id());
    // A non-dumpable process's /proc files belong to root; wait for loopd's first act.
    let mut owner = u32::MAX;
    for _ in 0..500 {
        owner = std::fs::metadata(&environ).unwrap().uid();
        if owner == 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let read = Command::new("cat")
        .arg(&environ)
        .current_dir(loopd.folder())
        .uid(testkit::NOBODY)
        .gid(testkit::NOBODY)
        .output()
        .unwrap();
    drop(child.stdin.take());
    child.wait().unwrap();
    assert_eq!(owner, 0, "loopd stayed dumpable");
    assert!(!read.status.success());
    assert!(!String::from_utf8_lossy(&read.stdout).contains("hunter2"));
    assert!(String::from_utf8_lossy(&read.stderr).contains("Permission denied"));
}
