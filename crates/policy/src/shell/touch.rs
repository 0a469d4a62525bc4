//! Deny matching: whether a command may run what a deny grant's prefix names. Deny wins on
//! doubt, so matching is loose on purpose:
//!
//! - the program by name wherever it lives (`/usr/bin/git`), or in its dashed form (`git-push`
//!   for `git push`);
//! - the prefix's other words anywhere after it, in order (`git -C . push`), or the first of them
//!   inside a word with `=` (`cargo --config alias.p=publish p`, inline aliases);
//! - for git, an invocation whose subcommand cannot be known for certain ([`super::git`]);
//! - inside a program that runs other programs (`env`, `nice`, `timeout`, `sudo`, `xargs`,
//!   `find -exec`, interpreters: the loader's list), every later word may start the command it
//!   runs, and the program's name inside any of its words (`python -c "…git…"`) counts; when
//!   the program adds arguments of its own (`xargs git`), a deny of a subcommand is touched;
//! - a shell's scripts (every word after it that is not an option) are read in turn; a shell
//!   that reads a script from a file or its input touches every deny.

use super::Dialect;
use super::git::deny_doubt;
use super::runners::{ARGUMENT_ADDERS, SHELL_NAMES, basename, runs_other_programs};
use super::words::{Literal, looks_like_assignment};

/// Whether the command `words` touches one of `prefixes`; the scripts of shells it runs are
/// passed to `queue`.
pub(super) fn command_touches(
    prefixes: &[Vec<String>],
    words: &[Literal],
    queue: &mut dyn FnMut(String, Dialect),
) -> bool {
    let Some(first) = words.first() else {
        return false;
    };
    let mut hit = touches_at(prefixes, words, false, queue);
    let name = basename(&first.text);
    if runs_other_programs(name) && !SHELL_NAMES.contains(&name) {
        let adds = ARGUMENT_ADDERS.contains(&name);
        for start in 1..words.len() {
            hit |= touches_at(prefixes, &words[start..], adds, queue);
        }
        // `env GIT_DIR=… git …`, `env GIT_CONFIG_COUNT=…`: git's own variables change its
        // repository, configuration and programs, so any git it runs may be any subcommand.
        let sets_git = words[1..]
            .iter()
            .any(|word| looks_like_assignment(&word.text) && word.text.starts_with("GIT_"));
        hit |= sets_git
            && prefixes
                .iter()
                .any(|p| p.first().is_some_and(|program| basename(program) == "git"));
        // The program's name inside a larger word: code for an interpreter, a shell command
        // line for `find -exec sh -c`, … (a word that is the program itself was read above).
        hit |= words[1..].iter().any(|word| {
            prefixes.iter().any(|prefix| {
                prefix
                    .first()
                    .is_some_and(|program| basename(&word.text) != basename(program))
                    && names_program(&word.text, prefix)
            })
        });
    }
    hit
}

/// Whether the command starting at `words[0]` touches a prefix (a shell's scripts are queued).
fn touches_at(
    prefixes: &[Vec<String>],
    words: &[Literal],
    adds_arguments: bool,
    queue: &mut dyn FnMut(String, Dialect),
) -> bool {
    let Some((first, args)) = words.split_first() else {
        return false;
    };
    let name = basename(&first.text);
    let mut hit = false;
    if SHELL_NAMES.contains(&name) {
        let dialect = if name == "bash" {
            Dialect::Bash
        } else {
            Dialect::Posix
        };
        let has_c = args.iter().any(|w| {
            w.text
                .strip_prefix('-')
                .is_some_and(|letters| !letters.starts_with('-') && letters.contains('c'))
        });
        if !has_c && prefixes.iter().any(|p| !p.is_empty()) {
            // The script comes from a file or the input, which the checker cannot see.
            hit = true;
        }
        for word in args.iter().filter(|w| !w.text.starts_with('-')) {
            queue(word.text.clone(), dialect);
        }
    }
    hit | prefixes
        .iter()
        .any(|prefix| prefix_touches(prefix, words, adds_arguments))
}

/// Whether a deny prefix (non-empty) touches the command `words`.
fn prefix_touches(prefix: &[String], words: &[Literal], adds_arguments: bool) -> bool {
    let (Some((program, wanted)), Some((first, args))) =
        (prefix.split_first(), words.split_first())
    else {
        return false;
    };
    let program = basename(program);
    let name = basename(&first.text);
    if name != program {
        // The dashed form: `git-push` runs `git push`.
        return wanted.first().is_some_and(|sub| {
            name.strip_prefix(program)
                .and_then(|rest| rest.strip_prefix('-'))
                == Some(sub.as_str())
                && in_order(&wanted[1..], args)
        });
    }
    let Some(sub) = wanted.first() else {
        return true;
    };
    if in_order(wanted, args) || inline_setting(sub, args) {
        return true;
    }
    if program == "git" {
        return deny_doubt(args, sub, adds_arguments).is_some();
    }
    // The program that runs it may add the subcommand itself.
    adds_arguments
}

/// Whether `wanted` appear in `args` in order (anywhere).
fn in_order(wanted: &[String], args: &[Literal]) -> bool {
    let mut rest = args.iter();
    wanted
        .iter()
        .all(|want| rest.any(|word| word.text == *want))
}

/// Whether `sub` is a token of a word with `=` (an inline setting such as `alias.p=push`).
fn inline_setting(sub: &str, args: &[Literal]) -> bool {
    args.iter()
        .filter(|word| word.text.contains('='))
        .any(|word| tokens(&word.text).any(|token| token == sub))
}

/// Whether `text` names the prefix's program (or its dashed form) as a token, as code given to
/// an interpreter would (`subprocess.run(['git', 'push'])`).
fn names_program(text: &str, prefix: &[String]) -> bool {
    let Some(program) = prefix.first() else {
        return false;
    };
    let program = basename(program);
    let dashed = prefix.get(1).map(|sub| format!("{program}-{sub}"));
    tokens(text).any(|token| token == program || Some(token) == dashed.as_deref())
}

/// The runs of letters, digits and `_.+-` in `text` (a path's parts are separate tokens).
fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !(c.is_alphanumeric() || matches!(c, '_' | '.' | '+' | '-')))
        .filter(|token| !token.is_empty())
}
