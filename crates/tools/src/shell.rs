//! `shell`: one command line through `bash -c` (or `sh -c` where there is no bash), contained
//! by the sandbox crate (the first process of its own PID and mount namespaces, every
//! capability dropped, `no_new_privs`), with a scrubbed environment, a time limit, and output
//! bounded in memory.

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use sandbox::{CommandSpec, ContainOptions, Ended, Exit, spawn_contained};

pub use sandbox::Containment;

use crate::clean::clean_output;

pub use proto::tools::schemas::{MAX_TIMEOUT_SECS, broker_shell_schema, shell_schema};

/// Bytes kept from the start of each stream.
pub const HEAD_BYTES: usize = 64 * 1024;
/// Bytes kept from the end of each stream.
pub const TAIL_BYTES: usize = 192 * 1024;

/// The variables a command sees from the broker's environment, when they are set; nothing else
/// passes (no tokens, no sockets, no `LD_PRELOAD`).
pub const PASSED_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR",
];

/// Variables every command gets, so that tools write plain text and never wait for input.
pub const FIXED_ENV: &[(&str, &str)] = &[
    ("TERM", "dumb"),
    ("NO_COLOR", "1"),
    ("PAGER", "cat"),
    ("GIT_PAGER", "cat"),
    ("GIT_TERMINAL_PROMPT", "0"),
];

/// Git's own hooks into a repository, turned off for every command: a repository is data from
/// outside, and its `.git/config` must not choose programs that run when the agent types
/// `git status`. These are command-line level settings (`GIT_CONFIG_COUNT`, as `git -c`),
/// which win over every configuration file; `GIT_CONFIG_NOSYSTEM` skips `/etc/gitconfig`.
///
/// - `core.fsmonitor=false`: no file-system monitor hook (run by `git status`).
/// - `core.hooksPath=/dev/null`: no hook of `.git/hooks` (commit, checkout, merge, ...).
/// - `core.pager=cat`, `core.editor=false`, `sequence.editor=false`: no pager or editor from
///   the repository (and an editor fails instead of waiting for input).
/// - `core.sshCommand=ssh`: no transport program from the repository.
/// - `protocol.ext.allow=never`: no `ext::` remote helper, which runs any command.
/// - `safe.bareRepository=explicit`: a bare repository planted inside a work tree is not
///   entered by merely changing into it.
///
/// Not covered by any setting: `diff.external` and the drivers and filters a repository's
/// `.gitattributes` names (`diff.<driver>.command`, `filter.<name>.clean`); an empty value
/// makes `git diff` fail instead. The sandbox's box is what confines those.
pub const GIT_ENV: &[(&str, &str)] = &[
    ("GIT_CONFIG_NOSYSTEM", "1"),
    ("GIT_CONFIG_COUNT", "8"),
    ("GIT_CONFIG_KEY_0", "core.fsmonitor"),
    ("GIT_CONFIG_VALUE_0", "false"),
    ("GIT_CONFIG_KEY_1", "core.hooksPath"),
    ("GIT_CONFIG_VALUE_1", "/dev/null"),
    ("GIT_CONFIG_KEY_2", "core.pager"),
    ("GIT_CONFIG_VALUE_2", "cat"),
    ("GIT_CONFIG_KEY_3", "core.editor"),
    ("GIT_CONFIG_VALUE_3", "false"),
    ("GIT_CONFIG_KEY_4", "sequence.editor"),
    ("GIT_CONFIG_VALUE_4", "false"),
    ("GIT_CONFIG_KEY_5", "core.sshCommand"),
    ("GIT_CONFIG_VALUE_5", "ssh"),
    ("GIT_CONFIG_KEY_6", "protocol.ext.allow"),
    ("GIT_CONFIG_VALUE_6", "never"),
    ("GIT_CONFIG_KEY_7", "safe.bareRepository"),
    ("GIT_CONFIG_VALUE_7", "explicit"),
];

/// The `PATH` a command gets when the broker has none.
pub const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";

/// The arguments of `shell`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShellArgs {
    /// The command line to run.
    pub command: String,
    /// The absolute path of the directory to run it in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
    /// The longest the command may run, in seconds (default [`DEFAULT_TIMEOUT_SECS`], at most
    /// [`MAX_TIMEOUT_SECS`], and never past the broker's own limit for `shell`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_secs: Option<u64>,
}

/// A command's time limit when the call names none (seed 002).
pub const DEFAULT_TIMEOUT_SECS: u64 = 60;

impl ShellArgs {
    /// The call's `command` alone, in the folder the broker chooses, with the default time.
    pub fn new(command: impl Into<String>) -> ShellArgs {
        ShellArgs {
            command: command.into(),
            cwd: None,
            timeout_secs: None,
        }
    }

    /// The time the command gets: the smallest of `timeout_secs` (or
    /// [`DEFAULT_TIMEOUT_SECS`]), [`MAX_TIMEOUT_SECS`] and `limit` (the broker's limit).
    pub fn effective_timeout(&self, limit: Duration) -> Duration {
        let asked = self
            .timeout_secs
            .unwrap_or(DEFAULT_TIMEOUT_SECS)
            .min(MAX_TIMEOUT_SECS);
        Duration::from_secs(asked).min(limit)
    }
}

/// How `shell` runs commands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellOptions {
    /// The longest a command may run (the broker's limit; a call's `timeout_secs` may ask for
    /// less, [`ShellArgs::effective_timeout`]); then every process it started is killed.
    pub timeout: Duration,
    /// The directory used when the call names none.
    pub default_cwd: PathBuf,
    /// Bytes kept from the start of each stream.
    pub head_bytes: usize,
    /// Bytes kept from the end of each stream.
    pub tail_bytes: usize,
    /// Contain each command (default): the first process of its own PID and mount namespaces,
    /// or under a child subreaper where the kernel refuses namespaces. When false, the command
    /// only leads its own process group (which `setsid` leaves): for the sandbox's box, which
    /// contains its commands itself, to set. Capabilities are dropped either way.
    pub contain: bool,
    /// Run each command in a box built from this policy ([`sandbox::spawn_boxed`]): then
    /// `contain` is not used, the box contains the command itself.
    pub policy: Option<sandbox::Policy>,
}

impl Default for ShellOptions {
    fn default() -> Self {
        ShellOptions {
            timeout: Duration::from_secs(60),
            default_cwd: PathBuf::from("/"),
            head_bytes: HEAD_BYTES,
            tail_bytes: TAIL_BYTES,
            contain: true,
            policy: None,
        }
    }
}

/// What a command did. A non-zero exit is a result like any other.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ShellResult {
    /// The exit status, when the command exited.
    pub exit_code: Option<i32>,
    /// The signal that ended it, when one did.
    pub signal: Option<i32>,
    /// Whether it was killed at the time limit.
    pub timed_out: bool,
    /// Standard output (head and tail when long, with a marker between), cleaned for the
    /// model ([`clean_output`]: no terminal escape sequences, no carriage-return redraws).
    pub stdout: String,
    /// Standard error, the same way.
    pub stderr: String,
    /// Bytes written to standard output in all, before any cut or cleaning.
    pub stdout_bytes: u64,
    /// Bytes written to standard error in all, before any cut or cleaning.
    pub stderr_bytes: u64,
    /// Whether either stream was cut.
    pub truncated: bool,
    /// How long it ran, in milliseconds.
    pub duration_ms: u64,
    /// How the command's processes were held together (`pid_namespace`, or the fall-backs
    /// `subreaper` and `process_group`), so the result header names a weaker one.
    pub containment: Containment,
}

/// Why a command could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum ShellError {
    /// `cwd` is not an absolute path to a directory.
    #[error("cwd {0:?} is not an absolute path to a directory")]
    BadCwd(String),
    /// The command line is empty.
    #[error("the command is empty")]
    Empty,
    /// The command line contains a NUL byte.
    #[error("the command contains a NUL byte")]
    Nul,
    /// The shell could not be started.
    #[error("cannot start {shell}: {source}")]
    Spawn {
        /// The shell tried.
        shell: String,
        /// The cause.
        source: io::Error,
    },
    /// The command's box could not be built.
    #[error("cannot build the command's box: {0}")]
    Box(#[from] sandbox::BoxError),
    /// The command started, but its output or its end could not be followed.
    #[error("lost track of the command: {0}")]
    Follow(io::Error),
    /// The warm box that was to run the command failed (it is replaced for the next call).
    #[error("the command's warm box failed: {0}")]
    Warm(String),
}

/// Runs `args.command` and waits for it, at most `options.timeout`.
pub fn shell(args: &ShellArgs, options: &ShellOptions) -> Result<ShellResult, ShellError> {
    shell_with(args, options, &mut |spec, timeout, on_stdout, on_stderr| {
        let contain = ContainOptions {
            timeout,
            containment: if options.contain {
                Containment::PidNamespace
            } else {
                Containment::ProcessGroup
            },
        };
        let child = match &options.policy {
            Some(policy) => sandbox::spawn_boxed(spec, policy, timeout)?,
            None => spawn_contained(spec, &contain).map_err(|source| ShellError::Spawn {
                shell: spec.program.display().to_string(),
                source,
            })?,
        };
        let containment = child.containment();
        let ended = child
            .finish(on_stdout, on_stderr)
            .map_err(ShellError::Follow)?;
        Ok((ended, containment))
    })
}

/// Starts a command and follows it to its end: its output to the two sinks as it comes, then
/// how it ended and how its processes were held together. [`shell`] starts each command
/// itself; a caller with a warm box passes one of these to [`shell_with`].
pub type RunCommand<'a> = dyn FnMut(
        &CommandSpec,
        Duration,
        &mut dyn FnMut(&[u8]),
        &mut dyn FnMut(&[u8]),
    ) -> Result<(Ended, Containment), ShellError>
    + 'a;

/// Runs `args.command` as [`shell`] does, started and followed by `run` (given the command and
/// its time limit); `options.contain` and `options.policy` are `run`'s to honour.
pub fn shell_with(
    args: &ShellArgs,
    options: &ShellOptions,
    run: &mut RunCommand<'_>,
) -> Result<ShellResult, ShellError> {
    let spec = command_spec(args, &options.default_cwd)?;
    let timeout = args.effective_timeout(options.timeout);
    let started = Instant::now();
    let mut stdout = Captured::new(options.head_bytes, options.tail_bytes);
    let mut stderr = Captured::new(options.head_bytes, options.tail_bytes);
    let (ended, containment) = run(
        &spec,
        timeout,
        &mut |bytes| stdout.push(bytes),
        &mut |bytes| stderr.push(bytes),
    )?;
    Ok(ShellResult {
        exit_code: match ended.exit {
            Some(Exit::Code(code)) if !ended.timed_out => Some(code),
            _ => None,
        },
        signal: match ended.exit {
            Some(Exit::Signal(signal)) => Some(signal),
            _ => None,
        },
        timed_out: ended.timed_out,
        truncated: stdout.cut() > 0 || stderr.cut() > 0,
        stdout_bytes: stdout.total,
        stderr_bytes: stderr.total,
        stdout: stdout.text(),
        stderr: stderr.text(),
        duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        containment,
    })
}

/// The command `args` runs: its script through [`find_shell`]'s `-c`, the scrubbed environment
/// ([`PASSED_ENV`], [`FIXED_ENV`], [`GIT_ENV`]), in `cwd` or `default_cwd`; a `shell` call and a
/// background job (`crate::jobs`) start the same way.
pub(crate) fn command_spec(
    args: &ShellArgs,
    default_cwd: &Path,
) -> Result<CommandSpec, ShellError> {
    if args.command.trim().is_empty() {
        return Err(ShellError::Empty);
    }
    if args.command.contains('\0') {
        return Err(ShellError::Nul);
    }
    let cwd = match &args.cwd {
        Some(dir) if Path::new(dir).is_absolute() && Path::new(dir).is_dir() => PathBuf::from(dir),
        Some(dir) => return Err(ShellError::BadCwd(dir.clone())),
        None => default_cwd.to_path_buf(),
    };
    Ok(CommandSpec {
        program: find_shell(),
        args: vec!["-c".into(), args.command.clone().into()],
        env: command_env(),
        cwd,
    })
}

/// The whole environment of a command: `PASSED_ENV` from the broker's where set (with
/// `DEFAULT_PATH` when it has no `PATH`), then `FIXED_ENV` and `GIT_ENV`.
fn command_env() -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: Vec<(std::ffi::OsString, std::ffi::OsString)> = PASSED_ENV
        .iter()
        .filter_map(|name| std::env::var_os(name).map(|value| ((*name).into(), value)))
        .collect();
    if std::env::var_os("PATH").is_none() {
        env.push(("PATH".into(), DEFAULT_PATH.into()));
    }
    for (name, value) in FIXED_ENV.iter().chain(GIT_ENV) {
        env.push(((*name).into(), (*value).into()));
    }
    env
}

/// The shell that runs commands: `bash` from the `PATH` (or the usual places), else `/bin/sh`.
/// The broker judges a script by the rules of this shell (POSIX rules when it is not bash).
pub fn find_shell() -> PathBuf {
    let path = std::env::var("PATH").unwrap_or_else(|_| DEFAULT_PATH.to_string());
    path.split(':')
        .chain(["/usr/bin", "/bin"])
        .map(|dir| Path::new(dir).join("bash"))
        .find(|candidate| candidate.is_file())
        .unwrap_or_else(|| PathBuf::from("/bin/sh"))
}

/// One stream's bytes: the first `head` of them, the last `tail`, and how many in all.
pub struct Captured {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    pub(crate) total: u64,
}

impl Captured {
    pub(crate) fn new(head_cap: usize, tail_cap: usize) -> Captured {
        Captured {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_cap.saturating_sub(self.head.len());
        let (to_head, rest) = bytes.split_at(room.min(bytes.len()));
        self.head.extend_from_slice(to_head);
        bytes = rest;
        if bytes.len() > self.tail_cap {
            // Invariant: the start is below the length, which is past `tail_cap`.
            bytes = &bytes[bytes.len() - self.tail_cap..];
            self.tail.clear();
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow.min(self.tail.len()));
        self.tail.extend(bytes);
    }

    /// Bytes dropped between head and tail.
    pub fn cut(&self) -> u64 {
        self.total - self.head.len() as u64 - self.tail.len() as u64
    }

    /// The head and the tail, each cleaned ([`clean_output`]), with a marker between when
    /// bytes were cut.
    pub fn text(&self) -> String {
        let mut text = clean_output(&self.head);
        let tail: Vec<u8> = self.tail.iter().copied().collect();
        if self.cut() > 0 {
            text.push_str(&format!("\n[... {} bytes cut ...]\n", self.cut()));
        }
        text.push_str(&clean_output(&tail));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::Captured;

    #[test]
    fn a_stream_keeps_its_head_and_tail_and_counts_the_cut() {
        let mut c = Captured::new(3, 4);
        c.push(b"abcdef");
        c.push(b"ghij");
        assert_eq!(c.total, 10);
        assert_eq!(c.cut(), 3);
        assert_eq!(c.text(), "abc\n[... 3 bytes cut ...]\nghij");
    }

    #[test]
    fn a_short_stream_is_whole() {
        let mut c = Captured::new(3, 4);
        c.push(b"abcde");
        assert_eq!(c.text(), "abcde");
        assert_eq!(c.cut(), 0);
    }

    #[test]
    fn the_time_limit_is_the_smallest_of_the_call_the_seed_and_the_broker() {
        use std::time::Duration;
        let mut args = super::ShellArgs::new("true");
        let broker = Duration::from_secs(120);
        assert_eq!(args.effective_timeout(broker), Duration::from_secs(60));
        args.timeout_secs = Some(5);
        assert_eq!(args.effective_timeout(broker), Duration::from_secs(5));
        args.timeout_secs = Some(200);
        assert_eq!(args.effective_timeout(broker), Duration::from_secs(120));
        args.timeout_secs = Some(10_000);
        assert_eq!(
            args.effective_timeout(Duration::from_secs(1_000)),
            Duration::from_secs(300)
        );
        assert_eq!(
            args.effective_timeout(Duration::from_millis(50)),
            Duration::from_millis(50)
        );
    }

    #[test]
    fn one_huge_write_keeps_only_its_end_in_the_tail() {
        let mut c = Captured::new(2, 3);
        c.push(b"0123456789");
        assert_eq!(c.text(), "01\n[... 5 bytes cut ...]\n789");
    }
}
