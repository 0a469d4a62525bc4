//! `git config`: whether an invocation only reads, and if it writes, which file and which keys.
//! Read as git 2.47 reads it: the old action options (`--get`, `--add`, …) and the subcommands
//! (`get`, `set`, …), long options by any unambiguous abbreviation and with `--no-` where git
//! accepts it. An option the checker does not know is reported, never guessed.

use super::found::GitConfigScope;
use super::show::show;
use super::words::Literal;

/// What a `git config` invocation does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum ConfigUse {
    /// Only reads (or fails before writing).
    Read,
    /// Writes the files of `scopes`: the keys (or sections) named, or whatever an editor does.
    Write {
        scopes: Vec<GitConfigScope>,
        keys: Vec<String>,
        edit: bool,
    },
}

/// Long options, by full name: (name, takes a value, accepts `--no-`).
const LONG: &[(&str, bool, bool)] = &[
    ("global", false, true),
    ("system", false, true),
    ("local", false, true),
    ("worktree", false, true),
    ("file", true, true),
    ("blob", true, true),
    ("get", false, false),
    ("get-all", false, false),
    ("get-regexp", false, false),
    ("get-urlmatch", false, false),
    ("replace-all", false, false),
    ("add", false, false),
    ("unset", false, false),
    ("unset-all", false, false),
    ("rename-section", false, false),
    ("remove-section", false, false),
    ("list", false, false),
    ("edit", false, false),
    ("get-color", false, false),
    ("get-colorbool", false, false),
    ("null", false, true),
    ("name-only", false, true),
    ("show-origin", false, true),
    ("show-scope", false, true),
    ("show-names", false, true),
    ("type", true, true),
    ("bool", false, false),
    ("int", false, false),
    ("bool-or-int", false, false),
    ("bool-or-str", false, false),
    ("path", false, false),
    ("expiry-date", false, false),
    ("default", true, true),
    ("comment", true, true),
    ("fixed-value", false, true),
    ("includes", false, true),
    ("all", false, true),
    ("regexp", false, true),
    ("value", true, true),
    ("url", true, true),
];

/// Short options: (letter, the long option it stands for).
const SHORT: &[(char, &str)] = &[
    ('f', "file"),
    ('t', "type"),
    ('l', "list"),
    ('e', "edit"),
    ('z', "null"),
];

/// Actions that only read.
const READ_ACTIONS: &[&str] = &[
    "get",
    "get-all",
    "get-regexp",
    "get-urlmatch",
    "list",
    "get-color",
    "get-colorbool",
];

/// The long option `name` stands for (exactly, or as git's unambiguous abbreviation), with
/// whether it is negated; None when git would refuse it.
fn resolve(name: &str) -> Option<(&'static str, bool, bool)> {
    let mut candidates: Vec<(&'static str, bool, bool)> = Vec::new();
    for &(full, value, negatable) in LONG {
        if full == name {
            return Some((full, value, false));
        }
        if negatable && name.strip_prefix("no-") == Some(full) {
            return Some((full, false, true));
        }
        if full.starts_with(name) {
            candidates.push((full, value, false));
        }
        if negatable
            && let Some(rest) = name.strip_prefix("no-")
            && !rest.is_empty()
            && full.starts_with(rest)
        {
            candidates.push((full, false, true));
        }
    }
    match candidates.as_slice() {
        [only] => Some(*only),
        _ => None,
    }
}

/// Reads the words after `git config`. Err names an option git would refuse (the checker then
/// refuses too).
pub(super) fn config_use(args: &[Literal]) -> Result<ConfigUse, String> {
    let mut scope_flags: Vec<(&'static str, Option<String>)> = Vec::new();
    let mut actions: Vec<&'static str> = Vec::new();
    let mut positionals: Vec<&str> = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    // Applies one option (by full name) with its value.
    let mut apply = |full: &'static str, negated: bool, value: Option<String>| {
        if matches!(full, "global" | "system" | "local" | "worktree" | "file") {
            scope_flags.retain(|(name, _)| *name != full);
            if !negated {
                scope_flags.push((full, value));
            }
        } else if !negated && (READ_ACTIONS.contains(&full) || is_write_action(full)) {
            actions.push(full);
        }
    };
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        i += 1;
        if options_done || !text.starts_with('-') || text == "-" {
            positionals.push(text);
            continue;
        }
        if text == "--" {
            options_done = true;
            continue;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (name, attached) = match long.split_once('=') {
                Some((name, value)) => (name, Some(value.to_owned())),
                None => (long, None),
            };
            let Some((full, takes_value, negated)) = resolve(name) else {
                return Err(show(text));
            };
            let value = if takes_value && attached.is_none() {
                let next = args.get(i).map(|w| w.text.clone());
                i += 1;
                next
            } else {
                attached
            };
            apply(full, negated, value);
            continue;
        }
        let letters: Vec<char> = text.chars().skip(1).collect();
        for (at, letter) in letters.iter().enumerate() {
            let Some(&(_, full)) = SHORT.iter().find(|(l, _)| l == letter) else {
                return Err(show(text));
            };
            if full == "file" || full == "type" {
                let rest: String = letters[at + 1..].iter().collect();
                let value = if rest.is_empty() {
                    let next = args.get(i).map(|w| w.text.clone());
                    i += 1;
                    next
                } else {
                    Some(rest)
                };
                apply(full, false, value);
                break;
            }
            apply(full, false, None);
        }
    }
    let scopes = scopes_of(&scope_flags);
    if let Some(action) = actions.iter().find(|a| is_write_action(a)) {
        let keys = keys_of(action, &positionals);
        return Ok(ConfigUse::Write {
            scopes,
            keys,
            edit: *action == "edit",
        });
    }
    if !actions.is_empty() {
        return Ok(ConfigUse::Read);
    }
    match positionals.split_first() {
        Some((&("get" | "list"), _)) | None => Ok(ConfigUse::Read),
        Some((&sub @ ("set" | "unset" | "rename-section" | "remove-section" | "edit"), rest)) => {
            let keys = match sub {
                "set" | "unset" | "remove-section" => rest.iter().take(1),
                _ => rest.iter().take(2),
            }
            .map(|k| (*k).to_owned())
            .collect();
            Ok(ConfigUse::Write {
                scopes,
                keys,
                edit: sub == "edit",
            })
        }
        Some((key, rest)) if !rest.is_empty() => Ok(ConfigUse::Write {
            scopes,
            keys: vec![(*key).to_owned()],
            edit: false,
        }),
        Some(_) => Ok(ConfigUse::Read),
    }
}

/// Actions that write.
fn is_write_action(action: &str) -> bool {
    matches!(
        action,
        "replace-all"
            | "add"
            | "unset"
            | "unset-all"
            | "rename-section"
            | "remove-section"
            | "edit"
    )
}

/// The keys (or section names) an old-style write action names.
fn keys_of(action: &str, positionals: &[&str]) -> Vec<String> {
    let count = match action {
        "rename-section" => 2,
        "edit" => 0,
        _ => 1,
    };
    positionals
        .iter()
        .take(count)
        .map(|k| (*k).to_owned())
        .collect()
}

/// The files a write goes to: the scope options left after negations, or the repository's.
fn scopes_of(flags: &[(&'static str, Option<String>)]) -> Vec<GitConfigScope> {
    let scopes: Vec<GitConfigScope> = flags
        .iter()
        .map(|(name, value)| match *name {
            "global" => GitConfigScope::Global,
            "system" => GitConfigScope::System,
            "worktree" => GitConfigScope::Worktree,
            "file" => GitConfigScope::File(value.clone().unwrap_or_default()),
            _ => GitConfigScope::Local,
        })
        .collect();
    if scopes.is_empty() {
        vec![GitConfigScope::Local]
    } else {
        scopes
    }
}

/// Sections whose every key names no program, path, alias or include.
const SAFE_SECTIONS: &[&str] = &[
    "user", "color", "advice", "column", "status", "log", "i18n", "branch",
];

/// Single keys that name no program, path, alias or include.
const SAFE_KEYS: &[&str] = &[
    "core.autocrlf",
    "core.filemode",
    "core.ignorecase",
    "core.quotepath",
    "core.eol",
    "core.safecrlf",
    "core.whitespace",
    "init.defaultbranch",
    "pull.rebase",
    "pull.ff",
    "push.default",
    "push.autosetupremote",
    "fetch.prune",
    "merge.ff",
    "merge.conflictstyle",
    "diff.algorithm",
    "diff.renames",
    "diff.colormoved",
    "rerere.enabled",
    "rerere.autoupdate",
    "commit.verbose",
    "tag.sort",
];

/// Whether setting `key` cannot make a later git command run something else: aliases,
/// includes, editors, pagers, helpers, hooks, tools, filters and remote programs all can, so only
/// a short list of plain settings passes.
pub(super) fn safe_config_key(key: &str) -> bool {
    let lower = key.to_ascii_lowercase();
    let Some((section, _)) = lower.split_once('.') else {
        return false;
    };
    if SAFE_SECTIONS.contains(&section) {
        return true;
    }
    SAFE_KEYS.contains(&lower.as_str())
}
