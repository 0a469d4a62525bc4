//! The description of a tool that a model reads.

use serde::{Deserialize, Serialize};

/// A tool as a model sees it: a name, what it is for, and a JSON Schema of its arguments.
///
/// It is written into a session's baseline file, so it is boxmaker's own format: unknown
/// fields are errors. On the OpenAI-compatible wire it is wrapped as
/// `{"type":"function","function":<this>}` by `loopd::llama`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSchema {
    /// The tool's name, as the model calls it.
    pub name: String,
    /// One or two sentences on what the tool is for.
    pub description: String,
    /// A JSON Schema object describing the arguments.
    pub parameters: serde_json::Value,
}
