//! The git tools: `git_status`, `git_diff` (seed 003), and the arguments of `git_clone`, which
//! `nettools` runs.
//!
//! Every git here runs with a scrubbed environment (no `HOME`, no global or system
//! configuration) and the settings of [`crate::shell::GIT_ENV`] plus [`GIT_TOOL_CONFIG`], so a
//! repository's configuration chooses no program that runs: no fsmonitor, hook, pager, editor,
//! credential helper, askpass, filter driver, external diff or textconv (`--no-ext-diff
//! --no-textconv` on every diff), and git never prompts (`GIT_TERMINAL_PROMPT=0`, standard
//! input empty). Output is merged (standard output and standard error as they come) and
//! bounded (head and tail kept, [`crate::shell::HEAD_BYTES`] and [`crate::shell::TAIL_BYTES`]).
//!
//! The repository is guessed as seed 003 says: the requested folder (git's own discovery, from
//! it up to the granted folder and never above: `GIT_CEILING_DIRECTORIES` is the granted
//! folder's parent), else the one sub-folder of the requested folder that is a repository. Its
//! work tree and git folders must be inside the granted folder.

mod repo;

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use sandbox::{CommandSpec, ContainOptions, Containment, Exit};

use crate::shell::{Captured, DEFAULT_PATH, FIXED_ENV, GIT_ENV, HEAD_BYTES, TAIL_BYTES};

pub use repo::{Repository, find_repository, git_diff, git_status};

pub use proto::tools::schemas::{
    MAX_DIFF_PATHS, git_clone_schema, git_diff_schema, git_status_schema,
};

/// The arguments of `git_status`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitStatusArgs {
    /// The absolute path of the repository's folder, or of a folder inside it.
    pub path: String,
}

/// The arguments of `git_diff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitDiffArgs {
    /// The absolute path of the repository's folder, or of a folder inside it.
    pub path: String,
    /// The staged changes (`git diff --staged`) instead of the unstaged ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub staged: Option<bool>,
    /// Only these paths, relative to the repository's top folder (after `--`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paths: Option<Vec<String>>,
}

/// The arguments of `git_clone`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GitCloneArgs {
    /// The repository's `https://` URL.
    pub url: String,
    /// The absolute path of the folder to clone into: it must not exist yet, or be empty.
    pub path: String,
}

/// Why a `git_diff` path filter is refused, if it is: it must be relative to the repository,
/// stay inside it, and not read as an option or as pathspec magic.
pub fn check_diff_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("a path filter is empty".to_string());
    }
    if path.contains('\0') {
        return Err(format!("the path filter {path:?} holds a NUL byte"));
    }
    if path.starts_with('-') {
        return Err(format!("the path filter {path:?} starts with -"));
    }
    if path.starts_with(':') {
        return Err(format!(
            "the path filter {path:?} starts with : (pathspec magic is not taken)"
        ));
    }
    if Path::new(path).is_absolute() {
        return Err(format!(
            "the path filter {path:?} is absolute: give it relative to the repository"
        ));
    }
    if Path::new(path)
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(format!(
            "the path filter {path:?} goes up with ..: it must stay inside the repository"
        ));
    }
    Ok(())
}

/// The sentence for a `git@host:path` URL.
pub const SSH_NOT_SUPPORTED: &str =
    "git@ URLs need SSH keys, which git_clone does not support yet: give the https:// URL";

/// Settings every git tool adds to [`GIT_ENV`]'s (command-line level, so they win over every
/// configuration file): no credential helper or askpass program, no colour, no submodule
/// recursion, no automatic maintenance, objects checked as they arrive.
pub const GIT_TOOL_CONFIG: &[(&str, &str)] = &[
    ("credential.helper", ""),
    ("core.askPass", ""),
    ("color.ui", "never"),
    ("submodule.recurse", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("transfer.fsckObjects", "true"),
];

/// Variables every git tool sets beside [`FIXED_ENV`]: no global configuration, no askpass
/// program, no optional locks (git writes nothing to only look), no replace refs.
pub const GIT_TOOL_ENV: &[(&str, &str)] = &[
    ("GIT_CONFIG_GLOBAL", "/dev/null"),
    ("GIT_ASKPASS", ""),
    ("SSH_ASKPASS", ""),
    ("GIT_OPTIONAL_LOCKS", "0"),
    ("GIT_NO_REPLACE_OBJECTS", "1"),
];

/// The variables a git tool passes on from the broker's environment, when set.
const GIT_PASSED_ENV: &[&str] = &["PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ"];

/// How each git of a call is held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GitContainment {
    /// In a fresh box of this policy ([`sandbox::spawn_boxed`]; the caller binds the granted
    /// folder, read-only).
    Boxed(Box<sandbox::Policy>),
    /// Contained only ([`sandbox::spawn_contained`]: its own PID and mount namespaces, every
    /// capability dropped, `no_new_privs`), seeing every file the broker's user can.
    Contained,
    /// Run by the caller's worker (a warm box's command worker), which holds the box.
    Worker(GitWorker),
}

/// What runs one git for [`GitContainment::Worker`]: the command, its time limit and the sinks of its
/// two streams; how it ended and how it was held.
pub type RunGit = dyn Fn(
        &CommandSpec,
        Duration,
        &mut dyn FnMut(&[u8]),
        &mut dyn FnMut(&[u8]),
    ) -> Result<(sandbox::Ended, Containment), String>
    + Send
    + Sync;

/// A caller's runner of gits, shared; two are the same when they are the same runner.
#[derive(Clone)]
pub struct GitWorker(pub std::sync::Arc<RunGit>);

impl std::fmt::Debug for GitWorker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("GitWorker")
    }
}

impl PartialEq for GitWorker {
    fn eq(&self, other: &GitWorker) -> bool {
        std::sync::Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for GitWorker {}

/// How `git_status` and `git_diff` run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GitOptions {
    /// The granted folder: the repository must be inside it, and discovery stops at it.
    pub root: PathBuf,
    /// The whole call's time limit, every git of it together.
    pub timeout: Duration,
    /// The box, or containment alone.
    pub walls: GitContainment,
    /// Bytes kept from the start of the merged output.
    pub head_bytes: usize,
    /// Bytes kept from the end of the merged output.
    pub tail_bytes: usize,
}

impl GitOptions {
    /// `root` granted, 30 seconds, contained, the shell's output bounds.
    pub fn new(root: impl Into<PathBuf>) -> GitOptions {
        GitOptions {
            root: root.into(),
            timeout: Duration::from_secs(30),
            walls: GitContainment::Contained,
            head_bytes: HEAD_BYTES,
            tail_bytes: TAIL_BYTES,
        }
    }
}

/// What a git command did. A non-zero exit is a result like any other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GitResult {
    /// The repository's top folder.
    pub repository: String,
    /// The exit status, when git exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Whether it was killed at the time limit.
    pub timed_out: bool,
    /// Standard output and standard error merged, head and tail when long, cleaned
    /// ([`crate::clean::clean_output`]).
    pub output: String,
    /// Bytes of output in all, before any cut.
    pub output_bytes: u64,
    /// Whether the output was cut.
    pub truncated: bool,
    /// How long the whole call took, in milliseconds.
    pub duration_ms: u64,
    /// How git's processes were held.
    pub containment: Containment,
}

/// Why a git tool could not give a result.
#[derive(Debug, thiserror::Error)]
pub enum GitError {
    /// The path is not an absolute path to a folder.
    #[error("{0} is not an absolute path to a folder")]
    BadPath(String),
    /// The requested folder is not inside the granted folder.
    #[error("{path} is not inside the granted folder {root}")]
    OutsideGrant {
        /// The folder asked for.
        path: String,
        /// The granted folder.
        root: String,
    },
    /// No repository was found.
    #[error(
        "no git repository at {path} (nor above it up to the granted folder {root}), and none of its sub-folders is one"
    )]
    NoRepository {
        /// The folder asked for.
        path: String,
        /// The granted folder.
        root: String,
    },
    /// Several sub-folders are repositories and the folder itself is none.
    #[error("{path} is not a git repository but holds several: {names}; give the path of one")]
    Several {
        /// The folder asked for.
        path: String,
        /// The sub-folders that are repositories.
        names: String,
    },
    /// The repository's work tree or git folder is outside the granted folder.
    #[error("the repository's {what} {place} is outside the granted folder {root}")]
    RepositoryOutside {
        /// `work tree`, `git folder` or `common git folder`.
        what: &'static str,
        /// Where it is.
        place: String,
        /// The granted folder.
        root: String,
    },
    /// A `git_diff` path filter was refused.
    #[error("{0}")]
    BadFilter(String),
    /// Git could not tell where the repository is.
    #[error("git could not read the repository at {path}: {output}")]
    Discovery {
        /// The folder.
        path: String,
        /// What git said.
        output: String,
    },
    /// The URL is refused (not `https://`, its host not allowed or not public).
    #[error("{0}")]
    Url(String),
    /// The destination cannot be cloned into.
    #[error("{0}")]
    Destination(String),
    /// `git` is not installed.
    #[error("git is not installed (looked in {0})")]
    NoGit(String),
    /// Git could not be started.
    #[error("cannot start git: {0}")]
    Spawn(std::io::Error),
    /// Git's box could not be built.
    #[error("cannot build git's box: {0}")]
    Box(#[from] sandbox::BoxError),
    /// Git started, but its output or its end could not be followed.
    #[error("lost track of git: {0}")]
    Follow(std::io::Error),
    /// The caller's worker could not run git (its box failed; it is replaced for the next call).
    #[error("the box that was to run git failed: {0}")]
    Worker(String),
    /// A file the clone needs could not be written (the trusted roots).
    #[error("cannot prepare the clone: {0}")]
    Setup(String),
}

/// The `git` binary from the `PATH` (or the usual places).
pub fn find_git() -> Result<PathBuf, GitError> {
    let path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_string());
    let found = path
        .split(':')
        .chain(["/usr/bin", "/bin"])
        .map(|dir| Path::new(dir).join("git"))
        .find(|candidate| candidate.is_file());
    found.ok_or(GitError::NoGit(path))
}

/// The whole environment of a git tool's git: [`GIT_PASSED_ENV`] from the broker's, then
/// [`FIXED_ENV`], [`GIT_TOOL_ENV`], `GIT_CONFIG_NOSYSTEM`, `GIT_CEILING_DIRECTORIES` when
/// given, and every setting of [`GIT_ENV`], [`GIT_TOOL_CONFIG`] and `extra` as
/// `GIT_CONFIG_KEY_n`/`GIT_CONFIG_VALUE_n` (a key with any character stays one key).
pub fn git_env(ceiling: Option<&Path>, extra: &[(String, String)]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = GIT_PASSED_ENV
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| ((*name).into(), value)))
        .collect();
    if std::env::var_os("PATH").is_none() {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    for (name, value) in FIXED_ENV.iter().chain(GIT_TOOL_ENV) {
        env.push(((*name).into(), (*value).into()));
    }
    if let Some(ceiling) = ceiling {
        env.push(("GIT_CEILING_DIRECTORIES".into(), ceiling.into()));
    }
    let mut settings: Vec<(String, String)> = Vec::new();
    for (name, key) in GIT_ENV {
        if let Some(index) = name.strip_prefix("GIT_CONFIG_KEY_") {
            let wanted = format!("GIT_CONFIG_VALUE_{index}");
            if let Some((_, value)) = GIT_ENV.iter().find(|(n, _)| *n == wanted) {
                settings.push(((*key).to_string(), (*value).to_string()));
            }
        } else if !name.starts_with("GIT_CONFIG_VALUE_") && *name != "GIT_CONFIG_COUNT" {
            env.push(((*name).into(), (*key).into()));
        }
    }
    settings.extend(
        GIT_TOOL_CONFIG
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string())),
    );
    settings.extend(extra.iter().cloned());
    env.push(("GIT_CONFIG_COUNT".into(), settings.len().to_string().into()));
    for (index, (key, value)) in settings.into_iter().enumerate() {
        env.push((format!("GIT_CONFIG_KEY_{index}").into(), key.into()));
        env.push((format!("GIT_CONFIG_VALUE_{index}").into(), value.into()));
    }
    env
}

/// What one git run gave.
pub struct Ran {
    /// How git ended, if it did.
    pub exit: Option<Exit>,
    /// Whether the time limit stopped it.
    pub timed_out: bool,
    /// Standard output and standard error, merged and bounded.
    pub merged: Captured,
    /// Standard output alone, its first 64 KiB (for the commands whose output is read).
    pub stdout: Vec<u8>,
    /// How it was held.
    pub containment: Containment,
}

impl Ran {
    /// Whether git ended in time with code 0.
    pub fn succeeded(&self) -> bool {
        !self.timed_out && self.exit == Some(Exit::Code(0))
    }
}

/// How one git run is held and bounded.
pub struct Run<'a> {
    /// Its box, or its containment.
    pub walls: &'a GitContainment,
    /// Its time limit.
    pub timeout: Duration,
    /// Bytes of merged output kept from the start.
    pub head_bytes: usize,
    /// Bytes of merged output kept from the end.
    pub tail_bytes: usize,
    /// Called once git started with what stops its box (the clone's size watch).
    pub on_start: Option<&'a mut dyn FnMut(sandbox::Stopper)>,
}

/// Runs git with `args` in `cwd` under `env`, and waits for it. Every git tool runs git this
/// way, `nettools`' `git_clone` too.
pub fn run_git(
    args: Vec<OsString>,
    cwd: &Path,
    env: Vec<(OsString, OsString)>,
    run: Run<'_>,
) -> Result<Ran, GitError> {
    let spec = CommandSpec {
        program: find_git()?,
        args,
        env,
        cwd: cwd.to_path_buf(),
    };
    let merged = std::cell::RefCell::new(Captured::new(run.head_bytes, run.tail_bytes));
    let mut stdout = Vec::new();
    let mut on_stdout = |bytes: &[u8]| {
        merged.borrow_mut().push(bytes);
        let room = STDOUT_KEPT.saturating_sub(stdout.len());
        // Cannot panic: the end is at most the length.
        stdout.extend_from_slice(&bytes[..room.min(bytes.len())]);
    };
    let mut on_stderr = |bytes: &[u8]| merged.borrow_mut().push(bytes);
    let mut child = match run.walls {
        GitContainment::Boxed(policy) => sandbox::spawn_boxed(&spec, policy, run.timeout)?,
        GitContainment::Contained => sandbox::spawn_contained(
            &spec,
            &ContainOptions {
                timeout: run.timeout,
                containment: Containment::PidNamespace,
            },
        )
        .map_err(GitError::Spawn)?,
        GitContainment::Worker(worker) => {
            let (ended, containment) =
                (worker.0)(&spec, run.timeout, &mut on_stdout, &mut on_stderr)
                    .map_err(GitError::Worker)?;
            return Ok(Ran {
                exit: ended.exit,
                timed_out: ended.timed_out,
                merged: merged.into_inner(),
                stdout,
                containment,
            });
        }
    };
    if let Some(on_start) = run.on_start {
        on_start(child.stopper().map_err(GitError::Spawn)?);
    }
    let containment = child.containment();
    let ended = child
        .finish(&mut on_stdout, &mut on_stderr)
        .map_err(GitError::Follow)?;
    Ok(Ran {
        exit: ended.exit,
        timed_out: ended.timed_out,
        merged: merged.into_inner(),
        stdout,
        containment,
    })
}

/// Bytes of standard output kept apart for the commands whose output the tool reads.
const STDOUT_KEPT: usize = 64 * 1024;

/// The time left of `timeout` since `started`, at least a millisecond (then git times out).
pub(crate) fn left(started: Instant, timeout: Duration) -> Duration {
    timeout
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1))
}

/// Milliseconds since `started`.
pub fn millis(started: Instant) -> u64 {
    u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// Git's exit code, when it ended in time by itself.
pub fn exit_code(ran: &Ran) -> Option<i32> {
    match ran.exit {
        Some(Exit::Code(code)) if !ran.timed_out => Some(code),
        _ => None,
    }
}

/// The signal that ended git, if one did.
pub fn signal(ran: &Ran) -> Option<i32> {
    match ran.exit {
        Some(Exit::Signal(signal)) => Some(signal),
        _ => None,
    }
}
