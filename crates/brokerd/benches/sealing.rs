//! What sealing and a witness cost a call (issue 36): a small `read_file` over the agent socket,
//! audited with its fsync, from three brokers in turns of 100 calls each (this VM's speed
//! drifts within minutes, so turns rather than one run after another): sealing off; sealing
//! set up with a witness at the default interval (`[audit] seal_interval_secs = 600`); and
//! the same every second, so that seals and the witness's exchanges fall among the calls.
//! The witness is `ledger`'s (what `bx audit witness` serves) on a thread of this process, on
//! a unix socket; the file tools run in the broker's own process (`file_walls = false`), so
//! what differs is the broker's checkpointing alone.
//!
//! `cargo bench -p brokerd --bench sealing` (builds brokerd first: `cargo build --release -p
//! brokerd -p worker`). Prints each broker's median and p99 and the ratio of its median to
//! the broker without sealing's, and how many checkpoints the every-second broker made.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::time::{Duration, Instant, SystemTime};

use ledger::audit::witness::WitnessDir;
use ledger::audit::witness_wire::{Request, answer, read_line};
use proto::ToolResponse;
use testkit::{AgentClient, BrokerProcess};

const GRANTS: &str =
    "[[grant]]\nid = \"w\"\ntool = \"read_file\"\npaths = [\"{work}\"]\nuntrusted = false\n";

const UNBOXED: &str = "idle_timeout_ms = 60000\n[sandbox]\nfile_walls = false\n";

const TURNS: u64 = 30;
const PER_TURN: u64 = 100;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

/// A witness serving `dir` on `socket`, one connection at a time, for the whole run.
fn witness(dir: &Path, socket: &Path) {
    let witness = WitnessDir::open(dir).unwrap();
    let listener = UnixListener::bind(socket).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let stream = stream.unwrap();
            let mut writer = stream.try_clone().unwrap();
            let mut reader = BufReader::new(stream);
            while let Ok(Some(line)) = read_line(&mut reader) {
                let request: Request = serde_json::from_slice(&line).unwrap();
                let time = SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_secs();
                let reply = answer(&witness, &request, time);
                let mut out = serde_json::to_vec(&reply).unwrap();
                out.push(b'\n');
                if writer.write_all(&out).is_err() {
                    break;
                }
            }
        }
    });
}

/// A broker reading `small.txt`, with `audit` as its `[audit]` section (none: no sealing)
/// and sealing set up when it has one; its client and the call's arguments.
fn broker(audit: Option<&str>) -> (BrokerProcess, AgentClient, String) {
    let config = match audit {
        Some(audit) => format!("{UNBOXED}[audit]\n{audit}"),
        None => UNBOXED.to_string(),
    };
    let broker = BrokerProcess::start(GRANTS, &config);
    if audit.is_some() {
        let origin = ledger::audit::origin_of(&broker.state);
        ledger::audit::SealStore::of(&broker.state)
            .init(&origin)
            .unwrap();
    }
    std::fs::write(broker.work.join("small.txt"), "a small file\n").unwrap();
    let args = serde_json::json!({ "path": broker.work.join("small.txt") }).to_string();
    let mut client = AgentClient::open(&broker.socket(), None);
    for id in 1..=50 {
        let _ = client.call(id, "read_file", &args);
    }
    (broker, client, args)
}

fn main() {
    let root = testkit::temp_dir();
    let socket = root.path().join("witness.sock");
    witness(&root.path().join("w"), &socket);
    let witnessed = format!("witness = \"unix:{}\"\n", socket.display());
    let mut brokers = [
        ("sealing off", broker(None), Vec::new()),
        (
            "sealed, witnessed, every 600 s (the default)",
            broker(Some(&witnessed)),
            Vec::new(),
        ),
        (
            "sealed, witnessed, every second",
            broker(Some(&format!("{witnessed}seal_interval_secs = 1\n"))),
            Vec::new(),
        ),
    ];
    let started = Instant::now();
    for turn in 0..TURNS {
        for (_, (_, client, args), times) in brokers.iter_mut() {
            for id in 51 + turn * PER_TURN..51 + (turn + 1) * PER_TURN {
                let start = Instant::now();
                let answer = client.call(id, "read_file", args).unwrap();
                times.push(start.elapsed());
                assert!(matches!(answer, ToolResponse::Result { .. }), "{answer:?}");
            }
        }
    }
    let seconds = started.elapsed().as_secs();
    let mut off = Duration::ZERO;
    for (label, (broker, _, _), times) in brokers.iter_mut() {
        times.sort();
        let median = percentile(times, 0.5);
        if off.is_zero() {
            off = median;
        }
        let checkpoints = broker
            .log()
            .matches("the witness cosigned the audit log")
            .count();
        println!(
            "1 client read_file round trip, {label}: median {median:?}, p99 {:?}, {:.3}x sealing off's median ({} calls, {checkpoints} checkpoints cosigned in {seconds} s)",
            percentile(times, 0.99),
            median.as_secs_f64() / off.as_secs_f64(),
            times.len()
        );
    }
}
