//! `read_file` through `bx mcp` (grants, the audit log's fsync, the sandbox's warm box) against
//! the reference filesystem server (npm `@modelcontextprotocol/server-filesystem`) doing
//! `read_text_file` on the same 4 KiB file, both from the same official Python SDK client
//! over stdio, in one run: median, p99 and calls per second.
//!
//! `cargo build --workspace --bins && cargo bench -p bx --bench mcp` (as root, after
//! `scripts/test-deps`). The bench installs the reference server with npm into
//! `/var/tmp/boxmaker-bench-mcp` (or `$BOXMAKER_BENCH_MCP_DIR`) the first time.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use testkit::BrokerProcess;

const REFERENCE: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";

const GRANTS: &str = r#"
[[grant]]
id = "read-work"
tool = "read_file"
paths = ["{work}"]
class = "private"
untrusted = false
"#;

/// The reference server's binary, installed once.
fn reference_server() -> PathBuf {
    let dir = std::env::var_os("BOXMAKER_BENCH_MCP_DIR").map_or_else(
        || PathBuf::from("/var/tmp/boxmaker-bench-mcp"),
        PathBuf::from,
    );
    let bin = dir.join("node_modules/.bin/mcp-server-filesystem");
    if !bin.exists() {
        std::fs::create_dir_all(&dir).unwrap();
        let status = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", REFERENCE])
            .current_dir(&dir)
            .status()
            .expect("npm is needed to install the reference server");
        assert!(status.success(), "npm install {REFERENCE} failed");
    }
    bin
}

/// One run of the client against `command`: its JSON line.
fn measure(runs: usize, tool: &str, arguments: &Value, command: &[&std::ffi::OsStr]) -> Value {
    let python = std::env::var_os("BOXMAKER_MCP_VENV")
        .map_or_else(|| PathBuf::from("/opt/boxmaker-mcp2"), PathBuf::from)
        .join("bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/mcp_read.py");
    let output = Command::new(python)
        .arg(script)
        .arg(runs.to_string())
        .arg(tool)
        .arg(arguments.to_string())
        .arg("--")
        .args(command)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

fn main() {
    let runs: usize = std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(300);
    let broker = BrokerProcess::start(GRANTS, "idle_timeout_ms = 600000\n");
    let file = broker.work.join("a.txt");
    std::fs::write(&file, "x".repeat(4095) + "\n").unwrap();
    let reference = reference_server();
    let bx = testkit::binary("bx").unwrap();
    let bx_command: Vec<&std::ffi::OsStr> = vec![
        bx.as_os_str(),
        "--config-dir".as_ref(),
        broker.config.as_os_str(),
        "--state-dir".as_ref(),
        broker.state.as_os_str(),
        "--runtime-dir".as_ref(),
        broker.runtime.as_os_str(),
        "mcp".as_ref(),
        "--catalog".as_ref(),
        "all".as_ref(),
        "--session".as_ref(),
        "bench".as_ref(),
    ];
    let reference_command: Vec<&std::ffi::OsStr> =
        vec![reference.as_os_str(), broker.work.as_os_str()];
    let ours = serde_json::json!({ "path": file });
    let theirs = serde_json::json!({ "path": file });
    // Interleaved, twice each (and `clock` beside them), so that neither side has the machine to itself.
    let mut rows = Vec::new();
    for round in 0..2 {
        rows.push((
            round,
            "bx mcp read_file",
            measure(runs, "read_file", &ours, &bx_command),
        ));
        rows.push((
            round,
            "server-filesystem read_text_file",
            measure(runs, "read_text_file", &theirs, &reference_command),
        ));
        // `clock` is answered in `bx mcp` itself: the MCP front alone, no broker, no file.
        rows.push((
            round,
            "bx mcp clock (no broker)",
            measure(runs, "clock", &serde_json::json!({}), &bx_command),
        ));
    }
    println!("{runs} calls each, one after another, 4 KiB file:");
    for (round, name, row) in &rows {
        println!(
            "  round {round}: {name:34} median {:6.3} ms  p99 {:6.3} ms  {:7.0} calls/s  ({})",
            row["median_ms"].as_f64().unwrap(),
            row["p99_ms"].as_f64().unwrap(),
            row["calls_per_s"].as_f64().unwrap(),
            row["protocol"].as_str().unwrap_or("?")
        );
    }
    for round in 0..2 {
        let ours = &rows[round * 3].2;
        let theirs = &rows[round * 3 + 1].2;
        let front = &rows[round * 3 + 2].2;
        println!(
            "  round {round}: bx mcp / reference: median {:.2}x, p99 {:.2}x, calls/s {:.2}x",
            ours["median_ms"].as_f64().unwrap() / theirs["median_ms"].as_f64().unwrap(),
            ours["p99_ms"].as_f64().unwrap() / theirs["p99_ms"].as_f64().unwrap(),
            ours["calls_per_s"].as_f64().unwrap() / theirs["calls_per_s"].as_f64().unwrap()
        );
        println!(
            "  round {round}: bx mcp's front alone (clock) / reference: median {:.2}x, p99 {:.2}x",
            front["median_ms"].as_f64().unwrap() / theirs["median_ms"].as_f64().unwrap(),
            front["p99_ms"].as_f64().unwrap() / theirs["p99_ms"].as_f64().unwrap()
        );
    }
}
