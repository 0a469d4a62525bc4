//! What travels between a broker (or `bx`) and a witness: one JSON object a line, over
//! whatever stream the caller opened (a unix socket for `[audit] witness = "unix:PATH"`).
//!
//! The submitter asks for the last checkpoint the witness cosigned for its log
//! (`{"latest":{"origin":…}}`, answered `{"latest":{"size":N,"root":…}}`, size 0 for none),
//! then sends its checkpoint with the consistency proof from that size and the leaf hashes of
//! the records after it (`{"submit":{"checkpoint":…,"proof":…,"leaves":…}}`), answered
//! `{"cosigned":{"note":…}}` or `{"refused":{"why":…}}`.

use std::io::{BufRead, Write};
use std::path::{Path, PathBuf};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde::{Deserialize, Serialize};

use super::checkpoint::{Checkpoint, Proof, encode_hash};
use super::merkle::Hash;
use super::tree::LogTree;
use super::witness::{WitnessDir, private_dir, write_new};

/// The longest line either side reads: a first submission of a large log sends every leaf
/// hash (44 bytes of base64 for 32 bytes); 64 MiB is over a million records at once.
pub const MAX_LINE: u64 = 64 << 20;

/// A request to the witness.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Request {
    /// The last checkpoint cosigned for a log.
    Latest {
        /// The log's origin.
        origin: String,
    },
    /// A checkpoint to cosign.
    Submit {
        /// Its text.
        checkpoint: String,
        /// The consistency proof's text from the last cosigned size (none for the first).
        proof: Option<String>,
        /// The leaf hashes of the records after the last cosigned size, concatenated, base64.
        leaves: String,
    },
}

/// The witness's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Reply {
    /// The last checkpoint cosigned for the log asked about.
    Latest {
        /// Its size (0: none).
        size: u64,
        /// Its root, base64 (empty for none).
        root: String,
    },
    /// The checkpoint, cosigned.
    Cosigned {
        /// The cosigned text.
        note: String,
    },
    /// Not cosigned.
    Refused {
        /// Why, as a sentence.
        why: String,
    },
}

/// Why an exchange with the witness did not end in a cosignature.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WitnessError {
    /// The stream failed or the answer could not be read.
    #[error("the witness could not be reached or did not answer: {0}")]
    Unreachable(String),
    /// The witness refused.
    #[error("the witness refused the checkpoint: {0}")]
    Refused(String),
    /// The answer is not about the checkpoint sent.
    #[error("the witness's answer does not hold: {0}")]
    Answer(String),
}

fn send(stream: &mut impl Write, request: &Request) -> Result<(), WitnessError> {
    let mut line =
        serde_json::to_vec(request).map_err(|e| WitnessError::Unreachable(e.to_string()))?;
    line.push(b'\n');
    stream
        .write_all(&line)
        .and_then(|()| stream.flush())
        .map_err(|e| WitnessError::Unreachable(e.to_string()))
}

/// Reads one line of at most [`MAX_LINE`] bytes; `None` at the end of the stream.
pub fn read_line(reader: &mut impl BufRead) -> std::io::Result<Option<Vec<u8>>> {
    use std::io::Read;
    let mut line = Vec::new();
    reader.take(MAX_LINE).read_until(b'\n', &mut line)?;
    if line.is_empty() {
        return Ok(None);
    }
    if line.pop() != Some(b'\n') {
        return Err(std::io::Error::other(
            "a line longer than the limit, or cut short",
        ));
    }
    Ok(Some(line))
}

fn receive(stream: &mut impl BufRead) -> Result<Reply, WitnessError> {
    let line = read_line(stream)
        .map_err(|e| WitnessError::Unreachable(e.to_string()))?
        .ok_or_else(|| WitnessError::Unreachable("it closed the connection".to_string()))?;
    serde_json::from_slice(&line).map_err(|e| WitnessError::Unreachable(e.to_string()))
}

/// Sends the checkpoint of the whole log `tree` to the witness that `writer` reaches and
/// `reader` hears (two halves of one stream), and returns the checkpoint and its cosigned text: only when its checkpoint is the one sent, for this log
/// (a witness answering for another log, or for another size, is not believed).
pub fn exchange(
    reader: &mut impl BufRead,
    writer: &mut impl Write,
    tree: &LogTree,
) -> Result<(Checkpoint, String), WitnessError> {
    let answer = |e: super::tree::TreeError| WitnessError::Answer(e.to_string());
    let checkpoint = tree.checkpoint(None).map_err(answer)?;
    send(
        writer,
        &Request::Latest {
            origin: checkpoint.origin.clone(),
        },
    )?;
    let old = match receive(reader)? {
        Reply::Latest { size, .. } => size,
        Reply::Refused { why } => return Err(WitnessError::Refused(why)),
        other => return Err(WitnessError::Answer(format!("unexpected answer {other:?}"))),
    };
    // A log shorter than what the witness cosigned is sent as it is: the witness says why it
    // refuses (an old checkpoint presented as current, records deleted).
    let old = old.min(tree.size());
    let proof = if old > 0 && old < tree.size() {
        Some(
            tree.consistency(old, tree.size())
                .map_err(answer)?
                .to_string(),
        )
    } else {
        None
    };
    let leaves: Vec<u8> = tree.leaves()[old as usize..]
        .iter()
        .flatten()
        .copied()
        .collect();
    send(
        writer,
        &Request::Submit {
            checkpoint: checkpoint.to_string(),
            proof,
            leaves: STANDARD.encode(leaves),
        },
    )?;
    match receive(reader)? {
        Reply::Cosigned { note } => {
            let body = note.split_once("\n\n").map(|(body, _)| format!("{body}\n"));
            if body.as_deref() != Some(checkpoint.to_string().as_str()) {
                return Err(WitnessError::Answer(format!(
                    "it cosigned another checkpoint than the one sent (another log, or another size): {}",
                    note.lines().next().unwrap_or_default()
                )));
            }
            Ok((checkpoint, note))
        }
        Reply::Refused { why } => Err(WitnessError::Refused(why)),
        other => Err(WitnessError::Answer(format!("unexpected answer {other:?}"))),
    }
}

/// The witness's answer to one request, made at `time` (Unix seconds).
pub fn answer(witness: &WitnessDir, request: &Request, time: u64) -> Reply {
    let refused = |why: String| Reply::Refused { why };
    match request {
        Request::Latest { origin } => match witness.latest(origin) {
            Ok(Some(last)) => Reply::Latest {
                size: last.size,
                root: encode_hash(&last.root),
            },
            Ok(None) => Reply::Latest {
                size: 0,
                root: String::new(),
            },
            Err(why) => refused(why),
        },
        Request::Submit {
            checkpoint,
            proof,
            leaves,
        } => {
            let checkpoint = match Checkpoint::parse(checkpoint) {
                Ok(checkpoint) => checkpoint,
                Err(e) => return refused(format!("not a checkpoint: {e}")),
            };
            let proof = match proof.as_deref().map(Proof::parse).transpose() {
                Ok(proof) => proof,
                Err(e) => return refused(format!("not a consistency proof: {e}")),
            };
            let Some(leaves) = STANDARD
                .decode(leaves)
                .ok()
                .filter(|bytes| bytes.len() % 32 == 0)
            else {
                return refused("the leaves are not 32-byte hashes in base64".to_string());
            };
            let leaves: Vec<Hash> = leaves
                .chunks_exact(32)
                .filter_map(|chunk| chunk.try_into().ok())
                .collect();
            match witness.submit(&checkpoint, proof.as_ref(), &leaves, time) {
                Ok(note) => Reply::Cosigned { note },
                Err(why) => refused(why),
            }
        }
    }
}

/// Keeps a witness's cosigned `note` of `checkpoint` where the broker and `bx audit cosign`
/// keep them: `witness/SIZE` in the state folder `state` (0600 in a 0700 folder, synced).
/// Returns its path.
pub fn keep_cosigned(state: &Path, checkpoint: &Checkpoint, note: &str) -> Result<PathBuf, String> {
    let dir = state.join("witness");
    private_dir(&dir)?;
    let path = dir.join(checkpoint.size.to_string());
    write_new(&path, note.as_bytes())?;
    Ok(path)
}
