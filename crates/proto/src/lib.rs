//! boxmaker's wire types: what an agent's tool call is, what can come back, and the frames that
//! carry them over a Unix socket.
//!
//! [`text::escape_terminal`] makes text from outside safe to print on a terminal.
//!
//! [`tools`] is one description per tool: each built-in tool's schema, argument roles,
//! side-effect class, default labels, time limit, MCP hints and search words, in a table the
//! compiler checks, and the same facts for a downstream server's tool.
//!
//! Every crate names these types; none of them does I/O beyond the frame codec, which reads and
//! writes any `std::io::Read`/`Write` the caller hands it, and [`rendezvous`], the record of
//! the folder a running broker serves.
//!
//! Conventions (the design brief's "Wire"): enums are internally tagged with `"type"` in
//! snake_case, a [`Timestamp`] is written as RFC 3339 UTC with milliseconds, and a frame is a
//! 4-byte big-endian length followed by a JSON body of at most [`MAX_FRAME`] bytes.

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod agent_event;
mod call;
pub mod dirs;
mod frame;
pub mod ids;
mod owner;
pub mod rendezvous;
mod schema;
pub mod text;
mod timestamp;
pub mod tools;

pub use agent_event::{AgentEvent, AgentRole, VerifyOutcome};
pub use call::{Class, DenyReason, ToolRequest, ToolResponse};
pub use frame::{
    AgentFrame, BrokerFrame, ErrorCode, FrameError, MAX_FRAME, PROTOCOL_VERSION, Resume,
    decode_frame, encode_frame, read_frame, write_frame,
};
pub use ids::{ApprovalId, CallId, GrantId, SessionId};
pub use owner::{
    AUDIT_LINES_BYTES, AskWhy, AskedValue, AuditBreak, DownstreamTool, DownstreamView, MemoryEntry,
    OwnerErrorCode, OwnerEvent, OwnerReply, OwnerRequest, PendingKind, PendingView, Resolution,
    StatusView,
};
pub use schema::ToolSchema;
pub use timestamp::{Timestamp, TimestampError};
