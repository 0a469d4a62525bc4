//! What a command of a script writes, as the walkers find it: the values (whole words or parts
//! of one), the folders it moves to, the git configuration files it changes. Shared by the
//! generic writers (`writes`) and git's own (`gitwrites`, `gitconfig`).

use super::NotCovered;
use super::words::Literal;

/// The configuration file a `git config` writes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GitConfigScope {
    /// The repository's `.git/config` (the repository git finds from the call's folder, or from
    /// the `-C` folders reported beside it).
    Local,
    /// `~/.gitconfig` and `$XDG_CONFIG_HOME/git/config`.
    Global,
    /// The system's `/etc/gitconfig`.
    System,
    /// The worktree's `config.worktree`.
    Worktree,
    /// The file of `--file`/`-f`, as written (relative to the call's folder unless absolute).
    File(String),
}

/// A value as found: a whole word, or a part of one (`--output=VALUE`, `-oVALUE`).
pub(super) struct Value {
    pub(super) text: String,
    /// A leading `~` is one the shell expands (an unquoted `~` starting a whole word).
    pub(super) expands: bool,
}

/// What one command writes, before it is placed under the script's folders.
#[derive(Default)]
pub(super) struct Found {
    pub(super) paths: Vec<Value>,
    pub(super) chdirs: Vec<Value>,
    pub(super) configs: Vec<GitConfigScope>,
}

/// A write the checker cannot place: the call is not covered.
pub(super) fn unknown(what: String) -> NotCovered {
    NotCovered::UnknownWrite(what)
}

/// A whole word's value.
pub(super) fn word_value(word: &Literal) -> Value {
    Value {
        text: word.text.clone(),
        expands: word.leading_tilde,
    }
}

/// A path the checker names itself (`.`, `~/.ssh`).
pub(super) fn fixed(text: &str) -> Value {
    Value {
        text: text.to_owned(),
        expands: true,
    }
}

/// A value inside a word (after `=` or an option letter): a `~` there may or may not be
/// expanded.
pub(super) fn part(text: &str) -> Value {
    Value {
        text: text.to_owned(),
        expands: false,
    }
}
