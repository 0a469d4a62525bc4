//! The schemas a client knows by heart: the core tools (sent in every request), with the exact
//! texts of seed M2b/03, and the four tools the broker decides on, with those of seed M3a/16:
//! the seed's fixture, which must never change under an existing session, kept with every
//! other tool's facts in `proto::tools::schemas` (a client runs no tool and reads only
//! `proto`).

use proto::ToolSchema;
use serde_json::json;

/// The name of the core tool that searches the registry.
pub const FIND_TOOL: &str = "find_tool";
/// The name of the core tool that calls a tool found with `find_tool`.
pub const CALL_TOOL: &str = "call_tool";
/// The name of the core tool the client answers itself with the current time.
pub const CLOCK: &str = "clock";

pub use proto::tools::schemas::{
    http_fetch_schema, read_file_schema, shell_schema, write_file_schema,
};

/// `clock`: the current time, answered by the client itself.
pub fn clock_schema() -> ToolSchema {
    ToolSchema {
        name: CLOCK.to_string(),
        description: "The current date and time, as RFC 3339 in UTC.".to_string(),
        parameters: json!({ "type": "object", "properties": {} }),
    }
}

/// `echo`: the test tool that `FakeTools` answers with its argument.
pub fn echo_schema() -> ToolSchema {
    ToolSchema {
        name: "echo".to_string(),
        description: "Returns its text argument unchanged.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "text": { "type": "string", "description": "The text to return." }
            },
            "required": ["text"]
        }),
    }
}

/// `find_tool`: the model's way to discover tools that are not in the array.
pub fn find_tool_schema() -> ToolSchema {
    ToolSchema {
        name: FIND_TOOL.to_string(),
        description:
            "Search for more tools by keyword. Returns the schemas of the tools that match."
                .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    "description": "Keywords to look for in tool names and descriptions."
                }
            },
            "required": ["query"]
        }),
    }
}

/// `call_tool`: the model's way to call a tool that `find_tool` returned.
pub fn call_tool_schema() -> ToolSchema {
    ToolSchema {
        name: CALL_TOOL.to_string(),
        description:
            "Call a tool that find_tool returned. Pass its name and an arguments object that fits its schema."
                .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": "The name of the tool, as find_tool returned it."
                },
                "arguments": {
                    "type": "object",
                    "description": "The arguments for the tool, fitting its parameters."
                }
            },
            "required": ["name", "arguments"]
        }),
    }
}
