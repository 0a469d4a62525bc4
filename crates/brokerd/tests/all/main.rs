//! brokerd's integration tests, one binary: the `consult` client against a scripted server,
//! the one place that opens a decided folder, and the daemon end to end.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod consult;
mod daemon;
mod files;
mod parity;
