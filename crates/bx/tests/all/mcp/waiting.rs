//! A call waiting for the owner, seen from the client's side: progress keeps coming while it
//! waits (so a client that resets its timeout on progress keeps waiting), and a client that is
//! gone (its `bx mcp` input closed, `bx mcp`'s parent killed, the SDK client killed while it
//! asks its user) leaves nothing for the owner to approve: the call is abandoned, never runs,
//! and `bx approve` says so. Driven by a raw JSON-RPC client on `bx mcp`'s standard input and
//! output (the 2025-11-25 handshake), and by the Python SDK for the client's own interface.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use testkit::{BrokerProcess, OwnerClient};

use super::{GRANTS, bx, bx_mcp, bx_mcp_command, call_tool, start_with};

/// A short grace, so a call whose client left is abandoned soon in every case.
pub(super) const CONFIG: &str = "idle_timeout_ms = 1000\nshell_ms = 5000\npending_grace_ms = 300\n";

/// How long a test waits for what must happen before it calls it a failure (not a timing
/// assertion: only a bound on a hang).
pub(super) const PATIENCE: Duration = Duration::from_secs(60);

fn grants() -> String {
    format!("{GRANTS}\n[[grant]]\nid = \"questions\"\ntool = \"ask\"\n")
}

/// A client speaking JSON-RPC lines to a `bx mcp` process (or a process that started one).
struct Raw {
    child: Child,
    input: Option<ChildStdin>,
    lines: Receiver<Value>,
}

impl Raw {
    /// Starts `command` (whose standard input and output become the client's) and does the
    /// handshake.
    fn start(mut command: Command) -> Raw {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let input = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (sender, lines) = channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if let Ok(value) = serde_json::from_str::<Value>(&line)
                    && sender.send(value).is_err()
                {
                    return;
                }
            }
        });
        let mut raw = Raw {
            child,
            input,
            lines,
        };
        raw.send(&json!({
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": { "name": "raw-client", "version": "1" }
            }
        }));
        let answer = raw.next();
        assert_eq!(answer["id"], 1, "{answer}");
        raw.send(&json!({ "jsonrpc": "2.0", "method": "notifications/initialized" }));
        raw
    }

    fn send(&mut self, message: &Value) {
        let input = self.input.as_mut().unwrap();
        writeln!(input, "{message}").unwrap();
        input.flush().unwrap();
    }

    /// The next message from the server.
    fn next(&mut self) -> Value {
        match self.lines.recv_timeout(PATIENCE) {
            Ok(value) => value,
            Err(e) => panic!("the server said nothing more: {e}"),
        }
    }

    /// Calls `call_tool` with `name` and `arguments` as request 2, with a progress token.
    fn call_tool(&mut self, name: &str, arguments: Value) {
        self.send(&json!({
            "jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {
                "name": "call_tool",
                "arguments": { "name": name, "arguments": arguments },
                "_meta": { "progressToken": "waiting" }
            }
        }));
    }

    /// Reads up to the next progress notification of the call.
    fn next_progress(&mut self) -> Value {
        loop {
            let message = self.next();
            assert!(message.get("id") != Some(&json!(2)), "answered: {message}");
            if message["method"] == "notifications/progress" {
                assert_eq!(message["params"]["progressToken"], "waiting", "{message}");
                return message;
            }
        }
    }

    /// Waits until the server closed its output (it exited).
    fn wait_closed(&mut self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            match self.lines.recv_timeout(Duration::from_millis(100)) {
                Err(RecvTimeoutError::Disconnected) => return,
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
            }
            assert!(
                Instant::now() < deadline,
                "bx mcp did not exit once its client was gone"
            );
        }
    }
}

impl Drop for Raw {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until the owner has nothing pending, then checks that `bx approve ID` says the call
/// was abandoned.
pub(super) fn abandoned(broker: &BrokerProcess, approval: u64) {
    let mut owner = OwnerClient::open(&broker.owner_socket());
    let deadline = Instant::now() + PATIENCE;
    while !owner.pending().is_empty() {
        assert!(Instant::now() < deadline, "{:?}", owner.pending());
        std::thread::sleep(Duration::from_millis(50));
    }
    // The approval leaves the pending list before its resolution is in the ledger; until then
    // `bx approve` says it is being settled, which is true: ask again.
    let approve = loop {
        let approve = bx(broker, &["approve", &approval.to_string()]);
        if !approve.stderr.contains("being settled right now") || Instant::now() >= deadline {
            break approve;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_ne!(approve.code, 0, "{}", approve.stdout);
    assert!(
        approve.stderr.contains("abandoned"),
        "{}{}",
        approve.stdout,
        approve.stderr
    );
}

#[test]
fn a_waiting_call_sends_progress_again_and_again_until_the_owner_answers() {
    let broker = BrokerProcess::start(&grants(), CONFIG);
    std::fs::create_dir_all(broker.work.join("asked")).unwrap();
    let target = broker.work.join("asked/progress.txt");
    let mut raw = Raw::start(bx_mcp_command(
        &broker,
        &[OsStr::new("--progress-every"), OsStr::new("0.05")],
    ));
    raw.call_tool("write_file", json!({ "path": target, "content": "made\n" }));
    let first = raw.next_progress();
    let second = raw.next_progress();
    let third = raw.next_progress();
    assert!(
        first["params"]["message"]
            .as_str()
            .unwrap()
            .contains("waiting for the owner"),
        "{first}"
    );
    // Each value is greater than the one before, as MCP requires.
    let values: Vec<f64> = [&first, &second, &third]
        .iter()
        .map(|m| m["params"]["progress"].as_f64().unwrap())
        .collect();
    assert!(values[0] < values[1] && values[1] < values[2], "{values:?}");
    let pending = OwnerClient::open(&broker.owner_socket()).wait_pending();
    let approved = bx(&broker, &["approve", &pending.approval.0.to_string()]);
    assert_eq!(approved.code, 0, "{}", approved.stderr);
    let answer = loop {
        let message = raw.next();
        if message.get("id") == Some(&json!(2)) {
            break message;
        }
    };
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "made\n");
}

#[test]
fn a_client_that_closes_its_input_while_a_call_waits_leaves_it_abandoned_and_unrun() {
    let broker = BrokerProcess::start(&grants(), CONFIG);
    std::fs::create_dir_all(broker.work.join("asked")).unwrap();
    let target = broker.work.join("asked/closed.txt");
    // An approval the owner gives in `bx`, and a question the model asks.
    let calls = [
        ("write_file", json!({ "path": target, "content": "no\n" })),
        ("ask", json!({ "question": "Proceed?" })),
    ];
    for (tool, arguments) in calls {
        let mut raw = Raw::start(bx_mcp_command(&broker, &[]));
        raw.call_tool(tool, arguments);
        raw.next_progress();
        let pending = OwnerClient::open(&broker.owner_socket()).wait_pending();
        drop(raw.input.take());
        raw.wait_closed();
        abandoned(&broker, pending.approval.0);
    }
    assert!(!target.exists(), "the abandoned write ran");
    let verified = bx(&broker, &["audit", "verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stderr);
}

#[test]
fn killing_the_parent_of_bx_mcp_makes_it_withdraw_what_waits_and_exit() {
    let broker = BrokerProcess::start(&grants(), CONFIG);
    std::fs::create_dir_all(broker.work.join("asked")).unwrap();
    let target = broker.work.join("asked/orphan.txt");
    // The parent keeps `bx mcp`'s input open for it (the test holds the other end), as a
    // client killed by a signal may leave it: only the parent's death tells.
    let mut parent = Command::new("sh");
    parent
        .arg("-c")
        .arg("\"$@\"; exit $?")
        .arg("sh")
        .args(bx_mcp(&broker, &[]))
        .current_dir(&broker.work);
    let mut raw = Raw::start(parent);
    raw.call_tool("write_file", json!({ "path": target, "content": "no\n" }));
    raw.next_progress();
    let pending = OwnerClient::open(&broker.owner_socket()).wait_pending();
    raw.child.kill().unwrap();
    raw.child.wait().unwrap();
    raw.wait_closed();
    abandoned(&broker, pending.approval.0);
    assert!(!target.exists(), "the abandoned write ran");
}

#[test]
fn an_sdk_client_killed_while_it_asks_its_user_leaves_the_call_abandoned_and_unrun() {
    let config = format!("{CONFIG}[mcp]\napprove_in_client = [\"boxmaker-test-client\"]\n");
    let broker = BrokerProcess::start(&grants(), &config);
    std::fs::create_dir_all(broker.work.join("asked")).unwrap();
    // `elicitation/create` on the handshake revision, `InputRequired` on 2026-07-28.
    for mode in ["legacy", "modern"] {
        let target = broker.work.join("asked").join(format!("{mode}.txt"));
        let plan = json!([call_tool(
            "write_file",
            json!({ "path": target, "content": "no\n" })
        )]);
        let mut child = start_with(
            &broker,
            mode,
            &plan,
            &[],
            &[("BOXMAKER_TEST_ELICIT", "hang")],
        );
        // The client has asked its user (it printed the question), who never answers.
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("elicited") {
            line.clear();
            assert_ne!(
                stdout.read_line(&mut line).unwrap(),
                0,
                "{mode}: no question"
            );
        }
        let pending = OwnerClient::open(&broker.owner_socket()).wait_pending();
        child.kill().unwrap();
        child.wait().unwrap();
        abandoned(&broker, pending.approval.0);
        assert!(!target.exists(), "{mode}: the abandoned write ran");
    }
}
