//! The tools' integration tests, one binary: the file tools, the git tools, the seed-pinned
//! schemas, and `shell` (the network tools' are `nettools`').
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod edit;
mod fs;
mod git;
mod index;
mod jobs;
mod schemas;
mod search;
mod shell;
