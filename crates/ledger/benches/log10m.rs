//! Proofs and verification on a large audit log (issue 36): a log of 10 million records
//! (`BOXMAKER_BENCH_RECORDS` for another size) synthesised in `/var/tmp` by the ledger's own
//! writer (batches of 10,000 records, one fsync each) and removed at the end, never by
//! `cargo test`. Each step is timed once, as `bx` runs it:
//!
//! - the tree read from the log (every record's leaf hashed; what each `bx audit` command
//!   that reads the tree pays first);
//! - `bx audit prove N`: that, then the inclusion proof of the middle record;
//! - `bx audit verify`: the chain over every record;
//! - `bx audit verify --checkpoint --proof`: the tree read, the checkpoint's root checked and
//!   the proof checked (beside the chain);
//! - a third party's check of the proof against a checkpoint, without the log (averaged).
//!
//! `cargo bench -p ledger --bench log10m`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::time::{Duration, Instant};

use ledger::audit::merkle;
use ledger::{AuditLog, Event, LogTree, Proof};
use proto::{SessionId, Timestamp};

const BATCH: u64 = 10_000;

fn timed<T>(what: &str, run: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let value = run();
    let took = start.elapsed();
    println!("{what}: {took:.2?}");
    (value, took)
}

fn main() {
    let records: u64 = std::env::var("BOXMAKER_BENCH_RECORDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000_000);
    let dir = tempfile::Builder::new()
        .prefix("boxmaker-log10m-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let path = dir.path().join("audit.jsonl");
    let origin = "boxmaker audit bench".to_string();
    timed(&format!("write {records} records"), || {
        let now = Timestamp::parse("2026-12-05T00:00:00Z").unwrap();
        let (mut log, _) = AuditLog::open(&path, None, now).unwrap();
        let mut written = 0;
        while written < records {
            let batch = BATCH.min(records - written);
            let events: Vec<Event> = (written..written + batch)
                .map(|i| Event::SessionResumed {
                    session: SessionId(format!("s{i}")),
                })
                .collect();
            log.append(&events, now).unwrap();
            written += batch;
        }
    });
    let bytes = std::fs::metadata(&path).unwrap().len();
    println!(
        "the log: {records} records, {:.2} GB, {:.0} bytes a record",
        bytes as f64 / 1e9,
        bytes as f64 / records as f64
    );
    let record = records / 2;
    let (tree, read) = timed("the tree read from the log (every leaf hashed)", || {
        LogTree::read(&path, origin.clone()).unwrap()
    });
    let (proof, made) = timed(
        &format!("the inclusion proof of record {record} made"),
        || tree.prove(record, None).unwrap(),
    );
    println!("bx audit prove {record}: the two, {:.2?}", read + made);
    let checkpoint = tree.checkpoint(None).unwrap();
    drop(tree);
    let (summary, _) = timed("bx audit verify (the chain)", || {
        ledger::verify(&path, None).unwrap()
    });
    assert_eq!(summary.records, records);
    timed(
        "bx audit verify --checkpoint --proof, beside the chain (tree read, root, proof)",
        || {
            let tree = LogTree::read(&path, origin.clone()).unwrap();
            tree.check_checkpoint(&checkpoint).unwrap();
            tree.check_proof(&proof, std::slice::from_ref(&checkpoint))
                .unwrap()
        },
    );
    let Proof::Inclusion {
        leaf,
        size,
        path: hashes,
        ..
    } = &proof
    else {
        unreachable!("prove makes an inclusion proof");
    };
    use std::io::BufRead;
    let line = std::io::BufReader::new(std::fs::File::open(&path).unwrap())
        .lines()
        .nth(*leaf as usize)
        .unwrap()
        .unwrap();
    let rounds = 10_000u32;
    let start = Instant::now();
    for _ in 0..rounds {
        let leaf_hash = ledger::audit::record_leaf(line.as_bytes());
        merkle::verify_inclusion(*leaf, *size, &leaf_hash, hashes, &checkpoint.root).unwrap();
    }
    println!(
        "a third party's check of the proof ({} hashes) against the checkpoint, without the log: {:.2?}",
        hashes.len(),
        start.elapsed() / rounds
    );
    drop(dir);
    println!("removed {}", path.display());
}
