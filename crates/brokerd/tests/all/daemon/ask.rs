//! `ask`, end to end: the model asks the owner a question and waits; the answer is a trusted,
//! public result; unanswered, "The owner did not answer."; answered after its session ended,
//! refused.

use proto::{
    ApprovalId, Class, OwnerErrorCode, OwnerReply, OwnerRequest, PendingKind, ToolResponse,
};
use testkit::{AgentClient, BrokerProcess, OwnerClient};

const ASK: &str = "[[grant]]\nid = \"questions\"\ntool = \"ask\"\n";

fn question() -> String {
    serde_json::json!({ "question": "Deploy to production?", "choices": ["yes", "no"] }).to_string()
}

fn answer(owner: &mut OwnerClient, id: u64, text: &str) -> Option<OwnerReply> {
    owner.send(&OwnerRequest::Answer {
        approval: ApprovalId(id),
        text: text.to_string(),
    })
}

#[test]
fn an_answered_question_is_a_public_trusted_result_holding_the_answer() {
    let broker = BrokerProcess::start(ASK, "");
    let mut client = AgentClient::open(&broker.socket(), None);
    let id = client.call_pending(1, "ask", &question());
    let mut owner = OwnerClient::open(&broker.owner_socket());
    let pending = owner.wait_pending();
    assert_eq!(pending.kind, PendingKind::Question);
    assert_eq!(pending.question.as_deref(), Some("Deploy to production?"));
    assert_eq!(pending.choices, ["yes", "no"]);
    // A question is answered, not approved.
    match owner.approve(ApprovalId(id), false) {
        Some(OwnerReply::Error { code, .. }) => assert_eq!(code, OwnerErrorCode::WrongKind),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        answer(&mut owner, id, "no"),
        Some(OwnerReply::Done { .. })
    ));
    let response = client.finish_call().1.unwrap();
    let ToolResponse::Result {
        content,
        class,
        untrusted,
        ..
    } = &response
    else {
        panic!("{response:?}")
    };
    assert_eq!(*class, Class::Public);
    assert!(!untrusted);
    assert_eq!(content.split_once('\n').unwrap().1, "no");
    // A second answer is refused.
    match answer(&mut owner, id, "yes") {
        Some(OwnerReply::Error { code, message }) => {
            assert_eq!(code, OwnerErrorCode::NotPending);
            assert!(message.contains("answered"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unanswered_question_gives_the_owner_did_not_answer() {
    let broker = BrokerProcess::start(ASK, "approval_ms = 300\n");
    let mut client = AgentClient::open(&broker.socket(), None);
    client.call_pending(1, "ask", &question());
    let response = client.finish_call().1.unwrap();
    let ToolResponse::Result {
        content, untrusted, ..
    } = &response
    else {
        panic!("{response:?}")
    };
    assert_eq!(
        content.split_once('\n').unwrap().1,
        "The owner did not answer."
    );
    assert!(!untrusted);
}

#[test]
fn a_question_answered_after_its_session_ended_is_refused() {
    let broker = BrokerProcess::start(ASK, "");
    let mut client = AgentClient::open(&broker.socket(), None);
    let id = client.call_pending(1, "ask", &question());
    let mut closer = AgentClient::open(&broker.socket(), client.session.clone());
    assert!(matches!(
        closer.send(&proto::AgentFrame::Close {}),
        Some(proto::BrokerFrame::Closed {})
    ));
    match client.finish_call().1 {
        Ok(ToolResponse::Failed { message }) => {
            assert!(message.contains("session ended"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    let mut owner = OwnerClient::open(&broker.owner_socket());
    match answer(&mut owner, id, "too late") {
        Some(OwnerReply::Error { code, message }) => {
            assert_eq!(code, OwnerErrorCode::NotPending);
            assert!(message.contains("its session ended"), "{message}");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ask_without_a_grant_is_no_grant_and_with_unknown_fields_fails_naming_the_field() {
    let broker = BrokerProcess::start("", "");
    let mut client = AgentClient::open(&broker.socket(), None);
    assert!(matches!(
        client.call(1, "ask", &question()),
        Ok(ToolResponse::Denied {
            reason: proto::DenyReason::NoGrant
        })
    ));
    broker.write_grants("ask.toml", ASK);
    super::reloaded(&broker, "grants reloaded grants=1", 1);
    let unknown = client.call(2, "ask", r#"{"question":"x","path":"/"}"#);
    let Ok(ToolResponse::Failed { message }) = &unknown else {
        panic!("{unknown:?}")
    };
    assert!(
        message.starts_with("argument `path` is not one of ask's arguments"),
        "{message}"
    );
}
