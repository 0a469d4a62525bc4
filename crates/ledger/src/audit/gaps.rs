//! What the log's stops read as (issue 36, item 4), told apart by what the log holds:
//!
//! - **logging off**: a run that ends with a `stopped` record (a signal, the broker's own
//!   stop), which the stop's checkpoint then covers, and a later `started`: the broker was
//!   off between the two times, and nothing was open to rewrite but what its checkpoint shows.
//! - **a crash** (or a kill): a run that ends without a `stopped` record. Its records after
//!   the last checkpoint before the crash were open to rewrite unnoticed: the window is the
//!   time from that checkpoint to the crash, at most the interval the run's `started` record
//!   names (`checkpoint_every_secs`).
//! - **records deleted**: not here, but in the chain's answer (a record missing between two
//!   that remain) and in a checkpoint's or the witness's (the log holds fewer records than
//!   were cosigned, or a record no longer matches).
//!
//! The checkpoint a record's protection is measured from is the largest size a check that
//! held (the witness's, the seals') gives at or before it; the time of a checkpoint is taken
//! as the time of its last record, the earliest it can have been taken.

use std::io::{BufRead, BufReader};
use std::path::Path;

use proto::Timestamp;

use super::{AuditError, Event, Record};

struct Run {
    /// The line of its `started` record (from 1), and its time.
    started: (u64, Timestamp),
    /// How often it checkpointed.
    every: Option<u64>,
    /// Its last line and time, and whether that is a `stopped` record (with why).
    last: (u64, Timestamp),
    stopped: Option<String>,
}

/// One sentence per stop the log shows, and one for its end, given the sizes of the
/// checkpoints known to hold (`checkpoints`). Lines that are not records end the reading
/// (the chain's answer names them).
pub fn gaps(path: &Path, checkpoints: &[u64]) -> Result<Vec<String>, AuditError> {
    let io = |source| AuditError::Io {
        path: path.display().to_string(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    let mut runs: Vec<Run> = Vec::new();
    let mut times: Vec<Timestamp> = Vec::new();
    let mut line = Vec::new();
    let mut reader = BufReader::new(file);
    loop {
        line.clear();
        reader.read_until(b'\n', &mut line).map_err(io)?;
        let Some(bytes) = line.strip_suffix(b"\n") else {
            break;
        };
        let Ok(record) = serde_json::from_slice::<Record>(bytes) else {
            break;
        };
        times.push(record.at);
        let at = (times.len() as u64, record.at);
        match (&record.event, runs.last_mut()) {
            (Event::Started { .. }, _) | (_, None) => runs.push(Run {
                started: at,
                every: match record.event {
                    Event::Started {
                        checkpoint_every_secs,
                        ..
                    } => checkpoint_every_secs,
                    _ => None,
                },
                last: at,
                stopped: None,
            }),
            // Written at the next start, before its `started` record: not the run's own.
            (Event::Interrupted { .. } | Event::Cut { .. }, Some(_)) => {}
            (Event::Stopped { reason }, Some(run)) => {
                run.last = at;
                run.stopped = Some(reason.clone());
            }
            (_, Some(run)) => {
                run.last = at;
                run.stopped = None;
            }
        }
    }
    let covered = |line: u64| checkpoints.iter().copied().filter(|s| *s <= line).max();
    let mut said = Vec::new();
    for (at, run) in runs.iter().enumerate() {
        let next = runs.get(at + 1);
        let (last, last_at) = run.last;
        let window = |ended: &str| {
            let bound = match run.every {
                Some(every) => {
                    format!("at most the {every} s checkpoint interval its start record names")
                }
                None => "unbounded: this run neither sealed nor had a witness".to_string(),
            };
            match covered(last) {
                Some(size) if size >= last => {
                    format!("{ended}; its checkpoint covers every record of it")
                }
                Some(size) => {
                    let since = times
                        .get(size.max(1) as usize - 1)
                        .copied()
                        .unwrap_or(run.started.1);
                    format!(
                        "{ended}; records {} to {last}, written after the last checkpoint (of {size} records, {since}), were open to rewrite unnoticed for {} s ({bound})",
                        size + 1,
                        seconds(since, last_at)
                    )
                }
                None => format!(
                    "{ended}; no checkpoint covers records {} to {last}: they were open to rewrite unnoticed for {} s since the run started ({bound})",
                    run.started.0,
                    seconds(run.started.1, last_at)
                ),
            }
        };
        match (next, &run.stopped) {
            (Some(next), Some(reason)) => said.push(window(&format!(
                "logging off from {last_at} to {}: the broker stopped ({reason}) at record {last} and started again at record {}",
                next.started.1, next.started.0
            ))),
            (Some(next), None) => said.push(window(&format!(
                "a crash: the broker's run ended without its stop record after record {last} ({last_at}), and it started again at record {} ({})",
                next.started.0, next.started.1
            ))),
            (None, Some(reason)) => said.push(window(&format!(
                "the broker is off since {last_at}: it stopped ({reason}) at record {last}"
            ))),
            (None, None) => said.push(window(&format!(
                "the last run (from record {}) is still going or ended in a crash after record {last} ({last_at})",
                run.started.0
            ))),
        }
    }
    Ok(said)
}

fn seconds(from: Timestamp, to: Timestamp) -> i64 {
    (to.as_millis() - from.as_millis()).max(0) / 1000
}
