//! The downstream MCP servers' part of `bx grants check` and `bx grants pin`: each server's
//! tools as the running broker lists them, held against the grants that name them. A tool no
//! grant pins shows its definition and the pin to add; a tool whose definition changed since a
//! grant pinned it shows the difference (the broker keeps every definition it has seen) and the
//! new pin. The definitions are text from outside: printed escaped.

use policy::downstream::{Downstream, Listed, ToolGrant, split};
use proto::text::escape_terminal;
use proto::{DownstreamTool, OwnerReply, OwnerRequest, Timestamp};
use serde::Serialize;
use serde_json::Value;

use crate::grant_text::toml_string;
use crate::owner::{Owner, OwnerError};

/// Where a downstream tool stands against the grants (`status` in `bx grants check --json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// A grant pins its current definition: sessions see it.
    Pinned,
    /// A grant names it but pins no definition of it: hidden until one does.
    Unpinned,
    /// A grant pinned another definition of it: hidden until the new one is pinned.
    Changed,
    /// A live deny grant names it: refused whatever the other grants say.
    Denied,
    /// No grant names it: refused.
    Ungranted,
}

/// One tool of a server, against the grants.
#[derive(Debug, Clone, Serialize)]
pub struct ToolReport {
    /// `server.tool`, as grants name it.
    pub name: String,
    /// Where it stands.
    pub status: Status,
    /// The grant that decides its status (the pinning, naming or denying one); none when no
    /// grant names it.
    pub grant: Option<String>,
    /// The pin of its definition as the server lists it now (what `bx grants pin` writes).
    pub hash: String,
    /// The pin the grant holds for it, if any (differs from `hash` when `changed`).
    pub pinned: Option<String>,
    /// Whether a call of it counts as a read (no side effect) under the grants that pin it:
    /// each says `read_only = true`, or `"hint"` with the server's `readOnlyHint: true`.
    pub read_only: bool,
    /// Its definition now: name, description, input schema, annotations.
    pub definition: Value,
    /// The definition `pinned` stands for, when the broker has seen it (`changed` only).
    pub pinned_definition: Option<Value>,
}

/// One downstream server and its tools.
#[derive(Debug, Clone, Serialize)]
pub struct ServerReport {
    /// Its name in brokerd.toml.
    pub name: String,
    /// Why it could not list its tools, if it could not.
    pub error: Option<String>,
    /// Its tools, as it lists them.
    pub tools: Vec<ToolReport>,
}

/// Every downstream server's tools against the grants.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    /// The servers brokerd.toml names.
    pub servers: Vec<ServerReport>,
    /// Servers the grants name that brokerd.toml does not list.
    pub unlisted_servers: Vec<String>,
}

impl Report {
    /// How many tools have `status`.
    pub fn count(&self, status: Status) -> usize {
        self.tools().filter(|t| t.status == status).count()
    }

    /// Every tool of every server.
    pub fn tools(&self) -> impl Iterator<Item = &ToolReport> {
        self.servers.iter().flat_map(|s| s.tools.iter())
    }
}

/// Asks the broker at `socket` for every downstream server's tools and holds them against
/// `grants`.
pub fn report(grants: &Downstream, socket: &std::path::Path) -> Result<Report, OwnerError> {
    let hashes: Vec<String> = grants
        .tools
        .iter()
        .flat_map(|g| g.pins.values().cloned())
        .collect();
    let mut owner = Owner::connect(socket)?;
    let (servers, known) = match owner.request(&OwnerRequest::Downstream { hashes })? {
        OwnerReply::Downstream { servers, known } => (servers, known),
        other => return Err(owner.unexpected(&other)),
    };
    let now = Timestamp::now();
    let unlisted_servers = grants
        .named_servers()
        .into_iter()
        .filter(|name| !servers.iter().any(|s| s.name == *name))
        .map(str::to_string)
        .collect();
    let servers = servers
        .into_iter()
        .map(|server| ServerReport {
            tools: server
                .tools
                .iter()
                .filter_map(|tool| tool_report(tool, grants, &known, now))
                .collect(),
            name: server.name,
            error: server.error,
        })
        .collect();
    Ok(Report {
        servers,
        unlisted_servers,
    })
}

/// `definition` (indented JSON text) as JSON; as a string if it is not JSON.
fn parsed(definition: &str) -> Value {
    serde_json::from_str(definition).unwrap_or_else(|_| Value::String(definition.to_string()))
}

/// Where `tool` stands against `grants` at `now`.
fn tool_report(
    tool: &DownstreamTool,
    grants: &Downstream,
    known: &[DownstreamTool],
    now: Timestamp,
) -> Option<ToolReport> {
    let (server, name) = split(&tool.name)?;
    let naming: Vec<&ToolGrant> = grants
        .tools
        .iter()
        .filter(|g| g.names(server, name))
        .collect();
    let definition = parsed(&tool.definition);
    let id = |g: &ToolGrant| Some(g.id.clone());
    let allowing = || naming.iter().copied().filter(|g| !g.deny);
    let pinning: Vec<&ToolGrant> = allowing()
        .filter(|g| g.pin(name) == Some(tool.hash.as_str()))
        .collect();
    let (status, grant, pinned) =
        if let Some(deny) = naming.iter().find(|g| g.deny && !g.expired(now)) {
            (Status::Denied, id(deny), None)
        } else if let Some(first) = pinning.first() {
            (Status::Pinned, id(first), Some(tool.hash.clone()))
        } else if let Some((grant, pin)) = allowing().find_map(|g| g.pin(name).map(|p| (g, p))) {
            (Status::Changed, id(grant), Some(pin.to_string()))
        } else if let Some(grant) = allowing().next() {
            (Status::Unpinned, id(grant), None)
        } else {
            (Status::Ungranted, None, None)
        };
    let listed = Listed {
        read_only_hint: policy::downstream::read_only_hint(&definition),
        ..Listed::new(server, name, &tool.hash)
    };
    let read_only = status == Status::Pinned && pinning.iter().all(|g| g.reads(&listed));
    let pinned_definition = match (status, &pinned) {
        (Status::Changed, Some(pin)) => known
            .iter()
            .find(|k| &k.hash == pin)
            .map(|k| parsed(&k.definition)),
        _ => None,
    };
    Some(ToolReport {
        name: tool.name.clone(),
        status,
        grant,
        hash: tool.hash.clone(),
        pinned,
        read_only,
        definition,
        pinned_definition,
    })
}

/// What a report printed as text found that needs the owner.
pub struct Checked {
    /// Tools whose definition changed since a grant pinned them (hidden from every session).
    pub changed: usize,
    /// Tools a grant names but no grant pins (hidden from every session).
    pub unpinned: usize,
}

/// Prints `report` as `bx grants check` shows it.
pub fn print(report: &Report) -> Checked {
    for server in &report.servers {
        print_server(server);
    }
    for name in &report.unlisted_servers {
        println!(
            "warning: the grants name downstream server {}, which brokerd.toml's [[mcp.servers]] does not list",
            escape_terminal(name)
        );
    }
    Checked {
        changed: report.count(Status::Changed),
        unpinned: report.count(Status::Unpinned),
    }
}

/// A TOML line to paste: the name is text from outside, written with TOML's `\u` escapes for
/// every character a terminal acts on, so the line stays valid TOML, copies as the same name
/// and shows it unambiguously (escape_terminal then finds nothing).
pub fn pin_line(tool: &ToolReport) -> String {
    let pin = format!("{} = {}", toml_string(&tool.name), toml_string(&tool.hash));
    escape_terminal(&pin).into_owned()
}

fn print_server(server: &ServerReport) {
    if let Some(error) = &server.error {
        println!(
            "downstream server {}: cannot list its tools: {}",
            escape_terminal(&server.name),
            escape_terminal(error)
        );
        return;
    }
    println!(
        "downstream server {}: {} tool definition(s)",
        escape_terminal(&server.name),
        server.tools.len()
    );
    for tool in &server.tools {
        let shown = escape_terminal(&tool.name);
        let grant = escape_terminal(tool.grant.as_deref().unwrap_or("")).into_owned();
        let pin = pin_line(tool);
        match tool.status {
            Status::Pinned => println!(
                "  {shown}: pinned by grant {grant}{}",
                if tool.read_only {
                    " (a read: no side effect)"
                } else {
                    ""
                }
            ),
            Status::Denied => println!("  {shown}: denied by grant {grant}"),
            Status::Changed => {
                println!(
                    "  {shown}: CHANGED since grant {grant} pinned it; hidden until it is pinned again"
                );
                print_change(tool);
                println!(
                    "    to grant this definition, pin it in grant {grant} (`bx grants pin {shown}`): {pin}"
                );
            }
            Status::Unpinned => {
                println!("  {shown}: named by grant {grant} but not pinned; hidden until it is");
                print_definition(&tool.definition);
                println!("    its pin (`bx grants pin {shown}` writes it): {pin}");
            }
            Status::Ungranted => {
                println!("  {shown}: no grant names it");
                print_definition(&tool.definition);
                println!("    its pin: {pin}");
            }
        }
    }
}

/// The definition a changed tool had when pinned against the one it has now, or the new one
/// alone when the broker never saw the pinned one.
pub fn print_change(tool: &ToolReport) {
    match &tool.pinned_definition {
        Some(before) => print_diff(&pretty(before), &pretty(&tool.definition)),
        None => {
            println!("    (the pinned definition was never seen by this broker)");
            print_definition(&tool.definition);
        }
    }
}

/// `definition` as indented JSON (the broker sends it with sorted keys).
pub fn pretty(definition: &Value) -> String {
    match definition {
        Value::String(text) => text.clone(),
        other => serde_json::to_string_pretty(other).unwrap_or_default(),
    }
}

/// Prints `definition`, each line escaped for the terminal.
pub fn print_definition(definition: &Value) {
    for line in pretty(definition).lines() {
        println!("    | {}", escape_terminal(line));
    }
}

fn print_diff(before: &str, after: &str) {
    for line in diff(before, after).lines() {
        println!("    {}", escape_terminal(line));
    }
}

/// A changed tool's difference: the pinned definition against the one it has now, as a
/// unified diff; `None` when the broker never saw the pinned one.
pub fn change(tool: &ToolReport) -> Option<String> {
    tool.pinned_definition
        .as_ref()
        .map(|before| diff(&pretty(before), &pretty(&tool.definition)))
}

/// The unified diff of two definitions' texts (not escaped).
fn diff(before: &str, after: &str) -> String {
    similar::TextDiff::from_lines(before, after)
        .unified_diff()
        .context_radius(2)
        .header("pinned", "now")
        .to_string()
}
