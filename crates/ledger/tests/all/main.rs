//! The ledger crate's integration tests, one binary (modules per area).

mod audit;
mod store;
