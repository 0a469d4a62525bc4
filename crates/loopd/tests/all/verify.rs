//! Code mode's verify loop (`loopd chat --criteria FILE`), the `loopd` binary against the
//! scripted model server: a builder that claims done early, a verifier that fails one
//! criterion, the stop after two corrections, a resumed session keeping its criteria, and bad
//! input (criteria files, a damaged `criteria.json`, a verifier reply without a verdict); and
//! through a real broker, the events reaching the owner's `watch` stream.

use std::path::Path;
use std::process::Output;

use loopd::verify::VERIFIER_PROMPT;
use proto::{AgentEvent, AgentRole, OwnerEvent, OwnerRequest, VerifyOutcome, write_frame};
use serde_json::Value;
use testkit::{BrokerProcess, OwnerClient, ScriptServer};

use super::cli::{loopd_with, text};

const CRITERIA: &str = "hello.txt says hello\n\nthe tests pass\n";

/// `loopd chat --port fake --model <server>` with the state folder in `dir` and `extra`.
fn chat(server: &ScriptServer, dir: &Path, extra: &[&str]) -> Output {
    let state = dir.join("state").display().to_string();
    let url = server.base_url();
    let mut args = vec![
        "chat",
        "--port",
        "fake",
        "--model",
        &url,
        "--state-dir",
        &state,
    ];
    args.extend_from_slice(extra);
    loopd_with(&args, "", &[])
}

fn criteria_file(dir: &Path, text: &str) -> String {
    let path = dir.join("criteria.txt");
    std::fs::write(&path, text).unwrap();
    path.display().to_string()
}

fn events(output: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The events' types, text deltas aside, with the role for `role` events.
fn kinds(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .map(|e| match e["type"].as_str().unwrap() {
            "role" => format!("role:{}", e["role"].as_str().unwrap()),
            other => other.to_string(),
        })
        .collect()
}

fn verify_done(events: &[Value]) -> &Value {
    let last = events
        .iter()
        .rev()
        .find(|e| e["type"] != "chat_end")
        .unwrap();
    assert_eq!(
        last["type"], "verify_done",
        "verify_done is last: {events:?}"
    );
    last
}

fn states(done: &Value) -> Vec<(String, Option<String>)> {
    done["criteria"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["state"].as_str().unwrap().to_string(),
                c["finding"].as_str().map(str::to_string),
            )
        })
        .collect()
}

/// The requests the server got: (is it the verifier's, its messages).
fn requests(server: &ScriptServer) -> Vec<(bool, Vec<Value>)> {
    server
        .request_json()
        .into_iter()
        .map(|body| {
            let messages = body["messages"].as_array().unwrap().clone();
            (messages[0]["content"] == VERIFIER_PROMPT, messages)
        })
        .collect()
}

fn last_user(messages: &[Value]) -> String {
    messages.iter().rev().find(|m| m["role"] == "user").unwrap()["content"]
        .as_str()
        .unwrap()
        .to_string()
}

fn session_dir(dir: &Path, events: &[Value]) -> std::path::PathBuf {
    let end = events.iter().find(|e| e["type"] == "chat_end").unwrap();
    let session = end["session"].as_str().unwrap();
    dir.join("state/sessions").join(session)
}

fn echo(text: &str) -> String {
    format!(
        r#"{{"call":[{{"name":"call_tool","arguments":{{"name":"echo","arguments":{{"text":"{text}"}}}}}}]}}"#
    )
}

#[test]
fn a_builder_that_claims_done_early_is_relaunched_on_the_open_criteria() {
    let script = format!(
        r#"{{"turns":[
            {{"replies":[{{"say":"Done."}}]}},
            {{"replies":[{},{{"say":"Now it is really done."}}]}}],
          "verifier":[{{"say":"PASS 1\nPASS 2"}}]}}"#,
        echo("wrote hello.txt; 3 tests passed")
    );
    let server = ScriptServer::from_json(&script);
    let dir = testkit::temp_dir();
    let criteria = criteria_file(dir.path(), CRITERIA);
    let output = chat(
        &server,
        dir.path(),
        &["--json", "--criteria", &criteria, "-m", "Write hello.txt."],
    );
    assert!(output.status.success(), "{:?}", text(&output));
    let events = events(&output);
    let kinds = kinds(&events);
    let wanted = [
        "user",
        "role:builder",
        "assistant_text",
        "turn_done",
        "tool_call_started",
        "tool_result",
        "assistant_text",
        "turn_done",
        "role:verifier",
        "assistant_text",
        "verify_done",
        "chat_end",
    ];
    assert_eq!(kinds, wanted, "{events:?}");
    let role = events.iter().find(|e| e["role"] == "verifier").unwrap();
    assert_eq!(role["ctx_isolated"]["messages"], 2);
    assert_eq!(role["ctx_isolated"]["tools"], 0);
    assert_eq!(role["ctx_isolated"]["builder_messages"], 7);
    let done = verify_done(&events);
    assert_eq!(done["outcome"], "passed");
    assert_eq!(
        (done["passes"].as_u64(), done["corrections"].as_u64()),
        (Some(1), Some(0))
    );
    assert_eq!(
        states(done),
        vec![("passed".into(), None), ("passed".into(), None)]
    );

    let requests = requests(&server);
    assert_eq!(
        requests.len(),
        4,
        "builder, relaunch (2 requests), verifier"
    );
    // The owner's message carries the criteria; the relaunch names the open ones.
    let first = last_user(&requests[0].1);
    assert!(
        first.starts_with("Write hello.txt.\n\nCode mode:"),
        "{first}"
    );
    assert!(first.contains("1. [open] hello.txt says hello\n2. [open] the tests pass"));
    let relaunch = last_user(&requests[1].1);
    assert!(relaunch.contains("You said you are done"), "{relaunch}");
    assert!(relaunch.contains("1. hello.txt says hello\n2. the tests pass"));
    // The verifier: its own prompt and one message of facts, no tools, no builder words.
    let body = &server.request_json()[3];
    assert!(
        body.get("tools").is_none() && body.get("tool_choice").is_none(),
        "{body}"
    );
    let (is_verifier, messages) = &requests[3];
    assert!(is_verifier);
    assert_eq!(messages.len(), 2);
    let facts = messages[1]["content"].as_str().unwrap();
    assert!(facts.starts_with("Verification pass 1.\n"), "{facts}");
    assert!(
        facts.contains("result: wrote hello.txt; 3 tests passed"),
        "{facts}"
    );
    assert!(
        !facts.contains("really done") && !facts.contains("Done."),
        "{facts}"
    );
    // The verdicts are kept in the session's folder.
    let kept: Value = serde_json::from_str(
        &std::fs::read_to_string(session_dir(dir.path(), &events).join("criteria.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(kept["criteria"][1]["state"], "passed");
    assert_eq!(kept["passes"], 1);
}

#[test]
fn a_criterion_the_verifier_fails_goes_back_to_the_builder_as_a_correction() {
    let script = format!(
        r#"{{"turns":[
            {{"replies":[{{"say":"Done."}}]}},
            {{"replies":[{{"say":"Still done."}}]}},
            {{"replies":[{},{{"say":"Fixed."}}]}}],
          "verifier":[{{"say":"PASS 1\nFAIL 2: no test was run"}},{{"say":"2. PASS"}}]}}"#,
        echo("cargo test: 3 passed")
    );
    let server = ScriptServer::from_json(&script);
    let dir = testkit::temp_dir();
    let criteria = criteria_file(dir.path(), CRITERIA);
    let output = chat(
        &server,
        dir.path(),
        &["--json", "--criteria", &criteria, "-m", "Do it."],
    );
    assert!(output.status.success(), "{:?}", text(&output));
    let events = events(&output);
    let roles: Vec<String> = kinds(&events)
        .into_iter()
        .filter(|k| k.starts_with("role:"))
        .collect();
    assert_eq!(
        roles,
        [
            "role:builder",
            "role:verifier",
            "role:builder",
            "role:verifier"
        ]
    );
    let done = verify_done(&events);
    assert_eq!(done["outcome"], "passed");
    assert_eq!(
        (done["passes"].as_u64(), done["corrections"].as_u64()),
        (Some(2), Some(1))
    );

    let requests = requests(&server);
    let correction = last_user(&requests[3].1);
    assert!(correction.contains("Correction 1 of 2"), "{correction}");
    assert!(
        correction.contains("2. the tests pass (verifier: no test was run)"),
        "{correction}"
    );
    assert!(
        !correction.contains("hello.txt"),
        "only the failed criterion: {correction}"
    );
    // The second pass judges only the criterion still open.
    let (is_verifier, messages) = requests.last().unwrap();
    assert!(is_verifier);
    let facts = messages[1]["content"].as_str().unwrap();
    assert!(facts.starts_with("Verification pass 2.\n"), "{facts}");
    assert!(
        facts.contains("2. the tests pass") && !facts.contains("1. hello.txt"),
        "{facts}"
    );
}

#[test]
fn after_two_corrections_loopd_stops_and_says_so_in_the_conversation() {
    let script = r#"{"turns":[
            {"replies":[{"say":"Done."}]},
            {"replies":[{"say":"Done."}]},
            {"replies":[{"say":"Done."}]},
            {"replies":[{"say":"Done."}]}],
          "verifier":[{"say":"FAIL 1: empty"},{"say":"FAIL 1: still empty"},{"say":"FAIL 1: empty again"}]}"#;
    let server = ScriptServer::from_json(script);
    let dir = testkit::temp_dir();
    let criteria = criteria_file(dir.path(), "hello.txt says hello\n");
    let output = chat(&server, dir.path(), &["--criteria", &criteria, "-m", "Go."]);
    let (out, err) = text(&output);
    assert!(output.status.success(), "{out}{err}");
    assert!(
        out.contains(
            "  verify done: stopped after two corrections (3 pass(es), 2 correction(s))\n"
        ),
        "{out}"
    );
    assert!(
        out.contains("  verify 1 failed: hello.txt says hello (empty again)\n"),
        "{out}"
    );
    assert_eq!(
        out.matches("  role   verifier (isolated: 2 messages")
            .count(),
        3,
        "{out}"
    );
    assert!(
        out.contains("verifier> FAIL 1: still empty\n  role   builder\nassistant> Done.\n"),
        "{out}"
    );
    assert_eq!(requests(&server).iter().filter(|r| r.0).count(), 3);

    // The stop is the conversation's last message.
    let sessions = dir.path().join("state/sessions");
    let session = std::fs::read_dir(&sessions)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let log = std::fs::read_to_string(session.join("messages.jsonl")).unwrap();
    let last: Value = serde_json::from_str(log.lines().last().unwrap()).unwrap();
    assert_eq!(last["role"], "user");
    let said = last["content"].as_str().unwrap();
    assert!(
        said.contains("Verification stopped after 2 corrections"),
        "{said}"
    );
    assert!(
        said.contains("1. hello.txt says hello (verifier: empty again)"),
        "{said}"
    );
}

#[test]
fn a_resumed_session_keeps_its_criteria_and_their_verdicts() {
    // Run 1: criterion 1 passes, 2 fails; after the correction the verifier's reply holds no
    // verdict, and loopd stops (user messages 1 to 4). Run 2 resumes without --criteria.
    let script = r#"{"turns":[
            {"replies":[{"say":"Done."}]},
            {"replies":[{"say":"Done."}]},
            {"replies":[{"say":"Done."}]},
            {"replies":[]},
            {"replies":[{"say":"Done again."}]},
            {"replies":[{"say":"Checked."}]}],
          "verifier":[{"say":"PASS 1\nFAIL 2: missing"},{"say":"I cannot tell."},{"say":"PASS 2"}]}"#;
    let server = ScriptServer::from_json(script);
    let dir = testkit::temp_dir();
    let criteria = criteria_file(dir.path(), CRITERIA);
    let output = chat(
        &server,
        dir.path(),
        &["--json", "--criteria", &criteria, "-m", "One."],
    );
    assert!(output.status.success(), "{:?}", text(&output));
    let first = events(&output);
    let done = verify_done(&first);
    assert_eq!(done["outcome"], "unreadable");
    assert_eq!(
        states(done),
        vec![
            ("passed".into(), None),
            (
                "open".into(),
                Some("the verifier gave no verdict on it".into())
            )
        ]
    );
    let dir_of_session = session_dir(dir.path(), &first);
    let id = dir_of_session
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    let log = std::fs::read_to_string(dir_of_session.join("messages.jsonl")).unwrap();
    assert!(
        log.lines()
            .last()
            .unwrap()
            .contains("the verifier's reply held no verdict")
    );

    let output = chat(
        &server,
        dir.path(),
        &["--json", "--session", &id, "-m", "Two."],
    );
    assert!(output.status.success(), "{:?}", text(&output));
    let second = events(&output);
    let done = verify_done(&second);
    assert_eq!(done["outcome"], "passed");
    assert_eq!(done["passes"], 1);
    let requests = requests(&server);
    let owner = requests.iter().rev().find_map(|(verifier, messages)| {
        let text = last_user(messages);
        (!verifier && text.starts_with("Two.")).then_some(text)
    });
    let owner = owner.unwrap();
    assert!(
        owner.contains("1. [passed] hello.txt says hello\n2. [open] the tests pass"),
        "{owner}"
    );
    let facts = requests.last().unwrap().1[1]["content"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        facts.starts_with("Verification pass 3.\n"),
        "passes count on: {facts}"
    );
    assert!(
        !facts.contains("hello.txt says hello"),
        "a passed criterion stays passed"
    );
}

#[test]
fn a_verifier_request_that_fails_ends_the_loop_as_failed_and_the_turn_as_failed() {
    let script = r#"{"turns":[{"replies":[{"say":"Done."}]},{"replies":[{"say":"Done."}]}],
          "verifier":[{"raw_body":"<html>not a completion</html>"}]}"#;
    let server = ScriptServer::from_json(script);
    let dir = testkit::temp_dir();
    let criteria = criteria_file(dir.path(), "hello.txt says hello\n");
    let output = chat(
        &server,
        dir.path(),
        &["--json", "--criteria", &criteria, "-m", "Go."],
    );
    assert_eq!(output.status.code(), Some(1), "{:?}", text(&output));
    let events = events(&output);
    let failed = events.iter().find(|e| e["type"] == "turn_failed").unwrap();
    let error = failed["error"].as_str().unwrap();
    assert!(
        error.starts_with("the verification pass failed: "),
        "{error}"
    );
    let done = verify_done(&events);
    assert_eq!(done["outcome"], "failed");
    assert_eq!(states(done), vec![("open".into(), None)]);
    let end = events.last().unwrap();
    assert_eq!(
        (end["done"].as_u64(), end["failed"].as_u64()),
        (Some(0), Some(1))
    );
}

#[test]
fn bad_criteria_files_and_a_damaged_criteria_json_are_clear_errors() {
    let server = ScriptServer::from_json(r#"{"turns":[{"replies":[{"say":"Hi."}]}]}"#);
    let dir = testkit::temp_dir();
    let missing = dir.path().join("nope.txt").display().to_string();
    let output = chat(&server, dir.path(), &["--criteria", &missing, "-m", "x"]);
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("cannot read --criteria {missing}: ")),
        "{err}"
    );

    let empty = criteria_file(dir.path(), "\n   \n");
    let output = chat(&server, dir.path(), &["--criteria", &empty, "-m", "x"]);
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(
        err.contains("holds no criterion: write one criterion a line"),
        "{err}"
    );

    let binary = dir.path().join("binary.txt");
    std::fs::write(&binary, [0xff, 0xfe, b'\n']).unwrap();
    let output = chat(
        &server,
        dir.path(),
        &["--criteria", &binary.display().to_string(), "-m", "x"],
    );
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot read --criteria"), "{err}");
    assert!(
        server.requests().is_empty(),
        "no request before the criteria are read"
    );

    // A session whose criteria.json is damaged is not resumed blind.
    let output = chat(&server, dir.path(), &["--json", "-m", "Hello."]);
    assert!(output.status.success(), "{:?}", text(&output));
    let session = session_dir(dir.path(), &events(&output));
    std::fs::write(session.join("criteria.json"), "{\"criteria\": 3}").unwrap();
    let id = session.file_name().unwrap().to_str().unwrap();
    let output = chat(&server, dir.path(), &["--session", id, "-m", "Again."]);
    let (_, err) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{err}");
    assert!(err.contains("criteria.json: invalid type"), "{err}");
}

#[test]
fn through_the_broker_the_role_and_verify_done_events_reach_the_owners_watch() {
    let broker = BrokerProcess::start("", "idle_timeout_ms = 1000\n");
    let mut watcher = OwnerClient::open(&broker.owner_socket());
    write_frame(&mut watcher.stream, &OwnerRequest::Watch {}).unwrap();
    let server = ScriptServer::from_json(
        r#"{"turns":[{"replies":[{"say":"Done."}]},{"replies":[{"say":"Done."}]}],
            "verifier":[{"say":"PASS 1"}]}"#,
    );
    let dir = testkit::temp_dir();
    let criteria = criteria_file(dir.path(), "hello.txt says hello\n");
    let socket = broker.socket().display().to_string();
    let state = dir.path().join("state").display().to_string();
    let url = server.base_url();
    let args = [
        "chat",
        "--port",
        "broker",
        "--socket",
        &socket,
        "--model",
        &url,
        "--state-dir",
        &state,
        "--json",
        "--criteria",
        &criteria,
        "-m",
        "Go.",
    ];
    let output = loopd_with(&args, "", &[]);
    assert!(output.status.success(), "{:?}", text(&output));
    let (_, err) = text(&output);
    assert!(err.is_empty(), "no notice: {err}");
    let session = events(&output)
        .iter()
        .find(|e| e["type"] == "chat_end")
        .unwrap()["session"]
        .as_str()
        .unwrap()
        .to_string();

    let mut seen = Vec::new();
    while let Some(event) = watcher.next_event() {
        if let OwnerEvent::Agent { session: of, event } = event {
            assert_eq!(of.to_string(), session);
            let last = matches!(event, AgentEvent::VerifyDone { .. });
            seen.push(event);
            if last {
                break;
            }
        }
    }
    assert_eq!(
        seen,
        vec![
            AgentEvent::Role {
                role: AgentRole::Builder
            },
            AgentEvent::Role {
                role: AgentRole::Verifier
            },
            AgentEvent::VerifyDone {
                outcome: VerifyOutcome::Passed,
                passes: 1,
                corrections: 0,
                passed: vec![1],
                open: vec![],
            },
        ]
    );
}
