//! Shell coverage: whether a `shell` call's script runs only commands that start with a granted
//! prefix, word by word ([`covers_script_as`], for allow grants); whether it may run what a deny
//! grant names ([`touches_script_as`]); and where it writes files ([`write_targets`]).
//!
//! The script is read with `brush-parser` (tokenizer and parser), and every word is then resolved
//! here with the shell's own quoting rules. The rule is simple and errs on the side of "not
//! covered": a script is covered only if the checker understands all of it and every simple
//! command in it (in pipelines, lists, subshells, brace groups and `sh -c`/`bash -c`/`dash -c`
//! with a literal script, recursively) starts with a granted prefix.
//!
//! **Which shell's rules judge a script.** The `shell` tool runs `bash -c`, so the call's script
//! is read by bash's rules ([`Dialect::Bash`]), or by POSIX sh's when the tool falls back to
//! `/bin/sh` ([`Dialect::Posix`]; the decision passes the dialect). The script of `sh -c` or
//! `dash -c` (any path whose last part is `sh` or `dash`) is always read by POSIX sh's rules, the
//! script of `bash -c` by bash's. brush reads bash (even in its sh mode), so under sh's rules
//! whatever bash and dash read differently is refused before brush runs
//! ([`NotCovered::ShellDialect`]): `$'…'` and `$"…"` anywhere in the text (bash reads one quoted
//! word where dash reads a `$` and a quote, so the two disagree about everything after it), bash's
//! operators (`&>`, `&>>`, `|&`, `<<<`, `;&`, `;;&`), `((`, process substitution, `time` and `! !`
//! at a command's start, and a `~` inside a word (bash expands it after `=` or `:`). Brace
//! expansion, `[[`, `function`, `select` and `coproc` are refused under both. A differential test
//! runs every script covered under sh's rules through both bash and dash and compares what runs.
//!
//! **Deny wins on doubt** ([`touches_script_as`], `touch.rs`): a deny prefix touches its program
//! wherever it lives and in its dashed form (`git-push`), run by wrappers (`env`, `nice`,
//! `timeout`, `sudo`, `xargs`, `find -exec`, interpreters' code), inside any shell script (a
//! script the checker cannot read, or a shell reading a file or its input, touches every deny),
//! with an inline setting naming the denied word (`--config alias.p=publish`), and, for git,
//! any invocation whose subcommand cannot be known for certain: `-c`, `--config-env`,
//! `--exec-path`, `--git-dir`, `--work-tree`, a word that is not one of git's own commands (an
//! alias or a `git-*` program), subcommands that run commands named elsewhere (`submodule`,
//! `bisect`, `rebase -x`, tools, hooks), the plumbing that runs the denied one (`send-pack` for
//! `push`), and a `git config` that writes anything but a few plain keys (`alias.*`, `include.*`,
//! editors, pagers, helpers all make later commands run something else).
//!
//! **Git options under allow grants**: `-c`, `--config-env`, `--exec-path`, `--git-dir`,
//! `--work-tree` and any global option the checker does not know make a covered `git` command
//! not covered ([`NotCovered::GitOption`]), and so do a subcommand's options that name a program
//! or a new repository's configuration (`clone -c`/`-u`/`--template`, `--upload-pack`,
//! `--receive-pack`, `rebase -x`, `grep -O`, a merge strategy git does not build in).
//!
//! **Other programs under a deny**: the deny's words in order, the dashed form and inline
//! settings are matched for every program; aliases and scripts that live in files (cargo's
//! `[alias]`, npm scripts, Makefiles) are not seen, so a deny on such a program's subcommand
//! only holds against grants that do not cover the program itself.
//!
//! **Write targets** ([`write_targets`], `writes.rs` and the table in `writers.rs`): until the
//! sandbox enforces paths, every literal word through which a command may write is reported for
//! the decision to resolve against the call's folder: the operands of writers (`cp`, `mv`, `rm`,
//! `touch`, `tee`, …), the values of write options of any program (`--output`, `-o`, `--log-file`,
//! … by any abbreviation) and of each writer (`dd of=`, `tar -f`/`-C`, `curl -o`/`-O`,
//! `wget -O`/`-P`, `sed -i` and `w`, `find -delete`/`-fprint`, …), git's (`-C`, `init`, `clone`,
//! `worktree add`, `format-patch`, `bundle`, and `git config` writes as
//! [`WriteTarget::GitConfig`]), and, after `cd`, `git -C` or `tar -C`, relative paths under each
//! folder the command may be in. Reporting a read as a write only costs a refusal, so the table
//! reports generously; where the writes cannot be known (a script a wrapper's shell reads, paths
//! `xargs` adds, `tar -P`, `sed -f`, …) the answer is [`NotCovered::UnknownWrite`].
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
//! - **ANSI-C quoting** (`$'…'`) is accepted under bash's rules only as an argument after the
//!   prefix, never as the script of `sh -c` or `bash -c`; its escapes by number or control letter
//!   (`\x41`, `\101`, `\u…`, `\cA`) are refused, so the decoded text is always what bash passes.
//!   `$"…"` (translated text) is refused.
//! - **Refused whatever the grants say**: `eval`, `source`, `.`, `exec`, and the builtins that
//!   change what later commands mean (`alias`, `enable`, `hash`, `trap`, `shopt`, `set`,
//!   `declare`/`typeset`/`export`/`readonly`/`local`, `unset`, `let`, `read`, `mapfile`/`readarray`,
//!   `getopts`, `fc`, `coproc`, `compgen`/`complete`/`compopt`, `bind`), plus `printf -v`,
//!   `test -v`/`[ -v` (bash evaluates array subscripts there) and `wait -p`.
//! - **Control flow** (`if`, `while`, `until`, `for`, `case`, `select`), `[[ … ]]`, `(( … ))`,
//!   function definitions, assignments, any redirection (heredocs, here-strings, `2>&1`, `|&`),
//!   process substitution and a background `&` are not covered; where the box enforces paths
//!   ([`PathEnforcement::Enforced`]), a redirection to or from a named file and a descriptor's
//!   duplication are covered, the file being one more place the decision checks.
//! - `!` (negation) and, under bash's rules, `time` in front of a pipeline are understood and
//!   allowed.
//! - An empty prefix covers nothing.
//! - Limits: scripts longer than [`MAX_SCRIPT_BYTES`] are not read; `sh -c` nests at most
//!   [`MAX_SHELL_DEPTH`] deep; subshells nest at most [`MAX_NESTING`] deep, and so do brace
//!   groups. brush's parser backtracks exponentially on nested parentheses and `case`, and
//!   recurses on the stack, so these limits are checked on the tokens before it runs; a `<<`
//!   anywhere is refused before the tokenizer runs (it can loop without end on some heredocs).
//!   A file descriptor number that does not fit an `i32` (`99999999999>out`), on which brush
//!   panics, is refused on the tokens too. Any other panic inside brush is caught and reported
//!   as [`NotCovered::Unparsable`].

mod archives;
mod builtins;
mod found;
mod git;
mod gitconfig;
mod gitwrites;
mod rails;
mod runners;
mod screen;
mod sed;
mod show;
mod touch;
mod walk;
mod warnings;
mod words;
mod writers;
mod writes;

use std::collections::VecDeque;
use std::fmt;

pub use found::GitConfigScope;
pub use rails::{Place, backgrounded, catastrophic, path_words, script_words};
pub use warnings::prefix_warning;
pub use words::prefix_words;
pub use writes::WriteTarget;

use walk::{Context, check_one};

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
    /// A redirection, heredoc or here-string (refused where the box does not enforce paths:
    /// [`PathEnforcement::Unenforced`]; a heredoc or here-string always).
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
    /// The script runs under sh (dash) and uses something bash and sh read differently (`$'…'`,
    /// `$"…"`, bash's operators, `((`, `time`, a `~` inside a word, …), described.
    ShellDialect(String),
    /// A git option that makes git use another repository, configuration or program (`-c`,
    /// `--config-env`, `--exec-path`, `--git-dir`, `--work-tree`), or a global option the checker
    /// does not know.
    GitOption(String),
    /// A command writes files where the checker cannot tell (a script it cannot see, paths a
    /// program adds, an extraction that may leave the folder, …), described.
    UnknownWrite(String),
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
            Self::Redirection(redirect) if redirect.starts_with("<<") => write!(
                f,
                "`{redirect}` is a heredoc or here-string, which the checker does not read"
            ),
            Self::Redirection(redirect) => write!(
                f,
                "`{redirect}` redirects input or output, which is refused where the box does not enforce paths"
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
            Self::ShellDialect(what) => write!(
                f,
                "`{what}` is read differently by bash and by sh (dash), and this script runs under sh"
            ),
            Self::GitOption(option) => write!(
                f,
                "`git {option}` makes git use another repository, configuration or program"
            ),
            Self::UnknownWrite(what) => {
                write!(f, "the checker cannot tell where the script writes: {what}")
            }
        }
    }
}

impl std::error::Error for NotCovered {}

/// Whether the box a script runs in keeps it to its grant's folders. Where it does, a
/// redirection to or from a named file is covered, and its file is one more place the decision
/// checks against the grant's folders and the protected ones ([`write_targets_in`]); where it
/// does not, every redirection is refused. Heredocs, here-strings and process substitution are
/// refused either way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum PathEnforcement {
    /// No box enforces paths (`[sandbox] file_walls = false`): the strict rules.
    #[default]
    Unenforced,
    /// The box binds only the grant's folders read-write.
    Enforced,
}

/// Which shell's rules a script is read by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// bash's: the `shell` tool runs `bash -c`.
    Bash,
    /// POSIX sh's (dash on Debian): scripts of `sh -c`/`dash -c`, and the whole script when the
    /// `shell` tool falls back to `/bin/sh` because there is no bash. Whatever bash and sh read
    /// differently is refused ([`NotCovered::ShellDialect`]), so the checker's reading (bash's)
    /// is what sh runs.
    Posix,
}

/// Whether every simple command of `script` starts with one of `prefixes`, word by word, read as
/// bash reads it (the `shell` tool's `bash -c`): [`covers_script_as`] with [`Dialect::Bash`].
pub fn covers_script(script: &str, prefixes: &[Vec<String>]) -> Result<(), NotCovered> {
    covers_script_as(script, prefixes, Dialect::Bash)
}

/// Whether every simple command of `script` starts with one of `prefixes`, word by word, read
/// by the rules of the shell that runs it (`dialect`; `sh -c` scripts inside it always by
/// POSIX sh's). What an allow grant's `commands` cover.
pub fn covers_script_as(
    script: &str,
    prefixes: &[Vec<String>],
    dialect: Dialect,
) -> Result<(), NotCovered> {
    covers_script_in(script, prefixes, dialect, PathEnforcement::Unenforced)
}

/// [`covers_script_as`], with redirections covered where `walls` says the box enforces paths.
pub fn covers_script_in(
    script: &str,
    prefixes: &[Vec<String>],
    dialect: Dialect,
    walls: PathEnforcement,
) -> Result<(), NotCovered> {
    walk_script(script, prefixes, Mode::Cover, dialect, walls).map(|_| ())
}

/// Whether some command of `script`, read as bash reads it, may run one of `prefixes`:
/// [`touches_script_as`] with [`Dialect::Bash`].
pub fn touches_script(script: &str, prefixes: &[Vec<String>]) -> bool {
    touches_script_as(script, prefixes, Dialect::Bash)
}

/// Whether some command of `script` (in `sh -c` scripts too) may run one of `prefixes`: what a
/// deny grant's `commands` forbid. Deny wins on doubt, so matching is looser than for allow
/// grants (see `touch.rs`): the program by name wherever it lives, the prefix's further words
/// anywhere after it in order (`git -C . push` is `git push`), programs run by wrappers
/// (`env`, `nice`, `timeout`, `xargs`, …), and for git any invocation whose subcommand cannot be
/// known for certain (aliases, `-c`, `git config alias.…`). A nested script the checker cannot
/// read touches every deny. The call's own script, when the checker cannot read it, touches
/// nothing here; no allow grant covers it either, so it is refused all the same.
pub fn touches_script_as(script: &str, prefixes: &[Vec<String>], dialect: Dialect) -> bool {
    touches_script_in(script, prefixes, dialect, PathEnforcement::Unenforced)
}

/// [`touches_script_as`], reading redirections where `walls` says the box enforces paths (so a
/// deny grant still sees a command that an allow grant covers with a redirection).
pub fn touches_script_in(
    script: &str,
    prefixes: &[Vec<String>],
    dialect: Dialect,
    walls: PathEnforcement,
) -> bool {
    walk_script(script, prefixes, Mode::Touch, dialect, walls).is_ok_and(|(hits, _)| hits > 0)
}

/// Every place `script` (read by `dialect`'s rules, with its `sh -c` scripts) may write through
/// the words of its commands, for the decision to check against the grant's folders and the
/// protected ones; each path as written (relative to the call's folder unless absolute, `~`
/// unexpanded), in order of appearance, without repeats. Err when the script cannot be read, or
/// when a command writes where the checker cannot tell ([`NotCovered::UnknownWrite`]). Programs
/// that run arbitrary code (interpreters, build tools) are not looked into: a grant on one
/// covers whatever it writes.
pub fn write_targets(script: &str, dialect: Dialect) -> Result<Vec<WriteTarget>, NotCovered> {
    write_targets_in(script, dialect, PathEnforcement::Unenforced)
}

/// [`write_targets`]; where `walls` says the box enforces paths, the file of every redirection
/// (written or read: `>`, `>>`, `>|`, `&>`, `<>`, `<`, `>&FILE`) is a place too.
pub fn write_targets_in(
    script: &str,
    dialect: Dialect,
    walls: PathEnforcement,
) -> Result<Vec<WriteTarget>, NotCovered> {
    walk_script(script, &[], Mode::Writes, dialect, walls).map(|(_, targets)| targets)
}

/// What the walk is for: every command covered, any command touched, or the writes of all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Cover,
    Touch,
    Writes,
}

/// Walks `script` and its `sh -c` scripts; returns how many commands a prefix matched, and the
/// write targets found.
fn walk_script(
    script: &str,
    prefixes: &[Vec<String>],
    mode: Mode,
    dialect: Dialect,
    walls: PathEnforcement,
) -> Result<(usize, Vec<WriteTarget>), NotCovered> {
    let mut ctx = Context {
        prefixes,
        mode,
        walls,
        inner: VecDeque::new(),
        writes: writes::Writes::new(),
    };
    let mut hits = check_one(&mut ctx, script, 0, dialect)?;
    // Scripts of `sh -c '…'` are checked after their parent, one after another (never on top of
    // the parent's stack frames), each one level deeper.
    while let Some((text, depth, dialect)) = ctx.inner.pop_front() {
        match check_one(&mut ctx, &text, depth, dialect) {
            Ok(count) => hits += count,
            // Deny wins on doubt: a script run by a shell that the checker cannot read may run
            // anything.
            Err(_) if mode == Mode::Touch => hits += 1,
            Err(problem) => return Err(problem),
        }
    }
    Ok((hits, ctx.writes.targets))
}
