//! loopd, boxmaker's agent loop: it runs a conversation's turns against an OpenAI-compatible
//! model server and sends every tool call through a [`tools::ToolPort`]. It runs no tool
//! itself: the model sees a fixed `tools` array (`clock`, `find_tool`, `call_tool`), loopd
//! answers those three, and everything else goes to the port, whose far side decides.
//!
//! Modules: [`llama`] (the model client), [`tools`] (registry, dispatch, port) and [`broker`]
//! (the port over brokerd's agent socket), both re-exported from the `toolport` crate at the
//! paths the seeds pin, [`turn`] (the turn loop), [`session`] (conversations on disk), [`script`] (scripted models), [`chat`]
//! (the `loopd chat` command).

pub mod broker;
pub mod chat;
pub mod llama;
pub mod script;
pub mod session;
pub mod tools;
pub mod turn;
