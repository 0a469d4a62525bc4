//! The audit log's fsync, two ways, interleaved call by call on the same disk (issue 37, item
//! 1): today's append (`O_APPEND` write, `fdatasync`), which grows the file so that every
//! fdatasync also flushes its size and extents; and a write at the end of the records into a
//! tail already zero-filled and synced (the databases' WAL trick), so that fdatasync flushes
//! data only. Records of the broker's size (700 bytes); the tail grows 4 MiB at a time (that
//! write and its sync are timed with the call that needs it).
//!
//! `cargo bench -p ledger --bench tail [CALLS]` (default 2,000; the first 50 unmeasured).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::time::{Duration, Instant};

const RECORD: usize = 700;
const TAIL_STEP: usize = 4 << 20;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

/// A log written into a zero-filled, synced tail.
struct Preallocated {
    file: File,
    end: u64,
    zeroed_to: u64,
}

impl Preallocated {
    fn append(&mut self, record: &[u8]) {
        if self.end + record.len() as u64 > self.zeroed_to {
            self.file
                .write_all_at(&vec![0u8; TAIL_STEP], self.zeroed_to)
                .unwrap();
            self.file.sync_all().unwrap();
            self.zeroed_to += TAIL_STEP as u64;
        }
        self.file.write_all_at(record, self.end).unwrap();
        self.file.sync_data().unwrap();
        self.end += record.len() as u64;
    }
}

fn main() {
    let calls: usize = std::env::args()
        .filter_map(|a| a.parse().ok())
        .next()
        .unwrap_or(2000);
    let dir = tempfile::Builder::new()
        .prefix("boxmaker-bench-")
        .tempdir_in("/var/tmp")
        .unwrap();
    let mut appended = OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.path().join("appended"))
        .unwrap();
    let mut preallocated = Preallocated {
        file: OpenOptions::new()
            .create(true)
            .truncate(true)
            .read(true)
            .write(true)
            .open(dir.path().join("preallocated"))
            .unwrap(),
        end: 0,
        zeroed_to: 0,
    };
    let mut record = vec![b'x'; RECORD];
    record[RECORD - 1] = b'\n';
    let (mut append_times, mut tail_times) = (Vec::new(), Vec::new());
    for call in 0..calls + 50 {
        let start = Instant::now();
        appended.write_all(&record).unwrap();
        appended.sync_data().unwrap();
        let append = start.elapsed();
        let start = Instant::now();
        preallocated.append(&record);
        let tail = start.elapsed();
        if call >= 50 {
            append_times.push(append);
            tail_times.push(tail);
        }
    }
    append_times.sort();
    tail_times.sort();
    let (append, tail) = (percentile(&append_times, 0.5), percentile(&tail_times, 0.5));
    println!(
        "{calls} records of {RECORD} bytes, interleaved:\n  append + fdatasync: median {append:?}, p99 {:?}\n  into a zeroed tail + fdatasync: median {tail:?}, p99 {:?} ({:.2}x the append)",
        percentile(&append_times, 0.99),
        percentile(&tail_times, 0.99),
        tail.as_secs_f64() / append.as_secs_f64()
    );
}
