//! `bx mcp` whose broker connection is closed as idle between two calls (`brokerd.toml`'s
//! `connection_idle_ms`): the next call resumes the same session on a new connection, and the
//! MCP client sees an answer as if nothing had happened.

use std::io::{BufRead, BufReader};
use std::time::Duration;

use serde_json::{Value, json};
use testkit::BrokerProcess;

use super::{GRANTS, call_tool, start};

#[test]
fn a_session_idle_past_the_brokers_timeout_goes_on_unnoticed_through_bx_mcp() {
    let broker = BrokerProcess::start_verbose(
        GRANTS,
        "idle_timeout_ms = 1000\nshell_ms = 5000\nconnection_idle_ms = 300\n",
    );
    std::fs::write(broker.work.join("a.txt"), "alpha from the work folder\n").unwrap();
    let go = broker.root.path().join("go");
    let read = call_tool("read_file", json!({ "path": broker.work.join("a.txt") }));
    let plan = json!([read, { "op": "wait_file", "path": go }, read]);
    let mut client = start(&broker, "modern", &plan, &["--session", "idle"]);
    let mut lines = BufReader::new(client.stdout.take().unwrap())
        .lines()
        .map(|line| serde_json::from_str::<Value>(&line.unwrap()).unwrap())
        .filter(|v| v.get("progress").is_none() || v.get("text").is_some());
    let first = lines.next().unwrap();
    assert_eq!(first["isError"], false, "{first}");
    // Every connection `bx mcp` made is closed as idle, the one its call used included.
    assert!(
        broker.wait_until_every_hello_closed_as_idle(Duration::from_secs(30)),
        "{}",
        broker.log()
    );
    std::fs::write(&go, "").unwrap();
    let second = lines.next().unwrap();
    assert_eq!(second["isError"], false, "{second}");
    assert!(
        second["text"]
            .as_str()
            .unwrap()
            .contains("alpha from the work folder"),
        "{second}"
    );
    assert_eq!(lines.next().unwrap()["done"], true);
    assert!(client.wait().unwrap().success());
    let log = broker.log();
    assert_eq!(log.matches("session opened").count(), 1, "{log}");
    assert!(log.contains("session resumed"), "{log}");
}
