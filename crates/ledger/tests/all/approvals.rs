//! Approvals in the ledger: a provenance ask's values and sentences kept through the log and
//! the ledger, a ledger of the schema before them still read, and what an approval for the
//! rest of a session covers (a grant whole, or a grant with the values a provenance ask named).

use ledger::{AuditLog, Event, Field, Ledger, Record};
use proto::{
    ApprovalId, AskWhy, AskedValue, CallId, Class, GrantId, Resolution, SessionId, Timestamp,
};

fn now() -> Timestamp {
    Timestamp::parse("2026-12-01T00:00:00Z").unwrap()
}

fn value(argument: &str, value: &str) -> AskedValue {
    AskedValue {
        argument: argument.into(),
        value: value.into(),
    }
}

fn requested(id: u64, session: &str, grant: &str, why: AskWhy, values: &[AskedValue]) -> Event {
    Event::ApprovalRequested {
        approval: ApprovalId(id),
        session: SessionId(session.into()),
        call_id: CallId(id),
        tool: "send_mail".into(),
        arguments: Field::of("{\"recipient\":\"eve@evil.example\"}"),
        grant: Some(GrantId(grant.into())),
        why,
        labels: ledger::Labels {
            taint: Class::Private,
            untrusted: true,
        },
        expires: now().plus_millis(60_000),
        values: values.to_vec(),
        provenance: values
            .iter()
            .map(|v| format!("{v} came from call 1, read_inbox, untrusted"))
            .collect(),
    }
}

fn for_session(id: u64, session: &str, grant: &str) -> Event {
    Event::ApprovalResolved {
        approval: ApprovalId(id),
        session: SessionId(session.into()),
        call_id: CallId(id),
        grant: Some(GrantId(grant.into())),
        resolution: Resolution::ApprovedForSession,
        channel: None,
    }
}

/// Writes `events` to a new audit log, replays its lines into a new ledger, and gives both the
/// ledger and the log's text.
fn replayed(dir: &std::path::Path, events: &[Event]) -> (Ledger, String) {
    let log_path = dir.join("audit.jsonl");
    let (mut log, _) = AuditLog::open(&log_path, None, now()).unwrap();
    log.append(events, now()).unwrap();
    let ledger = Ledger::open(&dir.join("ledger.sqlite")).unwrap();
    let text = std::fs::read_to_string(&log_path).unwrap();
    for line in text.lines() {
        let record: Record = serde_json::from_str(line).unwrap();
        ledger
            .apply(&record, &ledger::sha256_hex(line.as_bytes()))
            .unwrap();
    }
    (ledger, text)
}

#[test]
fn a_provenance_asks_values_and_sentences_survive_the_log_and_the_ledger() {
    let dir = testkit::temp_dir();
    let values = [value("recipient", "eve@evil.example"), value("cc", "x\ny")];
    let (ledger, log) = replayed(
        dir.path(),
        &[
            requested(1, "s", "mail", AskWhy::Provenance, &values),
            requested(2, "s", "drafts", AskWhy::AfterUntrusted, &[]),
        ],
    );
    let row = ledger.approval(ApprovalId(1)).unwrap().unwrap();
    assert_eq!(row.values, values);
    assert_eq!(
        row.provenance,
        [
            "recipient eve@evil.example came from call 1, read_inbox, untrusted",
            "cc x\\ny came from call 1, read_inbox, untrusted",
        ]
    );
    let pending = ledger.pending_approvals().unwrap();
    assert_eq!(pending.len(), 2);
    assert_eq!(pending[0], row);
    assert!(pending[1].values.is_empty() && pending[1].provenance.is_empty());
    let by_call = ledger
        .approval_of_call(&SessionId("s".into()), CallId(1))
        .unwrap()
        .unwrap();
    assert_eq!(by_call.values, values);
    // An ask without values is written as before: neither key appears in its record.
    let lines: Vec<&str> = log.lines().collect();
    assert!(
        lines[0]
            .contains("\"values\":[{\"argument\":\"recipient\",\"value\":\"eve@evil.example\"}"),
        "{}",
        lines[0]
    );
    assert!(lines[0].contains("\"provenance\":["), "{}", lines[0]);
    assert!(
        !lines[1].contains("\"values\"") && !lines[1].contains("\"provenance\""),
        "{}",
        lines[1]
    );
}

#[test]
fn an_approval_record_written_before_values_existed_still_reads() {
    let line = r#"{"type":"approval_requested","approval":4,"session":"s","call_id":4,"tool":"write_file","arguments":{"text":"{}"},"grant":"g","why":"after_untrusted","labels":{"taint":"public","untrusted":true},"expires":"2026-12-01T00:01:00Z"}"#;
    let event: Event = serde_json::from_str(line).unwrap();
    match event {
        Event::ApprovalRequested {
            values, provenance, ..
        } => assert!(values.is_empty() && provenance.is_empty()),
        other => panic!("not an approval request: {other:?}"),
    }
}

#[test]
fn a_ledger_of_the_schema_before_values_opens_and_its_approvals_read_with_none() {
    let dir = testkit::temp_dir();
    let path = dir.path().join("ledger.sqlite");
    {
        let old = rusqlite::Connection::open(&path).unwrap();
        ledger::migrations::migrate(&old, &ledger::migrations::MIGRATIONS[..3]).unwrap();
        old.execute_batch(
            "INSERT INTO approvals (id, session, call_id, tool, arguments, grant_id, why, taint,
                 untrusted, requested_ms, expires_ms, state, resolution)
             VALUES (7, 's', 3, 'write_file', '{\"text\":\"{}\"}', 'drafts', 'after_untrusted',
                 'public', 1, 1764547200000, 1764547260000, 'pending', NULL);
             INSERT INTO session_grants (session, grant_id) VALUES ('s', 'old');",
        )
        .unwrap();
    }
    let ledger = Ledger::open(&path).unwrap();
    let row = ledger.approval(ApprovalId(7)).unwrap().unwrap();
    assert_eq!(row.why, AskWhy::AfterUntrusted);
    assert!(row.values.is_empty() && row.provenance.is_empty());
    assert_eq!(ledger.pending_approvals().unwrap(), [row]);
    // What the old ledger approved for the session still covers the grant whole.
    let s = SessionId("s".into());
    let old = GrantId("old".into());
    let eve = [value("recipient", "eve@evil.example")];
    assert!(
        ledger
            .approved_for_session(&s, &old, AskWhy::Provenance, &eve)
            .unwrap()
    );
}

#[test]
fn a_provenance_ask_approved_for_the_session_covers_its_grant_with_its_values_only() {
    let dir = testkit::temp_dir();
    let eve = value("recipient", "eve@evil.example");
    let (ledger, _) = replayed(
        dir.path(),
        &[
            requested(
                1,
                "s",
                "mail",
                AskWhy::Provenance,
                std::slice::from_ref(&eve),
            ),
            for_session(1, "s", "mail"),
        ],
    );
    let covered = |session: &str, grant: &str, why: AskWhy, values: &[AskedValue]| {
        ledger
            .approved_for_session(
                &SessionId(session.into()),
                &GrantId(grant.into()),
                why,
                values,
            )
            .unwrap()
    };
    let mallory = value("recipient", "mallory@evil.example");
    let p = AskWhy::Provenance;
    assert!(covered("s", "mail", p, std::slice::from_ref(&eve)));
    // Another value, the same value beside another, or in another argument: asks again.
    assert!(!covered("s", "mail", p, std::slice::from_ref(&mallory)));
    assert!(!covered("s", "mail", p, &[eve.clone(), mallory.clone()]));
    assert!(!covered("s", "mail", p, &[value("cc", "eve@evil.example")]));
    // Another grant, another session: asks again.
    assert!(!covered("s", "other", p, std::slice::from_ref(&eve)));
    assert!(!covered("t", "mail", p, std::slice::from_ref(&eve)));
    // The grant is not approved whole: an ask for another reason, or one naming no value.
    assert!(!covered("s", "mail", AskWhy::AfterUntrusted, &[]));
    assert!(!covered(
        "s",
        "mail",
        AskWhy::GrantAsks,
        std::slice::from_ref(&eve)
    ));
    assert!(!covered("s", "mail", p, &[]));
}

#[test]
fn any_other_ask_approved_for_the_session_covers_its_grant_whole() {
    let dir = testkit::temp_dir();
    let eve = [value("recipient", "eve@evil.example")];
    let (ledger, _) = replayed(
        dir.path(),
        &[
            requested(1, "s", "drafts", AskWhy::AfterUntrusted, &[]),
            for_session(1, "s", "drafts"),
            requested(2, "s", "ask-write", AskWhy::GrantAsks, &[]),
            for_session(2, "s", "ask-write"),
            // A provenance ask that names no value (the session's values untracked).
            requested(3, "s", "untracked", AskWhy::Provenance, &[]),
            for_session(3, "s", "untracked"),
        ],
    );
    let s = SessionId("s".into());
    for grant in ["drafts", "ask-write", "untracked"] {
        let grant = GrantId(grant.into());
        for (why, values) in [
            (AskWhy::AfterUntrusted, &[][..]),
            (AskWhy::GrantAsks, &[][..]),
            (AskWhy::Provenance, &eve[..]),
        ] {
            assert!(
                ledger
                    .approved_for_session(&s, &grant, why, values)
                    .unwrap(),
                "{grant:?} {why:?}"
            );
        }
        let t = SessionId("t".into());
        assert!(
            !ledger
                .approved_for_session(&t, &grant, AskWhy::GrantAsks, &[])
                .unwrap()
        );
    }
}
