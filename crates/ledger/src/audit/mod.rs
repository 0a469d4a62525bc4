//! The audit log: append-only JSON Lines, each record holding the SHA-256 of the line before it,
//! so that an edited, deleted, reordered or cut record is found by [`verify`].
//!
//! A record is written and fsynced before the answer it records leaves the broker. At open, a
//! torn last line (a crash in the middle of a write: no final newline) is cut and the cut is
//! recorded; any other break refuses to open, naming the record, unless the owner asks for a
//! new segment ([`AuditLog::open_new_segment`]), which keeps the broken file beside the new one
//! and records the break as the new file's first record.
//!
//! Beside the chain, a Merkle tree over the records (RFC 9162's hashing, [`merkle`]): a
//! [`Checkpoint`] names the log's size and root, and inclusion and consistency proofs are made
//! and checked from the log ([`LogTree`]), so a log rewritten after a checkpoint was taken
//! fails against it even when its whole chain was recomputed. A witness ([`witness`]) keeps
//! the checkpoints it cosigned and their records' leaf hashes outside the machine's reach,
//! so the first record rewritten after one is named ([`check_witnessed`]); [`gaps`] says what
//! each stop of the broker reads as.

mod checkpoint;
mod gaps;
mod log;
pub mod merkle;
pub mod seal;
mod seal_store;
mod tree;
mod verify;
pub mod witness;
pub mod witness_wire;
mod witnessed;

use serde::{Deserialize, Serialize};

use proto::{
    ApprovalId, AskWhy, AskedValue, CallId, Class, DenyReason, GrantId, Resolution, SessionId,
    Timestamp, ToolResponse,
};

pub use checkpoint::{Checkpoint, ORIGIN_PREFIX, Proof, TextError, decode_hash, encode_hash};
pub use gaps::gaps;
pub use log::{AuditLog, Opened};
pub use seal_store::{SEAL_DIR, SealStore, SealStoreError, seal_if_set_up};
pub use tree::{LogTree, TreeError, log_id, origin_of, record_leaf};
pub use verify::{Anchor, Broken, Summary, verify};
pub use witnessed::{Witnessed, check_witnessed, rfc3339};

/// The `prev` of a segment's first record.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// Fields longer than this many bytes are recorded as their SHA-256 and size ([`Field::of`]).
pub const INLINE_LIMIT: usize = 4096;

/// One line of the audit log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Record {
    /// The record's number, from 1, without gaps across segments.
    pub seq: u64,
    /// When it was written.
    pub at: Timestamp,
    /// The SHA-256 (hex) of the previous line's bytes, or [`GENESIS`] for the first record.
    pub prev: String,
    /// What happened.
    pub event: Event,
}

/// A value kept whole when short, or as its SHA-256 and size when long (file contents,
/// questions, answers).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Field {
    /// The value itself.
    Text {
        /// The text.
        text: String,
    },
    /// Only its digest.
    Digest {
        /// SHA-256, hex.
        sha256: String,
        /// Size in bytes.
        size: u64,
    },
}

impl Field {
    /// `text` whole when it is at most [`INLINE_LIMIT`] bytes, else its digest.
    pub fn of(text: &str) -> Field {
        if text.len() <= INLINE_LIMIT {
            Field::Text {
                text: text.to_string(),
            }
        } else {
            Field::Digest {
                sha256: sha256_hex(text.as_bytes()),
                size: text.len() as u64,
            }
        }
    }

    /// The text, when it was kept.
    pub fn text(&self) -> Option<&str> {
        match self {
            Field::Text { text } => Some(text),
            Field::Digest { .. } => None,
        }
    }
}

/// A session's two labels: the highest class it has received, and whether any of it was
/// untrusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Labels {
    /// The highest class received.
    pub taint: Class,
    /// Whether untrusted content was received.
    pub untrusted: bool,
}

/// How a call was answered, as recorded.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Answer {
    /// The tool ran; `text` is what the client received.
    Result {
        /// The rendered text.
        text: Field,
        /// Its label.
        class: Class,
        /// Whether it is marked untrusted.
        untrusted: bool,
        /// Whether a cap cut it.
        truncated: bool,
    },
    /// The tool failed; `message` is what the client received.
    Failed {
        /// The message.
        message: Field,
    },
    /// The call was refused.
    Denied {
        /// Why.
        reason: DenyReason,
    },
}

/// What a record says happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// A broker started writing to this log.
    Started {
        /// Its process id.
        pid: u32,
        /// Its version and build.
        version: String,
        /// How often it checkpoints the log (seals it, sends it to its witness), in seconds,
        /// when it does: the longest a record waits unprotected while it runs. Absent in
        /// records of brokers that neither seal nor have a witness.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        checkpoint_every_secs: Option<u64>,
    },
    /// A broker stopped writing to this log on purpose (a signal, its socket failing): the
    /// last record of its run before the stop's checkpoint. A run that ends without one
    /// ended in a crash or a kill.
    Stopped {
        /// Why (`SIGTERM`, `SIGINT`, the error that stopped it).
        reason: String,
    },
    /// At start, a torn last line (no final newline) was cut.
    Cut {
        /// Where the torn line started, in bytes.
        offset: u64,
        /// How many bytes were cut.
        bytes: u64,
        /// SHA-256 of the bytes cut.
        sha256: String,
    },
    /// A new segment, started by the owner after a break in the previous one.
    Segment {
        /// The file that holds the previous segment.
        previous_file: String,
        /// What was wrong with it.
        break_found: String,
        /// The hash of its last valid record (chaining across the break).
        previous_hash: String,
    },
    /// A session was opened.
    SessionOpened {
        /// The session.
        session: SessionId,
        /// SHA-256 of its resume token (what the ledger keeps, so it can be rebuilt).
        token_sha256: String,
    },
    /// A session was resumed by a client.
    SessionResumed {
        /// The session.
        session: SessionId,
    },
    /// A session ended.
    SessionEnded {
        /// The session.
        session: SessionId,
        /// Why (closed by its client, idle).
        reason: String,
    },
    /// A side-effecting call was decided; this is on disk before it runs.
    Decided {
        /// The session.
        session: SessionId,
        /// The call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// The arguments (canonical JSON), or their digest.
        arguments: Field,
        /// The grant that decided it.
        grant: Option<GrantId>,
    },
    /// A call's answer; on disk before the answer leaves the broker.
    Answered {
        /// The session.
        session: SessionId,
        /// The call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// The arguments (canonical JSON), or their digest.
        arguments: Field,
        /// The grant that decided it, when one did.
        grant: Option<GrantId>,
        /// The session's labels after this answer, when the answer set them (an answer that
        /// carries no outside bytes, or a session whose state is unreadable, leaves them).
        labels: Option<Labels>,
        /// The answer.
        answer: Answer,
        /// Why, for the owner (a denial's detail, a failure's cause, a result's walls as
        /// `sandbox: …`, which the model's header gives only as a token).
        detail: String,
    },
    /// A call waits for the owner: a grant asks, or the model asked a question (`ask`).
    ApprovalRequested {
        /// The approval's id.
        approval: ApprovalId,
        /// The session.
        session: SessionId,
        /// The call.
        call_id: CallId,
        /// The tool.
        tool: String,
        /// The arguments (canonical JSON), or their digest.
        arguments: Field,
        /// The grant that asks.
        grant: Option<GrantId>,
        /// Why it asks.
        why: AskWhy,
        /// The session's labels when it asked.
        labels: Labels,
        /// When it lapses unanswered.
        expires: Timestamp,
        /// When provenance asks: the values that made it ask (what approving it for the
        /// session covers, with its grant). Absent in records written before there were any.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        values: Vec<AskedValue>,
        /// When provenance asks: where each value came from, one sentence each, as the owner
        /// was shown it.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        provenance: Vec<String>,
    },
    /// A pending approval ended: the owner's answer, its expiry, or its abandonment.
    ApprovalResolved {
        /// The approval.
        approval: ApprovalId,
        /// The session.
        session: SessionId,
        /// The call.
        call_id: CallId,
        /// The grant that asked (approved for the session: every later call it asks about in
        /// this session runs unasked; for a provenance ask that named values, only the calls
        /// whose values that asks are all among the values of its request).
        grant: Option<GrantId>,
        /// How it ended.
        resolution: Resolution,
        /// Who answered when not the owner through `bx`: `client NAME`, an MCP client that
        /// `brokerd.toml` lets answer in its own interface. Absent: the owner (or expiry, or
        /// abandonment).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        channel: Option<String>,
    },
    /// A session saw a file's whole content as it now is (it read, wrote or edited it): what
    /// read before write compares a later write against.
    FileSeen {
        /// The session.
        session: SessionId,
        /// The file, resolved.
        path: String,
        /// The SHA-256 of its content.
        sha256: String,
    },
    /// The owner used the memory store through the owner socket (`bx memory list`, `show`,
    /// `forget`, `purge`, `export`).
    MemoryOwner {
        /// `list`, `show`, `forget`, `purge` or `export`.
        command: String,
        /// The entry named (`show`, `forget`).
        entry: Option<u64>,
        /// How many entries it returned, forgot or purged.
        entries: u64,
        /// What happened, for a person (`entry 3 forgotten`, `no entry 9`).
        outcome: String,
    },
    /// The owner's own words for a session (a message the owner typed, which `loopd` sends
    /// before the turn it starts): what the session's value index holds as the owner's.
    OwnerWords {
        /// The session.
        session: SessionId,
        /// The words (the broker records long ones in pieces, each kept whole).
        text: Field,
    },
    /// At start, a call found running (the broker stopped during it) is marked as such; its
    /// id answers that it may have taken effect.
    Interrupted {
        /// The session.
        session: SessionId,
        /// The call.
        call_id: CallId,
    },
}

impl Answer {
    /// The response a client receives for this answer; an answer kept only as a digest cannot
    /// be given again, and says so.
    pub fn response(&self) -> ToolResponse {
        match self {
            Answer::Result {
                text,
                class,
                untrusted,
                truncated,
            } => match text.text() {
                Some(content) => ToolResponse::Result {
                    content: content.to_string(),
                    class: *class,
                    untrusted: *untrusted,
                    truncated: *truncated,
                },
                None => ToolResponse::Failed {
                    message: ANSWER_LOST.to_string(),
                },
            },
            Answer::Failed { message } => ToolResponse::Failed {
                message: message.text().unwrap_or(ANSWER_LOST).to_string(),
            },
            Answer::Denied { reason } => ToolResponse::Denied { reason: *reason },
        }
    }
}

/// What a call id sent again gets when its answer was recorded only as a digest.
pub const ANSWER_LOST: &str = "it ran; its answer was lost";

/// What a call id gets when the broker stopped while the call was running.
pub const INTERRUPTED: &str =
    "the broker stopped while this call was running; it may have taken effect";

pub use proto::ids::sha256_hex;

/// Why the audit log cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum AuditError {
    /// Reading or writing the file failed.
    #[error("the audit log {path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The chain is broken somewhere other than a torn last line.
    #[error("the audit log {path} is broken: {broken}")]
    Broken {
        /// The file.
        path: String,
        /// Where and how.
        broken: Broken,
    },
    /// A record could not be encoded (it cannot happen for the types here; reported, not
    /// assumed).
    #[error("an audit record could not be encoded: {0}")]
    Encode(String),
}
