//! `grep` through the broker's round trip, on a large tree: the agent socket, the decision, the
//! audit record (fsynced), the worker's fresh box, the walk and the rendered answer, beside `rg`
//! on the same pattern and `grep` through the tool function (the broker's caps, in this process)
//! in the same run, and the daemon's plain round trip (a small `read_file`, also boxed).
//!
//! `cargo build --release -p brokerd -p worker && BOXMAKER_BENCH_TREE=/var/tmp/boxmaker-bench/linux-source-6.1
//! cargo bench -p brokerd --bench grep` (`scripts/bench-corpus` sets the tree and `rg` 15 up).
//! `BOXMAKER_BENCH_RUNS` sets the runs (default 20), `RG` the program (default `rg`),
//! `BOXMAKER_BENCH_PATTERN` the pattern (default a literal with fewer matching lines than the
//! broker's cap of 1,000, so that both sides do the whole search), `BOXMAKER_BENCH_CONFIG`
//! lines added to the broker's `brokerd.toml` (`[sandbox]\nfile_walls = false` runs the tool in
//! the broker's process). Both sides use every core.
//! Never part of CI.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use proto::ToolResponse;
use testkit::{AgentClient, BrokerProcess};
use tools::fs::GrantedDir;
use tools::search::{GrepArgs, OutputMode, SearchOptions, grep};

fn median(mut runs: Vec<Duration>) -> Duration {
    runs.sort();
    runs[runs.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn main() {
    let tree = PathBuf::from(
        std::env::var("BOXMAKER_BENCH_TREE")
            .expect("set BOXMAKER_BENCH_TREE to a large source tree (the Linux kernel's)"),
    )
    .canonicalize()
    .unwrap();
    let runs: usize = std::env::var("BOXMAKER_BENCH_RUNS").map_or(20, |n| n.parse().unwrap());
    let rg = std::env::var("RG").unwrap_or_else(|_| "rg".into());
    let pattern = std::env::var("BOXMAKER_BENCH_PATTERN")
        .unwrap_or_else(|_| r"EXPORT_SYMBOL_GPL\(usb_".into());
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let path = tree.display().to_string();
    let grants = format!(
        "[[grant]]\nid = \"tree\"\ntool = \"read\"\npaths = [\"{path}\"]\nuntrusted = false\n\n[[grant]]\nid = \"w\"\ntool = \"read_file\"\npaths = [\"{{work}}\"]\nuntrusted = false\n"
    );
    let extra = std::env::var("BOXMAKER_BENCH_CONFIG").unwrap_or_default();
    let broker = BrokerProcess::start(
        &grants,
        &format!("idle_timeout_ms = 600000\nread_file_ms = 60000\n{extra}"),
    );
    let args = serde_json::json!({
        "pattern": pattern, "path": path, "output_mode": "content",
    });
    let mut client = AgentClient::open(&broker.socket(), None);
    let mut id = 0;
    let mut call = |tool: &str, arguments: &str| {
        id += 1;
        let answer = client.call(id, tool, arguments).unwrap();
        let ToolResponse::Result { content, .. } = answer else {
            panic!("{tool} did not run: {answer:?}")
        };
        content
    };
    let first = call("grep", &args.to_string());
    let (header, _) = first.split_once('\n').unwrap_or((&first, ""));
    println!("tree {path} · {runs} runs · {threads} threads · pattern {pattern:?}");
    println!("broker's header: {header}");
    let header: serde_json::Value = serde_json::from_str(header).unwrap();
    assert_eq!(
        header["truncated"], false,
        "the pattern hits the broker's cap; pick a rarer one"
    );
    std::fs::write(broker.work.join("small.txt"), "a small file\n").unwrap();
    let small = serde_json::json!({ "path": broker.work.join("small.txt") }).to_string();
    let dir = GrantedDir::open(&tree).unwrap();
    let tool_args: GrepArgs = serde_json::from_value(args.clone()).unwrap();
    assert_eq!(tool_args.output_mode, OutputMode::Content);
    let options = SearchOptions::default();
    let j = threads.to_string();
    let rg_once = || {
        let status = Command::new(&rg)
            .args(["-n", "--no-heading", "-H", "-j", &j, &pattern])
            .arg(&tree)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap();
        assert!(status.code().is_some_and(|c| c <= 1), "{rg} failed");
    };
    // The four interleaved, run by run, so that the shared machine's load falls on all alike.
    let (mut broker_runs, mut trip_runs, mut function_runs, mut rg_runs) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    call("read_file", &small);
    grep(&dir, &tool_args, &options).unwrap();
    rg_once();
    for _ in 0..runs {
        let start = Instant::now();
        call("grep", &args.to_string());
        broker_runs.push(start.elapsed());
        let start = Instant::now();
        call("read_file", &small);
        trip_runs.push(start.elapsed());
        let start = Instant::now();
        grep(&dir, &tool_args, &options).unwrap();
        function_runs.push(start.elapsed());
        let start = Instant::now();
        rg_once();
        rg_runs.push(start.elapsed());
    }
    let (through_broker, round_trip, function, theirs) = (
        median(broker_runs),
        median(trip_runs),
        median(function_runs),
        median(rg_runs),
    );
    println!(
        "grep through the broker        {:>9.1} ms   ratio to rg {:.2}",
        ms(through_broker),
        through_broker.as_secs_f64() / theirs.as_secs_f64()
    );
    println!(
        "grep through the tool function {:>9.1} ms   ratio to rg {:.2}",
        ms(function),
        function.as_secs_f64() / theirs.as_secs_f64()
    );
    println!("rg                             {:>9.1} ms", ms(theirs));
    println!(
        "broker's part (broker - function) {:>6.1} ms; a boxed read_file round trip {:.1} ms",
        ms(through_broker.saturating_sub(function)),
        ms(round_trip)
    );
}
