//! The downstream MCP servers' part of `bx grants check`: each server's tools as the running
//! broker lists them, held against the grants that name them. A tool no grant pins shows its
//! definition and the pin to add; a tool whose definition changed since a grant pinned it
//! shows the difference (the broker keeps every definition it has seen) and the new pin. The
//! definitions are text from outside: printed escaped.

use policy::downstream::{Downstream, ToolGrant, split};
use proto::text::escape_terminal;
use proto::{DownstreamTool, DownstreamView, OwnerReply, OwnerRequest};

use crate::grants::toml_string;
use crate::owner::{Owner, OwnerError};

/// What the check found.
pub struct Checked {
    /// Tools whose definition changed since a grant pinned them (hidden from every session).
    pub changed: usize,
}

/// Prints every downstream server's tools against `grants`; asks the broker at `socket`.
pub fn check(grants: &Downstream, socket: &std::path::Path) -> Result<Checked, OwnerError> {
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
    let mut changed = 0;
    for server in &servers {
        changed += print_server(server, grants, &known);
    }
    for name in grants.named_servers() {
        if !servers.iter().any(|s| s.name == name) {
            println!(
                "warning: the grants name downstream server {}, which brokerd.toml's [[mcp.servers]] does not list",
                escape_terminal(name)
            );
        }
    }
    Ok(Checked { changed })
}

/// Prints one server; returns how many of its tools changed since pinned.
fn print_server(server: &DownstreamView, grants: &Downstream, known: &[DownstreamTool]) -> usize {
    if let Some(error) = &server.error {
        println!(
            "downstream server {}: cannot list its tools: {}",
            escape_terminal(&server.name),
            escape_terminal(error)
        );
        return 0;
    }
    println!(
        "downstream server {}: {} tool definition(s)",
        escape_terminal(&server.name),
        server.tools.len()
    );
    let mut changed = 0;
    for tool in &server.tools {
        let Some((_, name)) = split(&tool.name) else {
            continue;
        };
        let naming: Vec<&ToolGrant> = grants
            .tools
            .iter()
            .filter(|g| g.names(&server.name, name) && !g.deny)
            .collect();
        // A TOML line to paste: the name is text from outside, written with TOML's `\u`
        // escapes for every character a terminal acts on, so the line stays valid TOML, copies
        // as the same name and shows it unambiguously (escape_terminal then finds nothing).
        let pin = format!("{} = {}", toml_string(&tool.name), toml_string(&tool.hash));
        let pin = escape_terminal(&pin);
        let shown = escape_terminal(&tool.name);
        let grant_id = |grant: &ToolGrant| escape_terminal(grant.id.as_str()).into_owned();
        if let Some(grant) = naming
            .iter()
            .find(|g| g.pin(name) == Some(tool.hash.as_str()))
        {
            println!("  {shown}: pinned by grant {}", grant_id(grant));
            continue;
        }
        match naming.iter().find_map(|g| g.pin(name).map(|p| (g, p))) {
            Some((grant, pinned)) => {
                changed += 1;
                println!(
                    "  {shown}: CHANGED since grant {} pinned it; hidden until it is pinned again",
                    grant_id(grant)
                );
                match known.iter().find(|k| k.hash == pinned) {
                    Some(before) => print_diff(&before.definition, &tool.definition),
                    None => {
                        println!("    (the pinned definition was never seen by this broker)");
                        print_definition(&tool.definition);
                    }
                }
                println!(
                    "    to grant this definition, pin it in grant {}: {pin}",
                    grant_id(grant)
                );
            }
            None => {
                match naming.first() {
                    Some(grant) => println!(
                        "  {shown}: named by grant {} but not pinned; hidden until it is",
                        grant_id(grant)
                    ),
                    None => println!("  {shown}: no grant names it"),
                }
                print_definition(&tool.definition);
                println!("    its pin: {pin}");
            }
        }
    }
    changed
}

fn print_definition(definition: &str) {
    for line in definition.lines() {
        println!("    | {}", escape_terminal(line));
    }
}

fn print_diff(before: &str, after: &str) {
    let diff = similar::TextDiff::from_lines(before, after);
    let text = diff
        .unified_diff()
        .context_radius(2)
        .header("pinned", "now")
        .to_string();
    for line in text.lines() {
        println!("    {}", escape_terminal(line));
    }
}
