//! toolport, the client side of boxmaker's agent socket: what a program needs to offer the
//! broker's tools to a model or an MCP client, and nothing of the model itself. `loopd` (the
//! agent loop) and `mcp` (the MCP server) both use it; neither depends on the other.
//!
//! - [`ToolPort`]: the seam every tool call goes through, with [`Pending`] for a call waiting
//!   for the owner; [`BrokerPort`] is the port over `brokerd`'s agent socket, [`FakeTools`]
//!   the in-process stand-in of the tests and the demo.
//! - [`Registry`]: the tools that exist, in a fixed order, the core ones sent in every
//!   `tools` array, the others found with `find_tool` (a substring search, then a BM25 rank).
//! - [`dispatch`]: whether a call is answered here (`clock`, `find_tool`, `call_tool`'s own
//!   errors) or handed to the port, whose far side decides.
//! - The core schemas with the seeds' exact texts, [`cap_result`] and [`denial_text`].
//!
//! The seeds pin these names at `loopd::tools` (and the port at `loopd::broker`): loopd
//! re-exports them there unchanged. This crate never parses or checks a tool's arguments,
//! runs no tool and talks to no model.

mod broker;
mod dispatch;
mod fake;
mod port;
mod rank;
mod registry;
mod schemas;

pub use broker::{BrokerPort, PortError, RECONNECT_FOR, resume_of};
pub use dispatch::{Dispatch, FIND_LIMIT, cap_result, denial_text, dispatch};
pub use fake::FakeTools;
pub use port::{Pending, ToolPort};
pub use registry::{Entry, Registry};
pub use schemas::{
    CALL_TOOL, CLOCK, FIND_TOOL, call_tool_schema, clock_schema, echo_schema, find_tool_schema,
    http_fetch_schema, read_file_schema, shell_schema, write_file_schema,
};
