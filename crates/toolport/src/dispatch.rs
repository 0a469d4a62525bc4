//! [`dispatch`]: what happens to one tool call from the model (seed M2b/03's table, with
//! M3a/16's local `clock`), the result cap and the denial sentences.

use proto::{DenyReason, Timestamp};

use crate::registry::Registry;
use crate::schemas::{CALL_TOOL, CLOCK, FIND_TOOL};

/// At most this many tools are listed by one `find_tool` answer.
pub const FIND_LIMIT: usize = 10;

/// What the client does with one tool call from the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// The client answers it: this text is the tool result.
    Local(String),
    /// The port decides: this tool with these arguments (JSON text).
    Port {
        /// The tool the broker decides on.
        tool: String,
        /// Its arguments as JSON text.
        arguments: String,
    },
}

/// Decides whether the client answers a call itself or hands it to the port (seed M2b/03's
/// table, with M3a/16's local `clock`).
pub fn dispatch(registry: &Registry, name: &str, arguments: &str) -> Dispatch {
    if name == FIND_TOOL {
        return Dispatch::Local(find_tool(registry, arguments));
    }
    if name == CALL_TOOL {
        return call_tool(registry, arguments);
    }
    if name == CLOCK {
        return Dispatch::Local(Timestamp::now().to_rfc3339());
    }
    Dispatch::Port {
        tool: name.to_string(),
        arguments: arguments.to_string(),
    }
}

fn find_tool(registry: &Registry, arguments: &str) -> String {
    const NO_MATCH: &str = "No tool matches.";
    let Ok(serde_json::Value::Object(object)) = serde_json::from_str(arguments) else {
        return NO_MATCH.to_string();
    };
    let Some(query) = object.get("query").and_then(|q| q.as_str()) else {
        return NO_MATCH.to_string();
    };
    let (matches, left_out) = registry.search(query, FIND_LIMIT);
    if matches.is_empty() {
        return NO_MATCH.to_string();
    }
    let mut text = format!("{} tool(s) match:\n", matches.len());
    for schema in matches {
        match serde_json::to_string(schema) {
            Ok(line) => text.push_str(&line),
            Err(e) => text.push_str(&format!(
                "{}: its schema cannot be shown ({e})",
                schema.name
            )),
        }
        text.push('\n');
    }
    if left_out > 0 {
        text.push_str(&format!(
            "{left_out} more match; search with more specific words to see them.\n"
        ));
    }
    text.push_str("Call it with call_tool.");
    text
}

fn call_tool(registry: &Registry, arguments: &str) -> Dispatch {
    let Ok(serde_json::Value::Object(object)) = serde_json::from_str(arguments) else {
        return Dispatch::Local(
            "call_tool needs a JSON object with \"name\" and \"arguments\".".to_string(),
        );
    };
    let name = object.get("name").and_then(|n| n.as_str()).unwrap_or("");
    let Some(entry) = registry.get(name) else {
        return Dispatch::Local(format!(
            "No tool named \"{name}\". Use find_tool to search for tools."
        ));
    };
    if entry.core {
        return Dispatch::Local(format!(
            "\"{name}\" is a core tool: call it directly, not through call_tool."
        ));
    }
    match target_arguments(object.get("arguments")) {
        Some(arguments) => Dispatch::Port {
            tool: name.to_string(),
            arguments,
        },
        None => Dispatch::Local(format!(
            "call_tool needs a JSON object as \"arguments\" for \"{name}\"."
        )),
    }
}

/// The target's arguments as JSON text: an object; an object written as a JSON string (small
/// models often encode it twice); or nothing at all, which means no arguments.
fn target_arguments(value: Option<&serde_json::Value>) -> Option<String> {
    match value {
        None | Some(serde_json::Value::Null) => Some("{}".to_string()),
        Some(object @ serde_json::Value::Object(_)) => serde_json::to_string(object).ok(),
        Some(serde_json::Value::String(text)) => match serde_json::from_str(text) {
            Ok(object @ serde_json::Value::Object(_)) => serde_json::to_string(&object).ok(),
            _ => None,
        },
        Some(_) => None,
    }
}

/// Cuts to at most `cap` bytes on a character boundary and appends `"\n[truncated]"` if it cut.
pub fn cap_result(text: &str, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text.to_string(), false);
    }
    let head = proto::text::cut_at_boundary(text, cap);
    (format!("{head}\n[truncated]"), true)
}

/// The one sentence the model reads for each reason the broker can refuse a call (the seed's
/// function; the sentences live in [`DenyReason::model_text`], so the broker and every client
/// render the same bytes).
pub fn denial_text(reason: DenyReason) -> &'static str {
    reason.model_text()
}
