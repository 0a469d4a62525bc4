//! loopd, boxmaker's agent loop: it runs a conversation's turns against an OpenAI-compatible
//! model server and sends every tool call through a [`tools::ToolPort`]. It runs no tool
//! itself: the model sees a fixed `tools` array (`clock`, `find_tool`, `call_tool`), loopd
//! answers those three, and everything else goes to the port, whose far side decides.
//!
//! Modules: [`llama`] (the model client), [`tools`] (registry, dispatch, port) and [`broker`]
//! (the port over brokerd's agent socket), both re-exported from the `toolport` crate at the
//! paths the seeds pin, [`turn`] (the turn loop), [`session`] (conversations on disk), [`script`] (scripted models), [`chat`]
//! (the `loopd chat` command), [`criteria`] and [`verify`] (code mode: the owner's criteria and
//! the verify loop), [`delegate`] (the child sessions a `delegate` call opens, run as second
//! conversations).

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod broker;
pub mod chat;
pub mod criteria;
pub mod delegate;
pub mod llama;
pub mod script;
pub mod session;
pub mod tools;
pub mod turn;
pub mod verify;
