//! The ledger crate's integration tests, one binary (modules per area).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod audit;
mod engines;
mod pg_ledger;
mod seal;
mod store;
mod tamper;
