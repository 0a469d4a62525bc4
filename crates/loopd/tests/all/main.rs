//! loopd's integration tests, as one test binary (one link on two cores instead of one per
//! file): each module is what was a file of its own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod broker;
mod broker_approvals;
mod broker_idle;
mod chat;
mod cli;
mod delegate;
mod flags;
mod hostile_memory;
mod hostile_output;
mod hostile_protocol;
mod real_model;
mod session;
mod support;
mod tools;
mod turn;
mod unreadable_output;
mod verify;

/// Not a test of its own: the process `support::raw::run_loopd` starts again to run loopd as
/// its only child and measure its peak memory (a no-op when run as part of the suite).
#[test]
fn a_measured_loopd_runs_as_the_only_child_of_a_small_process() {
    support::raw::measure_if_asked();
}
