//! The sandbox crate's integration tests, one binary: containment of a command's processes and
//! the hardening of what it may do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod contain;
mod escape;
mod harden;
mod launcher;
mod net;
mod non_root;
mod pool;
mod warm;
