//! git: the global options that change which repository, configuration or programs git uses,
//! git's own subcommands (any other word may be an alias or a `git-*` program), and what a deny
//! on a git subcommand treats as doubt.

use super::NotCovered;
use super::gitconfig::{ConfigUse, config_use, safe_config_key};
use super::show::show;
use super::words::Literal;

/// git's global options, as git.c reads them (before the subcommand).
#[derive(Debug, Default)]
pub(super) struct Globals {
    /// Index (in the arguments after `git`) of the subcommand word, if there is one.
    pub(super) sub: Option<usize>,
    /// The subcommand `--help`/`-h` and `--version`/`-v` stand for.
    pub(super) implied: Option<&'static str>,
    /// The values of `-C`, in order: git works in each in turn.
    pub(super) chdirs: Vec<Literal>,
    /// The first option that makes git use another repository, configuration or program
    /// (`-c`, `--config-env`, `--exec-path`, `--git-dir`, `--work-tree`, …) or that the checker
    /// does not know.
    pub(super) risky: Option<String>,
    /// `--namespace`: refs are read and written in another namespace.
    pub(super) namespace: bool,
}

/// Global options that take no value and change nothing the checker cares about.
const PLAIN_GLOBALS: &[&str] = &[
    "-p",
    "--paginate",
    "-P",
    "--no-pager",
    "--bare",
    "--no-replace-objects",
    "--no-lazy-fetch",
    "--literal-pathspecs",
    "--no-literal-pathspecs",
    "--glob-pathspecs",
    "--noglob-pathspecs",
    "--icase-pathspecs",
    "--no-optional-locks",
    "--no-advice",
    "--html-path",
    "--man-path",
    "--info-path",
];

/// Global options that make git use another repository, configuration or program; with a value
/// in the next word when written without `=`.
const RISKY_GLOBALS: &[&str] = &[
    "-c",
    "--config-env",
    "--exec-path",
    "--git-dir",
    "--work-tree",
    "--shallow-file",
    "--super-prefix",
];

/// Reads git's global options from `args` (the words after `git`).
pub(super) fn globals(args: &[Literal]) -> Globals {
    let mut found = Globals::default();
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        if !text.starts_with('-') {
            found.sub = Some(i);
            return found;
        }
        match text {
            "--help" | "-h" => {
                found.implied = Some("help");
                return found;
            }
            "--version" | "-v" => {
                found.implied = Some("version");
                return found;
            }
            "-C" => {
                if let Some(dir) = args.get(i + 1) {
                    found.chdirs.push(dir.clone());
                }
                i += 2;
                continue;
            }
            "--namespace" | "--attr-source" => {
                found.namespace |= text == "--namespace";
                i += 2;
                continue;
            }
            _ => {}
        }
        if PLAIN_GLOBALS.contains(&text)
            || text.starts_with("--list-cmds=")
            || text.starts_with("--attr-source=")
        {
            i += 1;
            continue;
        }
        if text.starts_with("--namespace=") {
            found.namespace = true;
            i += 1;
            continue;
        }
        let name = text.split('=').next().unwrap_or(text);
        if found.risky.is_none() {
            found.risky = Some(if RISKY_GLOBALS.contains(&name) {
                text.to_owned()
            } else {
                format!("{text} (an option the checker does not know)")
            });
        }
        // A risky option written without `=` takes the next word.
        i += if RISKY_GLOBALS.contains(&text) && text != "--exec-path" {
            2
        } else {
            1
        };
    }
    found
}

/// Why a covered `git` command (its words after `git`) is not covered after all: a global
/// option that makes git use another repository, configuration or program.
pub(super) fn cover_problem(args: &[Literal]) -> Option<NotCovered> {
    let found = globals(args);
    if let Some(what) = found.risky {
        return Some(NotCovered::GitOption(show(&what)));
    }
    let index = found.sub?;
    let sub = args[index].text.as_str();
    program_option(sub, &args[index + 1..], PROGRAM_OPTIONS)
        .map(|word| NotCovered::GitOption(format!("{sub} {}", show(word))))
}

/// git's own commands (2.47: builtins and the commands it ships), by the name after `git`. Any
/// other word may be an alias, or a `git-*` program anywhere in `PATH`.
const GIT_COMMANDS: &[&str] = &[
    "add",
    "am",
    "annotate",
    "apply",
    "archimport",
    "archive",
    "bisect",
    "blame",
    "branch",
    "bugreport",
    "bundle",
    "cat-file",
    "check-attr",
    "check-ignore",
    "check-mailmap",
    "check-ref-format",
    "checkout",
    "checkout--worker",
    "checkout-index",
    "cherry",
    "cherry-pick",
    "citool",
    "clean",
    "clone",
    "column",
    "commit",
    "commit-graph",
    "commit-tree",
    "config",
    "count-objects",
    "credential",
    "credential-cache",
    "credential-cache--daemon",
    "credential-store",
    "cvsexportcommit",
    "cvsimport",
    "cvsserver",
    "daemon",
    "describe",
    "diagnose",
    "diff",
    "diff-files",
    "diff-index",
    "diff-tree",
    "difftool",
    "difftool--helper",
    "fast-export",
    "fast-import",
    "fetch",
    "fetch-pack",
    "filter-branch",
    "fmt-merge-msg",
    "for-each-ref",
    "for-each-repo",
    "format-patch",
    "fsck",
    "fsck-objects",
    "fsmonitor--daemon",
    "gc",
    "get-tar-commit-id",
    "grep",
    "gui",
    "hash-object",
    "help",
    "hook",
    "http-backend",
    "http-fetch",
    "http-push",
    "imap-send",
    "index-pack",
    "init",
    "init-db",
    "instaweb",
    "interpret-trailers",
    "log",
    "ls-files",
    "ls-remote",
    "ls-tree",
    "mailinfo",
    "mailsplit",
    "maintenance",
    "merge",
    "merge-base",
    "merge-file",
    "merge-index",
    "merge-octopus",
    "merge-one-file",
    "merge-ours",
    "merge-recursive",
    "merge-recursive-ours",
    "merge-recursive-theirs",
    "merge-resolve",
    "merge-subtree",
    "merge-tree",
    "mergetool",
    "mktag",
    "mktree",
    "multi-pack-index",
    "mv",
    "name-rev",
    "notes",
    "p4",
    "pack-objects",
    "pack-redundant",
    "pack-refs",
    "patch-id",
    "pickaxe",
    "prune",
    "prune-packed",
    "pull",
    "push",
    "quiltimport",
    "range-diff",
    "read-tree",
    "rebase",
    "receive-pack",
    "reflog",
    "refs",
    "remote",
    "remote-ext",
    "remote-fd",
    "remote-ftp",
    "remote-ftps",
    "remote-http",
    "remote-https",
    "repack",
    "replace",
    "replay",
    "request-pull",
    "rerere",
    "reset",
    "restore",
    "rev-list",
    "rev-parse",
    "revert",
    "rm",
    "send-email",
    "send-pack",
    "sh-i18n--envsubst",
    "shell",
    "shortlog",
    "show",
    "show-branch",
    "show-index",
    "show-ref",
    "sparse-checkout",
    "stage",
    "stash",
    "status",
    "stripspace",
    "submodule",
    "submodule--helper",
    "svn",
    "switch",
    "symbolic-ref",
    "tag",
    "unpack-file",
    "unpack-objects",
    "update-index",
    "update-ref",
    "update-server-info",
    "upload-archive",
    "upload-archive--writer",
    "upload-pack",
    "var",
    "verify-commit",
    "verify-pack",
    "verify-tag",
    "version",
    "web--browse",
    "whatchanged",
    "worktree",
    "write-tree",
];

/// Whether `name` is one of git's own commands (not an alias).
pub(super) fn is_git_command(name: &str) -> bool {
    GIT_COMMANDS.contains(&name)
}

/// Subcommands that run commands named in their arguments or in the configuration
/// (`submodule foreach`, `bisect run`, tools, hooks, remote helpers, …): under a deny on a git
/// subcommand they are refused whatever their arguments.
const RUNS_COMMANDS: &[&str] = &[
    "submodule",
    "submodule--helper",
    "bisect",
    "difftool",
    "difftool--helper",
    "mergetool",
    "filter-branch",
    "send-email",
    "for-each-repo",
    "hook",
    "remote-ext",
    "remote-fd",
    "shell",
    "instaweb",
    "web--browse",
    "p4",
    "svn",
    "cvsimport",
    "cvsexportcommit",
    "cvsserver",
    "archimport",
    "daemon",
    "upload-pack",
    "receive-pack",
    "upload-archive",
    "credential",
    "merge-one-file",
    "gui",
    "citool",
];

/// Subcommands that run another one themselves (`pull` runs `fetch`; `send-pack` is the plumbing
/// of `push`): a deny on the second touches the first. Automatic `gc` is not counted.
const RUNS_OTHER: &[(&str, &[&str])] = &[
    ("pull", &["fetch", "merge", "rebase"]),
    ("send-pack", &["push"]),
    ("http-push", &["push"]),
    ("fetch-pack", &["fetch"]),
    ("clone", &["fetch"]),
    ("remote", &["fetch"]),
    ("maintenance", &["fetch", "gc", "repack", "prune"]),
    ("gc", &["prune", "repack", "reflog"]),
    ("am", &["apply"]),
];

/// Long options, per subcommand, that name a program to run or the configuration a new
/// repository starts with (any abbreviation counts), and short options that do: never covered.
const PROGRAM_OPTIONS: &[(&str, &[&str], &str)] = &[
    ("rebase", &["exec"], "x"),
    ("clone", &["upload-pack", "config", "template"], "uc"),
    ("fetch", &["upload-pack"], ""),
    ("pull", &["upload-pack"], ""),
    ("ls-remote", &["upload-pack"], ""),
    ("push", &["receive-pack", "exec"], ""),
    ("archive", &["exec"], ""),
    ("grep", &["open-files-in-pager"], "O"),
    ("init", &["template"], ""),
];

/// [`PROGRAM_OPTIONS`], and the options that hand the choice of a command to an editor or a
/// remote: doubt under a deny.
const COMMAND_OPTIONS: &[(&str, &[&str], &str)] = &[
    ("rebase", &["exec", "interactive"], "xi"),
    ("clone", &["upload-pack", "config", "template"], "uc"),
    ("fetch", &["upload-pack"], ""),
    ("pull", &["upload-pack"], ""),
    ("ls-remote", &["upload-pack"], ""),
    ("push", &["receive-pack", "exec"], ""),
    ("archive", &["exec", "remote"], ""),
    ("grep", &["open-files-in-pager"], "O"),
    ("init", &["template"], ""),
];

/// Why a git invocation (its words after `git`) may run the subcommand `denied` without naming
/// it, if it may: deny wins on doubt.
pub(super) fn deny_doubt(args: &[Literal], denied: &str, adds_arguments: bool) -> Option<String> {
    let found = globals(args);
    if let Some(option) = found.risky {
        return Some(format!("`git {option}`"));
    }
    let (sub, rest) = match (found.sub, found.implied) {
        (Some(index), _) => (args[index].text.as_str(), &args[index + 1..]),
        (None, Some(implied)) => (implied, &args[args.len()..]),
        (None, None) if adds_arguments => {
            return Some("git gets its subcommand from the program that runs it".into());
        }
        (None, None) => return None,
    };
    if !is_git_command(sub) {
        return Some(format!("`git {sub}` may be an alias or a git-* program"));
    }
    if RUNS_COMMANDS.contains(&sub) {
        return Some(format!("`git {sub}` runs commands named elsewhere"));
    }
    if RUNS_OTHER
        .iter()
        .any(|(runner, runs)| *runner == sub && runs.contains(&denied))
    {
        return Some(format!("`git {sub}` runs `git {denied}`"));
    }
    if sub == "config" {
        return config_doubt(rest);
    }
    option_doubt(sub, rest)
}

/// A `git config` that writes a key other than a few harmless ones (aliases, includes, editors,
/// pagers, helpers, hooks and tools all make later git commands run something else).
fn config_doubt(rest: &[Literal]) -> Option<String> {
    match config_use(rest) {
        Err(option) => Some(format!(
            "`git config {option}` is not an option the checker knows"
        )),
        Ok(ConfigUse::Read) => None,
        Ok(ConfigUse::Write { keys, edit, .. }) => {
            if edit || keys.is_empty() {
                return Some("`git config` edits settings the checker cannot see".into());
            }
            keys.iter()
                .find(|key| !safe_config_key(key))
                .map(|key| format!("`git config` sets `{}`", show(key)))
        }
    }
}

/// An option of `sub` that names a program to run.
fn option_doubt(sub: &str, rest: &[Literal]) -> Option<String> {
    program_option(sub, rest, COMMAND_OPTIONS).map(|word| format!("`git {sub} {}`", show(word)))
}

/// The first word of `rest` (the words after the subcommand `sub`) that is one of `table`'s
/// options for `sub`, by any abbreviation or in a cluster of short options.
fn program_option<'a>(
    sub: &str,
    rest: &'a [Literal],
    table: &[(&str, &[&str], &str)],
) -> Option<&'a str> {
    if let Some(word) = strategy_program(sub, rest) {
        return Some(word);
    }
    let (_, long, short) = table.iter().find(|(name, _, _)| *name == sub)?;
    for word in rest {
        let text = word.text.as_str();
        if text == "--" {
            break;
        }
        if let Some(name) = text.strip_prefix("--") {
            let name = name.split('=').next().unwrap_or(name);
            if !name.is_empty() && long.iter().any(|known| known.starts_with(name)) {
                return Some(text);
            }
        } else if let Some(letters) = text.strip_prefix('-')
            && letters.chars().any(|letter| short.contains(letter))
        {
            return Some(text);
        }
    }
    None
}

/// Merge strategies built into git; any other `-s NAME` runs a `git-merge-NAME` program found
/// in `PATH`.
const BUILTIN_STRATEGIES: &[&str] = &["ort", "recursive", "resolve", "octopus", "ours", "subtree"];

/// The word of `-s NAME` (merge, pull, rebase; `-s` is `--signoff` elsewhere) or
/// `--strategy=NAME` (also cherry-pick, revert) whose strategy is not built into git.
fn strategy_program<'a>(sub: &str, rest: &'a [Literal]) -> Option<&'a str> {
    if !matches!(sub, "merge" | "pull" | "rebase" | "cherry-pick" | "revert") {
        return None;
    }
    let mut i = 0;
    while let Some(word) = rest.get(i) {
        let text = word.text.as_str();
        i += 1;
        if text == "--" {
            break;
        }
        let value = if let Some(long) = text.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value)),
                None => (long, None),
            };
            if name.len() < 3 || !"strategy".starts_with(name) {
                continue;
            }
            attached.or_else(|| rest.get(i).map(|w| w.text.as_str()))
        } else if let Some(value) = text
            .strip_prefix("-s")
            .filter(|_| matches!(sub, "merge" | "pull" | "rebase"))
        {
            if value.is_empty() {
                rest.get(i).map(|w| w.text.as_str())
            } else {
                Some(value)
            }
        } else {
            continue;
        };
        if !value.is_some_and(|v| BUILTIN_STRATEGIES.contains(&v)) {
            return Some(text);
        }
    }
    None
}
