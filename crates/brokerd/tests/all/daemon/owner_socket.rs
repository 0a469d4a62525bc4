//! The two sockets keep apart: every owner request on the agent socket, and every agent frame
//! on the owner socket, is refused; the owner socket serves status.

use std::os::unix::net::UnixStream;

use proto::{
    AgentFrame, ApprovalId, BrokerFrame, ErrorCode, OwnerErrorCode, OwnerReply, OwnerRequest,
    PROTOCOL_VERSION, ToolRequest, read_frame, write_frame,
};
use testkit::{AgentClient, BrokerProcess, OwnerClient};

use super::WORK;

fn owner_requests() -> Vec<OwnerRequest> {
    vec![
        OwnerRequest::OwnerHello {
            version: PROTOCOL_VERSION,
        },
        OwnerRequest::ListPending {},
        OwnerRequest::Approve {
            approval: ApprovalId(1),
            for_session: true,
        },
        OwnerRequest::Refuse {
            approval: ApprovalId(1),
        },
        OwnerRequest::Answer {
            approval: ApprovalId(1),
            text: "yes".into(),
        },
        OwnerRequest::Status {},
        OwnerRequest::Watch {},
        OwnerRequest::AuditLines { from: 0, limit: 1 },
        OwnerRequest::AuditVerify {},
    ]
}

#[test]
fn every_owner_request_on_the_agent_socket_is_refused() {
    let broker = BrokerProcess::start(WORK, "");
    for request in owner_requests() {
        // As the first frame.
        let mut stream = UnixStream::connect(broker.socket()).unwrap();
        write_frame(&mut stream, &request).unwrap();
        let answer: Option<BrokerFrame> = read_frame(&mut stream).unwrap();
        assert!(
            matches!(
                answer,
                Some(BrokerFrame::Error {
                    code: ErrorCode::BadFrame,
                    ..
                })
            ),
            "{request:?} as a first frame: {answer:?}"
        );
        // After a welcome.
        let mut client = AgentClient::open(&broker.socket(), None);
        write_frame(&mut client.stream, &request).unwrap();
        let answer = client.receive();
        assert!(
            matches!(
                answer,
                Some(BrokerFrame::Error {
                    code: ErrorCode::BadFrame,
                    ..
                })
            ),
            "{request:?} in a session: {answer:?}"
        );
        assert!(client.is_closed());
    }
}

#[test]
fn every_agent_frame_on_the_owner_socket_is_refused() {
    let broker = BrokerProcess::start(WORK, "");
    let frames = [
        AgentFrame::Hello {
            version: PROTOCOL_VERSION,
            client: None,
            resume: None,
        },
        AgentFrame::ListTools {},
        AgentFrame::Call {
            request: ToolRequest {
                session: "s".into(),
                call_id: 1,
                tool: "read_file".into(),
                arguments: "{}".into(),
            },
        },
        AgentFrame::Close {},
    ];
    for frame in &frames {
        let mut stream = UnixStream::connect(broker.owner_socket()).unwrap();
        write_frame(&mut stream, frame).unwrap();
        let answer: Option<OwnerReply> = read_frame(&mut stream).unwrap();
        assert!(
            matches!(
                answer,
                Some(OwnerReply::Error {
                    code: OwnerErrorCode::BadFrame,
                    ..
                })
            ),
            "{frame:?} as a first frame: {answer:?}"
        );
        let mut owner = OwnerClient::open(&broker.owner_socket());
        write_frame(&mut owner.stream, frame).unwrap();
        let answer = owner.receive();
        assert!(
            matches!(
                answer,
                Some(OwnerReply::Error {
                    code: OwnerErrorCode::BadFrame,
                    ..
                })
            ),
            "{frame:?} after owner_hello: {answer:?}"
        );
    }
}

#[test]
fn the_owner_socket_reports_status_and_streams_events() {
    let broker = BrokerProcess::start(WORK, "");
    let mut owner = OwnerClient::open(&broker.owner_socket());
    let status = match owner.send(&OwnerRequest::Status {}) {
        Some(OwnerReply::Status { status }) => status,
        other => panic!("{other:?}"),
    };
    assert_eq!(status.grants, 2);
    assert!(status.owner_socket.ends_with("owner.sock"));
    assert!(!status.walls.is_empty());
    let mut watcher = OwnerClient::open(&broker.owner_socket());
    write_frame(&mut watcher.stream, &OwnerRequest::Watch {}).unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let _ = client.call(1, "read_file", r#"{"path":"/etc/hostname"}"#);
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.push(watcher.next_event().unwrap());
    }
    assert!(
        matches!(seen[0], proto::OwnerEvent::SessionOpened { .. }),
        "{seen:?}"
    );
    assert!(
        matches!(seen[1], proto::OwnerEvent::Call { .. }),
        "{seen:?}"
    );
    assert!(
        matches!(
            &seen[2],
            proto::OwnerEvent::Answered {
                reason: Some(proto::DenyReason::NoGrant),
                ..
            }
        ),
        "{seen:?}"
    );
}

#[test]
fn the_owner_socket_pages_the_audit_log_as_written_and_checks_its_chain() {
    let broker = BrokerProcess::start(WORK, "");
    let mut client = AgentClient::open(&broker.socket(), None);
    let _ = client.call(1, "clock", "{}");
    let log = std::fs::read_to_string(broker.state.join("audit.jsonl")).unwrap();
    let written: Vec<&str> = log.lines().collect();
    assert!(written.len() >= 2, "{log}");
    let mut owner = OwnerClient::open(&broker.owner_socket());
    let mut read = Vec::new();
    loop {
        let from = read.len() as u64;
        match owner.send(&OwnerRequest::AuditLines { from, limit: 1 }) {
            Some(OwnerReply::AuditLines { lines, total }) => {
                assert!(lines.len() <= 1 && total >= written.len() as u64);
                if lines.is_empty() {
                    break;
                }
                read.extend(lines);
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(&read[..written.len()], &written[..]);
    match owner.send(&OwnerRequest::AuditVerify {}) {
        Some(OwnerReply::AuditVerified {
            holds: true,
            broken: None,
            message,
        }) => assert!(message.starts_with("the chain holds"), "{message}"),
        other => panic!("{other:?}"),
    }
    // The first record changed on disk: the check names it and its line.
    let changed = log.replacen("\"seq\":1,", "\"seq\":1 ,", 1);
    assert_ne!(changed, log);
    std::fs::write(broker.state.join("audit.jsonl"), changed).unwrap();
    match owner.send(&OwnerRequest::AuditVerify {}) {
        Some(OwnerReply::AuditVerified {
            holds: false,
            broken: Some(broken),
            ..
        }) => assert_eq!((broken.record, broken.line), (1, 1), "{broken:?}"),
        other => panic!("{other:?}"),
    }
}
