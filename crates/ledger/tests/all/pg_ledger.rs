//! The ledger on PostgreSQL: the same audit log replayed into a SQLite ledger and into a
//! PostgreSQL one reads back the same on every accessor (the SQL the two share, tested on
//! both), two brokers on one database keep their audit anchors apart, and a stopped server
//! makes the ledger say it is unavailable until it is back.

use ledger::engine::url::PgSettings;
use ledger::{Anchor, AuditLog, CallState, Event, Field, Ledger, Record};
use proto::{
    ApprovalId, AskWhy, AskedValue, CallId, Class, GrantId, Resolution, SessionId, Timestamp,
};
use testkit::PgServer;

fn now() -> Timestamp {
    Timestamp::parse("2026-12-01T00:00:00Z").unwrap()
}

fn events() -> Vec<Event> {
    let s = SessionId("s".into());
    let ended = SessionId("ended".into());
    let value = AskedValue {
        argument: "recipient".into(),
        value: "eve@evil.example".into(),
    };
    vec![
        Event::SessionOpened {
            session: s.clone(),
            token_sha256: ledger::sha256_hex(b"t"),
        },
        Event::SessionOpened {
            session: ended.clone(),
            token_sha256: ledger::sha256_hex(b"u"),
        },
        Event::Answered {
            session: s.clone(),
            call_id: CallId(1),
            tool: "read_file".into(),
            arguments: Field::of("{\"path\":\"/a\"}"),
            grant: Some("g".into()),
            labels: Some(ledger::Labels {
                taint: Class::Private,
                untrusted: true,
            }),
            answer: ledger::Answer::Result {
                text: Field::of("hello"),
                class: Class::Private,
                untrusted: true,
                truncated: false,
            },
            detail: String::new(),
        },
        Event::FileSeen {
            session: s.clone(),
            path: "/a".into(),
            sha256: ledger::sha256_hex(b"hello"),
        },
        Event::OwnerWords {
            session: s.clone(),
            text: Field::of("send it to bob"),
        },
        Event::ApprovalRequested {
            approval: ApprovalId(1),
            session: s.clone(),
            call_id: CallId(2),
            tool: "send_mail".into(),
            arguments: Field::of("{\"recipient\":\"eve@evil.example\"}"),
            grant: Some(GrantId("mail".into())),
            why: AskWhy::Provenance,
            labels: ledger::Labels {
                taint: Class::Private,
                untrusted: true,
            },
            expires: now().plus_millis(60_000),
            values: vec![value.clone()],
            provenance: vec!["it came from call 1".into()],
        },
        Event::ApprovalResolved {
            approval: ApprovalId(1),
            session: s.clone(),
            call_id: CallId(2),
            grant: Some(GrantId("mail".into())),
            resolution: Resolution::ApprovedForSession,
            channel: None,
        },
        Event::ApprovalRequested {
            approval: ApprovalId(2),
            session: s.clone(),
            call_id: CallId(3),
            tool: "write_file".into(),
            arguments: Field::of("{}"),
            grant: Some(GrantId("files".into())),
            why: AskWhy::GrantAsks,
            labels: ledger::Labels {
                taint: Class::Private,
                untrusted: true,
            },
            expires: now().plus_millis(60_000),
            values: vec![],
            provenance: vec![],
        },
        Event::Decided {
            session: s.clone(),
            call_id: CallId(u64::MAX),
            tool: "shell".into(),
            arguments: Field::of("{}"),
            grant: None,
        },
        Event::SessionEnded {
            session: ended,
            reason: "closed".into(),
        },
    ]
}

/// What every accessor reads back, as text to compare.
fn read_back(ledger: &Ledger) -> Vec<String> {
    let s = SessionId("s".into());
    let value = AskedValue {
        argument: "recipient".into(),
        value: "eve@evil.example".into(),
    };
    ledger
        .add_grant_uses(&s, &["g".into(), "mail".into()])
        .unwrap();
    ledger.add_grant_uses(&s, &["g".into()]).unwrap();
    let mut uses = ledger.grant_uses(&s).unwrap();
    uses.sort();
    vec![
        format!("{:?}", ledger.session(&s).unwrap()),
        format!("{:?}", ledger.session(&SessionId("ended".into())).unwrap()),
        format!("{:?}", ledger.call(&s, CallId(1)).unwrap()),
        format!("{:?}", ledger.call(&s, CallId(2)).unwrap()),
        format!("{:?}", ledger.highest_call(&s).unwrap()),
        format!("{:?}", ledger.answers(&s).unwrap()),
        format!("{:?}", ledger.calls_in(CallState::Running).unwrap()),
        format!("{:?}", ledger.approval(ApprovalId(1)).unwrap()),
        format!("{:?}", ledger.approval_of_call(&s, CallId(3)).unwrap()),
        format!("{:?}", ledger.pending_approvals().unwrap()),
        format!("{:?}", ledger.last_approval_id().unwrap()),
        format!(
            "{:?}",
            ledger
                .approved_for_session(&s, &GrantId("mail".into()), AskWhy::Provenance, &[value])
                .unwrap()
        ),
        format!(
            "{:?}",
            ledger
                .approved_for_session(&s, &GrantId("files".into()), AskWhy::GrantAsks, &[])
                .unwrap()
        ),
        format!("{:?}", ledger.untrusted_by(&s).unwrap()),
        format!("{:?}", ledger.open_sessions().unwrap()),
        format!("{:?}", ledger.owner_words(&s).unwrap()),
        format!("{:?}", ledger.read_hash(&s, "/a").unwrap()),
        format!("{:?}", ledger.idle_sessions(now().plus_millis(1)).unwrap()),
        format!("{uses:?}"),
        format!("{:?}", ledger.anchor().unwrap().map(|a| a.seq)),
    ]
}

fn replay(ledger: &mut Ledger, dir: &std::path::Path) {
    let log_path = dir.join("audit.jsonl");
    let (mut log, _) = AuditLog::open(&log_path, None, now()).unwrap();
    log.append(&events(), now()).unwrap();
    let text = std::fs::read_to_string(&log_path).unwrap();
    let records: Vec<(Record, String)> = text
        .lines()
        .map(|line| {
            (
                serde_json::from_str(line).unwrap(),
                ledger::sha256_hex(line.as_bytes()),
            )
        })
        .collect();
    ledger.apply_all(&records).unwrap();
}

#[test]
fn a_log_replayed_into_either_engine_reads_back_the_same() {
    let dir = testkit::temp_dir();
    let server = PgServer::start();
    let mut lite = Ledger::open(&dir.path().join("ledger.sqlite")).unwrap();
    let mut pg = Ledger::connect(&PgSettings::url(&server.url()), "one").unwrap();
    // Each its own log of the same events.
    for (ledger, folder) in [(&mut lite, "lite"), (&mut pg, "pg")] {
        let folder = dir.path().join(folder);
        std::fs::create_dir(&folder).unwrap();
        replay(ledger, &folder);
    }
    // The one difference: on PostgreSQL each approval names the broker it waits in.
    let a = read_back(&lite);
    let b: Vec<String> = read_back(&pg)
        .iter()
        .map(|line| line.replace("broker: Some(\"one\")", "broker: None"))
        .collect();
    assert!(a[0].contains("untrusted: true"), "{a:?}");
    assert!(a[9].contains("write_file"), "{a:?}");
    assert_eq!(a[11], "true");
    assert_eq!(a, b);
}

#[test]
fn two_brokers_on_one_database_keep_their_audit_anchors_apart() {
    let server = PgServer::start();
    let url = PgSettings::url(&server.url_of("postgres"));
    let one = Ledger::connect(&url, "one").unwrap();
    let two = Ledger::connect(&url, "two").unwrap();
    let anchor = |seq| Anchor {
        seq,
        hash: format!("{seq:064}"),
    };
    one.set_anchor(&anchor(7)).unwrap();
    assert_eq!(two.anchor().unwrap(), None);
    two.set_anchor(&anchor(3)).unwrap();
    assert_eq!(one.anchor().unwrap(), Some(anchor(7)));
    assert_eq!(two.anchor().unwrap(), Some(anchor(3)));
}

#[test]
fn a_stopped_server_is_an_unavailable_ledger_until_it_is_back() {
    let server = PgServer::start();
    let pg = Ledger::connect(&PgSettings::url(&server.url()), "one").unwrap();
    server.stop();
    let error = pg.open_sessions().unwrap_err();
    assert!(error.is_unavailable(), "{error}");
    assert!(error.to_string().contains("unavailable"), "{error}");
    // Connecting while it is down is refused as unavailable too, by URL.
    let error = Ledger::connect(&PgSettings::url(&server.url()), "two").unwrap_err();
    assert!(error.is_unavailable(), "{error}");
    assert!(error.to_string().contains("postgres://"), "{error}");
    server.restart();
    assert_eq!(pg.open_sessions().unwrap(), 0);
}

#[test]
fn bad_settings_are_refused_by_name() {
    let mut settings = PgSettings::url("postgres://ledger@%2Fnowhere/boxmaker");
    settings.password_file = Some("/nonexistent/boxmaker-password".into());
    let error = Ledger::connect(&settings, "one").unwrap_err();
    assert!(error.to_string().contains("password file"), "{error}");
}
