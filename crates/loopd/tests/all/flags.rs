//! What a person gets for flags that cannot work together or cannot work at all: one
//! sentence naming the flag and what is wrong, exit status 2 (3: no broker running), and no
//! request made to the model server.

use std::path::Path;

use testkit::ScriptServer;

use crate::cli::{loopd_with, text};

/// `loopd chat --port fake` against a script server that must never be asked, with `extra`
/// flags; the exit status and standard error.
fn refused(extra: &[&str], env: &[(&str, &Path)]) -> (Option<i32>, String) {
    let server = ScriptServer::from_json(r#"{"turns":[{"replies":[{"say":"asked"}]}]}"#);
    let url = server.base_url();
    let mut args = vec!["chat", "--model", &url, "-m", "hi"];
    args.extend_from_slice(extra);
    let output = loopd_with(&args, "", env);
    assert_eq!(server.requests().len(), 0, "the server was asked");
    let (out, err) = text(&output);
    assert!(out.is_empty(), "{out}");
    assert_eq!(err.lines().count(), 1, "one sentence: {err}");
    (output.status.code(), err)
}

#[test]
fn a_timeout_of_0_names_the_range_that_excludes_it() {
    let (code, err) = refused(&["--port", "fake", "--timeout", "0"], &[]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "loopd: --timeout 0 must be more than 0 and at most 86400 seconds"
    );
}

#[test]
fn a_bad_state_dir_is_named_as_the_state_folder() {
    let dir = testkit::temp_dir();
    let (code, err) = refused(&["--port", "fake", "--state-dir", "relative/state"], &[]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "loopd: the state folder relative/state must be an absolute path"
    );
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let given = file.display().to_string();
    let (code, err) = refused(&["--port", "fake", "--state-dir", &given], &[]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        format!(
            "loopd: the state folder {given} (--state-dir or BOXMAKER_STATE_DIR) is not a folder"
        )
    );
    // The variable means the same folder.
    let (code, err) = refused(&["--port", "fake"], &[("BOXMAKER_STATE_DIR", &file)]);
    assert_eq!(code, Some(2));
    assert!(err.contains("is not a folder"), "{err}");
}

#[test]
fn the_state_dir_holds_the_conversations_in_its_sessions_folder_flag_or_variable() {
    let dir = testkit::temp_dir();
    let server = ScriptServer::from_json(r#"{"turns":[{"replies":[{"say":"ok"}]}]}"#);
    let url = server.base_url();
    let by_variable = dir.path().join("by-variable");
    let output = loopd_with(
        &["chat", "--port", "fake", "--model", &url, "-m", "hi"],
        "",
        &[("BOXMAKER_STATE_DIR", &by_variable)],
    );
    assert!(output.status.success(), "{:?}", text(&output));
    let sessions: Vec<_> = std::fs::read_dir(by_variable.join("sessions"))
        .unwrap()
        .collect();
    assert_eq!(sessions.len(), 1);
    // XDG_STATE_HOME/boxmaker when neither is given.
    let xdg = dir.path().join("xdg");
    let output = loopd_with(
        &["chat", "--port", "fake", "--model", &url, "-m", "hi"],
        "",
        &[("XDG_STATE_HOME", &xdg)],
    );
    assert!(output.status.success(), "{:?}", text(&output));
    assert!(xdg.join("boxmaker/sessions").is_dir());
}

#[test]
fn a_first_tool_choice_outside_the_tools_array_is_refused_before_any_request() {
    let (code, err) = refused(&["--port", "fake", "--first-tool-choice", "read_file"], &[]);
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "loopd: --first-tool-choice \"read_file\" is not a tool the model is given: use auto, none, required or one of clock, find_tool, call_tool (other tools are reached through call_tool)"
    );
}

#[test]
fn the_usage_for_a_missing_port_lists_no_optional_flag_as_required() {
    let output = loopd_with(
        &[
            "chat",
            "--model",
            "script:x.json",
            "--timeout",
            "9",
            "--json",
        ],
        "",
        &[],
    );
    assert_eq!(output.status.code(), Some(2));
    let (_, err) = text(&output);
    assert!(
        err.contains("required arguments were not provided"),
        "{err}"
    );
    let usage = err.lines().find(|l| l.starts_with("Usage:")).unwrap();
    assert_eq!(usage, "Usage: loopd chat --port <broker|fake> [OPTIONS]");
}

#[test]
fn system_with_session_is_refused_with_a_sentence_not_ignored() {
    let dir = testkit::temp_dir();
    let system = dir.path().join("system.txt");
    std::fs::write(&system, "Be brief.").unwrap();
    let system = system.display().to_string();
    let (code, err) = refused(
        &[
            "--port",
            "fake",
            "--system",
            &system,
            "--session",
            "local-1",
        ],
        &[],
    );
    assert_eq!(code, Some(2));
    assert_eq!(
        err.trim(),
        "loopd: --system sets the system prompt of a new session, and session local-1 keeps the one it was started with: leave out --system, or --session to start a new session"
    );
}

#[test]
fn a_socket_with_the_fake_port_is_refused() {
    let (code, err) = refused(&["--port", "fake", "--socket", "/tmp/agent.sock"], &[]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--socket names the broker's agent socket"),
        "{err}"
    );
}

#[test]
fn no_broker_running_is_exit_3_with_one_sentence_naming_the_socket() {
    let dir = testkit::temp_dir();
    let state = dir.path().join("state");
    let socket = dir.path().join("agent.sock");
    let given = socket.display().to_string();
    let (code, err) = refused(
        &["--port", "broker", "--socket", &given],
        &[("BOXMAKER_STATE_DIR", &state)],
    );
    assert_eq!(code, Some(3));
    assert!(err.contains("pass --socket PATH"), "{err}");
    assert_eq!(
        err.trim(),
        format!(
            "loopd: {}",
            proto::rendezvous::no_broker(&socket, "--socket PATH")
        )
    );
    // Without --socket: agent.sock in the runtime folder.
    let runtime = dir.path().join("rt");
    let (code, err) = refused(
        &["--port", "broker"],
        &[
            ("BOXMAKER_STATE_DIR", &state),
            ("BOXMAKER_RUNTIME_DIR", &runtime),
        ],
    );
    assert_eq!(code, Some(3));
    assert!(
        err.contains(&format!(
            "no broker is running on {}",
            runtime.join("agent.sock").display()
        )),
        "{err}"
    );
    assert!(!state.join("sessions").exists(), "no conversation was made");
}
