//! Garbage on the agent socket: each bad client gets its error code where one can be sent and
//! is closed, while a well-behaved client goes on completing calls.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::thread;
use std::time::{Duration, Instant};

use proto::{
    AgentFrame, BrokerFrame, ErrorCode, PROTOCOL_VERSION, Resume, ToolRequest, ToolResponse,
};
use testkit::{AgentClient, BrokerProcess};

use super::{FAST, WORK, path_args};

fn error_code(frame: Option<BrokerFrame>) -> ErrorCode {
    match frame {
        Some(BrokerFrame::Error { code, .. }) => code,
        other => panic!("not an error frame: {other:?}"),
    }
}

fn raw(client: &mut AgentClient, bytes: &[u8]) -> Option<BrokerFrame> {
    client.stream.write_all(bytes).ok()?;
    client.receive()
}

#[test]
fn bad_clients_get_their_error_codes_while_a_good_one_completes_a_hundred_calls() {
    let broker = BrokerProcess::start(WORK, FAST);
    std::fs::write(broker.work.join("a.txt"), "a").unwrap();
    let socket = broker.socket();
    let args = path_args(&broker.work.join("a.txt"));
    let good = {
        let socket = socket.clone();
        thread::spawn(move || {
            let mut client = AgentClient::open(&socket, None);
            (1..=100)
                .filter(|id| {
                    matches!(
                        client.call(*id, "read_file", &args),
                        Ok(ToolResponse::Result { .. })
                    )
                })
                .count()
        })
    };

    // Random bytes: a length, then a body that is not JSON.
    let mut client = AgentClient::connect(&socket);
    let mut garbage = 9u32.to_be_bytes().to_vec();
    garbage.extend_from_slice(b"\x00\xffgarbage");
    assert_eq!(error_code(raw(&mut client, &garbage)), ErrorCode::BadFrame);
    assert!(client.is_closed());

    // A length over 16 MiB, refused before any body.
    let mut client = AgentClient::connect(&socket);
    let huge = (17u32 * 1024 * 1024).to_be_bytes();
    assert_eq!(error_code(raw(&mut client, &huge)), ErrorCode::BadFrame);

    // An unknown protocol version.
    let mut client = AgentClient::connect(&socket);
    let hello = AgentFrame::Hello {
        version: PROTOCOL_VERSION + 1,
        client: None,
        resume: None,
    };
    assert_eq!(error_code(client.send(&hello)), ErrorCode::Version);

    // A call before hello.
    let mut client = AgentClient::connect(&socket);
    let call = AgentFrame::Call {
        request: ToolRequest {
            session: "s".into(),
            call_id: 1,
            tool: "read_file".into(),
            arguments: "{}".into(),
        },
    };
    assert_eq!(error_code(client.send(&call)), ErrorCode::NotHello);

    // Another session's id in a call.
    let other = AgentClient::open(&socket, None);
    let mut client = AgentClient::open(&socket, None);
    let stolen = AgentFrame::Call {
        request: ToolRequest {
            session: other.session_id().to_string(),
            call_id: 1,
            tool: "read_file".into(),
            arguments: "{}".into(),
        },
    };
    assert_eq!(error_code(client.send(&stolen)), ErrorCode::WrongSession);

    // A call id reused with other arguments.
    let mut client = AgentClient::open(&socket, None);
    let _ = client.call(1, "read_file", &path_args(&broker.work.join("a.txt")));
    let reused = client.call(1, "read_file", &path_args(&broker.work.join("b.txt")));
    assert_eq!(error_code(reused.unwrap_err()), ErrorCode::CallIdReused);

    // A wrong resume token, and an unknown session.
    let mut client = AgentClient::connect(&socket);
    let wrong = AgentFrame::Hello {
        version: PROTOCOL_VERSION,
        client: None,
        resume: Some(Resume {
            session: other.session_id(),
            token: "0".repeat(64),
        }),
    };
    assert_eq!(error_code(client.send(&wrong)), ErrorCode::ResumeRefused);

    // Half a frame, then silence: closed after the idle timeout (1 s here).
    let mut client = AgentClient::open(&socket, None);
    let started = Instant::now();
    let half = raw(&mut client, &100u32.to_be_bytes()[..2]);
    assert_eq!(error_code(half), ErrorCode::BadFrame);
    assert!(started.elapsed() < Duration::from_secs(20));

    assert_eq!(good.join().unwrap(), 100, "{}", broker.log());
}

#[test]
fn a_client_of_another_user_is_refused_by_the_peer_check() {
    let broker = BrokerProcess::start(WORK, FAST);
    // Loosen the folder and the socket so that only the peer check stands in the way.
    std::fs::set_permissions(&broker.runtime, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(broker.socket(), std::fs::Permissions::from_mode(0o777)).unwrap();
    std::fs::set_permissions(broker.root.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = format!(
        "import socket,struct,json,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect({:?})\nb=json.dumps({{'type':'hello','version':1}}).encode()\ntry:\n  s.sendall(struct.pack('>I',len(b))+b)\n  d=s.recv(4)\nexcept OSError:\n  d=b''\nprint('closed' if d==b'' else 'answered')\n",
        broker.socket().display().to_string()
    );
    let output = std::process::Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            "/usr/bin/python3",
            "-c",
            &script,
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains("closed"),
        "stdout {stdout} stderr {}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        broker.log().contains("refused a client of another user"),
        "{}",
        broker.log()
    );
}
