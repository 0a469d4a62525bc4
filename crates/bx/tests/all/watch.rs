//! `bx watch` at a terminal (a pseudo-terminal made by util-linux `script`): it shows each
//! pending approval and asks, and the answer typed there reaches the waiting call.

use std::io::{BufReader, Read, Write};
use std::process::{Command, Stdio};

use proto::ToolResponse;
use testkit::{AgentClient, BrokerProcess};

const ASK_WRITE: &str = r#"
[[grant]]
id = "ask-write"
tool = "write_file"
paths = ["{work}"]
untrusted = false
approval = "ask"
"#;

#[test]
fn watch_at_a_terminal_asks_and_for_the_session_stops_the_next_question() {
    let broker = BrokerProcess::start(ASK_WRITE, "");
    let command = format!(
        "{} --runtime-dir {} watch",
        testkit::binary("bx").unwrap().display(),
        broker.runtime.display()
    );
    let mut watch = Command::new("script")
        .args(["-q", "-e", "-c", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("util-linux `script` makes the pseudo-terminal for this test");
    let mut stdin = watch.stdin.take().unwrap();
    let mut out = BufReader::new(watch.stdout.take().unwrap());
    let mut seen = String::new();
    let mut read_until = |needle: &str, seen: &mut String| {
        while !seen.contains(needle) {
            let mut chunk = [0u8; 256];
            let n = out.read(&mut chunk).unwrap();
            assert!(n > 0, "bx watch ended before {needle:?}:\n{seen}");
            seen.push_str(&String::from_utf8_lossy(&chunk[..n]));
        }
    };
    read_until("Watching the broker", &mut seen);
    let mut client = AgentClient::open(&broker.socket(), None);
    let first = serde_json::json!({ "path": broker.work.join("1"), "content": "1" }).to_string();
    client.start_call(1, "write_file", &first);
    read_until("Let it run?", &mut seen);
    assert!(
        seen.contains("grant ask-write says approval = \"ask\""),
        "{seen}"
    );
    stdin.write_all(b"s\n").unwrap();
    read_until("for the rest of session", &mut seen);
    assert!(matches!(
        client.finish_call().1,
        Ok(ToolResponse::Result { .. })
    ));
    let second = serde_json::json!({ "path": broker.work.join("2"), "content": "2" }).to_string();
    client.start_call(2, "write_file", &second);
    let (pending, answer) = client.finish_call();
    assert!(
        pending.is_empty(),
        "asked again after approval for the session"
    );
    assert!(matches!(answer, Ok(ToolResponse::Result { .. })));
    // Closing the terminal's input ends `script`, and with it bx watch (SIGHUP).
    drop(stdin);
    let _ = watch.kill();
    let _ = watch.wait();
}
