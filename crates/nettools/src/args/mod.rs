//! The broker's view of a call: which tool (`ToolName`) and its arguments, parsed strictly
//! (`ToolArgs`). Parsing is step 3 of the decision: arguments that do not fit the tool are an
//! [`ArgsError`], with a detail for the owner; the broker answers them as a failure that names
//! the argument and what it must be (the model's to fix), not as a denial.

use crate::web::HttpFetchArgs;
use crate::web::url::https_host;
use crate::web::web_search::{MAX_RESULTS, WebSearchArgs};
use serde::Serialize;
use tools::fs::{EditFileArgs, ReadFileArgs, WriteFileArgs};
use tools::git::{
    GitCloneArgs, GitDiffArgs, GitStatusArgs, MAX_DIFF_PATHS, SSH_NOT_SUPPORTED, check_diff_path,
};
use tools::jobs::{BashBgArgs, BashKillArgs, BashTailArgs};
use tools::search::{GlobArgs, GrepArgs, ListFilesArgs};
use tools::shell::ShellArgs;

use ask::{AskArgs, parse_ask};
use consult::{ConsultArgs, QUESTION_CAP, cap_bytes};
use delegate::{DelegateArgs, parse_delegate};
use memory::{
    AskMemoryArgs, MemoryAction, MemoryArgs, RecallArgs, parse_ask_memory, parse_memory,
    parse_recall,
};

pub mod ask;
pub mod consult;
pub mod delegate;
pub mod memory;

/// The longest path a call or a grant may name, in bytes (Linux's `PATH_MAX`).
pub const MAX_PATH_BYTES: usize = 4096;

/// The built-in tools, with their facts: `proto::tools`' table.
pub use proto::tools::ToolName;

/// A call's arguments, parsed for its tool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolArgs {
    /// `read_file`.
    ReadFile(ReadFileArgs),
    /// `write_file`.
    WriteFile(WriteFileArgs),
    /// `edit_file`.
    EditFile(EditFileArgs),
    /// `list_files`.
    ListFiles(ListFilesArgs),
    /// `glob`.
    Glob(GlobArgs),
    /// `grep`.
    Grep(GrepArgs),
    /// `shell`.
    Shell(ShellArgs),
    /// `http_fetch`.
    HttpFetch(HttpFetchArgs),
    /// `consult`, its question already capped at [`QUESTION_CAP`].
    Consult {
        /// The question.
        question: String,
    },
    /// `ask`: a question for the owner.
    Ask(AskArgs),
    /// `recall`.
    Recall(RecallArgs),
    /// `memory`.
    Memory(MemoryArgs),
    /// `ask_memory`.
    AskMemory(AskMemoryArgs),
    /// `delegate`: open a child session, or collect its report.
    Delegate(DelegateArgs),
    /// `web_search`.
    WebSearch(WebSearchArgs),
    /// `git_status`.
    GitStatus(GitStatusArgs),
    /// `git_diff`.
    GitDiff(GitDiffArgs),
    /// `git_clone`.
    GitClone(GitCloneArgs),
    /// `bash_bg`: its script as `shell` would run it, without `timeout_secs` (a job's time is
    /// the broker's `job_lifetime_ms`), so the checks of `shell` apply to it unchanged.
    BashBg(ShellArgs),
    /// `bash_tail`.
    BashTail(BashTailArgs),
    /// `bash_kill`.
    BashKill(BashKillArgs),
}

/// The one list of the tools whose arguments name a path: `$on` applied to the arguments of
/// such a call (bound to `$a`), `None` for every other tool.
macro_rules! path_of {
    ($args:expr, $a:ident => $on:expr) => {
        match $args {
            ToolArgs::ReadFile($a) => Some($on),
            ToolArgs::WriteFile($a) => Some($on),
            ToolArgs::EditFile($a) => Some($on),
            ToolArgs::ListFiles($a) => Some($on),
            ToolArgs::Glob($a) => Some($on),
            ToolArgs::Grep($a) => Some($on),
            ToolArgs::GitStatus($a) => Some($on),
            ToolArgs::GitDiff($a) => Some($on),
            ToolArgs::GitClone($a) => Some($on),
            ToolArgs::Shell(_)
            | ToolArgs::HttpFetch(_)
            | ToolArgs::Consult { .. }
            | ToolArgs::Ask(_)
            | ToolArgs::Recall(_)
            | ToolArgs::Memory(_)
            | ToolArgs::AskMemory(_)
            | ToolArgs::Delegate(_)
            | ToolArgs::WebSearch(_)
            | ToolArgs::BashBg(_)
            | ToolArgs::BashTail(_)
            | ToolArgs::BashKill(_) => None,
        }
    };
}

/// The one list of the tools whose arguments are a script (their row's `Command` argument):
/// `Some` of the script for such a call, `None` for every other tool.
macro_rules! script_of {
    ($args:expr) => {
        match $args {
            ToolArgs::Shell(a) | ToolArgs::BashBg(a) => Some(a),
            ToolArgs::ReadFile(_)
            | ToolArgs::WriteFile(_)
            | ToolArgs::EditFile(_)
            | ToolArgs::ListFiles(_)
            | ToolArgs::Glob(_)
            | ToolArgs::Grep(_)
            | ToolArgs::HttpFetch(_)
            | ToolArgs::Consult { .. }
            | ToolArgs::Ask(_)
            | ToolArgs::Recall(_)
            | ToolArgs::Memory(_)
            | ToolArgs::AskMemory(_)
            | ToolArgs::Delegate(_)
            | ToolArgs::WebSearch(_)
            | ToolArgs::GitStatus(_)
            | ToolArgs::GitDiff(_)
            | ToolArgs::GitClone(_)
            | ToolArgs::BashTail(_)
            | ToolArgs::BashKill(_) => None,
        }
    };
}

impl ToolArgs {
    /// The tool these arguments are for.
    pub fn tool(&self) -> ToolName {
        match self {
            ToolArgs::ReadFile(_) => ToolName::ReadFile,
            ToolArgs::WriteFile(_) => ToolName::WriteFile,
            ToolArgs::EditFile(_) => ToolName::EditFile,
            ToolArgs::ListFiles(_) => ToolName::ListFiles,
            ToolArgs::Glob(_) => ToolName::Glob,
            ToolArgs::Grep(_) => ToolName::Grep,
            ToolArgs::Shell(_) => ToolName::Shell,
            ToolArgs::HttpFetch(_) => ToolName::HttpFetch,
            ToolArgs::Consult { .. } => ToolName::Consult,
            ToolArgs::Ask(_) => ToolName::Ask,
            ToolArgs::WebSearch(_) => ToolName::WebSearch,
            ToolArgs::Recall(_) => ToolName::Recall,
            ToolArgs::Memory(_) => ToolName::Memory,
            ToolArgs::AskMemory(_) => ToolName::AskMemory,
            ToolArgs::Delegate(_) => ToolName::Delegate,
            ToolArgs::GitStatus(_) => ToolName::GitStatus,
            ToolArgs::GitDiff(_) => ToolName::GitDiff,
            ToolArgs::GitClone(_) => ToolName::GitClone,
            ToolArgs::BashBg(_) => ToolName::BashBg,
            ToolArgs::BashTail(_) => ToolName::BashTail,
            ToolArgs::BashKill(_) => ToolName::BashKill,
        }
    }

    /// What the call reaches, in the terms of a grant's constraints.
    pub fn reach(&self) -> CallReach<'_> {
        match self {
            ToolArgs::ReadFile(a) => CallReach::Path {
                path: &a.path,
                writes: false,
            },
            ToolArgs::WriteFile(a) => CallReach::Path {
                path: &a.path,
                writes: true,
            },
            ToolArgs::EditFile(a) => CallReach::Path {
                path: &a.path,
                writes: true,
            },
            ToolArgs::ListFiles(a) => CallReach::Path {
                path: &a.path,
                writes: false,
            },
            ToolArgs::Glob(a) => CallReach::Path {
                path: &a.path,
                writes: false,
            },
            ToolArgs::Grep(a) => CallReach::Path {
                path: &a.path,
                writes: false,
            },
            ToolArgs::GitStatus(a) => CallReach::Path {
                path: &a.path,
                writes: false,
            },
            ToolArgs::GitDiff(a) => CallReach::Path {
                path: &a.path,
                writes: false,
            },
            ToolArgs::GitClone(a) => CallReach::Clone {
                url: &a.url,
                path: &a.path,
            },
            ToolArgs::Shell(a) | ToolArgs::BashBg(a) => CallReach::Script(a),
            ToolArgs::HttpFetch(a) => CallReach::Url(&a.url),
            ToolArgs::Recall(_) | ToolArgs::AskMemory(_) => CallReach::MemoryRead,
            ToolArgs::Memory(a) => CallReach::MemoryChange(a.action()),
            ToolArgs::BashTail(_) | ToolArgs::BashKill(_) => CallReach::OwnJob,
            ToolArgs::Consult { .. }
            | ToolArgs::Ask(_)
            | ToolArgs::WebSearch(_)
            | ToolArgs::Delegate(_) => CallReach::Unconstrained,
        }
    }

    /// The script a `shell` or `bash_bg` call runs: what the shell checks and the guard rails
    /// read.
    pub fn script(&self) -> Option<&ShellArgs> {
        script_of!(self)
    }

    /// The same, mutably (to resolve and choose its `cwd`).
    pub fn script_mut(&mut self) -> Option<&mut ShellArgs> {
        script_of!(self)
    }

    /// Whether this call has side effects: its tool's ([`ToolName::has_side_effects`]), and
    /// `ask_memory` when the broker will send the entries to its consult model.
    pub fn has_side_effects(&self) -> bool {
        match self {
            ToolArgs::AskMemory(args) => args.consults,
            other => other.tool().has_side_effects(),
        }
    }

    /// The path the call reads or writes, for the tools that name one ([`ToolName::is_path_tool`]).
    pub fn path(&self) -> Option<&str> {
        path_of!(self, a => a.path.as_str())
    }

    /// The first path argument that is not absolute, as `(argument, path)`: a path tool's
    /// `path`, or a script's `cwd`. Every path a call names must be absolute; the model is told
    /// which one is not.
    pub fn relative_path(&self) -> Option<(&'static str, &str)> {
        let relative = |p: &str| !std::path::Path::new(p).is_absolute();
        if let Some(path) = self.path() {
            return relative(path).then_some(("path", path));
        }
        let cwd = self.script()?.cwd.as_deref()?;
        relative(cwd).then_some(("cwd", cwd))
    }

    /// The path argument, mutably (to resolve it).
    pub fn path_mut(&mut self) -> Option<&mut String> {
        path_of!(self, a => &mut a.path)
    }

    /// The arguments as compact JSON in the order of the tool's schema: what is recorded and
    /// what the tool receives.
    pub fn canonical_json(&self) -> String {
        #[expect(
            clippy::expect_used,
            reason = "the argument shapes hold strings, integers, booleans and string maps, which serde_json always serializes"
        )]
        fn json<T: Serialize>(value: &T) -> String {
            serde_json::to_string(value).expect("argument shapes always serialize")
        }
        match self {
            ToolArgs::ReadFile(args) => json(args),
            ToolArgs::WriteFile(args) => json(args),
            ToolArgs::EditFile(args) => json(args),
            ToolArgs::ListFiles(args) => json(args),
            ToolArgs::Glob(args) => json(args),
            ToolArgs::Grep(args) => json(args),
            ToolArgs::Shell(args) => json(args),
            ToolArgs::HttpFetch(args) => json(args),
            ToolArgs::Consult { question } => json(&ConsultArgs {
                question: question.clone(),
            }),
            ToolArgs::Ask(args) => json(args),
            ToolArgs::Recall(args) => json(args),
            ToolArgs::Memory(args) => json(args),
            ToolArgs::AskMemory(args) => json(args),
            ToolArgs::Delegate(args) => json(args),
            ToolArgs::WebSearch(args) => json(args),
            ToolArgs::GitStatus(args) => json(args),
            ToolArgs::GitDiff(args) => json(args),
            ToolArgs::GitClone(args) => json(args),
            ToolArgs::BashBg(args) => json(&BashBgArgs {
                command: args.command.clone(),
                cwd: args.cwd.clone(),
            }),
            ToolArgs::BashTail(args) => json(args),
            ToolArgs::BashKill(args) => json(args),
        }
    }
}

/// What a call reaches, in the terms a grant's constraints speak (`paths`, `hosts`,
/// `commands`, `tags`): the one place where a call's arguments meet `policy::decide`, which
/// reads a call through this and never through [`ToolArgs`]' cases. A tool added with a kind of
/// reach listed here needs no change in `policy`; a new kind is a new case that `policy`'s
/// exhaustive matches then ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallReach<'a> {
    /// One file or folder: a grant's `paths` cover it; `writes` when the call changes it.
    Path {
        /// The path as the call names it (absolute once resolved).
        path: &'a str,
        /// Whether the call changes what is there.
        writes: bool,
    },
    /// A clone: the host of `url`, and the folder `path` it writes.
    Clone {
        /// The https URL cloned from.
        url: &'a str,
        /// The destination folder.
        path: &'a str,
    },
    /// A script a shell runs: its commands, its `cwd`, the paths it writes.
    Script(&'a ShellArgs),
    /// An https URL, whose host is where the call goes.
    Url(&'a str),
    /// The session's memory, read: a grant's `tags` bound what it sees.
    MemoryRead,
    /// The session's memory, changed: an entry added with its tags, or one forgotten.
    MemoryChange(MemoryAction<'a>),
    /// One of the session's own background jobs.
    OwnJob,
    /// Nothing a grant constrains: every grant of the tool covers the call.
    Unconstrained,
}

/// Why arguments do not fit their tool.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    /// The JSON does not have the tool's shape (unknown or missing fields, wrong types, not
    /// JSON at all, or a value the tool cannot take).
    #[error("the arguments do not fit the tool: {0}")]
    Shape(String),
}

impl ArgsError {
    /// The detail for the owner and the audit log.
    pub fn detail(&self) -> String {
        match self {
            ArgsError::Shape(detail) => detail.clone(),
        }
    }
}

mod parse;

pub use parse::{TEXT_ARGUMENT_CAP, consult_question, parse};
