//! The policy crate's integration tests, one binary: argument parsing, grant files, `decide`,
//! and shell coverage (dialects, git, write targets).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod args;
mod decide;
mod grants;
mod shell_coverage;
mod shell_dialects;
mod shell_git;
mod shell_writes;
