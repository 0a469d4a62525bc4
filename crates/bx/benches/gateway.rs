//! The gateway's cost per call (issue 37, item 3): a downstream server's tool called through
//! `bx mcp` (the grant and its pin decided, the audit record fsynced, the server in its box, the
//! answer labelled) against the same server called directly, both from the same official Python
//! SDK client over stdio (`mcp_read.py`). The server is a small fast one (`gateway_server.py`:
//! newline-delimited JSON-RPC, no SDK, one `echo` tool), so the gateway's share is what shows.
//!
//! `cargo build --workspace --bins && cargo bench -p bx --bench gateway [RUNS]` (as root, after
//! `scripts/test-deps`). Prints, for one client, the median and p99 of each side in interleaved
//! rounds and the gateway's added time; then for 16 and 64 clients at once (each its own
//! `bx mcp` and session, or its own server), calls per second and the p99 of all calls.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime};

use proto::{OwnerReply, OwnerRequest};
use serde_json::Value;
use testkit::{BrokerProcess, OwnerClient};

fn client_python() -> PathBuf {
    std::env::var_os("BOXMAKER_MCP_VENV")
        .map_or_else(|| PathBuf::from("/opt/boxmaker-mcp2"), PathBuf::from)
        .join("bin/python")
}

fn bench_file(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("benches")
        .join(name)
}

/// Starts one client making `runs` calls of `tool` to `command`; with `barrier`, it waits
/// there before measuring (see `mcp_read.py`).
fn client(runs: usize, tool: &str, command: &[OsString], barrier: Option<&Path>) -> Child {
    let mut client = Command::new(client_python());
    client
        .arg(bench_file("mcp_read.py"))
        .arg(runs.to_string())
        .arg(tool)
        .arg(r#"{"text":"hello"}"#)
        .arg("--")
        .args(command)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(barrier) = barrier {
        client.env("BOXMAKER_BENCH_BARRIER", barrier);
    }
    client.spawn().unwrap()
}

fn finish(child: Child) -> Value {
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

/// `clients` clients at once, `runs` calls each, `command(i)` the server of client `i`:
/// calls per second over all, and the median and p99 of all calls.
fn concurrent(
    clients: usize,
    runs: usize,
    tool: &str,
    command: &dyn Fn(usize) -> Vec<OsString>,
) -> (f64, f64, f64) {
    let barrier = testkit::temp_dir();
    let children: Vec<Child> = (0..clients)
        .map(|i| client(runs, tool, &command(i), Some(barrier.path())))
        .collect();
    while std::fs::read_dir(barrier.path()).unwrap().count() < clients {
        std::thread::sleep(Duration::from_millis(10));
    }
    let go = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    std::fs::write(barrier.path().join("go"), "").unwrap();
    let rows: Vec<Value> = children.into_iter().map(finish).collect();
    let ended = rows
        .iter()
        .map(|r| r["ended_at"].as_f64().unwrap())
        .fold(go, f64::max);
    let mut times: Vec<f64> = rows
        .iter()
        .flat_map(|r| r["times_ms"].as_array().unwrap().clone())
        .map(|t| t.as_f64().unwrap())
        .collect();
    times.sort_by(f64::total_cmp);
    (
        times.len() as f64 / (ended - go),
        percentile(&times, 0.5),
        percentile(&times, 0.99),
    )
}

/// The pins of every tool of `server` as the broker lists them now (TOML inline-table keys).
fn pins_of(broker: &BrokerProcess, server: &str) -> String {
    let mut owner = OwnerClient::open(&broker.owner_socket());
    let servers = match owner.send(&OwnerRequest::Downstream { hashes: Vec::new() }) {
        Some(OwnerReply::Downstream { servers, .. }) => servers,
        other => panic!("not a downstream view: {other:?}"),
    };
    let view = servers.iter().find(|s| s.name == server).unwrap();
    assert_eq!(view.error, None, "{}", broker.log());
    view.tools
        .iter()
        .map(|t| format!("{:?} = {:?}", t.name, t.hash))
        .collect::<Vec<_>>()
        .join(", ")
}

fn grants(tools: &str) -> String {
    format!(
        "[[grant]]\nid = \"fast-box\"\nserver = \"fast\"\npaths = [\"{{work}}\"]\n\n[[grant]]\nid = \"fast-tools\"\ntool = \"fast.*\"\non_untrusted = \"allow\"\n{tools}"
    )
}

fn main() {
    let runs: usize = std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(500);
    let python = client_python();
    let venv = python.parent().and_then(Path::parent).unwrap();
    let mut read_only = testkit::python::python_folders(venv);
    let server = bench_file("gateway_server.py").canonicalize().unwrap();
    read_only.push(server.parent().unwrap().display().to_string());
    let config = format!(
        "idle_timeout_ms = 600000\n[[mcp.servers]]\nname = \"fast\"\ncommand = [{:?}, {:?}]\nread_only = {read_only:?}\n",
        python.display().to_string(),
        server.display().to_string(),
    );
    let broker = BrokerProcess::start(&grants(""), &config);
    let pins = pins_of(&broker, "fast");
    broker.write_grants("grants.toml", &grants(&format!("pins = {{ {pins} }}\n")));
    assert!(
        broker.wait_for_log("grants reloaded", 1, Duration::from_secs(10)),
        "{}",
        broker.log()
    );
    let bx = testkit::binary("bx").unwrap();
    let through = |i: usize| -> Vec<OsString> {
        let mut command: Vec<OsString> = vec![bx.clone().into()];
        for (flag, dir) in [
            ("--config-dir", &broker.config),
            ("--state-dir", &broker.state),
            ("--runtime-dir", &broker.runtime),
        ] {
            command.push(flag.into());
            command.push(dir.clone().into());
        }
        for arg in ["mcp", "--catalog", "all", "--session"] {
            command.push(arg.into());
        }
        command.push(format!("bench-{i}").into());
        command
    };
    let direct = |_: usize| -> Vec<OsString> { vec![python.clone().into(), server.clone().into()] };

    println!("{runs} calls each, one after another, one client (interleaved rounds):");
    for round in 0..3 {
        let ours = finish(client(runs, "fast.echo", &through(0), None));
        let theirs = finish(client(runs, "echo", &direct(0), None));
        let field = |row: &Value, key: &str| row[key].as_f64().unwrap();
        println!(
            "  round {round}: through bx mcp median {:.3} ms p99 {:.3} ms; direct median {:.3} ms p99 {:.3} ms; the gateway adds {:+.3} ms median, {:+.3} ms p99",
            field(&ours, "median_ms"),
            field(&ours, "p99_ms"),
            field(&theirs, "median_ms"),
            field(&theirs, "p99_ms"),
            field(&ours, "median_ms") - field(&theirs, "median_ms"),
            field(&ours, "p99_ms") - field(&theirs, "p99_ms"),
        );
    }
    for clients in [16usize, 64] {
        let each = (runs * 4 / clients).max(20);
        let (ours, ours_median, ours_p99) = concurrent(clients, each, "fast.echo", &through);
        let (theirs, theirs_median, theirs_p99) = concurrent(clients, each, "echo", &direct);
        println!(
            "  {clients} clients, {each} calls each: through bx mcp {ours:.0} calls/s, median {ours_median:.3} ms, p99 {ours_p99:.3} ms; direct {theirs:.0} calls/s, median {theirs_median:.3} ms, p99 {theirs_p99:.3} ms"
        );
    }
}
