//! Many connections never stop the broker (issue 31's item 3): it raises its soft open-file
//! limit at start, waits out `accept` failures, refuses a connection over a socket's cap with a
//! clear error frame, and closes a connection left idle after hello, whose client then resumes
//! its session unnoticed.

use std::os::unix::net::UnixStream;
use std::thread;
use std::time::{Duration, Instant};

use proto::{
    AgentFrame, BrokerFrame, ErrorCode, OwnerErrorCode, OwnerReply, OwnerRequest, PROTOCOL_VERSION,
    ToolRequest, ToolResponse, read_frame,
};
use testkit::{AgentClient, BrokerProcess, OwnerClient};
use toolport::BrokerPort;
use toolport::ToolPort;

use super::{FAST, WORK, content, path_args};

/// The connections the flood tests open (the issue's number).
const FLOOD: usize = 1500;

/// The broker started as systemd starts a user's programs: a soft limit of 1024 files.
const SYSTEMD_LIMITS: [&str; 3] = ["prlimit", "--nofile=1024:4096", "--"];

/// Lets this test process hold `files` open files (the flood's client ends are ours too).
fn room_for(files: u64) {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    if limit.current.is_none_or(|current| current >= files) {
        return;
    }
    let maximum = limit.maximum.map(|hard| hard.max(files));
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(files),
            maximum,
        },
    )
    .unwrap();
}

/// Runs `open` `count` times on eight threads: what each made.
fn in_parallel<T: Send + 'static>(
    count: usize,
    open: impl Fn() -> T + Send + Sync + 'static,
) -> Vec<T> {
    let open = std::sync::Arc::new(open);
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let open = std::sync::Arc::clone(&open);
            thread::spawn(move || (t..count).step_by(8).map(|_| open()).collect::<Vec<T>>())
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|t| t.join().unwrap())
        .collect()
}

/// Whether the process `pid` runs (not gone, not a zombie).
fn alive(broker: &BrokerProcess) -> bool {
    let pid = broker.pid().unwrap();
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(") ")
            .is_some_and(|(_, rest)| !rest.starts_with('Z'))
    })
}

/// A read of `a.txt` in a fresh session: its content.
fn fresh_read(broker: &BrokerProcess) -> String {
    let mut fresh = AgentClient::open(&broker.socket(), None);
    let answer = fresh
        .call(1, "read_file", &path_args(&broker.work.join("a.txt")))
        .unwrap();
    content(&answer).to_string()
}

#[test]
fn under_a_soft_limit_of_1024_fifteen_hundred_agent_connections_leave_every_session_answered() {
    room_for(8192);
    let broker = BrokerProcess::start_under(WORK, FAST, &SYSTEMD_LIMITS);
    std::fs::write(broker.work.join("a.txt"), "alpha").unwrap();
    let socket = broker.socket();
    let mut sessions = in_parallel(FLOOD, move || AgentClient::open(&socket, None));
    assert_eq!(sessions.len(), FLOOD);
    for (n, session) in sessions.iter_mut().enumerate() {
        match session.send(&AgentFrame::ListTools {}) {
            Some(BrokerFrame::Tools { tools }) => assert!(!tools.is_empty()),
            other => panic!("session {n} was answered {other:?}"),
        }
    }
    assert!(fresh_read(&broker).ends_with("alpha"));
    assert!(alive(&broker));
    let log = broker.log();
    assert!(log.contains("open_files=4096 was=1024"), "{log}");
}

#[test]
fn under_a_soft_limit_of_1024_fifteen_hundred_owner_connections_leave_every_one_answered() {
    room_for(8192);
    let broker = BrokerProcess::start_under(WORK, FAST, &SYSTEMD_LIMITS);
    std::fs::write(broker.work.join("a.txt"), "alpha").unwrap();
    let socket = broker.owner_socket();
    let mut owners = in_parallel(FLOOD, move || OwnerClient::open(&socket));
    assert_eq!(owners.len(), FLOOD);
    for (n, owner) in owners.iter_mut().enumerate() {
        match owner.send(&OwnerRequest::Status {}) {
            Some(OwnerReply::Status { status }) => assert!(status.pid > 0),
            other => panic!("owner connection {n} was answered {other:?}"),
        }
    }
    let mut fresh = OwnerClient::open(&broker.owner_socket());
    assert!(fresh.pending().is_empty());
    assert!(fresh_read(&broker).ends_with("alpha"));
    assert!(alive(&broker));
}

#[test]
fn accept_failures_when_the_files_run_out_are_waited_out_and_logged_once() {
    // Connections without hello are held a minute, so the files stay used until they close.
    let broker = BrokerProcess::start(WORK, "idle_timeout_ms = 60000\nshell_ms = 5000\n");
    std::fs::write(broker.work.join("a.txt"), "alpha").unwrap();
    let pid = broker.pid().unwrap().to_string();
    // Its hard limit stays (raising it back would need CAP_SYS_RESOURCE); the soft one moves.
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let hard = limits
        .lines()
        .find(|line| line.starts_with("Max open files"))
        .and_then(|line| line.split_whitespace().nth(4))
        .unwrap()
        .to_string();
    let prlimit = |soft: usize| {
        let status = std::process::Command::new("prlimit")
            .args(["--pid", &pid, &format!("--nofile={soft}:{hard}")])
            .status()
            .unwrap();
        assert!(status.success());
    };
    // Room for a few more files than the broker holds; then more connections than that.
    let held = std::fs::read_dir(format!("/proc/{pid}/fd"))
        .unwrap()
        .count();
    prlimit(held + 10);
    let waiting: Vec<UnixStream> = (0..60)
        .map(|_| UnixStream::connect(broker.socket()).unwrap())
        .collect();
    assert!(
        broker.wait_for_log("cannot take a connection", 1, Duration::from_secs(30)),
        "{}",
        broker.log()
    );
    assert!(alive(&broker));
    drop(waiting);
    prlimit(1024);
    assert!(fresh_read(&broker).ends_with("alpha"));
    assert!(alive(&broker));
    // Each burst of failures is logged once as it begins and once as it ends.
    let log = broker.log();
    let began = log.matches("cannot take a connection").count();
    let ended = log.matches("taking connections again").count();
    assert!(began >= 1 && began == ended, "{log}");
}

/// The error frame the next connection to the agent socket gets, before any hello.
fn agent_refusal(broker: &BrokerProcess) -> (ErrorCode, String) {
    let mut over = AgentClient::connect(&broker.socket());
    match over.receive() {
        Some(BrokerFrame::Error { code, message }) => {
            assert!(over.is_closed(), "closed after its error");
            (code, message)
        }
        other => panic!("a connection over the cap got {other:?}"),
    }
}

#[test]
fn a_connection_over_a_sockets_cap_gets_a_clear_error_and_room_comes_back_when_one_closes() {
    let config = format!("{FAST}agent_connections = 4\nowner_connections = 2\n");
    let broker = BrokerProcess::start(WORK, &config);
    std::fs::write(broker.work.join("a.txt"), "alpha").unwrap();
    let mut sessions: Vec<AgentClient> = (0..4)
        .map(|_| AgentClient::open(&broker.socket(), None))
        .collect();
    for _ in 0..3 {
        let (code, message) = agent_refusal(&broker);
        assert_eq!(code, ErrorCode::TooManyConnections);
        assert!(
            message.contains("agent.sock holds 4 open connections")
                && message.contains("agent_connections"),
            "{message}"
        );
    }
    // loopd's port says the broker's sentence.
    let refused = BrokerPort::connect(&broker.socket(), None).err().unwrap();
    assert!(
        refused.to_string().contains("agent_connections"),
        "{refused}"
    );
    for session in &mut sessions {
        assert!(matches!(
            session.send(&AgentFrame::ListTools {}),
            Some(BrokerFrame::Tools { .. })
        ));
    }
    // One leaves: a fresh client is taken once the broker has seen it go.
    drop(sessions.pop());
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut fresh = loop {
        let mut client = AgentClient::connect(&broker.socket());
        let hello = AgentFrame::Hello {
            version: PROTOCOL_VERSION,
            client: None,
            resume: None,
        };
        match client.send(&hello) {
            Some(BrokerFrame::Welcome { session, .. }) => {
                client.session = Some(proto::Resume {
                    session,
                    token: String::new(),
                });
                break client;
            }
            Some(BrokerFrame::Error {
                code: ErrorCode::TooManyConnections,
                ..
            }) => {}
            other => panic!("{other:?}"),
        }
        assert!(Instant::now() < deadline, "no room came back");
        thread::sleep(Duration::from_millis(20));
    };
    let read = fresh
        .call(1, "read_file", &path_args(&broker.work.join("a.txt")))
        .unwrap();
    assert!(content(&read).ends_with("alpha"));

    // The owner socket: the same, with its own error.
    let _owners: Vec<OwnerClient> = (0..2)
        .map(|_| OwnerClient::open(&broker.owner_socket()))
        .collect();
    let mut over = UnixStream::connect(broker.owner_socket()).unwrap();
    match read_frame::<OwnerReply, _>(&mut over) {
        Ok(Some(OwnerReply::Error { code, message })) => {
            assert_eq!(code, OwnerErrorCode::TooManyConnections);
            assert!(message.contains("owner_connections"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(read_frame::<OwnerReply, _>(&mut over), Ok(None)));
    let log = broker.log();
    assert_eq!(
        log.matches("refusing more until some close").count(),
        2,
        "once for each socket's burst: {log}"
    );
}

/// Grants for the idle tests: reads in the work folder, and writes that ask.
const READ_AND_ASK: &str = r#"
[[grant]]
id = "read-work"
tool = "read_file"
paths = ["{work}"]
class = "private"
untrusted = false

[[grant]]
id = "ask-write"
tool = "write_file"
paths = ["{work}/asked"]
untrusted = false
approval = "ask"
on_untrusted = "allow"
"#;

/// `brokerd.toml` with a short idle time after hello.
const IDLE: &str = "idle_timeout_ms = 1000\nshell_ms = 5000\nconnection_idle_ms = 300\n";

#[test]
fn a_connection_idle_after_hello_is_closed_with_its_reason_but_not_while_a_call_waits() {
    // A second: each client here sends its frames at once, well within it, however busy the
    // machine.
    let config = "idle_timeout_ms = 1000\nshell_ms = 5000\nconnection_idle_ms = 1000\n";
    let broker = BrokerProcess::start_verbose(READ_AND_ASK, config);
    std::fs::create_dir(broker.work.join("asked")).unwrap();
    // A call that waits for the owner past the idle time keeps its connection.
    let mut waiting = AgentClient::open(&broker.socket(), None);
    let arguments = serde_json::json!({
        "path": broker.work.join("asked/x.txt"),
        "content": "x",
    })
    .to_string();
    waiting.call_pending(1, "write_file", &arguments);
    // Idle after hello: closed with `idle`, which says what to do.
    let mut idle = AgentClient::open(&broker.socket(), None);
    match idle.receive() {
        Some(BrokerFrame::Error { code, message }) => {
            assert_eq!(code, ErrorCode::Idle);
            assert!(
                message.contains("idle for 1000 ms") && message.contains("resume the session"),
                "{message}"
            );
        }
        other => panic!("an idle connection got {other:?}"),
    }
    assert!(idle.is_closed());
    // The owner socket's requests, the same.
    let mut owner = OwnerClient::open(&broker.owner_socket());
    match owner.receive() {
        Some(OwnerReply::Error { code, .. }) => assert_eq!(code, OwnerErrorCode::Idle),
        other => panic!("an idle owner connection got {other:?}"),
    }
    // The waiting call's connection outlived both: approved, it is answered on it.
    let mut owner = OwnerClient::open(&broker.owner_socket());
    let pending = owner.wait_pending();
    assert!(matches!(
        owner.approve(pending.approval, false),
        Some(OwnerReply::Done { .. })
    ));
    let (_, answer) = waiting.finish_call();
    assert!(
        matches!(answer, Ok(ToolResponse::Result { .. })),
        "{answer:?}"
    );
    assert!(broker.work.join("asked/x.txt").exists());
}

#[test]
fn a_session_idle_past_the_timeout_calls_through_loopds_port_and_is_answered() {
    let broker = BrokerProcess::start_verbose(READ_AND_ASK, IDLE);
    std::fs::write(broker.work.join("a.txt"), "alpha").unwrap();
    let port = BrokerPort::connect(&broker.socket(), None).unwrap();
    let session = port.session().session.to_string();
    let read = |call_id: u64| ToolRequest {
        session: session.clone(),
        call_id,
        tool: "read_file".into(),
        arguments: path_args(&broker.work.join("a.txt")),
    };
    let first = port.call(&read(1), &mut |_| {});
    assert!(content(&first).ends_with("alpha"));
    assert!(
        broker.wait_until_every_hello_closed_as_idle(Duration::from_secs(30)),
        "{}",
        broker.log()
    );
    let second = port.call(&read(2), &mut |_| {});
    assert!(content(&second).ends_with("alpha"), "{second:?}");
    assert!(port.fatal().is_none());
    assert_eq!(port.session().session.to_string(), session);
    assert!(broker.log().contains("session resumed"));
    // Its catalog too.
    assert!(port.catalog().is_some_and(|tools| tools.is_ok()));
}
