//! The broker's view of a call: which tool (`ToolName`) and its arguments, parsed strictly
//! (`ToolArgs`). Parsing is step 3 of the decision: arguments that do not fit the tool are an
//! [`ArgsError`], with a detail for the owner; the broker answers them as a failure that names
//! the argument and what it must be (the model's to fix), not as a denial.

use serde::Serialize;
use tools::fs::{EditFileArgs, ReadFileArgs, WriteFileArgs};
use tools::git::{
    GitCloneArgs, GitDiffArgs, GitStatusArgs, MAX_DIFF_PATHS, SSH_NOT_SUPPORTED, check_diff_path,
};
use tools::jobs::{BashBgArgs, BashKillArgs, BashTailArgs};
use tools::search::{GlobArgs, GrepArgs, ListFilesArgs};
use tools::shell::ShellArgs;
use tools::web::HttpFetchArgs;
use tools::web::web_search::{MAX_RESULTS, WebSearchArgs};

use crate::ask::{AskArgs, parse_ask};
use crate::consult::{ConsultArgs, QUESTION_CAP, cap_bytes};
use crate::hosts::https_host;
use crate::memory::{
    AskMemoryArgs, MemoryArgs, RecallArgs, parse_ask_memory, parse_memory, parse_recall,
};
use crate::paths::MAX_PATH_BYTES;

/// The tools the broker can dispatch to: eight that run in a sandbox, the three memory tools
/// (routed to the memory store, never to a runner), `consult`, and `ask` (answered by the
/// owner).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ToolName {
    /// Read a text file.
    ReadFile,
    /// Write a text file.
    WriteFile,
    /// Edit a text file by exact snippets.
    EditFile,
    /// List a folder's files.
    ListFiles,
    /// Find files by a glob.
    Glob,
    /// Search file contents with a regular expression.
    Grep,
    /// Run a shell command.
    Shell,
    /// Fetch an https URL.
    HttpFetch,
    /// Search the memory.
    Recall,
    /// Write to the memory, or forget an entry.
    Memory,
    /// Ask a question answered from the memory.
    AskMemory,
    /// Ask another model a question.
    Consult,
    /// Ask the owner a question and wait for the answer.
    Ask,
    /// Search the web with the provider the owner configured.
    WebSearch,
    /// Show a git repository's status.
    GitStatus,
    /// Show a git repository's changes.
    GitDiff,
    /// Clone a git repository over https.
    GitClone,
    /// Start a shell command as a background job.
    BashBg,
    /// Read a background job's output since the last read.
    BashTail,
    /// Stop a background job.
    BashKill,
}

impl ToolName {
    /// The tools that run in a sandbox.
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

    /// Every tool a grant may name, in the order error messages list them.
    pub const KNOWN: [ToolName; 18] = [
        ToolName::ReadFile,
        ToolName::WriteFile,
        ToolName::EditFile,
        ToolName::ListFiles,
        ToolName::Glob,
        ToolName::Grep,
        ToolName::Shell,
        ToolName::BashBg,
        ToolName::HttpFetch,
        ToolName::WebSearch,
        ToolName::GitStatus,
        ToolName::GitDiff,
        ToolName::GitClone,
        ToolName::Consult,
        ToolName::Ask,
        ToolName::Recall,
        ToolName::Memory,
        ToolName::AskMemory,
    ];

    /// The tools a grant does not name itself: a grant of [`ToolName::BashBg`] covers them for
    /// the session's own jobs ([`ToolName::granted_by`]).
    pub const JOB_COMPANIONS: [ToolName; 2] = [ToolName::BashTail, ToolName::BashKill];

    /// The tool whose grants cover this one: itself, or `bash_bg` for `bash_tail` and
    /// `bash_kill`.
    pub fn granted_by(self) -> ToolName {
        match self {
            ToolName::BashTail | ToolName::BashKill => ToolName::BashBg,
            other => other,
        }
    }

    /// Whether this is one of the background job tools.
    pub fn is_job(self) -> bool {
        matches!(
            self,
            ToolName::BashBg | ToolName::BashTail | ToolName::BashKill
        )
    }

    /// The tool called `name`, if boxmaker has one.
    pub fn parse(name: &str) -> Option<ToolName> {
        match name {
            "read_file" => Some(ToolName::ReadFile),
            "write_file" => Some(ToolName::WriteFile),
            "edit_file" => Some(ToolName::EditFile),
            "list_files" => Some(ToolName::ListFiles),
            "glob" => Some(ToolName::Glob),
            "grep" => Some(ToolName::Grep),
            "shell" => Some(ToolName::Shell),
            "http_fetch" => Some(ToolName::HttpFetch),
            "recall" => Some(ToolName::Recall),
            "memory" => Some(ToolName::Memory),
            "ask_memory" => Some(ToolName::AskMemory),
            "consult" => Some(ToolName::Consult),
            "ask" => Some(ToolName::Ask),
            "web_search" => Some(ToolName::WebSearch),
            "git_status" => Some(ToolName::GitStatus),
            "git_diff" => Some(ToolName::GitDiff),
            "git_clone" => Some(ToolName::GitClone),
            "bash_bg" => Some(ToolName::BashBg),
            "bash_tail" => Some(ToolName::BashTail),
            "bash_kill" => Some(ToolName::BashKill),
            _ => None,
        }
    }

    /// The tool's name as models and grants write it.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolName::ReadFile => "read_file",
            ToolName::WriteFile => "write_file",
            ToolName::EditFile => "edit_file",
            ToolName::ListFiles => "list_files",
            ToolName::Glob => "glob",
            ToolName::Grep => "grep",
            ToolName::Shell => "shell",
            ToolName::HttpFetch => "http_fetch",
            ToolName::Recall => "recall",
            ToolName::Memory => "memory",
            ToolName::AskMemory => "ask_memory",
            ToolName::Consult => "consult",
            ToolName::Ask => "ask",
            ToolName::WebSearch => "web_search",
            ToolName::GitStatus => "git_status",
            ToolName::GitDiff => "git_diff",
            ToolName::GitClone => "git_clone",
            ToolName::BashBg => "bash_bg",
            ToolName::BashTail => "bash_tail",
            ToolName::BashKill => "bash_kill",
        }
    }

    /// Whether the tool's one path argument names what it reads or writes, and grants give it
    /// `paths` (every file tool and walker, the git tools: the repository's folder, or
    /// `git_clone`'s destination; not `shell`, whose paths are where it runs).
    pub fn is_path_tool(self) -> bool {
        matches!(
            self,
            ToolName::ReadFile
                | ToolName::WriteFile
                | ToolName::EditFile
                | ToolName::ListFiles
                | ToolName::Glob
                | ToolName::Grep
                | ToolName::GitStatus
                | ToolName::GitDiff
                | ToolName::GitClone
        )
    }

    /// Whether this is one of the memory tools.
    pub fn is_memory(self) -> bool {
        matches!(
            self,
            ToolName::Recall | ToolName::Memory | ToolName::AskMemory
        )
    }

    /// Whether a call changes something outside the session (a file, a process, a server, a
    /// model's bill, the memory): the calls that `on_untrusted` governs. `ask_memory` has
    /// side effects only when the broker has a consult model ([`ToolArgs::has_side_effects`]).
    pub fn has_side_effects(self) -> bool {
        match self {
            ToolName::WriteFile
            | ToolName::EditFile
            | ToolName::Shell
            | ToolName::HttpFetch
            | ToolName::Consult
            | ToolName::WebSearch
            | ToolName::GitClone
            | ToolName::BashBg
            | ToolName::BashKill
            | ToolName::Memory => true,
            ToolName::ReadFile
            | ToolName::ListFiles
            | ToolName::Glob
            | ToolName::Grep
            | ToolName::Recall
            | ToolName::AskMemory
            | ToolName::GitStatus
            | ToolName::GitDiff
            | ToolName::BashTail
            | ToolName::Ask => false,
        }
    }

    /// `read_file, write_file, …`: every known tool, for error messages.
    pub fn known_list() -> String {
        ToolName::KNOWN
            .iter()
            .map(|t| t.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    }
}

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
            | ToolArgs::WebSearch(_)
            | ToolArgs::BashBg(_)
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
            ToolArgs::GitStatus(_) => ToolName::GitStatus,
            ToolArgs::GitDiff(_) => ToolName::GitDiff,
            ToolArgs::GitClone(_) => ToolName::GitClone,
            ToolArgs::BashBg(_) => ToolName::BashBg,
            ToolArgs::BashTail(_) => ToolName::BashTail,
            ToolArgs::BashKill(_) => ToolName::BashKill,
        }
    }

    /// The script a `shell` or `bash_bg` call runs: what the shell checks and the guard rails
    /// read.
    pub fn script(&self) -> Option<&ShellArgs> {
        match self {
            ToolArgs::Shell(a) | ToolArgs::BashBg(a) => Some(a),
            _ => None,
        }
    }

    /// The same, mutably (to resolve and choose its `cwd`).
    pub fn script_mut(&mut self) -> Option<&mut ShellArgs> {
        match self {
            ToolArgs::Shell(a) | ToolArgs::BashBg(a) => Some(a),
            _ => None,
        }
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
