//! boxmaker's durable state, for the broker and the owner's `bx`: the hash-chained audit log
//! ([`audit`]), the durable record of every answer, and the SQLite ledger ([`store`]) of
//! sessions, labels and calls, which the broker can rebuild forward from the log.
//!
//! Nothing here talks to a socket. The log is written first and fsynced; the ledger then
//! records the log's last sequence number and hash ([`store::Ledger::set_anchor`]), so at start
//! the log may be ahead of the ledger by whole records, never behind.

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod anchored;
pub mod approvals;
pub mod audit;
pub mod calls;
pub mod engine;
pub mod grant_uses;
pub mod handed;
pub mod migrations;
pub mod owner_words;
pub mod private;
pub mod reads;
mod replay;
pub mod store;

pub use anchored::verify_with_ledger;
pub use approvals::{ApprovalRow, ApprovalState};
pub use audit::{
    ANSWER_LOST, Anchor, Answer, AuditError, AuditLog, Broken, Checkpoint, Event, Field,
    INTERRUPTED, Labels, LogTree, Opened, Proof, Record, Summary, TreeError, sha256_hex, verify,
};
pub use store::{CallRow, CallState, Ledger, LedgerError, SessionRow};
