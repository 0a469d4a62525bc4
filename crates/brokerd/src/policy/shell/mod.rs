//! Shell coverage: whether a `shell` call's script runs only commands that start with a granted
//! prefix, word by word.
//!
//! The script is read with `brush-parser` (tokenizer and parser), and every word is then resolved
//! here with the shell's own quoting rules. The rule is simple and errs on the side of "not
//! covered": a script is covered only if the checker understands all of it and every simple
//! command in it (in pipelines, lists, subshells, brace groups and `sh -c`/`bash -c`/`dash -c`
//! with a literal script, recursively) starts with a granted prefix.
//!
//! Decisions, written down so that the grant decision and the owner know what to expect:
//!
//! - **Empty scripts** (nothing, blanks, only comments) are not covered ([`NotCovered::Empty`]);
//!   so is an inner `sh -c ''`.
//! - **Unquoted glob characters** (`*`, `?`, `[…]`) and **brace expansion** (`{a,b}`, `{1..3}`)
//!   are not covered in *any* word, arguments included: the shell would expand them against the
//!   file system, so the words that run are not the words that were checked (and later path
//!   checks could not see them). Quoted, they are literal characters and fine anywhere, also in a
//!   prefix word (`"*"` is compared as a star). `{}` and `@{u}` are not brace expansions.
//! - **Tilde** (`~`, `~/x`) is accepted in arguments after the prefix (it names a path, as a
//!   literal path could), never in a word compared with a prefix word, nor in an `sh -c` script.
//! - **ANSI-C quoting** (`$'…'`) is read differently by bash and by dash, so a word that uses it
//!   is accepted only as an argument after the prefix; `$"…"` (translated text) is refused.
//! - **Refused whatever the grants say**: `eval`, `source`, `.`, `exec`, and the builtins that
//!   change what later commands mean (`alias`, `enable`, `hash`, `trap`, `shopt`, `set`,
//!   `declare`/`typeset`/`export`/`readonly`/`local`, `unset`, `let`, `read`, `mapfile`/`readarray`,
//!   `getopts`, `fc`, `coproc`, `compgen`/`complete`/`compopt`, `bind`), plus `printf -v`,
//!   `test -v`/`[ -v` (bash evaluates array subscripts there) and `wait -p`.
//! - **Control flow** (`if`, `while`, `until`, `for`, `case`, `select`), `[[ … ]]`, `(( … ))`,
//!   function definitions, assignments, any redirection (heredocs, here-strings, `2>&1`, `|&`),
//!   process substitution and a background `&` are not covered.
//! - `!` (negation) and `time` in front of a pipeline are understood and allowed.
//! - An empty prefix covers nothing.
//! - Limits: scripts longer than [`MAX_SCRIPT_BYTES`] are not read; `sh -c` nests at most
//!   [`MAX_SHELL_DEPTH`] deep; subshells nest at most [`MAX_NESTING`] deep, and so do brace
//!   groups. brush's parser backtracks exponentially on nested parentheses and `case`, and
//!   recurses on the stack, so these limits are checked on the tokens before it runs; a `<<`
//!   anywhere is refused before the tokenizer runs (it can loop without end on some heredocs).
//!   Any panic inside brush is caught and reported as [`NotCovered::Unparsable`].

mod builtins;
mod screen;
mod show;
mod walk;
mod warnings;
mod words;

use std::collections::VecDeque;
use std::fmt;

pub use warnings::prefix_warning;
pub use words::prefix_words;

use walk::check_one;

/// The longest script the checker reads, in bytes.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// How deeply `sh -c '…'` may nest inside a script (`sh -c "sh -c 'ls'"` is 2).
pub const MAX_SHELL_DEPTH: usize = 4;
/// How deeply subshells `( … )` may nest in one script, and, separately, brace groups `{ …; }`.
pub const MAX_NESTING: usize = 8;

/// Why a script is not covered, for the owner and the audit log (Display: one sentence naming
/// the command or construct).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotCovered {
    /// The script is not valid shell syntax as the checker reads it (the detail says where).
    Unparsable(String),
    /// The script is longer than [`MAX_SCRIPT_BYTES`] (its length in bytes).
    TooLong(usize),
    /// A word asks for a substitution: `$VAR`, `${…}`, `$(…)`, backticks, `$((…))`, `<(…)`.
    Substitution(String),
    /// A variable assignment, before a command (`PATH=/tmp git`) or alone (`X=1`).
    Assignment(String),
    /// A redirection, heredoc or here-string (refused until the sandbox enforces paths).
    Redirection(String),
    /// A command sent to the background with `&`.
    Background,
    /// A shell function definition (the function's name).
    FunctionDefinition(String),
    /// A builtin that runs text as commands or changes how later commands run (`eval`, …).
    Builtin(String),
    /// A word with unquoted glob or brace expansion characters.
    Glob(String),
    /// Control flow: `if`, `while`, `until`, `for`, `case`, `select`.
    ControlFlow(String),
    /// Something else the checker does not follow (`[[ … ]]`, `(( … ))`, `$'…'` in a command
    /// word, …), described.
    Unsupported(String),
    /// A command that no granted prefix covers (its words).
    NoPrefix(String),
    /// Subshells, brace groups or `sh -c` scripts nest more deeply than the checker follows.
    TooDeep,
    /// The script runs no command at all (empty, blanks or only comments).
    Empty,
}

impl fmt::Display for NotCovered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unparsable(detail) => {
                write!(
                    f,
                    "the script is not shell syntax the checker can read ({detail})"
                )
            }
            Self::TooLong(len) => write!(
                f,
                "the script is {len} bytes long, more than the {MAX_SCRIPT_BYTES} bytes the checker reads"
            ),
            Self::Substitution(word) => write!(
                f,
                "`{word}` asks the shell to substitute a value (a variable, a command's output or a file), which the checker cannot see through"
            ),
            Self::Assignment(word) => write!(
                f,
                "`{word}` assigns a shell variable, which could change what the commands do"
            ),
            Self::Redirection(redirect) => write!(
                f,
                "`{redirect}` redirects input or output, which is refused until the sandbox enforces paths"
            ),
            Self::Background => write!(f, "a command is sent to the background with `&`"),
            Self::FunctionDefinition(name) => write!(
                f,
                "`{name}` is defined as a shell function, which could stand in for a granted command"
            ),
            Self::Builtin(name) => write!(
                f,
                "`{name}` runs text as commands or changes how the shell runs later commands, so it is never covered"
            ),
            Self::Glob(word) => write!(
                f,
                "`{word}` has unquoted glob or brace expansion characters, which the shell would expand (quote them to mean them literally)"
            ),
            Self::ControlFlow(keyword) => write!(
                f,
                "`{keyword}` is control flow, which the checker does not follow"
            ),
            Self::Unsupported(what) => write!(f, "the checker does not follow {what}"),
            Self::NoPrefix(command) => {
                write!(f, "no granted prefix covers the command `{command}`")
            }
            Self::TooDeep => write!(
                f,
                "the script nests subshells, groups or `sh -c` scripts more deeply than the checker follows"
            ),
            Self::Empty => write!(
                f,
                "the script runs no command (it is empty or only comments)"
            ),
        }
    }
}

impl std::error::Error for NotCovered {}

/// Whether every simple command of `script` starts with one of `prefixes`, word by word.
pub fn covers_script(script: &str, prefixes: &[Vec<String>]) -> Result<(), NotCovered> {
    walk_script(script, prefixes, Mode::Cover).map(|_| ())
}

/// Whether some simple command of `script` (in `sh -c` scripts too) runs one of `prefixes`:
/// what a deny grant's `commands` forbid. Matching is looser than for allow grants, on purpose:
/// the program by name wherever it lives, and the prefix's further words anywhere after it in
/// order, so options before a subcommand (`git -C . push`) do not slip past `git push`. A script the checker cannot read touches
/// nothing here; no allow grant covers it either, so it is refused all the same.
pub fn touches_script(script: &str, prefixes: &[Vec<String>]) -> bool {
    walk_script(script, prefixes, Mode::Touch).is_ok_and(|hits| hits > 0)
}

/// What the walk is for: every command covered, or any command touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Cover,
    Touch,
}

/// Walks `script` and its `sh -c` scripts; returns how many commands a prefix matched.
fn walk_script(script: &str, prefixes: &[Vec<String>], mode: Mode) -> Result<usize, NotCovered> {
    let mut inner: VecDeque<(String, usize)> = VecDeque::new();
    let mut hits = check_one(script, prefixes, 0, &mut inner, mode)?;
    // Scripts of `sh -c '…'` are checked after their parent, one after another (never on top of
    // the parent's stack frames), each one level deeper.
    while let Some((text, depth)) = inner.pop_front() {
        hits += check_one(&text, prefixes, depth, &mut inner, mode)?;
    }
    Ok(hits)
}
