//! The SQLite ledger: migrations, sessions, calls, damaged rows, and the rebuild from the log.

use ledger::{AuditLog, CallRow, CallState, Event, Field, Ledger, LedgerError, SessionRow};
use proto::{CallId, Class, SessionId, Timestamp, ToolResponse};

fn now() -> Timestamp {
    Timestamp::parse("2026-12-01T00:00:00Z").unwrap()
}

fn session(id: &str) -> SessionRow {
    SessionRow {
        id: SessionId(id.into()),
        token_sha256: ledger::sha256_hex(b"token"),
        created: now(),
        last_used: now(),
        taint: Class::Private,
        untrusted: true,
        ended: None,
    }
}

#[test]
fn a_ledger_opens_twice_and_keeps_what_it_holds() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("ledger.sqlite");
    {
        let ledger = Ledger::open(&path).unwrap();
        ledger.put_session(&session("a")).unwrap();
    }
    let ledger = Ledger::open(&path).unwrap();
    assert_eq!(
        ledger.session(&SessionId("a".into())).unwrap(),
        Some(session("a"))
    );
    assert_eq!(ledger.session(&SessionId("b".into())).unwrap(), None);
}

#[test]
fn a_damaged_session_row_is_damaged_for_that_session_only() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("ledger.sqlite");
    let ledger = Ledger::open(&path).unwrap();
    ledger.put_session(&session("good")).unwrap();
    ledger.put_session(&session("bad")).unwrap();
    let raw = rusqlite_connection(&path);
    raw.execute("UPDATE sessions SET taint = 'ultra' WHERE id = 'bad'", [])
        .unwrap();
    let error = ledger.session(&SessionId("bad".into())).unwrap_err();
    assert!(matches!(error, LedgerError::Damaged { .. }), "{error}");
    assert!(error.to_string().contains("bad"), "{error}");
    assert!(ledger.session(&SessionId("good".into())).unwrap().is_some());
}

fn rusqlite_connection(path: &std::path::Path) -> rusqlite::Connection {
    rusqlite::Connection::open(path).unwrap()
}

#[test]
fn a_ledger_of_a_newer_schema_is_refused_by_name() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("ledger.sqlite");
    rusqlite_connection(&path)
        .execute_batch("PRAGMA user_version = 99;")
        .unwrap();
    let error = Ledger::open(&path).unwrap_err();
    assert!(error.to_string().contains("schema version 99"), "{error}");
}

#[test]
fn calls_keep_their_state_and_answer_and_end_with_their_session() {
    let dir = testkit::temp_dir();
    let ledger = Ledger::open(&dir.path().join("l.sqlite")).unwrap();
    ledger.put_session(&session("s")).unwrap();
    let row = CallRow {
        session: SessionId("s".into()),
        call_id: CallId(3),
        tool: "read_file".into(),
        arguments_sha256: ledger::sha256_hex(b"{}"),
        state: CallState::Done,
        response: Some(ToolResponse::Failed {
            message: "no".into(),
        }),
        updated: now(),
    };
    ledger.put_call(&row).unwrap();
    assert_eq!(
        ledger.call(&row.session, CallId(3)).unwrap(),
        Some(row.clone())
    );
    assert_eq!(ledger.calls_in(CallState::Done).unwrap().len(), 1);
    ledger.end_session(&row.session, now()).unwrap();
    assert_eq!(ledger.call(&row.session, CallId(3)).unwrap(), None);
    assert!(
        ledger
            .session(&row.session)
            .unwrap()
            .unwrap()
            .ended
            .is_some()
    );
}

#[test]
fn the_highest_call_id_is_compared_as_unsigned_and_per_session() {
    let dir = testkit::temp_dir();
    let ledger = Ledger::open(&dir.path().join("l.sqlite")).unwrap();
    let (s, t) = (SessionId("s".into()), SessionId("t".into()));
    assert_eq!(ledger.highest_call(&s).unwrap(), None);
    let put = |session: &SessionId, id: u64| {
        ledger
            .put_call(&CallRow {
                session: session.clone(),
                call_id: CallId(id),
                tool: "read_file".into(),
                arguments_sha256: ledger::sha256_hex(b"{}"),
                state: CallState::Done,
                response: None,
                updated: now(),
            })
            .unwrap();
    };
    put(&s, 7);
    put(&s, 3);
    put(&t, 900);
    assert_eq!(ledger.highest_call(&s).unwrap(), Some(CallId(7)));
    // Ids of 2^63 and above are stored as negative numbers; they are still the highest.
    put(&s, 1 << 63);
    put(&s, u64::MAX - 1);
    assert_eq!(ledger.highest_call(&s).unwrap(), Some(CallId(u64::MAX - 1)));
    assert_eq!(ledger.highest_call(&t).unwrap(), Some(CallId(900)));
}
#[test]
fn a_ledger_behind_the_log_is_rebuilt_forward_from_its_records() {
    let dir = testkit::temp_dir();
    let log_path = dir.path().join("audit.jsonl");
    let (mut log, _) = AuditLog::open(&log_path, None, now()).unwrap();
    let s = SessionId("s".into());
    let big = "x".repeat(ledger::audit::INLINE_LIMIT + 1);
    log.append(
        &[
            Event::SessionOpened {
                session: s.clone(),
                token_sha256: ledger::sha256_hex(b"t"),
            },
            answered(&s, 1, Field::of("hello"), Class::Private),
            answered(&s, 2, Field::of(&big), Class::Secret),
            Event::Decided {
                session: s.clone(),
                call_id: CallId(3),
                tool: "write_file".into(),
                arguments: Field::of("{}"),
                grant: None,
            },
            Event::Interrupted {
                session: s.clone(),
                call_id: CallId(3),
            },
        ],
        now(),
    )
    .unwrap();
    let ledger = Ledger::open(&dir.path().join("l.sqlite")).unwrap();
    let text = std::fs::read_to_string(&log_path).unwrap();
    for line in text.lines() {
        let record: ledger::Record = serde_json::from_str(line).unwrap();
        ledger
            .apply(&record, &ledger::sha256_hex(line.as_bytes()))
            .unwrap();
    }
    assert_eq!(ledger.anchor().unwrap(), Some(log.anchor()));
    let labels = ledger.session(&s).unwrap().unwrap();
    assert_eq!((labels.taint, labels.untrusted), (Class::Secret, true));
    let response = |id| {
        ledger
            .call(&s, CallId(id))
            .unwrap()
            .unwrap()
            .response
            .unwrap()
    };
    assert!(matches!(response(1), ToolResponse::Result { ref content, .. } if content == "hello"));
    assert_eq!(
        response(2),
        ToolResponse::Failed {
            message: ledger::ANSWER_LOST.into()
        }
    );
    assert_eq!(
        response(3),
        ToolResponse::Failed {
            message: ledger::INTERRUPTED.into()
        }
    );
}

fn answered(session: &SessionId, id: u64, text: Field, class: Class) -> Event {
    Event::Answered {
        session: session.clone(),
        call_id: CallId(id),
        tool: "read_file".into(),
        arguments: Field::of("{\"path\":\"/a\"}"),
        grant: Some("g".into()),
        labels: Some(ledger::Labels {
            taint: class,
            untrusted: true,
        }),
        answer: ledger::Answer::Result {
            text,
            class,
            untrusted: true,
            truncated: false,
        },
        detail: String::new(),
    }
}

#[test]
fn a_reader_beside_a_writer_never_pairs_one_records_number_with_anothers_hash() {
    // `audit verify` reads the anchor while the broker moves it on after every record.
    let dir = testkit::temp_dir();
    let path = dir.path().join("ledger.sqlite");
    let writer = Ledger::open(&path).unwrap();
    writer
        .set_anchor(&ledger::Anchor {
            seq: 0,
            hash: "0".to_string(),
        })
        .unwrap();
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reading = {
        let done = std::sync::Arc::clone(&done);
        let path = path.clone();
        std::thread::spawn(move || {
            let reader = Ledger::open_read_only(&path).unwrap();
            let mut reads = 0u64;
            while !done.load(std::sync::atomic::Ordering::Relaxed) {
                let anchor = reader.anchor().unwrap().unwrap();
                assert_eq!(anchor.hash, anchor.seq.to_string(), "after {reads} reads");
                reads += 1;
            }
            reads
        })
    };
    for seq in 1..=3_000u64 {
        writer
            .set_anchor(&ledger::Anchor {
                seq,
                hash: seq.to_string(),
            })
            .unwrap();
    }
    done.store(true, std::sync::atomic::Ordering::Relaxed);
    let reads = reading.join().unwrap();
    assert!(reads > 0);
}
