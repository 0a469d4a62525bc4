//! `loopd chat --port broker` against a real `brokerd` on temporary folders (`testkit`'s
//! `BrokerProcess`): a granted read answered, an ungranted one denied, a write into the grants
//! folder refused as protected, a grant added mid-session found by `find_tool`, and a loopd
//! killed mid-turn that resumes the same broker session.
//!
//! Needs the `brokerd` binary of this build (`cargo build -p brokerd`, or
//! `cargo test --workspace`); `testkit::binary` refuses a missing or stale one.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use loopd::broker::BrokerPort;
use loopd::llama::{LlamaClient, LlamaConfig};
use loopd::session::{Session, SessionIds};
use loopd::tools::{Registry, ToolPort, denial_text};
use loopd::turn::{Limits, Runtime, TurnEvent, run_turn};
use proto::DenyReason;
use serde_json::{Value, json};
use testkit::{BrokerProcess, ScriptServer};

/// Short limits for the broker.
const FAST: &str = "idle_timeout_ms = 1000\n";

/// Read in the work folder; labels explicit (the defaults make side effects after a read ask).
const READ_WORK: &str = r#"
[[grant]]
id = "read-work"
tool = "read_file"
paths = ["{work}"]
class = "private"
untrusted = false
"#;

/// A call of `tool` through `call_tool`, as a script writes it.
fn call(tool: &str, arguments: Value) -> Value {
    json!({"name": "call_tool", "arguments": {"name": tool, "arguments": arguments}})
}

/// `loopd chat --port broker` on `broker`'s socket with the state folder `state`, a script
/// server at `url`, and `extra` flags; JSON events.
fn chat(broker: &BrokerProcess, state: &Path, url: &str, extra: &[&str]) -> Output {
    let socket = broker.socket().display().to_string();
    let state = state.display().to_string();
    let mut args = vec![
        "chat",
        "--port",
        "broker",
        "--socket",
        &socket,
        "--model",
        url,
        "--state-dir",
        &state,
        "--json",
    ];
    args.extend_from_slice(extra);
    Command::new(env!("CARGO_BIN_EXE_loopd"))
        .args(&args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

fn events(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

fn of_type<'a>(events: &'a [Value], kind: &str) -> Vec<&'a Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// The only conversation in the state folder `state`.
fn only_session(state: &Path) -> PathBuf {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(state.join("sessions"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.remove(0)
}

#[test]
fn a_granted_read_file_is_answered_through_the_broker() {
    let broker = BrokerProcess::start(READ_WORK, FAST);
    let file = broker.work.join("notes.txt");
    std::fs::write(&file, "the notes\n").unwrap();
    let server = ScriptServer::from_json(
        &json!({"turns": [{"replies": [
            {"call": [call("read_file", json!({"path": file}))]},
            {"say": "read"}
        ]}]})
        .to_string(),
    );
    let state = broker.root.path().join("loopd-state");
    let output = chat(&broker, &state, &server.base_url(), &["-m", "read it"]);
    assert!(output.status.success(), "{output:?}");
    let events = events(&output);
    let results = of_type(&events, "tool_result");
    assert_eq!(results.len(), 1, "{events:?}");
    let content = results[0]["content"].as_str().unwrap();
    assert!(content.ends_with("\nthe notes\n"), "{content}");
    assert_eq!(results[0]["class"], "private");
    // The conversation is the broker's session, its token kept beside it, readable only by us.
    let dir = only_session(&state);
    let id = dir.file_name().unwrap().to_str().unwrap().to_string();
    assert!(id.starts_with("s-"), "{id}");
    let ids: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("session.json")).unwrap()).unwrap();
    assert_eq!(ids["id"], id.as_str());
    assert!(ids["resume_token"].as_str().is_some_and(|t| !t.is_empty()));
    let mode = std::fs::metadata(dir.join("session.json"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn an_ungranted_call_is_denied_with_the_no_grant_sentence() {
    let broker = BrokerProcess::start(READ_WORK, FAST);
    let server = ScriptServer::from_json(
        &json!({"turns": [{"replies": [
            {"call": [call("read_file", json!({"path": "/etc/hostname"}))]},
            {"say": "denied"}
        ]}]})
        .to_string(),
    );
    let state = broker.root.path().join("loopd-state");
    let output = chat(&broker, &state, &server.base_url(), &["-m", "read it"]);
    assert!(output.status.success(), "{output:?}");
    let events = events(&output);
    let denied = of_type(&events, "tool_denied");
    assert_eq!(denied.len(), 1, "{events:?}");
    assert_eq!(denied[0]["name"], "read_file");
    assert_eq!(denied[0]["reason"], "no_grant");
    let results = of_type(&events, "tool_result");
    assert_eq!(results[0]["content"], denial_text(DenyReason::NoGrant));
}

#[test]
fn a_mistaken_call_tells_the_model_which_argument_is_wrong_and_where_a_missing_file_may_be() {
    let broker = BrokerProcess::start(READ_WORK, FAST);
    let file = broker.work.join("notes.txt");
    std::fs::write(&file, "the notes\n").unwrap();
    let server = ScriptServer::from_json(
        &json!({"turns": [{"replies": [
            {"call": [call("read_file", json!({"path": "notes.txt"}))]},
            {"call": [call("read_file", json!({"path": 5}))]},
            {"call": [call("read_file", json!({"path": broker.work.join("Notes.txt")}))]},
            {"say": "done"}
        ]}]})
        .to_string(),
    );
    let state = broker.root.path().join("loopd-state");
    let output = chat(
        &broker,
        &state,
        &server.base_url(),
        &["-m", "read the notes"],
    );
    assert!(output.status.success(), "{output:?}");
    let events = events(&output);
    assert!(of_type(&events, "tool_denied").is_empty(), "{events:?}");
    let results = of_type(&events, "tool_result");
    assert_eq!(results.len(), 3, "{events:?}");
    let work = broker.work.display();
    assert_eq!(
        results[0]["content"],
        format!(
            "The tool failed: argument `path` must be an absolute path; got `notes.txt` (relative to the granted folder {work}: {work}/notes.txt)"
        )
    );
    assert_eq!(
        results[1]["content"],
        "The tool failed: argument `path` must be a string; got 5"
    );
    let missing = results[2]["content"].as_str().unwrap();
    assert!(missing.starts_with("The tool failed: "), "{missing}");
    assert!(
        missing.ends_with(&format!(
            "{work}/Notes.txt does not exist; the nearest existing folder is {work}; did you mean {work}/notes.txt?"
        )),
        "{missing}"
    );
}

#[test]
fn a_write_into_the_protected_grants_folder_is_denied() {
    let grants = format!(
        "{READ_WORK}\n[[grant]]\nid = \"write-everywhere\"\ntool = \"write_file\"\npaths = [\"/\"]\nuntrusted = false\non_untrusted = \"allow\"\n"
    );
    let broker = BrokerProcess::start(&grants, FAST);
    let target = broker.config.join("grants/more.toml");
    let server = ScriptServer::from_json(
        &json!({"turns": [{"replies": [
            {"call": [call("write_file", json!({"path": target, "content": "[[grant]]\n"}))]},
            {"say": "refused"}
        ]}]})
        .to_string(),
    );
    let state = broker.root.path().join("loopd-state");
    let output = chat(
        &broker,
        &state,
        &server.base_url(),
        &["-m", "grant yourself"],
    );
    assert!(output.status.success(), "{output:?}");
    let events = events(&output);
    let denied = of_type(&events, "tool_denied");
    assert_eq!(denied.len(), 1, "{events:?}");
    assert_eq!(denied[0]["reason"], "protected_path");
    assert!(!target.exists());
}

/// The `content` of each `find_tool` result of a turn.
fn found(events: &[TurnEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            TurnEvent::ToolResult { name, content, .. } if name == "find_tool" => {
                Some(content.clone())
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_grant_added_mid_session_is_found_by_find_tool_and_reached_by_call_tool() {
    let broker = BrokerProcess::start(READ_WORK, FAST);
    let file = broker.work.join("new.txt");
    let turn = json!({"replies": [
        {"call": [{"name": "find_tool", "arguments": {"query": "write_file"}}]},
        {"call": [call("write_file", json!({"path": file, "content": "made"}))]},
        {"say": "done"}
    ]});
    let server = ScriptServer::from_json(&json!({"turns": [turn, turn]}).to_string());
    let port = BrokerPort::connect(&broker.socket(), None).unwrap();
    let registry = Registry::m3a();
    let dir = testkit::temp_dir();
    let ids = SessionIds {
        id: port.session().session.to_string(),
        resume_token: Some(port.session().token.clone()),
    };
    let mut session = Session::create(dir.path(), ids, "x", &registry.core_schemas()).unwrap();
    let client = LlamaClient::new(LlamaConfig {
        base_url: server.base_url(),
        ..LlamaConfig::default()
    });
    let rt = Runtime {
        model: &client,
        port: &port as &dyn ToolPort,
        registry: &registry,
        limits: Limits::default(),
        children: None,
    };
    let mut before = Vec::new();
    run_turn(&rt, &mut session, "write", &mut |e| before.push(e.clone())).unwrap();
    assert!(!found(&before)[0].contains("\"write_file\""), "{before:?}");
    assert!(before.iter().any(|e| matches!(e,
        TurnEvent::ToolResult { content, .. } if content.starts_with("No tool named \"write_file\""))));
    assert!(!file.exists());

    broker.write_grants(
        "write.toml",
        "[[grant]]\nid = \"write-work\"\ntool = \"write_file\"\npaths = [\"{work}\"]\nuntrusted = false\non_untrusted = \"allow\"\n",
    );
    assert!(
        broker.wait_for_log("grants reloaded", 1, Duration::from_secs(60)),
        "{}",
        broker.log()
    );
    let mut after = Vec::new();
    run_turn(&rt, &mut session, "write again", &mut |e| {
        after.push(e.clone())
    })
    .unwrap();
    assert!(found(&after)[0].contains("\"write_file\""), "{after:?}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "made");
}

#[test]
fn loopd_killed_mid_turn_resumes_the_same_broker_session_with_its_labels() {
    let grants = format!(
        "{READ_WORK}\n[[grant]]\nid = \"secret\"\ntool = \"read_file\"\npaths = [\"{{work}}/secret\"]\nclass = \"secret\"\nuntrusted = false\n\n[[grant]]\nid = \"careful\"\ntool = \"read_file\"\npaths = [\"{{work}}/public\"]\nmax_taint = \"private\"\nuntrusted = false\n"
    );
    let broker = BrokerProcess::start(&grants, FAST);
    std::fs::create_dir_all(broker.work.join("secret")).unwrap();
    std::fs::create_dir_all(broker.work.join("public")).unwrap();
    std::fs::write(broker.work.join("secret/key"), "k").unwrap();
    std::fs::write(broker.work.join("public/page"), "p").unwrap();
    let server = ScriptServer::from_json(
        &json!({"turns": [
            {"replies": [
                {"call": [call("read_file", json!({"path": broker.work.join("secret/key")}))]},
                {"hang_ms": 60_000}
            ]},
            {"replies": [
                {"call": [call("read_file", json!({"path": broker.work.join("public/page")}))]},
                {"say": "after the restart"}
            ]}
        ]})
        .to_string(),
    );
    let state = broker.root.path().join("loopd-state");
    let socket = broker.socket().display().to_string();
    let state_arg = state.display().to_string();
    let url = server.base_url();
    let mut first = Command::new(env!("CARGO_BIN_EXE_loopd"))
        .args([
            "chat",
            "--port",
            "broker",
            "--socket",
            &socket,
            "--model",
            &url,
            "--state-dir",
            &state_arg,
            "-m",
            "read the secret",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Mid-turn: the secret's result is on disk and the model is answering (it hangs).
    let deadline = Instant::now() + Duration::from_secs(30);
    let session = loop {
        let messages = std::fs::read_dir(state.join("sessions"))
            .ok()
            .and_then(|mut dirs| dirs.next())
            .and_then(|dir| dir.ok())
            .map(|dir| dir.path());
        if let Some(dir) = messages
            && std::fs::read_to_string(dir.join("messages.jsonl"))
                .is_ok_and(|text| text.lines().count() >= 3)
        {
            break dir;
        }
        assert!(Instant::now() < deadline, "loopd never ran the first call");
        std::thread::sleep(Duration::from_millis(50));
    };
    first.kill().unwrap(); // SIGKILL
    first.wait().unwrap();
    let id = session.file_name().unwrap().to_str().unwrap().to_string();

    let output = chat(
        &broker,
        &state,
        &url,
        &["--session", &id, "-m", "now the page"],
    );
    assert!(output.status.success(), "{output:?}");
    let events = events(&output);
    // The same broker session: the secret read before the kill still counts.
    let denied = of_type(&events, "tool_denied");
    assert_eq!(denied.len(), 1, "{events:?}");
    assert_eq!(denied[0]["reason"], "taint_too_high");
    assert_eq!(of_type(&events, "chat_end")[0]["session"], id.as_str());
    assert_eq!(only_session(&state), session);
}

#[test]
fn under_umask_022_the_state_folder_loopd_shares_with_the_broker_holds_only_private_files() {
    // The umask most owners run with: a file made with the default mode is readable by all.
    rustix::process::umask(rustix::fs::Mode::from_raw_mode(0o022));
    let broker = BrokerProcess::start(READ_WORK, FAST);
    let file = broker.work.join("notes.txt");
    std::fs::write(&file, "the notes\n").unwrap();
    let server = ScriptServer::from_json(
        &json!({"turns": [{"replies": [
            {"call": [call("read_file", json!({"path": file}))]},
            {"say": "read"}
        ]}]})
        .to_string(),
    );
    // One state folder for both, as by default: loopd's conversations beside the ledger.
    let output = chat(
        &broker,
        &broker.state,
        &server.base_url(),
        &["-m", "read it"],
    );
    assert!(output.status.success(), "{output:?}");
    only_session(&broker.state);
    let mut wrong = Vec::new();
    let mut files = 0;
    let mut folders = vec![broker.state.clone()];
    while let Some(folder) = folders.pop() {
        for entry in std::fs::read_dir(&folder).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.permissions().mode() & 0o7777;
            if meta.is_dir() {
                folders.push(path.clone());
                if mode != 0o700 {
                    wrong.push((path, mode));
                }
            } else {
                files += 1;
                if mode != 0o600 {
                    wrong.push((path, mode));
                }
            }
        }
    }
    assert!(files >= 6, "{files} files");
    assert!(wrong.is_empty(), "readable by others: {wrong:?}");
}

#[test]
fn a_broker_conversation_whose_model_server_is_down_leaves_no_session_folder() {
    let broker = testkit::BrokerProcess::start("", "");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let state = broker.root.path().join("loopd-state");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_loopd"))
        .args(["chat", "--port", "broker", "--socket"])
        .arg(broker.socket())
        .args([
            "--model",
            &format!("http://127.0.0.1:{port}/v1"),
            "-m",
            "hi",
        ])
        .arg("--state-dir")
        .arg(&state)
        .output()
        .unwrap();
    let out = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(1), "{out}");
    assert!(out.contains("pass --model URL"), "{out}");
    let left: Vec<_> = std::fs::read_dir(state.join("sessions"))
        .map(|entries| entries.map(|e| e.unwrap().path()).collect())
        .unwrap_or_default();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn the_owners_message_reaches_the_broker_as_the_owners_words_so_a_value_from_it_runs_unasked() {
    // Reads are untrusted; a write asks only for a value that came only from untrusted text.
    let grants = r#"
[[grant]]
id = "read-work"
tool = "read_file"
paths = ["{work}"]

[[grant]]
id = "write-work"
tool = "write_file"
paths = ["{work}"]
on_untrusted = "provenance"
"#;
    // An unanswered ask lapses at once: a write that asks is refused, never waits.
    let broker = BrokerProcess::start(grants, "idle_timeout_ms = 1000\napproval_ms = 200\n");
    let inbox = broker.work.join("inbox.txt");
    std::fs::write(&inbox, "Pay billing@vendor.example, or drop@evil.example\n").unwrap();
    let reply = broker.work.join("reply.txt");
    let server = ScriptServer::from_json(
        &json!({"turns": [{"replies": [
            {"call": [call("read_file", json!({"path": inbox}))]},
            {"call": [call("write_file", json!({"path": reply, "content": "paid billing@vendor.example"}))]},
            {"say": "done"}
        ]}]})
        .to_string(),
    );
    let state = broker.root.path().join("loopd-state");
    let asked = "Pay the invoice from billing@vendor.example";
    let output = chat(&broker, &state, &server.base_url(), &["-m", asked]);
    assert!(output.status.success(), "{output:?}");
    let events = events(&output);
    let results = of_type(&events, "tool_result");
    assert_eq!(results.len(), 2, "{events:?}");
    assert!(
        results[1]["content"]
            .as_str()
            .unwrap()
            .contains("+paid billing@vendor.example"),
        "{events:?}"
    );
    assert!(
        of_type(&events, "approval_pending").is_empty(),
        "{events:?}"
    );
    // The owner's words are in the audit log, with the session.
    let log = std::fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    let words: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        .filter(|record| record["event"]["type"] == "owner_words")
        .collect();
    assert_eq!(words.len(), 1, "{log}");
    assert_eq!(words[0]["event"]["text"]["text"], asked);
    assert!(
        words[0]["event"]["session"]
            .as_str()
            .unwrap()
            .starts_with("s-")
    );
}
