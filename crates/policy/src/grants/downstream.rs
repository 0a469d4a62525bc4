//! The `[[grant]]` tables of downstream MCP servers' tools: `tool = "git.git_status"` (or
//! `"git.*"`, or a list) with `pins`, and `server = "git"` with the `paths` and `hosts` of the
//! server's box. Read by the same reader as every grant, so each problem has its line.

use std::collections::BTreeMap;

use toml::de::{DeTable, DeValue};

use super::Origin;
use super::reader::{GrantReader, Value};
use super::servers::{
    Downstream, Pattern, ReadOnly, ServerGrant, ToolGrant, split, valid_server_name,
};
use super::terms::Terms;
use crate::args::ToolName;

/// The keys a grant of downstream tools may have.
pub const TOOL_KEYS: &[&str] = &[
    "id",
    "tool",
    "pins",
    "class",
    "untrusted",
    "approval",
    "max_taint",
    "on_untrusted",
    "expires",
    "deny",
    "read_only",
    "args",
    "per_session",
];

/// The keys a grant of a downstream server's box may have.
pub const SERVER_KEYS: &[&str] = &["id", "server", "paths", "hosts"];

/// Whether `table` grants something of a downstream server: it has a `server` key, or a tool
/// it names has a dot (`server.tool`).
pub(super) fn names_downstream(table: &DeTable<'_>) -> bool {
    table.iter().any(|(k, v)| match k.get_ref().as_ref() {
        "server" => true,
        "tool" => match v.get_ref() {
            DeValue::String(s) => s.contains('.'),
            DeValue::Array(items) => items
                .iter()
                .any(|i| matches!(i.get_ref(), DeValue::String(s) if s.contains('.'))),
            _ => false,
        },
        _ => false,
    })
}

impl GrantReader<'_> {
    /// Reads a table [`names_downstream`] picked into `out`; nothing when anything is wrong.
    pub(super) fn read_downstream(
        &mut self,
        table: &DeTable<'_>,
        line: usize,
        out: &mut Downstream,
    ) {
        let before = self.problem_count();
        let field = |name: &str| -> Option<&Value<'_>> {
            table
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == name)
                .map(|(_, v)| v)
        };
        let is_server = field("server").is_some();
        if is_server && field("tool").is_some() {
            self.say(
                line,
                "a grant has either server (what a downstream server's box sees) or tool, not both"
                    .to_string(),
            );
            return;
        }
        let keys = if is_server { SERVER_KEYS } else { TOOL_KEYS };
        for (key, _) in table.iter() {
            let name = key.get_ref().as_ref();
            if !keys.contains(&name) {
                let at = self.lines.of(key.span().start);
                let what = if is_server {
                    "a grant of a downstream server's box"
                } else {
                    "a grant of downstream tools"
                };
                self.say(
                    at,
                    format!(
                        "unknown key {name:?} in {what}; the keys are {}",
                        keys.join(", ")
                    ),
                );
            }
        }
        let id = match field("id") {
            None => {
                self.say(line, "a grant needs an id".to_string());
                None
            }
            Some(v) => self.id(v),
        };
        let origin = Origin {
            file: self.file.to_path_buf(),
            line,
        };
        if is_server {
            let server = field("server").and_then(|v| self.server_name(v));
            let paths = field("paths")
                .map(|v| self.paths(v, false))
                .unwrap_or_default();
            let hosts = field("hosts").map(|v| self.hosts(v)).unwrap_or_default();
            if let (Some(id), Some(server)) = (id, server)
                && self.problem_count() == before
            {
                out.servers.push(ServerGrant {
                    id,
                    server,
                    paths,
                    hosts,
                    origin,
                });
            }
            return;
        }
        let patterns = field("tool").map(|v| self.patterns(v)).unwrap_or_default();
        let deny = field("deny")
            .and_then(|v| self.boolean(v, "deny"))
            .unwrap_or(false);
        let pins = field("pins")
            .map(|v| self.pins(v, &patterns))
            .unwrap_or_default();
        let read_only = field("read_only")
            .and_then(|v| self.read_only(v))
            .unwrap_or_default();
        let terms = self.terms(&field);
        self.check_deny_terms(deny, &terms, line, &field);
        let Terms {
            class,
            max_taint,
            carried,
            untrusted,
            approval,
            on_untrusted,
            expires,
            args,
            per_session,
        } = terms;
        let Some(id) = id else {
            return;
        };
        if self.problem_count() > before {
            return;
        }
        for (server, pattern) in patterns {
            out.tools.push(ToolGrant {
                id: id.clone(),
                server,
                pattern,
                pins: pins.clone(),
                class,
                untrusted,
                approval,
                max_taint,
                carried,
                on_untrusted,
                read_only,
                expires,
                deny,
                args: args.clone(),
                per_session,
                origin: origin.clone(),
            });
        }
    }

    /// `read_only = true | false | "hint"`.
    fn read_only(&mut self, value: &Value<'_>) -> Option<ReadOnly> {
        match value.get_ref() {
            DeValue::Boolean(true) => Some(ReadOnly::Declared),
            DeValue::Boolean(false) => Some(ReadOnly::No),
            DeValue::String(text) if text.as_ref() == "hint" => Some(ReadOnly::Hint),
            _ => {
                let line = self.line_of(value);
                self.say(
                    line,
                    "read_only must be true (the tools it names only read), false (the default), or \"hint\" (a tool only reads when the server's pinned definition says readOnlyHint: true)"
                        .to_string(),
                );
                None
            }
        }
    }

    fn server_name(&mut self, value: &Value<'_>) -> Option<String> {
        let name = self.string(value, "server")?.to_string();
        if valid_server_name(&name) {
            Some(name)
        } else {
            let line = self.line_of(value);
            self.say(line, bad_server(&name));
            None
        }
    }

    /// `tool = "git.git_status"`, `"git.*"` or a list of them: each (server, pattern) once.
    fn patterns(&mut self, value: &Value<'_>) -> Vec<(String, Pattern)> {
        let names: Vec<(String, usize)> = match value.get_ref() {
            DeValue::String(text) => vec![(text.to_string(), self.line_of(value))],
            _ => self.strings(value, "tool"),
        };
        let mut out: Vec<(String, Pattern)> = Vec::new();
        for (text, line) in names {
            let Some((server, tool)) = split(&text) else {
                let own =
                    ToolName::parse(&text).is_some() || matches!(text.as_str(), "read" | "write");
                let message = if own {
                    format!(
                        "{text} is one of boxmaker's tools; a grant names either boxmaker's tools or downstream servers' tools (server.tool), not both"
                    )
                } else {
                    format!("{text:?} names no downstream tool; write server.tool or server.*")
                };
                self.say(line, message);
                continue;
            };
            if !valid_server_name(server) {
                self.say(line, bad_server(server));
                continue;
            }
            if tool.is_empty() {
                self.say(line, format!("{text:?} names no tool of server {server}"));
                continue;
            }
            let pattern = if tool == "*" {
                Pattern::Every
            } else {
                Pattern::Tool(tool.to_string())
            };
            let entry = (server.to_string(), pattern);
            if !out.contains(&entry) {
                out.push(entry);
            }
        }
        out
    }

    /// `pins = { "git.git_status" = "<64 hex digits>" }`: each a tool the grant names.
    fn pins(
        &mut self,
        value: &Value<'_>,
        patterns: &[(String, Pattern)],
    ) -> BTreeMap<String, String> {
        let mut pins = BTreeMap::new();
        let DeValue::Table(table) = value.get_ref() else {
            let line = self.line_of(value);
            self.say(
                line,
                "pins must be a table of tool names and definition hashes, as `bx grants check` prints it"
                    .to_string(),
            );
            return pins;
        };
        for (key, hash) in table.iter() {
            let name = key.get_ref().as_ref();
            let line = self.lines.of(key.span().start);
            let named = split(name).is_some_and(|(server, tool)| {
                patterns.iter().any(|(s, p)| {
                    s == server
                        && match p {
                            Pattern::Every => true,
                            Pattern::Tool(t) => t == tool,
                        }
                })
            });
            if !named {
                self.say(
                    line,
                    format!("pins {name:?}, a tool this grant does not name"),
                );
                continue;
            }
            let Some(hash) = self.string(hash, "a pin") else {
                continue;
            };
            if hash.len() != 64 || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
                self.say(
                    line,
                    format!(
                        "the pin of {name} must be 64 lower-case hex digits (a SHA-256), as `bx grants check` prints it"
                    ),
                );
                continue;
            }
            pins.insert(name.to_string(), hash.to_string());
        }
        pins
    }
}

fn bad_server(name: &str) -> String {
    format!(
        "{name:?} is not a server name: 1 to {} lower-case letters, digits, '-' or '_', starting with a letter",
        super::servers::MAX_SERVER_NAME
    )
}
