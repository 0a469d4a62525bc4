//! The words of one command, below every way of running it: what to run ([`CommandSpec`]) and
//! how it ended ([`Exit`], [`Ended`]).

use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;

/// The command to run: a program, its arguments, its whole environment (nothing else is
/// inherited) and its working folder. Standard input is empty; output is collected by
/// [`crate::ContainedChild::finish`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandSpec {
    /// The program, by path.
    pub program: PathBuf,
    /// Its arguments, without the program's name.
    pub args: Vec<OsString>,
    /// Its environment, whole.
    pub env: Vec<(OsString, OsString)>,
    /// The folder it starts in.
    pub cwd: PathBuf,
}

impl CommandSpec {
    /// A [`Command`] of exactly this program, arguments, environment (the whole of it) and
    /// folder: what a box's supervisor and the command worker both start from.
    pub(crate) fn command(&self) -> Command {
        let mut command = Command::new(&self.program);
        command
            .args(&self.args)
            .env_clear()
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .current_dir(&self.cwd);
        command
    }
}

/// How a command ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// This signal ended it.
    Signal(i32),
}

/// What [`crate::ContainedChild::finish`] reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// How the command ended, when that is known (a command killed at the deadline ended by
    /// `SIGKILL`).
    pub exit: Option<Exit>,
    /// Whether it was killed at the deadline.
    pub timed_out: bool,
    /// Whether it was killed for writing more than its box's [`crate::Limits::output_bytes`]
    /// (what came past the limit was not passed on).
    pub output_exceeded: bool,
    /// Whether its [`crate::Stopper`] stopped it (or was dropped) before it ended.
    pub stopped: bool,
}
