//! The schemas loopd knows by heart: the core tools (sent in every request) and the four tools
//! the broker decides on, with the exact texts of seeds M2b/03 and M3a/16.
//!
//! The four broker tools' schemas are also written in the `tools` crate, on purpose: loopd runs
//! no tool and does not depend on the tool implementations, and these are the seed's fixture,
//! which must never change under an existing session. `crates/tools/tests/schemas.rs` checks that
//! both copies stay byte for byte equal.

use serde_json::json;

use crate::llama::ToolSchema;

/// `clock`: the current time, answered by loopd itself.
pub fn clock_schema() -> ToolSchema {
    ToolSchema {
        name: "clock".to_string(),
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
        name: super::FIND_TOOL.to_string(),
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
        name: super::CALL_TOOL.to_string(),
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

/// `read_file`, decided by the broker.
pub fn read_file_schema() -> ToolSchema {
    ToolSchema {
        name: "read_file".to_string(),
        description: "Read a text file. Needs a grant from the owner for the path.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the file." }
            },
            "required": ["path"]
        }),
    }
}

/// `write_file`, decided by the broker.
pub fn write_file_schema() -> ToolSchema {
    ToolSchema {
        name: "write_file".to_string(),
        description: "Write a text file, replacing it. Needs a grant from the owner for the path."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the file." },
                "content": { "type": "string", "description": "The whole new content of the file." }
            },
            "required": ["path", "content"]
        }),
    }
}

/// `shell`, decided by the broker.
pub fn shell_schema() -> ToolSchema {
    ToolSchema {
        name: "shell".to_string(),
        description: "Run a shell command in a sandbox. Needs a grant from the owner.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "command": { "type": "string", "description": "The command line to run." },
                "cwd": { "type": "string", "description": "The absolute path of the directory to run it in." }
            },
            "required": ["command"]
        }),
    }
}

/// `http_fetch`, decided by the broker.
pub fn http_fetch_schema() -> ToolSchema {
    ToolSchema {
        name: "http_fetch".to_string(),
        description: "Fetch an https URL. Needs a grant from the owner for the host.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "url": { "type": "string", "description": "The URL. It must start with https://." }
            },
            "required": ["url"]
        }),
    }
}
