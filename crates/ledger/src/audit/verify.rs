//! Checking the chain: one function, used by every command that offers `audit verify` and by
//! the broker when it opens the log.

use std::fmt;
use std::path::Path;

use super::{AuditError, Event, GENESIS, Record, sha256_hex};

/// The last record the ledger knows to be on disk: its number and hash. A log may be ahead of
/// it by whole records, never behind, and that record must hash the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Anchor {
    /// The record's number.
    pub seq: u64,
    /// The SHA-256 (hex) of its line.
    pub hash: String,
}

/// A chain that holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// How many complete records the file holds.
    pub records: u64,
    /// The last complete record's number (0 for an empty log).
    pub last_seq: u64,
    /// The last complete record's hash ([`GENESIS`] for an empty log).
    pub last_hash: String,
    /// Bytes after the last complete line: a write in progress, or a crash's torn line (the
    /// broker cuts it at start). Its offset and length.
    pub partial: Option<(u64, u64)>,
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the chain holds: {} records, the last is record {}",
            self.records, self.last_seq
        )?;
        if let Some((_, bytes)) = self.partial {
            write!(f, " ({bytes} bytes of a record being written follow it)")?;
        }
        Ok(())
    }
}

/// Where the chain breaks, and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Broken {
    /// The record named: the one changed, missing, out of place or unreadable.
    pub record: u64,
    /// The line of the file where it was found (from 1).
    pub line: u64,
    /// What is wrong, as a sentence.
    pub what: String,
}

impl fmt::Display for Broken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "record {} (line {}): {}",
            self.record, self.line, self.what
        )
    }
}

/// Checks the log at `path`: every line a record, numbered without gaps, each holding the hash
/// of the line before; with `anchor`, the log reaches the ledger's last record and that record
/// hashes as the ledger says. A missing file is an empty log.
pub fn verify(path: &Path, anchor: Option<&Anchor>) -> Result<Summary, AuditError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(source) => {
            return Err(AuditError::Io {
                path: path.display().to_string(),
                source,
            });
        }
    };
    scan(&bytes, anchor)
        .map(|scan| scan.summary)
        .map_err(|broken| AuditError::Broken {
            path: path.display().to_string(),
            broken,
        })
}

/// The result of reading a log's bytes.
pub(crate) struct Scan {
    pub summary: Summary,
    /// Bytes up to the end of the last complete line.
    pub complete_len: u64,
}

/// A scan that stopped at a break: the break, and the last good record before it.
pub(crate) struct Stopped {
    pub broken: Broken,
    pub last_good_seq: u64,
    pub last_good_hash: String,
}

pub(crate) fn scan(bytes: &[u8], anchor: Option<&Anchor>) -> Result<Scan, Broken> {
    scan_until_break(bytes, anchor).map_err(|stopped| stopped.broken)
}

pub(crate) fn scan_until_break(bytes: &[u8], anchor: Option<&Anchor>) -> Result<Scan, Stopped> {
    let mut last_seq = 0u64;
    let mut last_hash = GENESIS.to_string();
    let mut records = 0u64;
    let mut offset = 0usize;
    let mut anchor_hash: Option<(String, u64)> = None;
    let mut line_number = 0u64;
    let stop = |broken: Broken, seq: u64, hash: &str| Stopped {
        broken,
        last_good_seq: seq,
        last_good_hash: hash.to_string(),
    };
    while let Some(end) = bytes
        .get(offset..)
        .and_then(|rest| rest.iter().position(|b| *b == b'\n'))
    {
        line_number += 1;
        // Invariant: `end` is the position of a newline in `bytes[offset..]`, so the line lies
        // inside `bytes`.
        let line = &bytes[offset..offset + end];
        offset += end + 1;
        let expected = last_seq + 1;
        let record: Record = match serde_json::from_slice(line) {
            Ok(record) => record,
            Err(e) => {
                let broken = Broken {
                    record: expected,
                    line: line_number,
                    what: format!("the line is not a valid audit record ({e})"),
                };
                return Err(stop(broken, last_seq, &last_hash));
            }
        };
        let first = records == 0;
        let continues_segment = first && matches!(record.event, Event::Segment { .. });
        if first && !continues_segment && (record.seq != 1 || record.prev != GENESIS) {
            let broken = Broken {
                record: 1,
                line: line_number,
                what: format!(
                    "the log starts at record {} instead of record 1: the records before it were removed",
                    record.seq
                ),
            };
            return Err(stop(broken, last_seq, &last_hash));
        }
        if !first {
            if record.seq != expected {
                let what = if record.seq > expected {
                    format!(
                        "record {} follows record {last_seq}: record {expected} is missing (deleted, or records were reordered)",
                        record.seq
                    )
                } else {
                    format!(
                        "record {} follows record {last_seq}: records are out of order or repeated",
                        record.seq
                    )
                };
                let broken = Broken {
                    record: expected,
                    line: line_number,
                    what,
                };
                return Err(stop(broken, last_seq, &last_hash));
            }
            if record.prev != last_hash {
                let broken = Broken {
                    record: last_seq,
                    line: line_number.saturating_sub(1),
                    what: format!(
                        "record {last_seq} does not hash to what record {} holds for it: one of them was changed",
                        record.seq
                    ),
                };
                return Err(stop(broken, last_seq, &last_hash));
            }
        }
        last_seq = record.seq;
        last_hash = sha256_hex(line);
        records += 1;
        if anchor.is_some_and(|a| a.seq == last_seq) {
            anchor_hash = Some((last_hash.clone(), line_number));
        }
    }
    if let Some(anchor) = anchor.filter(|a| a.seq > 0) {
        match anchor_hash {
            None => {
                let broken = Broken {
                    record: last_seq + 1,
                    line: line_number + 1,
                    what: format!(
                        "the log ends at record {last_seq}, but the ledger recorded record {} as written: records were cut",
                        anchor.seq
                    ),
                };
                return Err(stop(broken, last_seq, &last_hash));
            }
            Some((hash, line)) if hash != anchor.hash => {
                let broken = Broken {
                    record: anchor.seq,
                    line,
                    what: format!(
                        "record {} does not hash to what the ledger recorded for it: it was changed",
                        anchor.seq
                    ),
                };
                return Err(stop(broken, last_seq, &last_hash));
            }
            Some(_) => {}
        }
    }
    let partial = (offset < bytes.len()).then(|| (offset as u64, (bytes.len() - offset) as u64));
    Ok(Scan {
        summary: Summary {
            records,
            last_seq,
            last_hash,
            partial,
        },
        complete_len: offset as u64,
    })
}
