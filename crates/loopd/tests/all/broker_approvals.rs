//! `loopd chat --port broker` and calls that wait for the owner: loopd keeps waiting through a
//! broker restart (its port reconnects, resumes and sends the same call id), and the owner's
//! answer reaches the model.

use std::process::{Command, Stdio};

use proto::{ApprovalId, OwnerReply};
use serde_json::{Value, json};
use testkit::{BrokerProcess, OwnerClient, ScriptServer};

const ASK_WRITE: &str = r#"
[[grant]]
id = "ask-write"
tool = "write_file"
paths = ["{work}"]
untrusted = false
approval = "ask"
"#;

#[test]
fn a_call_waiting_for_the_owner_across_a_broker_restart_gets_the_owners_answer() {
    let mut broker = BrokerProcess::start(ASK_WRITE, "");
    let target = broker.work.join("approved.txt");
    let server = ScriptServer::from_json(
        &json!({"turns": [{"replies": [
            {"call": [{"name": "call_tool", "arguments": {"name": "write_file",
                "arguments": {"path": target, "content": "written after the restart"}}}]},
            {"say": "written"}
        ]}]})
        .to_string(),
    );
    let state = broker.root.path().join("loopd-state");
    let child = Command::new(env!("CARGO_BIN_EXE_loopd"))
        .arg("chat")
        .arg("--port")
        .arg("broker")
        .arg("--socket")
        .arg(broker.socket())
        .arg("--model")
        .arg(server.base_url())
        .arg("--state-dir")
        .arg(&state)
        .args(["--json", "-m", "write it"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let id = OwnerClient::open(&broker.owner_socket())
        .wait_pending()
        .approval;
    broker.restart();
    let mut owner = OwnerClient::open(&broker.owner_socket());
    assert_eq!(owner.wait_pending().approval, id);
    assert!(matches!(
        owner.approve(ApprovalId(id.0), false),
        Some(OwnerReply::Done { .. })
    ));
    let output = child.wait_with_output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let events: Vec<Value> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let waited: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "approval_pending")
        .collect();
    assert!(!waited.is_empty(), "{events:?}");
    assert!(waited.iter().all(|e| e["approval"] == id.0), "{events:?}");
    let result = events.iter().find(|e| e["type"] == "tool_result").unwrap();
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("\"created\":true"),
        "{result}"
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "written after the restart"
    );
}
