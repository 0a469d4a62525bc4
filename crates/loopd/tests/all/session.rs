//! Sessions on disk: the baseline is written once and replayed byte for byte, messages are
//! append-only, damage is named, and a crash between a call and its result is finished.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use loopd::llama::{LlamaClient, LlamaConfig, Message, ToolCall};
use loopd::session::{BASELINE_FILE, MESSAGES_FILE, Session, SessionError, SessionIds};
use loopd::tools::{Entry, FakeTools, Registry, echo_schema};
use loopd::turn::{Limits, Runtime, run_turn};
use testkit::ScriptServer;

fn ids(id: &str) -> SessionIds {
    SessionIds {
        id: id.into(),
        resume_token: Some("token".into()),
    }
}

fn run(server: &ScriptServer, registry: &Registry, session: &mut Session, user: &str) -> String {
    let client = LlamaClient::new(LlamaConfig {
        base_url: server.base_url(),
        ..Default::default()
    });
    let fake = FakeTools::new();
    let rt = Runtime {
        model: &client,
        port: &fake,
        registry,
        limits: Limits::default(),
        children: None,
    };
    run_turn(&rt, session, user, &mut |_| {}).unwrap()
}

const TWO_TURNS: &str = r#"{"turns":[
  {"replies":[{"call":[{"name":"find_tool","arguments":{"query":"echo"}}]},{"say":"one"}]},
  {"replies":[{"call":[{"name":"find_tool","arguments":{"query":"echo"}}]},{"say":"two"}]}]}"#;

#[test]
fn changing_the_registry_changes_no_byte_of_an_existing_sessions_baseline_or_prefix() {
    let dir = testkit::temp_dir();
    let server = ScriptServer::from_json(TWO_TURNS);
    let before = Registry::m2b();
    let mut session =
        Session::create(dir.path(), ids("s1"), "system text", &before.core_schemas()).unwrap();
    let baseline = fs::read(dir.path().join("s1").join(BASELINE_FILE)).unwrap();
    assert_eq!(run(&server, &before, &mut session, "first"), "one");
    drop(session);

    // A new registry: another core tool and a different set of tools to find.
    let after = Registry::new(vec![
        Entry {
            schema: echo_schema(),
            core: true,
        },
        Entry {
            schema: loopd::tools::shell_schema(),
            core: false,
        },
    ]);
    assert_ne!(after.core_schemas(), before.core_schemas());
    let mut session = Session::open(dir.path(), "s1").unwrap();
    assert_eq!(run(&server, &after, &mut session, "second"), "two");

    assert_eq!(
        fs::read(dir.path().join("s1").join(BASELINE_FILE)).unwrap(),
        baseline
    );
    let bodies = server.requests();
    assert_eq!(bodies.len(), 4);
    for pair in bodies.windows(2) {
        let earlier = pair[0].strip_suffix("]}").unwrap();
        assert!(
            pair[1].starts_with(earlier),
            "a request is not a byte prefix of the next"
        );
    }
    let tools = loopd::llama::tools_json(&before.core_schemas()).unwrap();
    assert!(
        bodies
            .iter()
            .all(|b| b.contains(&format!("\"tools\":{tools},")))
    );
}

#[test]
fn the_baseline_holds_the_system_message_and_the_tools_array_and_is_never_rewritten() {
    let dir = testkit::temp_dir();
    let registry = Registry::m3a();
    Session::create(dir.path(), ids("s1"), "be brief", &registry.core_schemas()).unwrap();
    let text = fs::read_to_string(dir.path().join("s1").join(BASELINE_FILE)).unwrap();
    let expected = format!(
        "{{\"system\":{{\"role\":\"system\",\"content\":\"be brief\"}},\"tools\":{}}}\n",
        loopd::llama::tools_json(&registry.core_schemas()).unwrap()
    );
    assert_eq!(text, expected);
    let again = Session::create(dir.path(), ids("s1"), "other", &[]);
    assert!(matches!(again, Err(SessionError::Exists(id)) if id == "s1"));
    assert_eq!(
        fs::read_to_string(dir.path().join("s1").join(BASELINE_FILE)).unwrap(),
        expected
    );
}

#[test]
fn session_files_are_private_to_the_owner() {
    let dir = testkit::temp_dir();
    let mut session = Session::create(dir.path(), ids("s1"), "x", &[]).unwrap();
    session.append(&Message::user("hello")).unwrap();
    let mode = |p: &std::path::Path| fs::metadata(p).unwrap().permissions().mode() & 0o777;
    let folder = dir.path().join("s1");
    assert_eq!(mode(&folder), 0o700);
    for file in ["session.json", BASELINE_FILE, MESSAGES_FILE] {
        assert_eq!(mode(&folder.join(file)), 0o600, "{file}");
    }
    let stored: SessionIds =
        serde_json::from_str(&fs::read_to_string(folder.join("session.json")).unwrap()).unwrap();
    assert_eq!(stored, ids("s1"));
}

#[test]
fn a_session_file_other_users_could_read_is_refused_with_the_chmod_that_fixes_it() {
    let dir = testkit::temp_dir();
    Session::create(dir.path(), ids("s1"), "x", &[]).unwrap();
    let file = dir.path().join("s1").join("session.json");
    for mode in [0o640, 0o604, 0o644] {
        fs::set_permissions(&file, fs::Permissions::from_mode(mode)).unwrap();
        let error = Session::open(dir.path(), "s1").err().unwrap().to_string();
        assert!(
            error.contains(&format!("chmod 600 {}", file.display())),
            "{mode:o}: {error}"
        );
    }
    fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
    assert!(Session::open(dir.path(), "s1").is_ok());
}

#[test]
fn messages_are_appended_one_line_each_and_read_back_in_order() {
    let dir = testkit::temp_dir();
    let mut session = Session::create(dir.path(), ids("s1"), "x", &[]).unwrap();
    session.append(&Message::user("a")).unwrap();
    session.append(&Message::assistant("b", vec![])).unwrap();
    let text = fs::read_to_string(dir.path().join("s1").join(MESSAGES_FILE)).unwrap();
    assert_eq!(
        text,
        "{\"role\":\"user\",\"content\":\"a\"}\n{\"role\":\"assistant\",\"content\":\"b\"}\n"
    );
    let reopened = Session::open(dir.path(), "s1").unwrap();
    assert_eq!(reopened.len(), 2);
    assert_eq!(reopened.request(None).messages.len(), 3);
}

#[test]
fn a_torn_last_line_is_cut_and_the_session_opens() {
    let dir = testkit::temp_dir();
    let mut session = Session::create(dir.path(), ids("s1"), "x", &[]).unwrap();
    session.append(&Message::user("kept")).unwrap();
    drop(session);
    let path = dir.path().join("s1").join(MESSAGES_FILE);
    let mut bytes = fs::read(&path).unwrap();
    bytes.extend_from_slice(b"{\"role\":\"assis");
    fs::write(&path, &bytes).unwrap();
    let session = Session::open(dir.path(), "s1").unwrap();
    assert_eq!(session.len(), 1);
    assert_eq!(
        fs::read_to_string(&path).unwrap(),
        "{\"role\":\"user\",\"content\":\"kept\"}\n"
    );
}

#[test]
fn a_damaged_line_is_an_error_naming_the_file_and_line() {
    let dir = testkit::temp_dir();
    Session::create(dir.path(), ids("s1"), "x", &[]).unwrap();
    let path = dir.path().join("s1").join(MESSAGES_FILE);
    fs::write(
        &path,
        "{\"role\":\"user\",\"content\":\"a\"}\n{\"role\":\"wizard\"}\n",
    )
    .unwrap();
    let error = Session::open(dir.path(), "s1").unwrap_err().to_string();
    assert!(
        error.contains("messages.jsonl") && error.contains("line 2"),
        "{error}"
    );
}

#[test]
fn a_missing_session_and_a_bad_id_are_named() {
    let dir = testkit::temp_dir();
    let missing = Session::open(dir.path(), "nope").unwrap_err().to_string();
    assert!(missing.contains("no session nope"), "{missing}");
    for bad in ["../etc", "", "a/b", &"x".repeat(65)] {
        assert!(
            matches!(Session::open(dir.path(), bad), Err(SessionError::BadId(_))),
            "{bad}"
        );
        assert!(matches!(
            Session::create(dir.path(), ids(bad), "x", &[]),
            Err(SessionError::BadId(_))
        ));
    }
}

#[test]
fn a_session_folder_that_cannot_be_created_is_an_error_not_a_panic() {
    let dir = testkit::temp_dir();
    let file = dir.path().join("a-file");
    fs::write(&file, "").unwrap();
    let error = Session::create(&file, ids("s1"), "x", &[])
        .unwrap_err()
        .to_string();
    assert!(error.contains("a-file"), "{error}");
}

#[test]
fn calls_left_without_a_result_by_a_crash_are_sent_again_with_their_numbers_first() {
    let dir = testkit::temp_dir();
    let mut session = Session::create(dir.path(), ids("s1"), "x", &[]).unwrap();
    session.append(&Message::user("earlier")).unwrap();
    let call = |id: &str, text: &str| ToolCall {
        id: id.into(),
        name: "call_tool".into(),
        arguments: format!(r#"{{"name":"echo","arguments":{{"text":"{text}"}}}}"#),
    };
    session
        .append(&Message::assistant(
            "",
            vec![call("c1", "done"), call("c2", "lost")],
        ))
        .unwrap();
    session.append(&Message::tool("c1", "done")).unwrap();
    drop(session); // the process stopped before c2's result was written

    let mut session = Session::open(dir.path(), "s1").unwrap();
    assert_eq!(session.tool_calls_so_far(), 2);
    let unanswered: Vec<(u64, String)> = session
        .unanswered_calls()
        .into_iter()
        .map(|(n, c)| (n, c.id))
        .collect();
    assert_eq!(unanswered, [(2, "c2".to_string())]);

    let server =
        ScriptServer::from_json(r#"{"turns":[{"replies":[]},{"replies":[{"say":"ok"}]}]}"#);
    let client = LlamaClient::new(LlamaConfig {
        base_url: server.base_url(),
        ..Default::default()
    });
    let fake = FakeTools::new();
    let registry = Registry::demo();
    let rt = Runtime {
        model: &client,
        port: &fake,
        registry: &registry,
        limits: Limits::default(),
        children: None,
    };
    assert_eq!(
        run_turn(&rt, &mut session, "next", &mut |_| {}).unwrap(),
        "ok"
    );
    let sent: Vec<(u64, String)> = fake
        .calls()
        .into_iter()
        .map(|r| (r.call_id, r.arguments))
        .collect();
    assert_eq!(sent, [(2, r#"{"text":"lost"}"#.to_string())]);
    let roles: Vec<String> = server.request_json()[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(
        roles,
        ["system", "user", "assistant", "tool", "tool", "user"]
    );
    assert!(session.unanswered_calls().is_empty());
}

#[test]
fn a_messages_file_that_is_not_a_regular_file_is_refused_by_name() {
    let dir = testkit::temp_dir();
    Session::create(dir.path(), ids("s1"), "x", &[]).unwrap();
    let path = dir.path().join("s1").join(MESSAGES_FILE);
    let _ = fs::remove_file(&path);
    std::os::unix::fs::symlink("/dev/zero", &path).unwrap();
    let error = Session::open(dir.path(), "s1").unwrap_err().to_string();
    assert!(
        error.contains("messages.jsonl") && error.contains("not a regular file"),
        "{error}"
    );
}
