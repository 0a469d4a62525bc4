//! `bx mcp` on standard input and output against a client that misbehaves: not JSON, JSON that
//! is no JSON-RPC message, unknown methods, missing `_meta`, a huge line, an unknown version.

use std::io::{BufRead, BufReader};
use std::process::{Child, Stdio};

use serde_json::{Value, json};
use testkit::BrokerProcess;

use super::{FAST, GRANTS, bx_mcp_command};

/// A `bx mcp` process spoken to line by line, as a misbehaving client would.
struct Raw {
    child: Child,
    stdin: std::process::ChildStdin,
    lines: std::sync::mpsc::Receiver<String>,
}

impl Raw {
    fn start(broker: &BrokerProcess) -> Raw {
        let mut child = bx_mcp_command(broker, &[])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let (send, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines().map_while(Result::ok) {
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        Raw {
            child,
            stdin,
            lines,
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        use std::io::Write;
        self.stdin.write_all(bytes).unwrap();
        self.stdin.write_all(b"\n").unwrap();
        self.stdin.flush().unwrap();
    }

    /// The next message from the server.
    fn answer(&self) -> Value {
        let line = self
            .lines
            .recv_timeout(std::time::Duration::from_secs(20))
            .expect("the server answered nothing");
        serde_json::from_str(&line).unwrap()
    }
}

/// A 2026-07-28 request: the revision's `_meta` in its params.
pub(super) fn modern(id: u64, method: &str, mut params: Value) -> Vec<u8> {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": { "name": "raw", "version": "1" },
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params })
        .to_string()
        .into_bytes()
}

#[test]
fn garbage_gets_json_rpc_errors_and_the_server_serves_on() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    let mut raw = Raw::start(&broker);
    // Not JSON: ignored (as every official SDK does); the next request is answered.
    raw.send(b"this is not json {");
    raw.send(&modern(1, "tools/list", json!({})));
    let listed = raw.answer();
    assert_eq!(listed["id"], 1, "{listed}");
    assert_eq!(listed["result"]["tools"].as_array().unwrap().len(), 3);
    // JSON that is no JSON-RPC message.
    raw.send(br#"{"hello":"world"}"#);
    assert_eq!(raw.answer()["error"]["code"], -32600);
    // An unknown method.
    raw.send(&modern(2, "no/such/method", json!({})));
    let unknown = raw.answer();
    assert_eq!(
        (unknown["id"].clone(), unknown["error"]["code"].clone()),
        (json!(2), json!(-32601))
    );
    // A 2026-07-28 request without the revision's _meta.
    raw.send(br#"{"jsonrpc":"2.0","id":3,"method":"tools/list","params":{}}"#);
    let bare = raw.answer();
    assert_eq!(bare["error"]["code"], -32602, "{bare}");
    assert!(
        bare["error"]["message"]
            .as_str()
            .unwrap()
            .contains("protocolVersion")
    );
    // A call with arguments that are not an object, and a tool nobody granted.
    raw.send(&modern(
        4,
        "tools/call",
        json!({ "name": "call_tool", "arguments": { "name": 7 } }),
    ));
    let odd = raw.answer();
    assert_eq!(odd["result"]["isError"], false, "{odd}");
    assert!(
        odd["result"]["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("No tool named")
    );
    raw.send(&modern(
        5,
        "tools/call",
        json!({ "name": "shell", "arguments": { "command": "true" } }),
    ));
    let refused = raw.answer();
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    // A requestState this server never issued.
    raw.send(&modern(
        9,
        "tools/call",
        json!({ "name": "call_tool", "arguments": {}, "requestState": "forged",
                "inputResponses": { "approval": { "action": "accept", "content": { "decision": "approve" } } } }),
    ));
    let forged = raw.answer();
    assert_eq!(forged["error"]["code"], -32602, "{forged}");
    assert!(
        forged["error"]["message"]
            .as_str()
            .unwrap()
            .contains("requestState"),
        "{forged}"
    );
    // A line past 16 MiB is dropped; the server is still there.
    let huge = modern(6, "tools/list", json!({ "pad": "x".repeat(17 << 20) }));
    raw.send(&huge);
    raw.send(&modern(7, "tools/list", json!({})));
    assert_eq!(raw.answer()["id"], 7);
    // An unknown version in the handshake era is answered with the version the server speaks.
    raw.send(
        json!({ "jsonrpc": "2.0", "id": 8, "method": "initialize", "params": {
            "protocolVersion": "1999-01-01", "capabilities": {},
            "clientInfo": { "name": "old", "version": "1" } } })
        .to_string()
        .as_bytes(),
    );
    let init = raw.answer();
    assert_eq!(init["id"], 8, "{init}");
    drop(raw.stdin);
    let status = raw.child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}
