//! Approvals answered in the MCP client's own interface (elicitation): off unless
//! `brokerd.toml`'s `[mcp] approve_in_client` names the client; then approved and refused
//! through the client, by `elicitation/create` on the handshake revisions and by
//! `InputRequired` and its retry on 2026-07-28, each answer recorded with the client as its
//! channel; a dismissed question leaves the call to the owner in `bx`.

use std::io::{BufRead, BufReader};

use serde_json::{Value, json};
use testkit::{BrokerProcess, OwnerClient};

use super::{FAST, GRANTS, bx, call_tool, start_with};

const LET_CLIENT: &str = "[mcp]\napprove_in_client = [\"boxmaker-test-client\"]\n";

/// Runs one asked-for write as `mode`, the client answering elicitations with `answer`;
/// `owner` approves in `bx` when the call is still pending. The client's lines.
fn asked_write(
    broker: &BrokerProcess,
    mode: &str,
    answer: &str,
    name: &str,
    owner: bool,
) -> Vec<Value> {
    let target = broker.work.join("asked").join(name);
    let plan = json!([call_tool(
        "write_file",
        json!({ "path": target, "content": "made\n" })
    )]);
    let mut child = start_with(
        broker,
        mode,
        &plan,
        &[],
        &[("BOXMAKER_TEST_ELICIT", answer)],
    );
    if owner {
        let mut client = OwnerClient::open(&broker.owner_socket());
        let pending = client.wait_pending();
        let approved = bx(broker, &["approve", &pending.approval.0.to_string()]);
        assert_eq!(approved.code, 0, "{}", approved.stderr);
    }
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
        .collect();
    let status = child.wait().unwrap();
    assert!(status.success(), "{mode}: {lines:?}");
    lines
}

fn result(lines: &[Value]) -> &Value {
    lines.iter().find(|l| l.get("isError").is_some()).unwrap()
}

fn elicited(lines: &[Value]) -> usize {
    lines.iter().filter(|l| l.get("elicited").is_some()).count()
}

#[test]
fn by_default_the_client_is_never_asked_and_the_owner_answers_in_bx() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    std::fs::create_dir_all(broker.work.join("asked")).unwrap();
    let lines = asked_write(&broker, "legacy", "approve", "default.txt", true);
    assert_eq!(elicited(&lines), 0, "{lines:?}");
    assert_eq!(result(&lines)["isError"], false, "{lines:?}");
    let audit = std::fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    assert!(!audit.contains("\"channel\""), "{audit}");
}

#[test]
fn a_client_the_owner_names_approves_and_refuses_in_its_own_interface() {
    let broker = BrokerProcess::start(GRANTS, &format!("{FAST}{LET_CLIENT}"));
    std::fs::create_dir_all(broker.work.join("asked")).unwrap();
    for mode in ["legacy", "v1", "modern"] {
        let name = format!("{mode}-approved.txt");
        let lines = asked_write(&broker, mode, "approve", &name, false);
        assert_eq!(elicited(&lines), 1, "{mode}: {lines:?}");
        let asked = lines.iter().find_map(|l| l["elicited"].as_str()).unwrap();
        assert!(
            asked.contains("write_file") && asked.contains(&name),
            "{asked}"
        );
        assert_eq!(result(&lines)["isError"], false, "{mode}: {lines:?}");
        assert_eq!(
            std::fs::read_to_string(broker.work.join("asked").join(&name)).unwrap(),
            "made\n"
        );
        let name = format!("{mode}-refused.txt");
        let lines = asked_write(&broker, mode, "refuse", &name, false);
        assert_eq!(result(&lines)["isError"], true, "{mode}: {lines:?}");
        assert_eq!(
            result(&lines)["text"],
            toolport::denial_text(proto::DenyReason::ApprovalRefused)
        );
        assert!(!broker.work.join("asked").join(&name).exists());
    }
    let audit = std::fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    assert_eq!(
        audit
            .matches("\"channel\":\"client boxmaker-test-client\"")
            .count(),
        6,
        "{audit}"
    );
    assert_eq!(bx(&broker, &["audit", "verify"]).code, 0);
}

#[test]
fn a_dismissed_question_leaves_the_call_to_the_owner_on_both_eras() {
    let broker = BrokerProcess::start(GRANTS, &format!("{FAST}{LET_CLIENT}"));
    std::fs::create_dir_all(broker.work.join("asked")).unwrap();
    for mode in ["legacy", "modern"] {
        let name = format!("{mode}-dismissed.txt");
        let lines = asked_write(&broker, mode, "cancel", &name, true);
        assert_eq!(elicited(&lines), 1, "{mode}: {lines:?}");
        assert_eq!(result(&lines)["isError"], false, "{mode}: {lines:?}");
        assert!(broker.work.join("asked").join(&name).exists());
    }
    let audit = std::fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    assert!(
        !audit.contains("\"channel\""),
        "the owner answered both: {audit}"
    );
}

#[test]
fn the_models_question_is_answered_in_the_client_when_the_owner_lets_it() {
    let grants = format!("{GRANTS}\n[[grant]]\nid = \"questions\"\ntool = \"ask\"\n");
    let broker = BrokerProcess::start(&grants, &format!("{FAST}{LET_CLIENT}"));
    for mode in ["legacy", "modern"] {
        let plan = json!([call_tool(
            "ask",
            json!({ "question": "Deploy to staging or prod?", "choices": ["staging", "prod"] })
        )]);
        let mut child = start_with(
            &broker,
            mode,
            &plan,
            &[],
            &[("BOXMAKER_TEST_ELICIT", "text:staging only, please")],
        );
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let lines: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(&l.unwrap()).unwrap())
            .collect();
        assert!(child.wait().unwrap().success(), "{mode}: {lines:?}");
        let asked = lines.iter().find_map(|l| l["elicited"].as_str()).unwrap();
        assert!(
            asked.contains("Deploy to staging or prod?") && asked.contains("staging | prod"),
            "{asked}"
        );
        let answer = result(&lines);
        assert_eq!(answer["isError"], false, "{mode}: {answer}");
        assert!(
            answer["text"]
                .as_str()
                .unwrap()
                .contains("staging only, please"),
            "{mode}: {answer}"
        );
    }
    let audit = std::fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    assert_eq!(
        audit
            .matches("\"channel\":\"client boxmaker-test-client\"")
            .count(),
        2,
        "{audit}"
    );
}
