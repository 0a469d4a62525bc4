//! Tools as loopd sees them (seeds M2b/03 and M3a/16): the seam every call goes through
//! ([`ToolPort`]), the registry of what exists, the calls loopd answers itself (`clock`,
//! `find_tool`, `call_tool`'s own errors), the result cap, and [`FakeTools`].
//!
//! loopd runs no tool: [`dispatch`] either answers locally or hands the call to the port, whose
//! far side (the broker) decides. loopd never parses or checks a tool's arguments.

mod rank;
mod schemas;

use std::sync::Mutex;

use proto::{Class, DenyReason, Timestamp, ToolRequest, ToolResponse};

use crate::llama::ToolSchema;

pub use schemas::{
    call_tool_schema, clock_schema, echo_schema, find_tool_schema, http_fetch_schema,
    read_file_schema, shell_schema, write_file_schema,
};

/// The name of the core tool that searches the registry.
pub const FIND_TOOL: &str = "find_tool";
/// The name of the core tool that calls a tool found with `find_tool`.
pub const CALL_TOOL: &str = "call_tool";
/// The name of the core tool loopd answers itself with the current time.
pub const CLOCK: &str = "clock";

/// At most this many tools are listed by one `find_tool` answer.
pub const FIND_LIMIT: usize = 10;

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

/// Where tool calls go to be decided and run: the broker, or a stand-in in tests.
pub trait ToolPort: Send + Sync {
    /// Returns the final answer, never `PendingApproval`. If the broker says the call is waiting
    /// for the owner, the port calls `on_pending` once and goes on waiting.
    fn call(&self, request: &ToolRequest, on_pending: &mut dyn FnMut(&Pending)) -> ToolResponse;

    /// The schemas of the tools the far side can run now (the broker's `list_tools`, asked
    /// again on every `find_tool` and `call_tool`, so a grant fixed mid-session is seen;
    /// [`Registry::with_catalog`]), `Some(Err(why))` when it cannot be read now, or `None`
    /// when the port has no catalog and the turn's registry is used as it is.
    fn catalog(&self) -> Option<Result<Vec<ToolSchema>, String>> {
        None
    }

    /// Withdraws the call now waiting for the owner (the one `on_pending` announced, its
    /// client having cancelled it): the far side abandons it and `call` returns its answer
    /// without the call having run. Whether the port could send the withdrawal.
    fn withdraw(&self) -> bool {
        false
    }

    /// Answers the call now waiting for the owner from the client's own interface (only
    /// where `on_pending` said it is answerable): run it once, or refuse it. Whether the port
    /// could send the answer.
    fn answer(&self, _approve: bool) -> bool {
        false
    }

    /// Answers the model's `ask` question now waiting for the owner with `text`, from the
    /// client's own interface (only where `on_pending` said it is answerable). Whether the
    /// port could send it.
    fn reply(&self, _text: &str) -> bool {
        false
    }
}

/// A call waiting for the owner: the approval's number and when it lapses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// The approval's number, as the owner sees it.
    pub approval: u64,
    /// When the approval request expires unanswered.
    pub expires: Timestamp,
    /// Whether the client may answer it itself ([`ToolPort::answer`]): the owner let it.
    pub answerable: bool,
}

/// One tool the model can learn about; `core` tools are in every request's `tools` array.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// What the model reads.
    pub schema: ToolSchema,
    /// Sent in the `tools` array (true) or found through `find_tool` (false).
    pub core: bool,
}

/// The tools that exist, in a fixed order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Registry {
    entries: Vec<Entry>,
    /// Each entry's name and description in lower case, for [`Registry::find`].
    lowered: Vec<(String, String)>,
    index: rank::Index,
}

impl Registry {
    /// A registry of `entries`, in this order.
    pub fn new(entries: Vec<Entry>) -> Registry {
        let index = rank::Index::new(entries.iter().map(|e| &e.schema));
        let lowered = entries
            .iter()
            .map(|e| {
                (
                    e.schema.name.to_lowercase(),
                    e.schema.description.to_lowercase(),
                )
            })
            .collect();
        Registry {
            entries,
            lowered,
            index,
        }
    }

    /// The test registry: `clock` (core) and `echo`. `echo` exists only in [`FakeTools`] and in
    /// recorded conversations; a loopd that talks to the broker never uses this registry.
    pub fn m2b() -> Registry {
        Registry::new(vec![core(clock_schema()), found(echo_schema())])
    }

    /// The broker's registry: `clock` (core), then `read_file`, `write_file`, `shell`,
    /// `http_fetch`.
    pub fn m3a() -> Registry {
        Registry::new(vec![
            core(clock_schema()),
            found(read_file_schema()),
            found(write_file_schema()),
            found(shell_schema()),
            found(http_fetch_schema()),
        ])
    }

    /// The demo's registry: [`Registry::m3a`] and `echo`, which [`FakeTools`] answers.
    pub fn demo() -> Registry {
        let mut entries = Registry::m3a().entries;
        entries.push(found(echo_schema()));
        Registry::new(entries)
    }

    /// The `tools` array of every request: the core entries, then `find_tool`, then `call_tool`.
    pub fn core_schemas(&self) -> Vec<ToolSchema> {
        let mut schemas: Vec<ToolSchema> = self
            .entries
            .iter()
            .filter(|e| e.core)
            .map(|e| e.schema.clone())
            .collect();
        schemas.push(find_tool_schema());
        schemas.push(call_tool_schema());
        schemas
    }

    /// This registry's core entries, then `catalog`'s tools (those not named like a core tool,
    /// `find_tool` or `call_tool`) as found through `find_tool`, in the catalog's order.
    pub fn with_catalog(&self, catalog: Vec<ToolSchema>) -> Registry {
        let mut entries: Vec<Entry> = self.entries.iter().filter(|e| e.core).cloned().collect();
        let taken: Vec<String> = entries
            .iter()
            .map(|e| e.schema.name.clone())
            .chain([FIND_TOOL.to_string(), CALL_TOOL.to_string()])
            .collect();
        entries.extend(
            catalog
                .into_iter()
                .filter(|schema| !taken.contains(&schema.name))
                .map(found),
        );
        Registry::new(entries)
    }

    /// The entry named `name`.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.schema.name == name)
    }

    /// Every entry, in registry order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The schemas whose name or description contains `query`, ignoring case, in registry
    /// order. An empty query matches nothing.
    pub fn find(&self, query: &str) -> Vec<&ToolSchema> {
        self.find_positions(query)
            .into_iter()
            .filter_map(|at| self.entries.get(at).map(|e| &e.schema))
            .collect()
    }

    fn find_positions(&self, query: &str) -> Vec<usize> {
        if query.is_empty() {
            return Vec::new();
        }
        let needle = query.to_lowercase();
        self.lowered
            .iter()
            .enumerate()
            .filter(|(_, (name, description))| {
                name.contains(&needle) || description.contains(&needle)
            })
            .map(|(at, _)| at)
            .collect()
    }

    /// What `find_tool` lists: [`Registry::find`]'s matches first, then the further tools a BM25
    /// ranking finds, best first; at most `limit`. The second value counts the matches left out.
    pub fn search(&self, query: &str, limit: usize) -> (Vec<&ToolSchema>, usize) {
        let mut positions = self.find_positions(query);
        let mut listed = vec![false; self.entries.len()];
        for &at in &positions {
            if let Some(seen) = listed.get_mut(at) {
                *seen = true;
            }
        }
        for at in self.index.rank(query) {
            if let Some(seen) = listed.get_mut(at)
                && !*seen
            {
                *seen = true;
                positions.push(at);
            }
        }
        let left_out = positions.len().saturating_sub(limit);
        let shown = positions
            .into_iter()
            .take(limit)
            .filter_map(|at| self.entries.get(at).map(|e| &e.schema))
            .collect();
        (shown, left_out)
    }
}

fn core(schema: ToolSchema) -> Entry {
    Entry { schema, core: true }
}

fn found(schema: ToolSchema) -> Entry {
    Entry {
        schema,
        core: false,
    }
}

/// What loopd does with one tool call from the model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// loopd answers it: this text is the tool result.
    Local(String),
    /// The port decides: this tool with these arguments (JSON text).
    Port {
        /// The tool the broker decides on.
        tool: String,
        /// Its arguments as JSON text.
        arguments: String,
    },
}

/// Decides whether loopd answers a call itself or hands it to the port (seed M2b/03's table,
/// with M3a/16's local `clock`).
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
/// function; the sentences live in [`DenyReason::model_text`], so the broker and the MCP front
/// render the same bytes without depending on loopd).
pub fn denial_text(reason: DenyReason) -> &'static str {
    reason.model_text()
}

/// The in-process stand-in for the broker: `echo` answers its `text`, every other tool is
/// denied with `NoGrant`, and every request is recorded.
#[derive(Debug, Default)]
pub struct FakeTools {
    calls: Mutex<Vec<ToolRequest>>,
}

impl FakeTools {
    /// A stand-in that has seen no call yet.
    pub fn new() -> Self {
        FakeTools::default()
    }

    /// Every request received so far, in order.
    pub fn calls(&self) -> Vec<ToolRequest> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ToolPort for FakeTools {
    fn call(&self, request: &ToolRequest, _on_pending: &mut dyn FnMut(&Pending)) -> ToolResponse {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request.clone());
        if request.tool != "echo" {
            return ToolResponse::Denied {
                reason: DenyReason::NoGrant,
            };
        }
        let text = serde_json::from_str::<serde_json::Value>(&request.arguments)
            .ok()
            .and_then(|v| v.get("text").and_then(|t| t.as_str()).map(str::to_string));
        match text {
            Some(content) => ToolResponse::Result {
                content,
                class: Class::Public,
                untrusted: false,
                truncated: false,
            },
            None => ToolResponse::Failed {
                message: "echo needs a string argument \"text\"".to_string(),
            },
        }
    }
}
