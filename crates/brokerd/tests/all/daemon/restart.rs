//! The broker killed and started again: nothing an answered client saw is lost, nothing runs
//! twice, sessions resume with their labels.

use std::collections::BTreeSet;
use std::fs;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use proto::{Class, DenyReason, ToolResponse};
use testkit::{AgentClient, BrokerProcess};

use super::{FAST, WORK, audit_verify, content, denied, path_args};

#[test]
fn a_session_resumes_after_a_restart_with_its_labels() {
    let grants = format!(
        "{WORK}\n[[grant]]\nid = \"secret\"\ntool = \"read_file\"\npaths = [\"{{work}}/secret\"]\nclass = \"secret\"\nuntrusted = false\n\n[[grant]]\nid = \"careful\"\ntool = \"read_file\"\npaths = [\"{{work}}/public\"]\nmax_taint = \"private\"\nuntrusted = false\n"
    );
    let mut broker = BrokerProcess::start(&grants, FAST);
    fs::create_dir_all(broker.work.join("secret")).unwrap();
    fs::create_dir_all(broker.work.join("public")).unwrap();
    fs::write(broker.work.join("secret/k"), "k").unwrap();
    fs::write(broker.work.join("public/p"), "p").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let read = client
        .call(1, "read_file", &path_args(&broker.work.join("secret/k")))
        .unwrap();
    assert!(
        matches!(
            read,
            ToolResponse::Result {
                class: Class::Secret,
                ..
            }
        ),
        "{read:?}"
    );
    let resume = client.session.clone().unwrap();
    broker.restart();
    let mut again = AgentClient::open(&broker.socket(), Some(resume));
    let refused = again
        .call(2, "read_file", &path_args(&broker.work.join("public/p")))
        .unwrap();
    assert_eq!(denied(&refused), DenyReason::TaintTooHigh);
    // Another session of the same owner is not refused.
    let mut fresh = AgentClient::open(&broker.socket(), None);
    let read = fresh
        .call(1, "read_file", &path_args(&broker.work.join("public/p")))
        .unwrap();
    assert!(matches!(read, ToolResponse::Result { .. }), "{read:?}");
}

#[test]
fn a_closed_session_cannot_be_resumed() {
    let broker = BrokerProcess::start(WORK, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    let resume = client.session.clone().unwrap();
    assert!(matches!(
        client.send(&proto::AgentFrame::Close {}),
        Some(proto::BrokerFrame::Closed {})
    ));
    let mut again = AgentClient::connect(&broker.socket());
    let answer = again.send(&proto::AgentFrame::Hello {
        version: proto::PROTOCOL_VERSION,
        client: None,
        resume: Some(resume),
    });
    assert!(
        matches!(
            answer,
            Some(proto::BrokerFrame::Error {
                code: proto::ErrorCode::SessionEnded,
                ..
            })
        ),
        "{answer:?}"
    );
}

#[test]
fn a_session_closed_on_one_connection_refuses_the_next_call_on_another() {
    let broker = BrokerProcess::start(WORK, FAST);
    fs::write(broker.work.join("f"), "f").unwrap();
    let args = path_args(&broker.work.join("f"));
    let mut first = AgentClient::open(&broker.socket(), None);
    let resume = first.session.clone().unwrap();
    assert!(matches!(
        first.call(1, "read_file", &args),
        Ok(ToolResponse::Result { .. })
    ));
    let mut second = AgentClient::open(&broker.socket(), Some(resume));
    assert!(matches!(
        second.send(&proto::AgentFrame::Close {}),
        Some(proto::BrokerFrame::Closed {})
    ));
    let answer = first.call(2, "read_file", &args);
    assert!(
        matches!(
            answer,
            Err(Some(proto::BrokerFrame::Error {
                code: proto::ErrorCode::SessionEnded,
                ..
            }))
        ),
        "{answer:?}"
    );
}

#[test]
fn a_record_the_ledger_cannot_apply_stops_it_and_a_restart_replays_it_so_nothing_runs_twice() {
    let mut broker = BrokerProcess::start(WORK, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    let resume = client.session.clone().unwrap();
    let made = broker.work.join("made.txt");
    let write = serde_json::json!({"path": made, "content": "once"}).to_string();
    let read = path_args(&made);
    // The ledger refuses every row of call 13 (a full disk, a damaged page), not the others.
    let db = rusqlite::Connection::open(broker.state.join("ledger.sqlite")).unwrap();
    db.execute_batch(
        "CREATE TRIGGER refuse_13 BEFORE INSERT ON calls WHEN NEW.call_id = 13
         BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
    )
    .unwrap();
    // Its answer is on disk, so the client gets it; the ledger does not follow.
    let first = client.call(13, "write_file", &write).unwrap();
    assert!(content(&first).contains("\"created\":true"), "{first:?}");
    // Later calls are answered; the ledger applies none of them (it would skip call 13's).
    let later = client.call(14, "read_file", &read).unwrap();
    assert!(content(&later).contains("once"), "{later:?}");
    assert!(broker.wait_for_log(
        "the ledger stops following the audit log",
        1,
        Duration::from_secs(5)
    ));
    let rows: i64 = db
        .query_row("SELECT COUNT(*) FROM calls WHERE call_id = 14", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(rows, 0, "a call after the refused one was applied");
    db.execute_batch("DROP TRIGGER refuse_13").unwrap();
    drop(db);
    drop(client);
    broker.restart();
    // The restart caught the ledger up from the log: call 13 sent again is not run again.
    let mut client = AgentClient::open(&broker.socket(), Some(resume));
    let again = client.call(13, "write_file", &write).unwrap();
    let lost = answer_lost();
    assert!(again == first || again == lost, "{again:?}");
    let (answered_13, audit) = answers_recorded(&broker, 13);
    assert_eq!(answered_13, 1, "{audit}");
    assert_eq!(client.call(14, "read_file", &read).unwrap(), later);
    let (code, report) = audit_verify(&broker);
    assert_eq!(code, 0, "{report}");
}

#[test]
fn a_ledger_removed_while_the_broker_is_down_is_rebuilt_from_the_audit_log() {
    let mut broker = BrokerProcess::start(WORK, FAST);
    let mut client = AgentClient::open(&broker.socket(), None);
    let resume = client.session.clone().unwrap();
    let made = broker.work.join("made.txt");
    let write = serde_json::json!({"path": made, "content": "once"}).to_string();
    let first = client.call(1, "write_file", &write).unwrap();
    assert!(content(&first).contains("\"created\":true"), "{first:?}");
    let read = client.call(2, "read_file", &path_args(&made)).unwrap();
    drop(client);
    broker.kill();
    for name in ["ledger.sqlite", "ledger.sqlite-wal", "ledger.sqlite-shm"] {
        let _ = fs::remove_file(broker.state.join(name));
    }
    broker.spawn();
    // The session, its resume token and its calls come back from the log.
    let mut client = AgentClient::open(&broker.socket(), Some(resume));
    let again = client.call(1, "write_file", &write).unwrap();
    let lost = answer_lost();
    assert!(again == first || again == lost, "{again:?}");
    let read_again = client.call(2, "read_file", &path_args(&made)).unwrap();
    assert!(read_again == read || read_again == lost, "{read_again:?}");
    let (answered_1, audit) = answers_recorded(&broker, 1);
    assert_eq!(answered_1, 1, "{audit}");
    let (code, report) = audit_verify(&broker);
    assert_eq!(code, 0, "{report}");
}

/// What a call id sent again answers when the audit log kept only its answer's digest.
fn answer_lost() -> ToolResponse {
    ToolResponse::Failed {
        message: ledger::ANSWER_LOST.to_string(),
    }
}

/// How many `Answered` records the audit log holds for `call_id`, and the log (for messages).
fn answers_recorded(broker: &BrokerProcess, call_id: u64) -> (usize, String) {
    let audit = fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    let id = format!("\"call_id\":{call_id},");
    let count = audit
        .lines()
        .filter(|l| l.contains("\"type\":\"answered\"") && l.contains(&id))
        .count();
    (count, audit)
}

#[test]
fn a_kill_during_sixteen_busy_clients_loses_no_answer_and_runs_nothing_twice() {
    let grants = r#"
[[grant]]
id = "mktemp"
tool = "shell"
commands = ["mktemp -p {work}/made"]
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"
"#;
    let mut broker = BrokerProcess::start(grants, FAST);
    fs::create_dir_all(broker.work.join("made")).unwrap();
    let command = serde_json::json!({
        "command": format!("mktemp -p {}/made", broker.work.display()),
    })
    .to_string();
    // Each client keeps what it was answered: (session token, call id) -> answered.
    let answered: Arc<Mutex<Vec<(proto::Resume, u64)>>> = Arc::default();
    let socket = broker.socket();
    let workers: Vec<_> = (0..16)
        .map(|_| {
            let socket = socket.clone();
            let command = command.clone();
            let answered = Arc::clone(&answered);
            thread::spawn(move || {
                let mut client = AgentClient::open(&socket, None);
                let resume = client.session.clone().unwrap();
                for id in 1..=1000u64 {
                    match client.call(id, "shell", &command) {
                        Ok(ToolResponse::Result { .. }) => {
                            answered.lock().unwrap().push((resume.clone(), id))
                        }
                        Ok(other) => panic!("{other:?}"),
                        Err(_) => return (resume, id),
                    }
                }
                (resume, 1001)
            })
        })
        .collect();
    // Killed once the clients are well under way (a count, not a time: a loaded machine
    // answers fewer calls a second, never fewer calls in all).
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while answered.lock().unwrap().len() < 48 && std::time::Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
    }
    broker.kill();
    let stopped: Vec<(proto::Resume, u64)> =
        workers.into_iter().map(|w| w.join().unwrap()).collect();
    broker.spawn();
    let (code, output) = audit_verify(&broker);
    assert_eq!(code, 0, "{output}");
    let log = fs::read_to_string(broker.state.join("audit.jsonl")).unwrap();
    let seen = answered.lock().unwrap().clone();
    assert!(seen.len() > 16, "too few calls were made before the kill");
    for (resume, id) in &seen {
        let needle = format!("\"session\":\"{}\",\"call_id\":{id},", resume.session);
        assert!(
            log.contains(&needle),
            "answer {id} of {} is not in the log",
            resume.session
        );
    }
    // Every client resumes and sends its interrupted call again, and more: files made equal
    // distinct call ids answered.
    let mut ids: BTreeSet<(String, u64)> = seen
        .iter()
        .map(|(r, id)| (r.session.to_string(), *id))
        .collect();
    for (resume, stopped_at) in stopped {
        let mut client = AgentClient::open(&broker.socket(), Some(resume.clone()));
        for id in stopped_at.saturating_sub(1).max(1)..stopped_at + 2 {
            let answer = client.call(id, "shell", &command).unwrap();
            let ran = match &answer {
                ToolResponse::Result { .. } => true,
                ToolResponse::Failed { message } => {
                    assert!(message.contains("broker stopped"), "{message}");
                    false
                }
                other => panic!("{other:?}"),
            };
            if ran {
                ids.insert((resume.session.to_string(), id));
            }
        }
    }
    let made = fs::read_dir(broker.work.join("made")).unwrap().count();
    // A call interrupted by the kill may have made its file without an answer: at most one per
    // client.
    assert!(
        made >= ids.len() && made <= ids.len() + 16,
        "{made} files for {} calls",
        ids.len()
    );
}

#[test]
fn a_session_unused_for_its_idle_time_ends_and_a_busy_one_does_not() {
    let config = format!("{FAST}session_idle_ms = 1500\n");
    let broker = BrokerProcess::start(WORK, &config);
    fs::write(broker.work.join("f"), "f").unwrap();
    let mut idle = AgentClient::open(&broker.socket(), None);
    let idle_resume = idle.session.clone().unwrap();
    let read = idle
        .call(1, "read_file", &path_args(&broker.work.join("f")))
        .unwrap();
    assert!(matches!(read, ToolResponse::Result { .. }), "{read:?}");
    drop(idle);
    // Another session calls (and is denied, which is use too) every 200 ms for 3 s.
    let mut busy = AgentClient::open(&broker.socket(), None);
    for id in 1..=15 {
        let answer = busy
            .call(
                id,
                "read_file",
                &path_args(std::path::Path::new("/etc/hostname")),
            )
            .unwrap();
        assert_eq!(denied(&answer), DenyReason::NoGrant);
        thread::sleep(Duration::from_millis(200));
    }
    let mut again = AgentClient::connect(&broker.socket());
    let answer = again.send(&proto::AgentFrame::Hello {
        version: proto::PROTOCOL_VERSION,
        client: None,
        resume: Some(idle_resume),
    });
    assert!(
        matches!(
            answer,
            Some(proto::BrokerFrame::Error {
                code: proto::ErrorCode::SessionEnded,
                ..
            })
        ),
        "{answer:?}"
    );
    let answer = busy
        .call(16, "read_file", &path_args(&broker.work.join("f")))
        .unwrap();
    assert!(matches!(answer, ToolResponse::Result { .. }), "{answer:?}");
    let audit = fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
    assert_eq!(audit.matches("unused for 1500 ms").count(), 1, "{audit}");
}
