//! A broker whose ledger is a PostgreSQL database (`[ledger] url`), against a server of the
//! test's own: sessions, labels and calls live there, not in the state folder, and a session
//! resumes with its labels after the broker restarts.

use std::fs;

use ledger::Ledger;
use ledger::engine::url::PgSettings;
use proto::{Class, DenyReason, ToolResponse};
use testkit::{AgentClient, BrokerProcess, PgServer};

use super::{FAST, WORK, denied, path_args};

#[test]
fn a_broker_on_postgresql_keeps_its_sessions_there_across_a_restart() {
    let server = PgServer::start();
    let grants = format!(
        "{WORK}\n[[grant]]\nid = \"secret\"\ntool = \"read_file\"\npaths = [\"{{work}}/secret\"]\nclass = \"secret\"\nuntrusted = false\n\n[[grant]]\nid = \"careful\"\ntool = \"read_file\"\npaths = [\"{{work}}/public\"]\nmax_taint = \"private\"\nuntrusted = false\n"
    );
    let config = format!(
        "{FAST}\n[ledger]\nurl = \"{}\"\nname = \"north\"\n",
        server.url()
    );
    let mut broker = BrokerProcess::start(&grants, &config);
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
    let session = client.session_id();
    // The session and its label are in the database, and no SQLite ledger was made. The ledger
    // follows the audit log after the answer has left (the log is the record), so the probe
    // waits for the broker's apply: up to a minute, however slow the machine.
    let probe = Ledger::connect(&PgSettings::url(&server.url()), "probe").unwrap();
    let applied = |probe: &Ledger| {
        probe
            .session(&session)
            .unwrap()
            .is_some_and(|row| row.taint == Class::Secret)
            && probe.call(&session, proto::CallId(1)).unwrap().is_some()
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !applied(&probe) && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let row = probe.session(&session).unwrap().unwrap();
    assert_eq!(row.taint, Class::Secret);
    assert!(probe.call(&session, proto::CallId(1)).unwrap().is_some());
    assert!(
        !broker.state.join("ledger.sqlite").exists(),
        "a SQLite ledger was made beside the PostgreSQL one"
    );

    let resume = client.session.clone().unwrap();
    broker.restart();
    let mut again = AgentClient::open(&broker.socket(), Some(resume));
    let refused = again
        .call(2, "read_file", &path_args(&broker.work.join("public/p")))
        .unwrap();
    assert_eq!(denied(&refused), DenyReason::TaintTooHigh);
}
