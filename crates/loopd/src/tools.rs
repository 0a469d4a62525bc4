//! Tools as loopd sees them (seeds M2b/03 and M3a/16): the seam every call goes through
//! ([`ToolPort`]), the registry of what exists, the calls loopd answers itself (`clock`,
//! `find_tool`, `call_tool`'s own errors), the result cap, and [`FakeTools`]. They live in the
//! `toolport` crate, which `mcp` uses too, and are re-exported here unchanged at the paths the
//! seeds pin; the turn loop's own sentences are loopd's.
//!
//! loopd runs no tool: [`dispatch`] either answers locally or hands the call to the port, whose
//! far side (the broker) decides. loopd never parses or checks a tool's arguments.

pub use toolport::{
    CALL_TOOL, CLOCK, Dispatch, Entry, FIND_LIMIT, FIND_TOOL, FakeTools, Pending, Registry,
    ToolPort, call_tool_schema, cap_result, clock_schema, denial_text, dispatch, echo_schema,
    find_tool_schema, http_fetch_schema, read_file_schema, shell_schema, write_file_schema,
};

/// The sentence for a repeated call: same name, same arguments, nothing else in between.
pub const ALREADY_CALLED: &str = "already called in this turn; the result is above";

/// The answer to a call that a stopped loopd left without a result and that is past the turn's
/// limit: it is not sent again.
pub const STOPPED_BEFORE_RUNNING: &str = "Not run: loopd stopped before running it.";

/// The answer to the one call kept past the turn's limit of `limit` tool calls, for all
/// `not_run` calls of its reply (itself and those after it, which are not kept).
pub fn over_limit_text(limit: usize, not_run: usize) -> String {
    format!(
        "Not run: this turn has reached its limit of {limit} tool calls, so {not_run} tool call(s) of this reply were not run (this one and all after it). Answer with what you have."
    )
}
