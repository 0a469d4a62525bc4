//! Two brokers on one PostgreSQL database (issue 39): one approval id space, and an answer
//! given through one broker reaching the call waiting in the other, which records it in its own
//! audit log and runs (or refuses) the call.

use std::fs;
use std::time::Instant;

use proto::{ApprovalId, DenyReason, OwnerRequest, ToolResponse};
use testkit::{AgentClient, BrokerProcess, OwnerClient, PgServer};

use super::approvals::{ASK_WRITE, done, write_args};
use super::{FAST, denied};

fn on(server: &PgServer, name: &str) -> BrokerProcess {
    let config = format!(
        "{FAST}\n[ledger]\nurl = \"{}\"\nname = \"{name}\"\n",
        server.url()
    );
    BrokerProcess::start(ASK_WRITE, &config)
}

#[test]
fn an_answer_given_through_one_broker_reaches_the_call_waiting_in_the_other() {
    let server = PgServer::start();
    let north = on(&server, "north");
    let south = on(&server, "south");

    // Approved through south, the call waiting in north runs there.
    let target = north.work.join("a.txt");
    let mut agent = AgentClient::open(&north.socket(), None);
    let first = agent.call_pending(1, "write_file", &write_args(&target, "x"));
    let mut owner = OwnerClient::open(&south.owner_socket());
    let asked = Instant::now();
    let message = done(owner.approve(ApprovalId(first), false));
    eprintln!("cross-broker approval answered in {:?}", asked.elapsed());
    assert!(message.contains("waiting in broker north"), "{message}");
    assert!(message.contains("approved once"), "{message}");
    let (_, answer) = agent.finish_call();
    assert!(
        matches!(answer, Ok(ToolResponse::Result { .. })),
        "{answer:?}"
    );
    assert_eq!(fs::read_to_string(&target).unwrap(), "x");
    let log = fs::read_to_string(north.state.join("audit.jsonl")).unwrap();
    assert!(log.contains("\"channel\":\"broker south\""), "{log}");

    // Refused through north, the call waiting in south never runs.
    let refused = south.work.join("b.txt");
    let mut other = AgentClient::open(&south.socket(), None);
    let second = other.call_pending(1, "write_file", &write_args(&refused, "y"));
    assert_ne!(second, first, "two brokers issued one approval id");
    let mut owner_north = OwnerClient::open(&north.owner_socket());
    let asked = Instant::now();
    let message = done(owner_north.send(&OwnerRequest::Refuse {
        approval: ApprovalId(second),
    }));
    eprintln!("cross-broker refusal answered in {:?}", asked.elapsed());
    assert!(message.contains("refused"), "{message}");
    let (_, answer) = other.finish_call();
    assert_eq!(denied(&answer.unwrap()), DenyReason::ApprovalRefused);
    assert!(
        !refused.exists(),
        "a call refused through the other broker ran"
    );

    // Ids claimed in turn by both brokers never collide.
    let mut seen = vec![first, second];
    for call in 2..6u64 {
        let on_north = agent.call_pending(call, "write_file", &write_args(&target, "z"));
        let on_south = other.call_pending(call, "write_file", &write_args(&refused, "z"));
        seen.extend([on_north, on_south]);
        // Through south, so across brokers for north's call.
        let asked = Instant::now();
        done(owner.send(&OwnerRequest::Refuse {
            approval: ApprovalId(on_north),
        }));
        eprintln!("cross-broker refusal answered in {:?}", asked.elapsed());
        let (_, answer) = agent.finish_call();
        assert_eq!(denied(&answer.unwrap()), DenyReason::ApprovalRefused);
        done(owner.send(&OwnerRequest::Refuse {
            approval: ApprovalId(on_south),
        }));
        let (_, answer) = other.finish_call();
        assert_eq!(denied(&answer.unwrap()), DenyReason::ApprovalRefused);
    }
    let mut unique = seen.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), seen.len(), "approval ids collided: {seen:?}");
}
