//! `loopd chat --port broker` whose connection the broker closes as idle between two turns
//! (`brokerd.toml`'s `connection_idle_ms`): the next turn's call resumes the same session on a
//! new connection, and the person sees nothing of it.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};
use testkit::{BrokerProcess, ScriptServer};

const READ_WORK: &str = r#"
[[grant]]
id = "read-work"
tool = "read_file"
paths = ["{work}"]
class = "private"
untrusted = false
"#;

#[test]
fn a_conversation_idle_past_the_brokers_timeout_goes_on_in_the_same_session_unnoticed() {
    let broker = BrokerProcess::start_verbose(
        READ_WORK,
        "idle_timeout_ms = 1000\nconnection_idle_ms = 300\n",
    );
    let file = broker.work.join("notes.txt");
    std::fs::write(&file, "the notes\n").unwrap();
    let read = json!({"name": "call_tool", "arguments": {"name": "read_file", "arguments": {"path": file}}});
    let turn = |answer: &str| json!({"replies": [{"call": [read.clone()]}, {"say": answer}]});
    let server = ScriptServer::from_json(
        &json!({"turns": [turn("first read"), turn("second read")]}).to_string(),
    );
    let state = broker.root.path().join("loopd-state");
    let mut loopd = Command::new(env!("CARGO_BIN_EXE_loopd"))
        .args(["chat", "--port", "broker", "--socket"])
        .arg(broker.socket())
        .args(["--model", &server.base_url(), "--state-dir"])
        .arg(&state)
        .arg("--json")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = loopd.stdin.take().unwrap();
    let mut events = BufReader::new(loopd.stdout.take().unwrap()).lines();
    let mut next_turn = |message: &str| -> Vec<Value> {
        writeln!(stdin, "{message}").unwrap();
        let mut seen = Vec::new();
        for line in events.by_ref() {
            let event: Value = serde_json::from_str(&line.unwrap()).unwrap();
            let kind = event["type"].as_str().unwrap_or_default().to_string();
            seen.push(event);
            if kind == "turn_done" || kind == "turn_failed" {
                break;
            }
        }
        seen
    };
    let first = next_turn("read it");
    assert_eq!(first.last().unwrap()["text"], "first read", "{first:?}");
    // Every connection loopd made is closed as idle, the one its turn used included.
    assert!(
        broker.wait_until_every_hello_closed_as_idle(Duration::from_secs(30)),
        "{}",
        broker.log()
    );
    let second = next_turn("read it again");
    assert_eq!(second.last().unwrap()["type"], "turn_done", "{second:?}");
    assert_eq!(second.last().unwrap()["text"], "second read");
    let result = second
        .iter()
        .find(|e| e["type"] == "tool_result")
        .unwrap_or_else(|| panic!("{second:?}"));
    assert!(
        result["content"].as_str().unwrap().ends_with("the notes\n"),
        "{result}"
    );
    drop(stdin);
    let output = loopd.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    // One session, resumed on the new connection; nothing said about it to the person.
    let log = broker.log();
    assert_eq!(log.matches("session opened").count(), 1, "{log}");
    assert!(log.contains("session resumed"), "{log}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("idle"), "{stderr}");
}
