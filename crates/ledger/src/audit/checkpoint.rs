//! The texts of the tree that leave the machine: a checkpoint (which log, how many records,
//! what root) and the two proofs. Each is plain text a person can read, one fact a line,
//! hashes in standard base64 with padding (as in C2SP's tlog-checkpoint, whose body a
//! checkpoint's is: a signature block can follow it later, after an empty line).
//!
//! A checkpoint:
//!
//! ```text
//! boxmaker audit 5f0c3e1a9b7d2c4e6f8a0b1c2d3e4f50
//! 12
//! 3q2+7wAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=
//! ```
//!
//! An inclusion proof (`record` is the record's number, `leaf` its index in the tree, from 0)
//! and a consistency proof, each followed by its hashes, one a line:
//!
//! ```text
//! boxmaker audit inclusion proof      boxmaker audit consistency proof
//! boxmaker audit 5f0c3e1a…            boxmaker audit 5f0c3e1a…
//! record 5                            old 5
//! leaf 4                              new 12
//! size 12                             <hash>
//! <hash>                              ...
//! ```

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use super::merkle::Hash;

/// What a checkpoint's first line starts with: the origin names the log.
pub const ORIGIN_PREFIX: &str = "boxmaker audit ";

const INCLUSION_HEADER: &str = "boxmaker audit inclusion proof";
const CONSISTENCY_HEADER: &str = "boxmaker audit consistency proof";

/// A log's size and root at one moment, for one log (its origin).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Which log: `boxmaker audit ` and the log's id (`tree::log_id`, from its first record).
    pub origin: String,
    /// How many records the tree covers (the log's first `size` records).
    pub size: u64,
    /// The tree's root over them.
    pub root: Hash,
}

/// A proof, as `bx audit prove` and `bx audit consistency` print it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proof {
    /// That one record is in the tree of a given size.
    Inclusion {
        /// Which log.
        origin: String,
        /// The record's number.
        record: u64,
        /// Its leaf's index in the tree, from 0.
        leaf: u64,
        /// The tree's size.
        size: u64,
        /// The hashes, from the leaf's sibling up.
        path: Vec<Hash>,
    },
    /// That the tree of `old` records is a prefix of the tree of `new`.
    Consistency {
        /// Which log.
        origin: String,
        /// The older size.
        old: u64,
        /// The newer size.
        new: u64,
        /// The hashes (RFC 9162 2.1.4.1).
        path: Vec<Hash>,
    },
}

/// A text that is not a checkpoint or a proof: the line and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TextError {
    /// The line, from 1.
    pub line: usize,
    /// What is wrong, as a sentence.
    pub what: String,
}

impl fmt::Display for TextError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

/// A hash as the texts write it.
pub fn encode_hash(hash: &Hash) -> String {
    STANDARD.encode(hash)
}

/// A hash as the texts write it, read back.
pub fn decode_hash(text: &str) -> Option<Hash> {
    STANDARD.decode(text.trim()).ok()?.try_into().ok()
}

impl fmt::Display for Checkpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "{}", self.origin)?;
        writeln!(f, "{}", self.size)?;
        writeln!(f, "{}", encode_hash(&self.root))
    }
}

impl fmt::Display for Proof {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let path = match self {
            Proof::Inclusion {
                origin,
                record,
                leaf,
                size,
                path,
            } => {
                writeln!(f, "{INCLUSION_HEADER}\n{origin}")?;
                writeln!(f, "record {record}\nleaf {leaf}\nsize {size}")?;
                path
            }
            Proof::Consistency {
                origin,
                old,
                new,
                path,
            } => {
                writeln!(f, "{CONSISTENCY_HEADER}\n{origin}")?;
                writeln!(f, "old {old}\nnew {new}")?;
                path
            }
        };
        for hash in path {
            writeln!(f, "{}", encode_hash(hash))?;
        }
        Ok(())
    }
}

/// The lines of a text, numbered from 1, with one empty line allowed at the end.
struct Lines<'a> {
    lines: Vec<&'a str>,
    at: usize,
}

impl<'a> Lines<'a> {
    fn of(text: &'a str) -> Lines<'a> {
        Lines {
            lines: text
                .strip_suffix('\n')
                .unwrap_or(text)
                .split('\n')
                .collect(),
            at: 0,
        }
    }

    fn error(&self, what: impl Into<String>) -> TextError {
        TextError {
            line: self.at.max(1),
            what: what.into(),
        }
    }

    fn next(&mut self, what: &str) -> Result<&'a str, TextError> {
        let line = self.lines.get(self.at).copied();
        self.at += 1;
        line.ok_or_else(|| self.error(format!("the text ends where {what} should be")))
    }

    fn origin(&mut self) -> Result<String, TextError> {
        let origin = self.next("the origin (the log's name)")?;
        if !origin.starts_with(ORIGIN_PREFIX) {
            return Err(self.error(format!(
                "the origin must start with `{ORIGIN_PREFIX}` (it names the log)"
            )));
        }
        Ok(origin.to_string())
    }

    fn number(&mut self, key: Option<&str>) -> Result<u64, TextError> {
        let name = key.unwrap_or("the size");
        let line = self.next(name)?;
        let value = match key {
            Some(key) => line
                .strip_prefix(key)
                .and_then(|rest| rest.strip_prefix(' ')),
            None => Some(line),
        };
        value
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|v| v.to_string().len() == value.map_or(0, str::len))
            .ok_or_else(|| {
                self.error(match key {
                    Some(key) => format!("expected `{key} N`, a whole number"),
                    None => "expected the size, a whole number".to_string(),
                })
            })
    }

    fn hash(&mut self, what: &str) -> Result<Hash, TextError> {
        let line = self.next(what)?;
        decode_hash(line)
            .ok_or_else(|| self.error(format!("{what} must be 32 bytes in base64 (44 characters)")))
    }

    fn rest_hashes(&mut self) -> Result<Vec<Hash>, TextError> {
        let mut path = Vec::new();
        while self.at < self.lines.len() {
            path.push(self.hash("a proof hash")?);
        }
        Ok(path)
    }
}

impl Checkpoint {
    /// Reads a checkpoint's text: origin, size and root, one a line. Anything after them
    /// (a signature block, say) is refused: nothing here checks signatures yet.
    pub fn parse(text: &str) -> Result<Checkpoint, TextError> {
        let mut lines = Lines::of(text);
        let origin = lines.origin()?;
        let size = lines.number(None)?;
        let root = lines.hash("the root")?;
        if lines.at < lines.lines.len() {
            lines.at += 1;
            return Err(lines.error(
                "the checkpoint has lines after its root (a signature?): this bx checks none",
            ));
        }
        Ok(Checkpoint { origin, size, root })
    }
}

impl Proof {
    /// Reads a proof's text, either kind (its first line says which).
    pub fn parse(text: &str) -> Result<Proof, TextError> {
        let mut lines = Lines::of(text);
        match lines.next("the proof's kind")? {
            INCLUSION_HEADER => {
                let origin = lines.origin()?;
                let record = lines.number(Some("record"))?;
                let leaf = lines.number(Some("leaf"))?;
                let size = lines.number(Some("size"))?;
                let path = lines.rest_hashes()?;
                Ok(Proof::Inclusion {
                    origin,
                    record,
                    leaf,
                    size,
                    path,
                })
            }
            CONSISTENCY_HEADER => {
                let origin = lines.origin()?;
                let old = lines.number(Some("old"))?;
                let new = lines.number(Some("new"))?;
                let path = lines.rest_hashes()?;
                Ok(Proof::Consistency {
                    origin,
                    old,
                    new,
                    path,
                })
            }
            _ => Err(lines.error(format!(
                "a proof starts with `{INCLUSION_HEADER}` or `{CONSISTENCY_HEADER}`"
            ))),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_reads_back_as_written() {
        let checkpoint = Checkpoint {
            origin: "boxmaker audit /tmp/s".to_string(),
            size: 12,
            root: [7; 32],
        };
        let text = checkpoint.to_string();
        assert_eq!(text.lines().count(), 3);
        assert_eq!(Checkpoint::parse(&text).unwrap(), checkpoint);
    }

    #[test]
    fn both_proofs_read_back_as_written() {
        for proof in [
            Proof::Inclusion {
                origin: "boxmaker audit /s".to_string(),
                record: 5,
                leaf: 4,
                size: 12,
                path: vec![[1; 32], [2; 32]],
            },
            Proof::Consistency {
                origin: "boxmaker audit /s".to_string(),
                old: 12,
                new: 12,
                path: vec![],
            },
        ] {
            assert_eq!(Proof::parse(&proof.to_string()).unwrap(), proof);
        }
    }

    #[test]
    fn a_bad_text_is_refused_naming_its_line() {
        let root = encode_hash(&[0; 32]);
        for (text, line) in [
            (format!("other log\n3\n{root}\n"), 1),
            (format!("boxmaker audit /s\n+3\n{root}\n"), 2),
            ("boxmaker audit /s\n3\nAAAA\n".to_string(), 3),
            ("boxmaker audit /s\n3\n".to_string(), 3),
            (format!("boxmaker audit /s\n3\n{root}\n\n— sig\n"), 4),
        ] {
            let error = Checkpoint::parse(&text).unwrap_err();
            assert_eq!(error.line, line, "{text:?}: {error}");
        }
        let error = Proof::parse("boxmaker audit inclusion proof\nboxmaker audit /s\nrecord x\n")
            .unwrap_err();
        assert_eq!(error.line, 3, "{error}");
    }
}
