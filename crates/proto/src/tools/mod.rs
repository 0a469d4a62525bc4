//! One description per tool: what boxmaker knows about a tool besides running it, in one place.
//!
//! For a built-in tool ([`ToolName`]) the facts are a row of a table the compiler checks: the
//! enum and the table are written by one macro invocation ([`table`]), so a tool without its row
//! does not compile, and every fact is a field of [`Builtin`] that a row cannot leave out. For a
//! tool of a downstream MCP server, [`downstream::facts`] builds the same [`ToolFacts`] from the
//! server's schema and what the owner's grant says.
//!
//! Who reads what: `loopd` the search words, `mcp` the hints, `policy` the argument roles, the
//! side-effect class, the default labels and where a tool runs, `brokerd` the schemas and the
//! time-limit buckets.

pub mod downstream;
pub mod schemas;
mod table;
#[cfg(test)]
mod tests;
pub mod web_pages;

use std::borrow::Cow;

use crate::{Class, ToolSchema};

pub use table::ToolName;

/// What one argument of a tool holds, by what it means outside the call: how later checks
/// (per-argument rules in grants, the provenance of values) read it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    /// A file or folder path (absolute, or relative to a folder another argument names).
    Path,
    /// A URL, whose host is where the call goes.
    Url,
    /// A host name or address on its own.
    Host,
    /// Whom a message goes to: an email address, an account, a channel, a phone number.
    Recipient,
    /// A quantity with a meaning outside the call: money, a count of things to change.
    Amount,
    /// A command line that a shell splits into words and runs.
    Command,
    /// A search pattern (a regular expression, a glob) that selects what a read sees.
    Pattern,
    /// The name of one thing the tool already knows: a job id, a memory entry, a tag.
    Identifier,
    /// A knob of the call itself (a limit, a flag, a mode), bounded by the tool: it chooses how
    /// much or how, never what or where.
    Setting,
    /// Text the tool passes on or stores without acting on it: a file's content, a question,
    /// a message body.
    FreeText,
}

/// One argument of a tool and its role: `name` is a property of the tool's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arg {
    /// The property's name in the schema.
    pub name: Cow<'static, str>,
    /// What it holds.
    pub role: Role,
}

impl Arg {
    /// The argument `name` of a built-in tool's row.
    pub const fn new(name: &'static str, role: Role) -> Arg {
        Arg {
            name: Cow::Borrowed(name),
            role,
        }
    }
}

/// What a call of a tool can change: the class `on_untrusted` and `max_taint` read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Effect {
    /// It changes nothing: it reads files, the memory, a job's output, or asks the owner.
    Read,
    /// It changes something on the owner's machine: a file, the memory, a process.
    LocalWrite,
    /// It reaches beyond the owner's machine: a web server, a search provider, another model,
    /// a downstream server.
    Outbound,
}

impl Effect {
    /// Whether a call has side effects (anything but [`Effect::Read`]): the calls that
    /// `on_untrusted` governs.
    pub const fn has_side_effects(self) -> bool {
        !matches!(self, Effect::Read)
    }
}

/// Whether a tool's results are marked untrusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Untrusted {
    /// Untrusted unless its grant says `untrusted = false` (grants default to true, seed 001).
    UnlessGranted,
    /// Always untrusted, whatever a grant says: the tool returns the outside world's text (a
    /// search's results, a clone's output, another model's answer).
    Always,
    /// Untrusted when its arguments carry a value that came only from untrusted results: the
    /// result echoes what the call wrote (a write's diff), so it carries its arguments' labels,
    /// and a first write does not make the session untrusted.
    FromArguments,
}

/// The labels a tool's results get when its grant says nothing: the grant's default class,
/// and whether they are untrusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Labels {
    /// The class of the results when the grant names none.
    pub class: Class,
    /// Whether they are untrusted.
    pub untrusted: Untrusted,
}

/// The grants' defaults (seed 001): private, and untrusted unless the grant says otherwise.
pub const GRANT_DEFAULT_LABELS: Labels = Labels {
    class: Class::Private,
    untrusted: Untrusted::UnlessGranted,
};

/// Which of the broker's configured time limits a call gets (`brokerd.toml`'s `*_ms` keys).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TimeLimit {
    /// `read_file_ms`: reading a file or walking a tree.
    ReadFile,
    /// `write_file_ms`: writing or editing a file.
    WriteFile,
    /// `shell_ms`: a command, or starting, reading and stopping a job (the job itself lives up
    /// to `job_lifetime_ms`).
    Shell,
    /// `http_fetch_ms`.
    HttpFetch,
    /// `web_search_ms`.
    WebSearch,
    /// `consult_ms`: another model's answer.
    Consult,
    /// `memory_ms`: the memory store.
    Memory,
    /// `approval_ms`: the owner's answer.
    Approval,
    /// `git_ms`: reading a repository.
    Git,
    /// `git_clone_ms`.
    GitClone,
    /// A downstream server's own limit (its `[[mcp.servers]]` entry).
    Downstream,
}

/// The four hints an MCP client reads beside a tool (`readOnlyHint`, `destructiveHint`,
/// `idempotentHint`, `openWorldHint`): hints for the client's interface, never a decision.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Hints {
    /// It changes nothing.
    pub read_only: bool,
    /// A change it makes may destroy something (meaningful when not read-only).
    pub destructive: bool,
    /// The same call again changes nothing more.
    pub idempotent: bool,
    /// It reaches beyond the owner's machine (the web, another model).
    pub open_world: bool,
}

impl Hints {
    /// The four hints, in the order MCP names them.
    pub const fn new(
        read_only: bool,
        destructive: bool,
        idempotent: bool,
        open_world: bool,
    ) -> Hints {
        Hints {
            read_only,
            destructive,
            idempotent,
            open_world,
        }
    }
}

/// The facts every tool has, built-in or downstream: its arguments' roles, what it changes,
/// its results' default labels, its time limit and its MCP hints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFacts {
    /// Each argument the schema names, with its role, in the schema's order.
    pub args: Cow<'static, [Arg]>,
    /// What a call can change.
    pub effect: Effect,
    /// The labels of its results when the grant says nothing.
    pub labels: Labels,
    /// Which time limit it gets.
    pub time_limit: TimeLimit,
    /// The hints an MCP client reads.
    pub hints: Hints,
}

impl ToolFacts {
    /// The role of the argument `name`, if the tool has one by that name.
    pub fn role(&self, name: &str) -> Option<Role> {
        self.args.iter().find(|a| a.name == name).map(|a| a.role)
    }

    /// Whether some argument has `role`.
    pub fn has_role(&self, role: Role) -> bool {
        self.args.iter().any(|a| a.role == role)
    }
}

/// Where the broker sends a built-in tool's call once it is allowed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Home {
    /// A runner: the sandbox, or a container.
    Runner,
    /// The session's job table (the background job tools).
    Jobs,
    /// The broker's memory store (the memory tools); never a runner.
    Memory,
    /// The broker itself, which asks the consult model; never a container.
    Broker,
    /// The owner, who answers the question.
    Owner,
}

/// A built-in tool's row: its name and schema, the facts every tool has, and what only
/// built-in tools have.
#[derive(Debug, Clone)]
pub struct Builtin {
    /// The name models and grants write.
    pub name: &'static str,
    /// The schema the broker lists (seed-pinned texts, see [`schemas`]).
    pub schema: fn() -> ToolSchema,
    /// Roles, effect, labels, time limit, hints.
    pub facts: ToolFacts,
    /// Where an allowed call goes.
    pub home: Home,
    /// The tool whose grants cover this one, when it is not granted by its own name
    /// (`bash_tail` and `bash_kill` go with `bash_bg`).
    pub granted_with: Option<ToolName>,
    /// The argument that names what the tool reads or writes and that grants' `paths` cover,
    /// for the tools that have one (`shell`'s `cwd` is where it runs, not what it reads).
    pub target_path: Option<&'static str>,
    /// Words a model may search with that the tool's own texts do not hold (`find_tool "test"`
    /// finds `shell`): read by loopd's ranking alone, never shown to the model.
    pub search_words: &'static [&'static str],
}

impl ToolName {
    /// This tool's facts: its roles, effect, labels, time limit and hints.
    pub fn facts(self) -> &'static ToolFacts {
        &self.builtin().facts
    }

    /// The schema the broker lists for this tool.
    pub fn schema(self) -> ToolSchema {
        (self.builtin().schema)()
    }

    /// The tool's name as models and grants write it.
    pub fn as_str(self) -> &'static str {
        self.builtin().name
    }

    /// The tool called `name`, if boxmaker has one.
    pub fn parse(name: &str) -> Option<ToolName> {
        ToolName::EVERY.into_iter().find(|t| t.as_str() == name)
    }

    /// The tool whose grants cover this one: itself, or `bash_bg` for `bash_tail` and
    /// `bash_kill`.
    pub fn granted_by(self) -> ToolName {
        self.builtin().granted_with.unwrap_or(self)
    }

    /// Whether this is one of the background job tools.
    pub fn is_job(self) -> bool {
        self.builtin().home == Home::Jobs
    }

    /// Whether this is one of the memory tools.
    pub fn is_memory(self) -> bool {
        self.builtin().home == Home::Memory
    }

    /// Whether the tool's one path argument names what it reads or writes, and grants give it
    /// `paths` (every file tool and walker, the git tools: the repository's folder, or
    /// `git_clone`'s destination; not `shell`, whose paths are where it runs).
    pub fn is_path_tool(self) -> bool {
        self.builtin().target_path.is_some()
    }

    /// Whether the tool runs a command line (`shell`, `bash_bg`): grants give it `commands`.
    pub fn runs_commands(self) -> bool {
        self.facts().has_role(Role::Command)
    }

    /// Whether a call reaches the host of a URL argument (`http_fetch`, `git_clone`): grants
    /// give it `hosts` that choose which calls they cover.
    pub fn fetches_urls(self) -> bool {
        self.facts().has_role(Role::Url)
    }

    /// Whether a call changes something outside the session (a file, a process, a server, a
    /// model's bill, the memory): the calls that `on_untrusted` governs. `ask_memory` has
    /// side effects only when the broker has a consult model (`policy`'s
    /// `ToolArgs::has_side_effects`).
    pub fn has_side_effects(self) -> bool {
        self.facts().effect.has_side_effects()
    }

    /// Whether its results are untrusted whatever a grant says.
    pub fn always_untrusted(self) -> bool {
        self.facts().labels.untrusted == Untrusted::Always
    }

    /// Whether its results echo its arguments and carry their labels
    /// ([`Untrusted::FromArguments`]).
    pub fn echoes_arguments(self) -> bool {
        self.facts().labels.untrusted == Untrusted::FromArguments
    }

    /// `read_file, write_file, …`: every tool a grant may name, for error messages.
    pub fn known_list() -> String {
        ToolName::KNOWN
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Seed 001's name, kept as it spells it: its four container tools (`read_file`,
    /// `write_file`, `shell`, `http_fetch`) and the file and search tools added beside them;
    /// not every built-in tool ([`ToolName::EVERY`]) nor every tool a grant may name
    /// ([`ToolName::KNOWN`]).
    pub const ALL: [ToolName; 8] = [
        ToolName::ReadFile,
        ToolName::WriteFile,
        ToolName::EditFile,
        ToolName::ListFiles,
        ToolName::Glob,
        ToolName::Grep,
        ToolName::Shell,
        ToolName::HttpFetch,
    ];

    /// The tools of the grant group `read`: they read files and folders.
    pub const READ_GROUP: [ToolName; 4] = [
        ToolName::ReadFile,
        ToolName::Grep,
        ToolName::Glob,
        ToolName::ListFiles,
    ];

    /// The tools of the grant group `write`: they change files.
    pub const WRITE_GROUP: [ToolName; 2] = [ToolName::WriteFile, ToolName::EditFile];
}
