//! Warnings for granted prefixes that run other programs, write files through options, or can
//! never cover anything.

use super::builtins::refused_builtin_name;
use super::runners::runner_reason;
use super::screen::{CONTROL_KEYWORDS, OTHER_KEYWORDS};
use super::show::{render_words, show};
use super::writers::writer;

/// A warning for a granted prefix whose first word runs other programs (env, xargs, find, git,
/// sudo, shells, interpreters, build tools, …), writes files through options (`git log
/// --output`, `curl -o`, `dd of=`, …), or that can never cover anything; None when the prefix
/// looks narrow.
pub fn prefix_warning(prefix: &[String]) -> Option<String> {
    let Some(first) = prefix.first() else {
        return Some("the prefix is empty, so it covers no command".to_owned());
    };
    let name = first.rsplit('/').next().unwrap_or(first);
    let shown = show(&render_words(prefix));
    if refused_builtin_name(first) {
        return Some(format!(
            "`{first}` is never covered: the checker refuses it whatever the grants say"
        ));
    }
    if CONTROL_KEYWORDS.contains(&first.as_str()) || OTHER_KEYWORDS.contains(&first.as_str()) {
        return Some(format!(
            "`{first}` is a shell keyword, so a command never starts with it and `{shown}` covers nothing"
        ));
    }
    if name == "git" {
        return git_warning(prefix, &shown);
    }
    if name == "sed" || name == "gsed" {
        if prefix.iter().any(|w| w == "--sandbox") {
            return None;
        }
        return Some(format!(
            "`{shown}` can run other programs (GNU sed's `e` command and `s///e` flag) and write files (`w`); add `--sandbox` to the prefix to forbid them"
        ));
    }
    if let Some(how) = runner_reason(name) {
        return Some(format!(
            "`{shown}` can run other programs ({how}), so this grant covers whatever they run"
        ));
    }
    writer(name).and_then(|row| row.note).map(|note| {
        format!(
            "`{shown}` {note}; each path the checker sees is checked against the grant's folders"
        )
    })
}

/// git subcommands that run no other program (no hooks, pagers off without a terminal); some
/// still write files through options ([`GIT_WRITES`]).
const GIT_QUIET: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "tag",
    "add",
    "rm",
    "mv",
    "restore",
    "reset",
    "stash",
    "blame",
    "shortlog",
    "describe",
    "rev-parse",
    "rev-list",
    "ls-files",
    "ls-tree",
    "cat-file",
    "diff-tree",
    "diff-files",
    "diff-index",
    "for-each-ref",
    "show-ref",
    "reflog",
    "init",
    "version",
    "--version",
    "count-objects",
    "fsck",
    "notes",
    "range-diff",
    "format-patch",
    "apply",
    "check-ignore",
    "check-attr",
    "whatchanged",
    "name-rev",
    "merge-base",
    "symbolic-ref",
];

/// What the quiet git subcommands that write files through their options write.
const GIT_WRITES: &[(&str, &str)] = &[
    ("log", "writes the file named by `--output`"),
    ("show", "writes the file named by `--output`"),
    ("diff", "writes the file named by `--output`"),
    ("whatchanged", "writes the file named by `--output`"),
    ("reflog", "writes the file named by `--output`"),
    ("rev-list", "writes the file named by `--output`"),
    ("shortlog", "writes the file named by `--output`"),
    ("range-diff", "writes the file named by `--output`"),
    ("diff-tree", "writes the file named by `--output`"),
    ("diff-files", "writes the file named by `--output`"),
    ("diff-index", "writes the file named by `--output`"),
    ("blame", "writes the file named by `--output`"),
    (
        "stash",
        "writes the file named by `--output` (`stash show`)",
    ),
    (
        "format-patch",
        "writes patches into the folder of `-o`/`--output-directory` (without it, into the one the configuration names, which the checker refuses)",
    ),
    ("init", "creates a repository in the folder it names"),
    ("apply", "changes the files its patch names (`--directory`)"),
];

fn git_warning(prefix: &[String], shown: &str) -> Option<String> {
    match prefix.get(1) {
        None => Some(format!(
            "`{shown}` can run other programs (`git -c` settings, aliases, hooks, `--upload-pack`, `rebase --exec`, …), so this grant covers whatever they run; grant subcommands such as `git status`"
        )),
        Some(sub) if sub.starts_with('-') => Some(format!(
            "`{shown}` starts with a global git option; with `-c`, `--exec-path` or `--config-env` git runs whatever the setting names"
        )),
        Some(sub) if GIT_QUIET.contains(&sub.as_str()) => GIT_WRITES
            .iter()
            .find(|(name, _)| name == sub)
            .map(|(_, what)| {
                format!(
                    "`{shown}` {what}; each path the checker sees is checked against the grant's folders"
                )
            }),
        Some(sub) => Some(format!(
            "`{shown}` can run other programs (hooks, aliases, or options such as `--exec`, `--upload-pack`, `-x`), so this grant covers whatever git `{sub}` runs"
        )),
    }
}
