//! boxmaker's memory store: the entries behind `recall`, `memory` and `ask_memory`, in SQLite
//! (WAL) with an FTS5 index, each kept with the session that wrote it and that session's labels
//! at the time (class, untrusted), so nothing is laundered through it: a recall carries the
//! highest labels of the entries it returns.
//!
//! The store is reached only through the broker (its memory router); no tool and no box ever
//! opens it, and the memory folder is one of the protected folders.
//!
//! - [`Store::add`], [`Store::forget`] (soft: kept for the owner until [`Store::purge`]),
//!   [`Store::recall`] (FTS5's BM25 with a snippet; model-written syntax that FTS5 refuses
//!   falls back to a plain term search, see [`query`]), [`Store::list`], [`Store::show`],
//!   [`Store::page`] and [`Store::export`] (JSON Lines with labels).

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod migrations;
pub mod query;
mod store;

pub use query::{ReadAs, terms};
pub use store::{
    Forgot, Hit, MemoryError, NewEntry, OWNER_SESSION, Recall, Recalled, Scope, Store,
};
