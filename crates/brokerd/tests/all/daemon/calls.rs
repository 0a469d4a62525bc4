//! Calls through the daemon: each answer and each refusal, injected failures, the audit log.

use std::fs;

use proto::{Class, DenyReason, ToolResponse};
use testkit::{AgentClient, BrokerProcess};

use super::{FAST, WORK, audit_verify, content, denied, path_args, reloaded};

#[test]
fn a_granted_read_is_answered_with_its_labels_and_recorded() {
    let broker = BrokerProcess::start(WORK, FAST);
    fs::write(broker.work.join("a.txt"), "hello\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let response = client
        .call(1, "read_file", &path_args(&broker.work.join("a.txt")))
        .unwrap();
    let ToolResponse::Result {
        content,
        class,
        untrusted,
        ..
    } = &response
    else {
        panic!("{response:?}")
    };
    assert_eq!(*class, Class::Private);
    assert!(!untrusted);
    let (header, body) = content.split_once('\n').unwrap();
    assert_eq!(body, "hello\n");
    let header: serde_json::Value = serde_json::from_str(header).unwrap();
    assert_eq!(header["tool"], "read_file");
    assert_eq!(header["size"], 6);
    let (code, output) = audit_verify(&broker);
    assert_eq!(code, 0, "{output}");
    assert!(output.contains("the chain holds"), "{output}");
    let log = fs::read_to_string(broker.state.join("audit.jsonl")).unwrap();
    assert!(log.contains("\"type\":\"answered\"") && log.contains("\"grant\":\"read-work\""));
}

#[test]
fn no_grant_a_protected_path_and_an_unknown_tool_are_denied_and_recorded() {
    let broker = BrokerProcess::start(WORK, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    let no_grant = client.call(
        1,
        "read_file",
        &path_args(std::path::Path::new("/etc/hostname")),
    );
    assert_eq!(denied(&no_grant.unwrap()), DenyReason::NoGrant);
    let grants = broker.config.join("grants/grants.toml");
    let protected = client.call(2, "read_file", &path_args(&grants)).unwrap();
    assert_eq!(denied(&protected), DenyReason::ProtectedPath);
    let ledger = broker.state.join("ledger.sqlite");
    let protected = client.call(3, "read_file", &path_args(&ledger)).unwrap();
    assert_eq!(denied(&protected), DenyReason::ProtectedPath);
    let unknown = client.call(5, "launch_rockets", "{}").unwrap();
    assert_eq!(denied(&unknown), DenyReason::InvalidArguments);
    let log = fs::read_to_string(broker.state.join("audit.jsonl")).unwrap();
    assert_eq!(log.matches("\"kind\":\"denied\"").count(), 4, "{log}");
    assert_eq!(audit_verify(&broker).0, 0);
}

#[test]
fn grants_with_a_problem_refuse_every_call_until_they_are_fixed() {
    let broker = BrokerProcess::start(WORK, FAST);
    fs::write(broker.work.join("a.txt"), "a").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = path_args(&broker.work.join("a.txt"));
    assert!(matches!(
        client.call(1, "read_file", &args),
        Ok(ToolResponse::Result { .. })
    ));
    broker.write_grants(
        "broken.toml",
        "[[grant]]\nid = \"x\"\ntool = \"nonsense\"\n",
    );
    reloaded(&broker, "grant problem", 1);
    reloaded(&broker, "grants reloaded with problems", 1);
    assert!(broker.log().contains("broken.toml:3"), "{}", broker.log());
    assert_eq!(
        denied(&client.call(2, "read_file", &args).unwrap()),
        DenyReason::GrantsInvalid
    );
    fs::remove_file(broker.config.join("grants/broken.toml")).unwrap();
    reloaded(&broker, "grants reloaded grants=2", 1);
    assert!(matches!(
        client.call(3, "read_file", &args),
        Ok(ToolResponse::Result { .. })
    ));
}

#[test]
fn an_editor_style_save_and_a_grants_folder_made_again_are_both_seen() {
    let broker = BrokerProcess::start("", FAST);
    fs::write(broker.work.join("a.txt"), "a").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = path_args(&broker.work.join("a.txt"));
    assert_eq!(
        denied(&client.call(1, "read_file", &args).unwrap()),
        DenyReason::NoGrant
    );
    // Saved through a temporary file and a rename.
    let grants = broker.config.join("grants");
    let text = WORK.replace("{work}", &broker.work.display().to_string());
    fs::write(grants.join(".grants.toml.swp"), &text).unwrap();
    fs::rename(grants.join(".grants.toml.swp"), grants.join("grants.toml")).unwrap();
    reloaded(&broker, "grants reloaded grants=2", 1);
    assert!(matches!(
        client.call(2, "read_file", &args),
        Ok(ToolResponse::Result { .. })
    ));
    // The folder deleted, then made again.
    fs::remove_dir_all(&grants).unwrap();
    reloaded(&broker, "grants reloaded grants=0", 1);
    fs::create_dir(&grants).unwrap();
    fs::write(grants.join("g.toml"), &text).unwrap();
    reloaded(&broker, "grants reloaded grants=2", 2);
    assert!(matches!(
        client.call(3, "read_file", &args),
        Ok(ToolResponse::Result { .. })
    ));
}

#[test]
fn an_audit_log_that_cannot_be_written_gives_audit_unavailable() {
    let broker = BrokerProcess::start(WORK, FAST);
    fs::write(broker.work.join("a.txt"), "a").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = path_args(&broker.work.join("a.txt"));
    assert!(matches!(
        client.call(1, "read_file", &args),
        Ok(ToolResponse::Result { .. })
    ));
    let log = broker.state.join("audit.jsonl");
    let kept = broker.state.join("audit.kept");
    fs::rename(&log, &kept).unwrap();
    std::os::unix::fs::symlink("/dev/full", &log).unwrap();
    assert_eq!(
        denied(&client.call(2, "read_file", &args).unwrap()),
        DenyReason::AuditUnavailable
    );
    let write = serde_json::json!({"path": broker.work.join("b.txt"), "content": "b"}).to_string();
    assert_eq!(
        denied(&client.call(3, "write_file", &write).unwrap()),
        DenyReason::AuditUnavailable
    );
    assert!(
        !broker.work.join("b.txt").exists(),
        "a write ran without its record"
    );
    fs::remove_file(&log).unwrap();
    fs::rename(&kept, &log).unwrap();
    assert!(matches!(
        client.call(4, "read_file", &args),
        Ok(ToolResponse::Result { .. })
    ));
}

#[test]
fn a_damaged_session_row_is_state_unreadable_for_that_session_only() {
    let broker = BrokerProcess::start(WORK, FAST);
    fs::write(broker.work.join("a.txt"), "a").unwrap();
    let args = path_args(&broker.work.join("a.txt"));
    let mut damaged = AgentClient::open(&broker.socket(), None);
    let mut healthy = AgentClient::open(&broker.socket(), None);
    let db = rusqlite::Connection::open(broker.state.join("ledger.sqlite")).unwrap();
    db.execute(
        "UPDATE sessions SET taint = 'garbage' WHERE id = ?1",
        [damaged.session_id().as_str()],
    )
    .unwrap();
    assert_eq!(
        denied(&damaged.call(1, "read_file", &args).unwrap()),
        DenyReason::StateUnreadable
    );
    assert!(matches!(
        healthy.call(1, "read_file", &args),
        Ok(ToolResponse::Result { .. })
    ));
}

#[test]
fn a_call_id_sent_again_gets_the_same_answer_and_does_not_run_twice() {
    let broker = BrokerProcess::start(WORK, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    let target = broker.work.join("counter.txt");
    let write = serde_json::json!({"path": target, "content": "1"}).to_string();
    let first = client.call(7, "write_file", &write).unwrap();
    fs::write(&target, "changed by someone else").unwrap();
    let again = client.call(7, "write_file", &write).unwrap();
    assert_eq!(first, again);
    assert_eq!(
        fs::read_to_string(&target).unwrap(),
        "changed by someone else"
    );
    assert!(content(&first).contains("\"created\":true"));
}

#[test]
fn a_lower_call_id_is_a_new_call_and_a_higher_one_sent_again_is_not_run_twice() {
    let mut broker = BrokerProcess::start(WORK, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    let resume = client.session.clone().unwrap();
    let target = broker.work.join("ids.txt");
    let write = |text: &str| serde_json::json!({"path": target, "content": text}).to_string();
    assert!(content(&client.call(10, "write_file", &write("ten")).unwrap()).contains("created"));
    // Ids need not rise: 5 is new, and runs.
    let read = path_args(&target);
    let five = client.call(5, "read_file", &read).unwrap();
    assert_eq!(content(&five).lines().last(), Some("ten"), "{five:?}");
    fs::write(&target, "changed by someone else").unwrap();
    // 10 again: its answer, not a second run (from the session's memo, then from the ledger).
    let first = client.call(10, "write_file", &write("ten")).unwrap();
    let again = client.call(10, "write_file", &write("ten")).unwrap();
    assert_eq!(first, again);
    assert_eq!(
        fs::read_to_string(&target).unwrap(),
        "changed by someone else"
    );
    drop(client);
    broker.restart();
    let mut client = AgentClient::open(&broker.socket(), Some(resume));
    assert_eq!(client.call(10, "write_file", &write("ten")).unwrap(), first);
    assert_eq!(client.call(5, "read_file", &read).unwrap(), five);
    assert_eq!(
        fs::read_to_string(&target).unwrap(),
        "changed by someone else"
    );
    // And a new id above them all runs.
    let eleven = client.call(11, "read_file", &read).unwrap();
    assert!(
        content(&eleven).contains("changed by someone else"),
        "{eleven:?}"
    );
}
