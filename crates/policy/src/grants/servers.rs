//! The grants of downstream MCP servers, as the grant files hold them: which of a server's
//! tools a grant names and with which pins and terms, and what a server's box may see. Their
//! one public path is [`crate::downstream`], which re-exports them with the decision on a call.

use std::collections::BTreeMap;
use std::path::PathBuf;

use proto::{Class, Timestamp};

use super::on_arguments::ArgumentRule;
use super::{Approval, HostRule, OnUntrusted, Origin, PathRule};

/// The longest name a downstream server may have.
pub const MAX_SERVER_NAME: usize = 32;

/// `"git.git_status"` as `("git", "git_status")`: the server and its tool; `None` for a name
/// without a dot (one of boxmaker's own tools).
pub fn split(name: &str) -> Option<(&str, &str)> {
    name.split_once('.')
}

/// Whether `name` may name a downstream server: 1 to [`MAX_SERVER_NAME`] lower-case letters,
/// digits, `-` or `_`, starting with a letter.
pub fn valid_server_name(name: &str) -> bool {
    name.len() <= MAX_SERVER_NAME
        && name.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_'))
}

/// Whether a grant's tools only read, so a call of one is no side effect (`read_only`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ReadOnly {
    /// Every call may have side effects (the default).
    #[default]
    No,
    /// The owner declares that the tools it names only read (`read_only = true`).
    Declared,
    /// A tool only reads when the server's pinned definition says so: its annotations'
    /// `readOnlyHint` is `true` (`read_only = "hint"`).
    Hint,
}

/// Which of a server's tools a grant names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pattern {
    /// One tool (`"git.git_status"`).
    Tool(String),
    /// Every tool of the server (`"git.*"`).
    Every,
}

/// A grant of one downstream server's tools.
#[derive(Debug, Clone)]
pub struct ToolGrant {
    /// Its id, unique across the folder.
    pub id: String,
    /// The server.
    pub server: String,
    /// The tools it names.
    pub pattern: Pattern,
    /// The definition each covered tool must have (full name → [`definition_hash`]); an allow
    /// grant covers only a tool pinned here with its current definition.
    pub pins: BTreeMap<String, String>,
    /// The label of results (default private).
    pub class: Class,
    /// Whether results are marked untrusted (default true).
    pub untrusted: bool,
    /// Whether the owner is asked.
    pub approval: Approval,
    /// The most sensitive class the session may have seen for this grant to apply.
    pub max_taint: Option<Class>,
    /// `max_taint = "carried"`: a call that carries a value of a `secret` result is refused.
    pub carried: bool,
    /// Calls after untrusted content (every downstream call may have side effects, but for
    /// the tools it declares read-only).
    pub on_untrusted: OnUntrusted,
    /// Whether the tools it names only read.
    pub read_only: ReadOnly,
    /// When it stops covering calls.
    pub expires: Option<Timestamp>,
    /// Whether it forbids what it names (a deny grant needs no pin).
    pub deny: bool,
    /// Rules on the call's arguments (`[grant.args.NAME]`).
    pub args: Vec<ArgumentRule>,
    /// How many calls it lets run in one session before each further one asks the owner.
    pub per_session: Option<u64>,
    /// Where it was written.
    pub origin: Origin,
}

impl ToolGrant {
    /// Whether it names `tool` of `server`.
    pub fn names(&self, server: &str, tool: &str) -> bool {
        self.server == server
            && match &self.pattern {
                Pattern::Every => true,
                Pattern::Tool(name) => name == tool,
            }
    }

    /// The pin it holds for `tool` of its server, if any.
    pub fn pin(&self, tool: &str) -> Option<&str> {
        self.pins
            .get(&format!("{}.{tool}", self.server))
            .map(String::as_str)
    }
}

/// What a downstream server's box may see and reach (a `[[grant]]` with `server = "…"`).
#[derive(Debug, Clone)]
pub struct ServerGrant {
    /// Its id, unique across the folder.
    pub id: String,
    /// The server.
    pub server: String,
    /// Folders bound read-write into the server's box.
    pub paths: Vec<PathRule>,
    /// The only hosts the box may reach, through the broker's proxy (none: no network).
    pub hosts: Vec<HostRule>,
    /// Where it was written.
    pub origin: Origin,
}

/// Every grant of the downstream servers in a grant folder.
#[derive(Debug, Clone, Default)]
pub struct Downstream {
    /// The grants of their tools.
    pub tools: Vec<ToolGrant>,
    /// The grants of their boxes.
    pub servers: Vec<ServerGrant>,
}

impl Downstream {
    /// The box of `server`: the folders of every grant of it, and their hosts.
    pub fn box_of(&self, server: &str) -> (Vec<PathBuf>, Vec<HostRule>) {
        let mut paths = Vec::new();
        let mut hosts = Vec::new();
        for grant in self.servers.iter().filter(|g| g.server == server) {
            paths.extend(grant.paths.iter().map(PathRule::base));
            hosts.extend(grant.hosts.iter().cloned());
        }
        (paths, hosts)
    }

    /// The servers any grant names.
    pub fn named_servers(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self
            .tools
            .iter()
            .map(|g| g.server.as_str())
            .chain(self.servers.iter().map(|g| g.server.as_str()))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    }
}
