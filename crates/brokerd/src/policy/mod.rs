//! Deciding a call: which grant covers it and what the decision is.

pub mod shell;
