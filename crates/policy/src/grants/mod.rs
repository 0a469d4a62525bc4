//! Grant files: the owner's TOML, read into [`Grant`]s with every problem named by file, line
//! and a sentence. A folder with any problem yields no grants at all, so a typo never leaves
//! half a policy in force.

mod builtin;
mod downstream;
mod file;
mod on_arguments;
mod reader;
mod rules;
pub(crate) mod servers;
mod terms;

use std::fs;
use std::path::{Path, PathBuf};

use proto::{Class, Timestamp};

use crate::args::ToolName;
use servers::Downstream;

pub use downstream::{SERVER_KEYS, TOOL_KEYS};
pub use file::parse_file;
pub use on_arguments::{ARGUMENT_KEYS, ArgumentProvenance, ArgumentRule, Otherwise, ValuePattern};
pub use rules::{HostRule, PathRule, RuleError, host_rule, names_itself, path_rule};

/// The largest grant file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The keys a `[[grant]]` table may have.
pub const KEYS: &[&str] = &[
    "id",
    "tool",
    "paths",
    "hosts",
    "commands",
    "class",
    "untrusted",
    "approval",
    "max_taint",
    "on_untrusted",
    "expires",
    "deny",
    "tags",
    "args",
    "per_session",
];

/// Whether the owner is asked before a covered call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Runs without asking.
    Auto,
    /// Asks the owner each time (or once for the session, if the owner says so).
    Ask,
}

/// What happens to a side-effecting call once the session has received untrusted content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnUntrusted {
    /// It runs as usual.
    Allow,
    /// The owner is asked.
    Ask,
    /// It is refused (`UntrustedInput`).
    Deny,
    /// It runs unasked when none of its values came only from untrusted results
    /// ([`crate::provenance`]); otherwise the owner is asked.
    Provenance,
}

/// Where a grant was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file.
    pub file: PathBuf,
    /// The line of its `[[grant]]` table.
    pub line: usize,
}

/// One grant, validated.
#[derive(Debug, Clone)]
pub struct Grant {
    /// Its id, unique across the folder; named in audit records.
    pub id: String,
    /// The tool it covers (a table naming several tools or a group gives one grant per tool,
    /// each with the table's id).
    pub tool: ToolName,
    /// Paths (files and folders) it covers; for `shell`, where the command may run.
    pub paths: Vec<PathRule>,
    /// Hosts it covers (`http_fetch`, `git_clone`); for `shell` and `bash_bg`, the only hosts
    /// the box of a call it decides may reach, through the broker's proxy (they never widen
    /// or narrow what it covers; none: no network).
    pub hosts: Vec<HostRule>,
    /// Command prefixes, word by word (`shell`).
    pub commands: Vec<Vec<String>>,
    /// The label of results (default private).
    pub class: Class,
    /// Whether results are marked untrusted (default true).
    pub untrusted: bool,
    /// Whether the owner is asked (default auto).
    pub approval: Approval,
    /// The most sensitive class the session may have seen for this grant to apply.
    pub max_taint: Option<Class>,
    /// `max_taint = "carried"`: a call that carries a value of a `secret` result is refused,
    /// whatever else the session has seen ([`crate::provenance`]).
    pub carried: bool,
    /// Side-effecting calls after untrusted content (default ask).
    pub on_untrusted: OnUntrusted,
    /// When it stops covering calls.
    pub expires: Option<Timestamp>,
    /// Whether it forbids what it covers.
    pub deny: bool,
    /// The memory tools: the tags the session's reads, writes and forgets are limited to
    /// (empty: the whole memory).
    pub tags: Vec<String>,
    /// Rules on the call's arguments (`[grant.args.NAME]`).
    pub args: Vec<ArgumentRule>,
    /// How many calls it lets run in one session before each further one asks the owner.
    pub per_session: Option<u64>,
    /// Where it was written.
    pub origin: Origin,
}

impl Grant {
    /// A grant for `tool` with the defaults of the grant format and no constraints, as if
    /// written at line 1 of `grants.toml`; for tests and presets.
    pub fn new(id: &str, tool: ToolName) -> Grant {
        Grant {
            id: id.to_string(),
            tool,
            paths: Vec::new(),
            hosts: Vec::new(),
            commands: Vec::new(),
            class: Class::Private,
            untrusted: true,
            approval: Approval::Auto,
            max_taint: None,
            carried: false,
            on_untrusted: OnUntrusted::Ask,
            expires: None,
            deny: false,
            tags: Vec::new(),
            args: Vec::new(),
            per_session: None,
            origin: Origin {
                file: PathBuf::from("grants.toml"),
                line: 1,
            },
        }
    }

    /// Whether it has expired at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires.is_some_and(|at| at <= now)
    }
}

/// A problem in a grant file: which file, which line, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: PathBuf,
    /// The line, when the problem has one.
    pub line: Option<usize>,
    /// What is wrong, as a sentence.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// A folder's grants, all valid, with the warnings the owner should read.
#[derive(Debug, Clone, Default)]
pub struct GrantSet {
    /// The grants, in file-name order, then in file order.
    pub grants: Vec<Grant>,
    /// Things that are allowed but risky (prefixes that run other programs).
    pub warnings: Vec<Problem>,
    /// The grants of downstream MCP servers' tools and boxes.
    pub downstream: Downstream,
}

/// Reads every `*.toml` file of `dir` (in name order). Any problem anywhere means no grants:
/// the problems are returned instead. A folder that does not exist holds no grants.
pub fn load_dir(dir: &Path, home: &Path) -> Result<GrantSet, Vec<Problem>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(GrantSet::default()),
        Err(e) => {
            return Err(vec![problem(
                dir,
                None,
                format!("cannot read the folder: {e}"),
            )]);
        }
    };
    let mut set = GrantSet::default();
    let mut problems = Vec::new();
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in entries {
        // An entry that cannot be read could hold deny grants: it is a problem, not a skip.
        let path = match entry {
            Ok(entry) => entry.path(),
            Err(e) => {
                problems.push(problem(dir, None, format!("cannot list the folder: {e}")));
                continue;
            }
        };
        if path.extension().is_some_and(|x| x == "toml") {
            files.push(path);
        } else {
            set.warnings.push(problem(
                &path,
                None,
                "not loaded: only files named *.toml are grant files".to_string(),
            ));
        }
    }
    files.sort();
    set.warnings.sort_by(|a, b| a.file.cmp(&b.file));
    for file in files {
        match read_limited(&file) {
            Ok(text) => {
                let parsed = parse_file(&text, &file, home);
                set.grants.extend(parsed.grants);
                set.warnings.extend(parsed.warnings);
                set.downstream.tools.extend(parsed.downstream.tools);
                set.downstream.servers.extend(parsed.downstream.servers);
                problems.extend(parsed.problems);
            }
            Err(p) => problems.push(p),
        }
    }
    let ids: Vec<(&str, &Origin)> = set
        .grants
        .iter()
        .map(|g| (g.id.as_str(), &g.origin))
        .chain(
            set.downstream
                .tools
                .iter()
                .map(|g| (g.id.as_str(), &g.origin)),
        )
        .chain(
            set.downstream
                .servers
                .iter()
                .map(|g| (g.id.as_str(), &g.origin)),
        )
        .collect();
    check_unique_ids(&ids, &mut problems);
    if problems.is_empty() {
        Ok(set)
    } else {
        Err(problems)
    }
}

fn read_limited(file: &Path) -> Result<String, Problem> {
    let meta = fs::metadata(file).map_err(|e| problem(file, None, format!("cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(problem(file, None, "is not a regular file".to_string()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(problem(
            file,
            None,
            format!(
                "is {} bytes; grant files are at most {MAX_FILE_BYTES} bytes",
                meta.len()
            ),
        ));
    }
    fs::read_to_string(file).map_err(|e| problem(file, None, format!("cannot read: {e}")))
}

fn check_unique_ids(ids: &[(&str, &Origin)], problems: &mut Vec<Problem>) {
    for (i, (id, origin)) in ids.iter().enumerate() {
        if let Some((_, first)) = ids.get(..i).and_then(|earlier| {
            // One table naming several tools gives several grants with its id and origin.
            earlier.iter().find(|(e, o)| e == id && o != origin)
        }) {
            problems.push(problem(
                &origin.file,
                Some(origin.line),
                format!(
                    "grant id {id:?} is already used at {}:{}",
                    first.file.display(),
                    first.line
                ),
            ));
        }
    }
}

/// What one file gave: its grants, its problems and its warnings.
#[derive(Debug, Clone, Default)]
pub struct ParsedFile {
    /// The valid grants (meaningless if there are problems).
    pub grants: Vec<Grant>,
    /// Everything wrong, each with its line.
    pub problems: Vec<Problem>,
    /// Things allowed but risky.
    pub warnings: Vec<Problem>,
    /// The valid grants of downstream servers (meaningless if there are problems).
    pub downstream: Downstream,
}

pub(crate) fn problem(file: &Path, line: Option<usize>, message: String) -> Problem {
    Problem {
        file: file.to_path_buf(),
        line,
        message,
    }
}
