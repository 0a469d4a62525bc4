//! An approved call is decided again from the top with the grants and labels of the moment it
//! runs: the approval answers the ask it was given (the same grant, the same reason), and
//! anything stricter that appeared while it waited wins. One test per axis (a deny grant added,
//! the asking grant removed, the asking grant expired, the session's labels raised by another of
//! its calls, the path swapped for a symbolic link), and one where nothing changed.

use std::fs;
use std::time::Duration;

use proto::{
    ApprovalId, AskWhy, BrokerFrame, DenyReason, OwnerErrorCode, OwnerReply, ToolResponse,
};
use testkit::{AgentClient, BrokerProcess, OwnerClient};

use super::approvals::{ASK_WRITE, done, write_args};
use super::{audit_verify, denied, path_args, reloaded};

/// A write that waits for the owner: the broker, its waiting client, the owner, the approval,
/// and the file the write would make.
fn waiting_write(
    grants: &str,
) -> (
    BrokerProcess,
    AgentClient,
    OwnerClient,
    u64,
    std::path::PathBuf,
) {
    let broker = BrokerProcess::start(grants, "pending_grace_ms = 60000\n");
    let target = broker.work.join("a.txt");
    let mut client = AgentClient::open(&broker.socket(), None);
    let id = client.call_pending(1, "write_file", &write_args(&target, "x"));
    let owner = OwnerClient::open(&broker.owner_socket());
    (broker, client, owner, id, target)
}

/// Approves `id` and reads the waiting client's answer: the final response, after checking
/// that it did not ask again.
fn approve_and_answer(owner: &mut OwnerClient, client: &mut AgentClient, id: u64) -> ToolResponse {
    done(owner.approve(ApprovalId(id), false));
    let (asked_again, answer) = client.finish_call();
    assert!(asked_again.is_empty(), "asked again: {asked_again:?}");
    answer.unwrap()
}

/// The audit log's text.
fn audit(broker: &BrokerProcess) -> String {
    fs::read_to_string(broker.state.join("audit.jsonl")).unwrap()
}

#[test]
fn a_deny_grant_added_while_a_call_waits_refuses_it_when_approved() {
    let (broker, mut client, mut owner, id, target) = waiting_write(ASK_WRITE);
    broker.write_grants(
        "deny.toml",
        "[[grant]]\nid = \"no-writes\"\ntool = \"write_file\"\npaths = [\"{work}\"]\ndeny = true\n",
    );
    reloaded(&broker, "grants reloaded grants=2", 1);
    // A probe call of another session shows the deny is live.
    let mut probe = AgentClient::open(&broker.socket(), None);
    let probed = probe.call(1, "write_file", &write_args(&broker.work.join("p"), "p"));
    assert_eq!(denied(&probed.unwrap()), DenyReason::DeniedByGrant);
    let answer = approve_and_answer(&mut owner, &mut client, id);
    assert_eq!(denied(&answer), DenyReason::DeniedByGrant);
    assert!(!target.exists(), "the approved write ran past a deny grant");
    let log = audit(&broker);
    assert!(
        log.contains(&format!("(decided again after approval {id})")),
        "{log}"
    );
    assert_eq!(audit_verify(&broker).0, 0);
}

#[test]
fn the_asking_grant_removed_while_a_call_waits_refuses_it_when_approved() {
    let (broker, mut client, mut owner, id, target) = waiting_write(ASK_WRITE);
    broker.write_grants("grants.toml", "");
    reloaded(&broker, "grants reloaded grants=0", 1);
    let answer = approve_and_answer(&mut owner, &mut client, id);
    assert_eq!(denied(&answer), DenyReason::NoGrant);
    assert!(!target.exists(), "the approved write ran without a grant");
    assert_eq!(audit_verify(&broker).0, 0);
}

#[test]
fn the_asking_grant_expired_while_a_call_waits_refuses_it_when_approved() {
    let (broker, mut client, mut owner, id, target) = waiting_write(ASK_WRITE);
    let expired = format!("{ASK_WRITE}expires = \"2020-01-01T00:00:00Z\"\n");
    broker.write_grants("grants.toml", &expired);
    reloaded(&broker, "grants reloaded grants=1", 1);
    let answer = approve_and_answer(&mut owner, &mut client, id);
    assert_eq!(denied(&answer), DenyReason::GrantExpired);
    assert!(
        !target.exists(),
        "the approved write ran under an expired grant"
    );
}

#[test]
fn a_call_whose_path_became_a_link_while_it_waited_is_decided_on_where_the_link_leads() {
    let grants = r#"
[[grant]]
id = "ask-inside"
tool = "write_file"
paths = ["{work}/inside"]
untrusted = false
approval = "ask"

[[grant]]
id = "no-private"
tool = "write_file"
paths = ["{work}/private"]
deny = true
"#;
    let broker = BrokerProcess::start(grants, "");
    for dir in ["inside/sub", "private", "elsewhere"] {
        fs::create_dir_all(broker.work.join(dir)).unwrap();
    }
    let target = broker.work.join("inside/sub/a.txt");
    let mut owner = OwnerClient::open(&broker.owner_socket());
    // The folder swapped for a link to a folder a deny grant covers, then to one no grant
    // covers: each is refused as the place the link leads to.
    for (leads_to, reason) in [
        ("private", DenyReason::DeniedByGrant),
        ("elsewhere", DenyReason::NoGrant),
    ] {
        let mut client = AgentClient::open(&broker.socket(), None);
        let id = client.call_pending(1, "write_file", &write_args(&target, "x"));
        let sub = broker.work.join("inside/sub");
        fs::remove_dir(&sub).unwrap();
        std::os::unix::fs::symlink(broker.work.join(leads_to), &sub).unwrap();
        let answer = approve_and_answer(&mut owner, &mut client, id);
        assert_eq!(denied(&answer), reason, "a link to {leads_to}");
        assert!(!broker.work.join(leads_to).join("a.txt").exists());
        fs::remove_file(&sub).unwrap();
        fs::create_dir(&sub).unwrap();
    }
    assert!(!target.exists());
}

/// A session that waits for the owner on call 1, leaves, comes back and reads a file its
/// grant labels (`keys`), then sends call 1 again: its client and the approval.
fn waiting_across_a_read(
    grants: &str,
) -> (
    BrokerProcess,
    AgentClient,
    OwnerClient,
    u64,
    std::path::PathBuf,
) {
    let broker = BrokerProcess::start(grants, "pending_grace_ms = 60000\n");
    fs::create_dir_all(broker.work.join("keys")).unwrap();
    fs::create_dir_all(broker.work.join("out")).unwrap();
    fs::write(broker.work.join("keys/k"), "k").unwrap();
    let target = broker.work.join("out/a.txt");
    let args = write_args(&target, "x");
    let mut client = AgentClient::open(&broker.socket(), None);
    let id = client.call_pending(1, "write_file", &args);
    let resume = client.session.clone().unwrap();
    drop(client);
    assert!(broker.wait_for_log(
        "the client waiting for this approval left",
        1,
        Duration::from_secs(20)
    ));
    // Another call of the session, while call 1 waits, raises its labels.
    let mut again = AgentClient::open(&broker.socket(), Some(resume));
    let read = again.call(2, "read_file", &path_args(&broker.work.join("keys/k")));
    assert!(matches!(read, Ok(ToolResponse::Result { .. })), "{read:?}");
    assert_eq!(again.call_pending(1, "write_file", &args), id);
    let owner = OwnerClient::open(&broker.owner_socket());
    (broker, again, owner, id, target)
}

#[test]
fn a_call_whose_session_became_untrusted_while_it_waited_asks_again_under_a_new_approval() {
    let grants = r#"
[[grant]]
id = "keys"
tool = "read_file"
paths = ["{work}/keys"]
class = "secret"
untrusted = true

[[grant]]
id = "ask-out"
tool = "write_file"
paths = ["{work}/out"]
untrusted = false
approval = "ask"
on_untrusted = "ask"
"#;
    let (broker, mut client, mut owner, first, target) = waiting_across_a_read(grants);
    // The approval answers the ask it was given (the grant asks), not the new one.
    done(owner.approve(ApprovalId(first), false));
    let second = match client.receive() {
        Some(BrokerFrame::Response {
            response: ToolResponse::PendingApproval { approval, .. },
            ..
        }) => approval,
        other => panic!("the call did not ask again: {other:?}"),
    };
    assert_ne!(second, first);
    assert!(
        !target.exists(),
        "the write ran before the new ask was answered"
    );
    let pending = owner.wait_pending();
    assert_eq!(pending.approval, ApprovalId(second));
    assert_eq!(pending.why, AskWhy::AfterUntrusted);
    assert!(pending.untrusted);
    // The first approval cannot be used again.
    match owner.approve(ApprovalId(first), false) {
        Some(OwnerReply::Error { code, .. }) => assert_eq!(code, OwnerErrorCode::NotPending),
        other => panic!("approved twice: {other:?}"),
    }
    let answer = approve_and_answer(&mut owner, &mut client, second);
    assert!(matches!(answer, ToolResponse::Result { .. }), "{answer:?}");
    assert_eq!(fs::read_to_string(&target).unwrap(), "x");
    assert_eq!(audit_verify(&broker).0, 0);
}

#[test]
fn a_call_whose_session_passed_max_taint_while_it_waited_is_refused_when_approved() {
    let grants = r#"
[[grant]]
id = "keys"
tool = "read_file"
paths = ["{work}/keys"]
class = "secret"
untrusted = false

[[grant]]
id = "ask-out"
tool = "write_file"
paths = ["{work}/out"]
untrusted = false
approval = "ask"
max_taint = "private"
"#;
    let (_broker, mut client, mut owner, id, target) = waiting_across_a_read(grants);
    let answer = approve_and_answer(&mut owner, &mut client, id);
    assert_eq!(denied(&answer), DenyReason::TaintTooHigh);
    assert!(!target.exists());
}

#[test]
fn an_approved_call_runs_when_nothing_changed_and_its_approval_is_used_once() {
    let (broker, mut client, mut owner, id, target) = waiting_write(ASK_WRITE);
    let answer = approve_and_answer(&mut owner, &mut client, id);
    assert!(matches!(answer, ToolResponse::Result { .. }), "{answer:?}");
    assert_eq!(fs::read_to_string(&target).unwrap(), "x");
    match owner.approve(ApprovalId(id), false) {
        Some(OwnerReply::Error { code, .. }) => assert_eq!(code, OwnerErrorCode::NotPending),
        other => panic!("approved twice: {other:?}"),
    }
    assert!(owner.pending().is_empty());
    // Sent again, the call gets its answer and does not run or ask again.
    fs::write(&target, "changed").unwrap();
    let again = client.call(1, "write_file", &write_args(&target, "x"));
    assert!(
        matches!(again, Ok(ToolResponse::Result { .. })),
        "{again:?}"
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "changed");
    let log = audit(&broker);
    assert_eq!(
        log.matches("\"type\":\"approval_requested\"").count(),
        1,
        "{log}"
    );
    assert_eq!(log.matches("\"type\":\"decided\"").count(), 1, "{log}");
    assert_eq!(audit_verify(&broker).0, 0);
}

#[test]
fn a_downstream_call_whose_session_became_untrusted_while_it_waited_asks_again() {
    let mut probe = super::gateway::Probe::start("");
    let pins = super::gateway::pins_of(&probe.broker, "probe");
    let pin = |tool: &str| {
        let named = format!("\"probe.{tool}\" = ");
        pins.split(", ")
            .find(|p| p.starts_with(&named))
            .unwrap()
            .to_string()
    };
    let grants = format!(
        "[[grant]]\nid = \"echo\"\ntool = \"probe.echo\"\non_untrusted = \"allow\"\npins = {{ {} }}\n\n\
         [[grant]]\nid = \"read-asks\"\ntool = \"probe.read\"\napproval = \"ask\"\non_untrusted = \"ask\"\npins = {{ {} }}\n",
        pin("echo"),
        pin("read")
    );
    probe.grant(&grants);
    let broker = &probe.broker;
    fs::write(broker.work.join("a.txt"), "the file").unwrap();
    let args = serde_json::json!({ "path": broker.work.join("a.txt") }).to_string();
    let mut client = AgentClient::open(&broker.socket(), None);
    let first = client.call_pending(1, "probe.read", &args);
    let resume = client.session.clone().unwrap();
    drop(client);
    assert!(broker.wait_for_log(
        "the client waiting for this approval left",
        1,
        Duration::from_secs(20)
    ));
    // Another call of the session, while call 1 waits, brings untrusted content.
    let mut again = AgentClient::open(&broker.socket(), Some(resume));
    let echoed = again.call(2, "probe.echo", r#"{"text":"hi"}"#).unwrap();
    assert!(
        matches!(
            echoed,
            ToolResponse::Result {
                untrusted: true,
                ..
            }
        ),
        "{echoed:?}"
    );
    assert_eq!(again.call_pending(1, "probe.read", &args), first);
    let mut owner = OwnerClient::open(&broker.owner_socket());
    done(owner.approve(ApprovalId(first), false));
    let second = match again.receive() {
        Some(BrokerFrame::Response {
            response: ToolResponse::PendingApproval { approval, .. },
            ..
        }) => approval,
        other => panic!("the call did not ask again: {other:?}"),
    };
    assert_ne!(second, first);
    assert_eq!(owner.wait_pending().why, AskWhy::AfterUntrusted);
    let answer = approve_and_answer(&mut owner, &mut again, second);
    assert!(super::content(&answer).contains("the file"), "{answer:?}");
}
