//! boxmaker's tools as a library: each tool is an args struct (serde, unknown fields refused), a
//! hand-written JSON Schema, and a function from args and options to a typed result or a typed
//! error. Nothing here decides policy or knows about sessions: the broker does both, and hands
//! each tool only what it already decided (paths resolved and checked, hosts allowed).

pub mod clean;
pub mod fs;
pub mod git;
pub mod jobs;
pub mod search;
pub mod shell;
pub mod web;
