//! The Merkle tree over the audit log's records, beside the hash chain: checkpoints and proofs
//! made from the log, and checked against it, offline.
//!
//! **A record's leaf is its line's bytes without the newline that ends it** ([`record_leaf`]):
//! the same bytes whose SHA-256 the next record holds as `prev`. Leaf `i` is the file's line
//! `i + 1`. Bytes after the last newline (a record being written, a crash's torn line) are
//! not a record and not a leaf. The tree is over the lines as they are, read or not, so a
//! rewritten log is compared with a checkpoint even where its chain no longer holds.

use std::fmt;
use std::io::{BufRead, BufReader};
use std::path::Path;

use super::checkpoint::{Checkpoint, ORIGIN_PREFIX, Proof};
use super::merkle::{self, Hash, ProofError};
use super::{AuditError, Record};

/// The leaf hash of a record whose line (without its newline) is `line`: the one place that
/// says which bytes a leaf is.
pub fn record_leaf(line: &[u8]) -> Hash {
    merkle::leaf_hash(line)
}

/// The log id of a log whose first record's leaf hash is `first`: its first 16 bytes in hex,
/// or `empty` for a log with no record yet. The first record of a log holds when and by which
/// process it was started, so two logs (two brokers, two machines) have two ids; the id moves
/// with the log (a state folder moved or copied keeps it) and changes only if record 1 is
/// rewritten, which every checkpoint of the log then shows.
pub fn log_id(first: Option<&Hash>) -> String {
    match first {
        Some(leaf) => leaf[..16].iter().map(|b| format!("{b:02x}")).collect(),
        None => "empty".to_string(),
    }
}

/// The origin line naming the log of the state folder `state_dir`: [`ORIGIN_PREFIX`] and the
/// log id of its `audit.jsonl` ([`log_id`], read from its first line).
pub fn origin_of(state_dir: &Path) -> String {
    let first = std::fs::File::open(state_dir.join(proto::dirs::AUDIT_FILE))
        .ok()
        .filter(|file| file.metadata().is_ok_and(|m| m.is_file()))
        .and_then(|file| {
            let mut line = Vec::new();
            BufReader::new(file).read_until(b'\n', &mut line).ok()?;
            line.strip_suffix(b"\n").map(record_leaf)
        });
    format!("{ORIGIN_PREFIX}{}", log_id(first.as_ref()))
}

/// The log's leaves, in order, and the number of its first record.
#[derive(Debug, Clone)]
pub struct LogTree {
    origin: String,
    leaves: Vec<Hash>,
    /// The first line's record number (1, or where a new segment continues the numbering);
    /// `None` when the log is empty or its first line is not a record.
    first_seq: Option<u64>,
}

/// Why a checkpoint or a proof does not hold for the log, or cannot be made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TreeError {
    /// The record asked for is not in the log (or not in the tree of the size asked).
    NoRecord {
        /// The record's number.
        record: u64,
        /// The tree's size.
        size: u64,
    },
    /// A size larger than the log's.
    Beyond {
        /// The size asked for or named.
        size: u64,
        /// The records the log holds.
        records: u64,
    },
    /// The checkpoint or proof names another log.
    Origin {
        /// The origin it names.
        named: String,
        /// This log's.
        this: String,
    },
    /// The log's first `size` records no longer hash to the checkpoint's root.
    Root {
        /// The checkpoint's size.
        size: u64,
    },
    /// The proof's leaf is not where the log has that record.
    Leaf {
        /// The record named.
        record: u64,
        /// The leaf named.
        leaf: u64,
    },
    /// A proof that does not hold, or cannot be made.
    Proof(ProofError),
}

impl fmt::Display for TreeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TreeError::NoRecord { record, size } => {
                write!(
                    f,
                    "record {record} is not among the log's first {size} records"
                )
            }
            TreeError::Beyond { size, records } => write!(
                f,
                "the tree of {size} records is larger than the log, which holds {records}: records were cut, or the size is wrong"
            ),
            TreeError::Origin { named, this } => {
                write!(f, "it is for the log `{named}`, not this one (`{this}`)")
            }
            TreeError::Root { size } => write!(
                f,
                "the log's first {size} records no longer hash to the checkpoint's root: a record among them was changed, removed, added or moved since it was taken"
            ),
            TreeError::Leaf { record, leaf } => write!(
                f,
                "the proof puts record {record} at leaf {leaf}, which is not where the log has it"
            ),
            TreeError::Proof(error) => write!(f, "{error}"),
        }
    }
}

impl From<ProofError> for TreeError {
    fn from(error: ProofError) -> TreeError {
        TreeError::Proof(error)
    }
}

impl LogTree {
    /// The tree of the log at `path` (a missing file is an empty log), named `origin`. The
    /// file is read a line at a time: only the leaf hashes are kept.
    pub fn read(path: &Path, origin: String) -> Result<LogTree, AuditError> {
        let io = |source| AuditError::Io {
            path: path.display().to_string(),
            source,
        };
        match std::fs::File::open(path) {
            // A device or a pipe where the log should be (/dev/zero) would never end.
            Ok(file) if !file.metadata().map_err(io)?.is_file() => {
                Err(io(std::io::Error::other("it is not a regular file")))
            }
            Ok(file) => LogTree::of_reader(BufReader::new(file), origin).map_err(io),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                LogTree::of_reader(&[][..], origin).map_err(io)
            }
            Err(source) => Err(io(source)),
        }
    }

    /// The tree of a log read from `reader`.
    pub fn of_reader(mut reader: impl BufRead, origin: String) -> std::io::Result<LogTree> {
        let mut leaves = Vec::new();
        let mut first_seq = None;
        let mut line = Vec::new();
        loop {
            line.clear();
            reader.read_until(b'\n', &mut line)?;
            // What follows the last newline is not a record (nothing when the log ends whole).
            let Some(record) = line.strip_suffix(b"\n") else {
                break;
            };
            if leaves.is_empty() {
                first_seq = serde_json::from_slice::<Record>(record).ok().map(|r| r.seq);
            }
            leaves.push(record_leaf(record));
        }
        Ok(LogTree {
            origin,
            leaves,
            first_seq,
        })
    }

    /// How many records (complete lines) the log holds.
    pub fn size(&self) -> u64 {
        self.leaves.len() as u64
    }

    /// The origin naming this log.
    pub fn origin(&self) -> &str {
        &self.origin
    }

    /// Every record's leaf hash, in the order of the file's lines.
    pub fn leaves(&self) -> &[Hash] {
        &self.leaves
    }

    /// The first line's record number, when it is a record.
    pub fn first_seq(&self) -> Option<u64> {
        self.first_seq
    }

    fn prefix(&self, size: u64) -> Result<&[Hash], TreeError> {
        self.leaves.get(..size as usize).ok_or(TreeError::Beyond {
            size,
            records: self.size(),
        })
    }

    /// The leaf index of record `record` in the tree of `size` records.
    fn leaf_of(&self, record: u64, size: u64) -> Result<u64, TreeError> {
        let missing = TreeError::NoRecord { record, size };
        let first = self.first_seq.ok_or(missing.clone())?;
        let leaf = record.checked_sub(first).ok_or(missing.clone())?;
        if leaf >= size {
            return Err(missing);
        }
        Ok(leaf)
    }

    /// The checkpoint of the log's first `size` records (all of them when `None`).
    pub fn checkpoint(&self, size: Option<u64>) -> Result<Checkpoint, TreeError> {
        let size = size.unwrap_or(self.size());
        Ok(Checkpoint {
            origin: self.origin.clone(),
            size,
            root: merkle::root(self.prefix(size)?),
        })
    }

    /// The inclusion proof of record `record` in the tree of `size` records (all of them
    /// when `None`).
    pub fn prove(&self, record: u64, size: Option<u64>) -> Result<Proof, TreeError> {
        let size = size.unwrap_or(self.size());
        let leaves = self.prefix(size)?;
        let leaf = self.leaf_of(record, size)?;
        Ok(Proof::Inclusion {
            origin: self.origin.clone(),
            record,
            leaf,
            size,
            path: merkle::inclusion_proof(leaves, leaf)?,
        })
    }

    /// The consistency proof between the trees of `old` and `new` records.
    pub fn consistency(&self, old: u64, new: u64) -> Result<Proof, TreeError> {
        let leaves = self.prefix(new)?;
        Ok(Proof::Consistency {
            origin: self.origin.clone(),
            old,
            new,
            path: merkle::consistency_proof(leaves, old)?,
        })
    }

    fn same_origin(&self, named: &str) -> Result<(), TreeError> {
        if named == self.origin {
            Ok(())
        } else {
            Err(TreeError::Origin {
                named: named.to_string(),
                this: self.origin.clone(),
            })
        }
    }

    /// Whether the log's first `checkpoint.size` records still hash to its root: the check
    /// that finds any change to them, whatever was done to the chain.
    pub fn check_checkpoint(&self, checkpoint: &Checkpoint) -> Result<(), TreeError> {
        self.same_origin(&checkpoint.origin)?;
        if merkle::root(self.prefix(checkpoint.size)?) == checkpoint.root {
            Ok(())
        } else {
            Err(TreeError::Root {
                size: checkpoint.size,
            })
        }
    }

    /// Whether `proof` holds for the roots the `checkpoints` name: an inclusion proof shows
    /// the record as the log has it now in the checkpoint of the proof's size; a consistency
    /// proof joins the two sizes' roots, each taken from a checkpoint of that size when one is
    /// given, else recomputed from the log (so one checkpoint and the log check a log's
    /// growth since it). Returns what was shown, as a sentence.
    pub fn check_proof(
        &self,
        proof: &Proof,
        checkpoints: &[Checkpoint],
    ) -> Result<String, TreeError> {
        for checkpoint in checkpoints {
            self.same_origin(&checkpoint.origin)?;
        }
        let root_at = |size: u64| -> Result<(Hash, &'static str), TreeError> {
            match checkpoints.iter().find(|c| c.size == size) {
                Some(checkpoint) => Ok((checkpoint.root, "the checkpoint")),
                None => Ok((merkle::root(self.prefix(size)?), "the log")),
            }
        };
        match proof {
            Proof::Inclusion {
                origin,
                record,
                leaf,
                size,
                path,
            } => {
                self.same_origin(origin)?;
                if self.leaf_of(*record, *size)? != *leaf {
                    return Err(TreeError::Leaf {
                        record: *record,
                        leaf: *leaf,
                    });
                }
                let line = self.prefix(*size)?.get(*leaf as usize).copied();
                let line = line.ok_or(TreeError::NoRecord {
                    record: *record,
                    size: *size,
                })?;
                let (root, from) = root_at(*size)?;
                merkle::verify_inclusion(*leaf, *size, &line, path, &root)?;
                Ok(format!(
                    "record {record}, as the log holds it, is leaf {leaf} of the tree of {size} records whose root {from} gives"
                ))
            }
            Proof::Consistency {
                origin,
                old,
                new,
                path,
            } => {
                self.same_origin(origin)?;
                let (old_root, old_from) = root_at(*old)?;
                let (new_root, new_from) = root_at(*new)?;
                merkle::verify_consistency(*old, *new, &old_root, &new_root, path)?;
                Ok(format!(
                    "the tree of {old} records (root from {old_from}) is a prefix of the tree of {new} (root from {new_from})"
                ))
            }
        }
    }
}
