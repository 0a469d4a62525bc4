//! What git writes through its words: the `-C` folders, `git config` writes, and the paths of
//! the subcommands that create repositories, worktrees, bundles and patches (the write options
//! of any program, such as `--output`, are read by [`super::writes`] besides).

use super::NotCovered;
use super::found::{Found, fixed, part, unknown, word_value};
use super::git;
use super::gitconfig::{ConfigUse, config_use};
use super::show::show;
use super::words::Literal;
use super::writers::long_matches;

/// git: `-C` folders, `git config` writes, and the paths of the subcommands that create
/// repositories, worktrees, bundles and patches (the options of any program are read besides).
pub(super) fn git_writes(args: &[Literal], found: &mut Found) -> Result<(), NotCovered> {
    let globals = git::globals(args);
    if let Some(option) = globals.risky {
        return Err(NotCovered::GitOption(show(&option)));
    }
    for dir in &globals.chdirs {
        found.chdirs.push(word_value(dir));
    }
    let Some(index) = globals.sub else {
        return Ok(());
    };
    let sub = args[index].text.as_str();
    let rest = &args[index + 1..];
    let positionals: Vec<&Literal> = rest.iter().filter(|w| !w.text.starts_with('-')).collect();
    let mut push = |words: &[&Literal]| {
        for word in words {
            found.paths.push(word_value(word));
        }
    };
    match sub {
        "init" | "init-db" => {
            push(&positionals);
            found.paths.push(fixed("."));
        }
        "clone" => {
            let operands = git_clone_operands(rest);
            push(operands.get(1..).unwrap_or(&[]));
            found.paths.push(fixed("."));
        }
        "worktree" | "bundle" => push(positionals.get(1..).unwrap_or(&[])),
        "format-patch" => format_patch(rest)?,
        "diagnose" | "bugreport" => found.paths.push(fixed(".")),
        "merge-file" | "pack-objects" | "submodule" => push(&positionals),
        "checkout-index" => {
            for word in rest {
                if let Some(prefix) = word.text.strip_prefix("--prefix=") {
                    found.paths.push(part(prefix));
                }
            }
        }
        "apply"
            if rest.iter().any(|w| {
                w.text
                    .strip_prefix("--")
                    .is_some_and(|n| n.len() >= 2 && "unsafe-paths".starts_with(n))
            }) =>
        {
            return Err(unknown(
                "`git apply --unsafe-paths` writes outside the work tree".into(),
            ));
        }
        "config" => match config_use(rest) {
            Err(option) => {
                return Err(unknown(format!(
                    "`git config {option}` is not an option the checker knows"
                )));
            }
            Ok(ConfigUse::Read) => {}
            Ok(ConfigUse::Write { scopes, .. }) => found.configs.extend(scopes),
        },
        _ => {}
    }
    Ok(())
}

/// The operands of `git clone` (the repository, then the folder), skipping the values of its
/// options that take one.
fn git_clone_operands(rest: &[Literal]) -> Vec<&Literal> {
    const VALUE_SHORT: &[&str] = &["-b", "-o", "-u", "-c", "-j"];
    const VALUE_LONG: &[&str] = &[
        "--branch",
        "--origin",
        "--upload-pack",
        "--config",
        "--jobs",
        "--depth",
        "--reference",
        "--reference-if-able",
        "--template",
        "--separate-git-dir",
        "--shallow-since",
        "--shallow-exclude",
        "--filter",
        "--server-option",
        "--bundle-uri",
        "--ref-format",
        "--revision",
    ];
    let mut operands = Vec::new();
    let mut i = 0;
    let mut options_done = false;
    while let Some(word) = rest.get(i) {
        let text = word.text.as_str();
        i += 1;
        if options_done || !text.starts_with('-') {
            operands.push(word);
        } else if text == "--" {
            options_done = true;
        } else if VALUE_SHORT.contains(&text) || VALUE_LONG.contains(&text) {
            i += 1;
        }
    }
    operands
}

/// `git format-patch` writes its patches into the folder of `-o`/`--output-directory` (read as a
/// write option), to standard output with `--stdout`, and otherwise into `format.outputDirectory`
/// from whichever configuration git reads, which the checker cannot see.
fn format_patch(rest: &[Literal]) -> Result<(), NotCovered> {
    let named = rest.iter().any(|word| {
        let text = word.text.as_str();
        match text.strip_prefix("--") {
            Some(long) => {
                let name = long.split('=').next().unwrap_or(long);
                long_matches(name, &["output-directory", "stdout"])
            }
            None => text.starts_with("-o"),
        }
    });
    if named {
        return Ok(());
    }
    Err(unknown(
        "`git format-patch` without `-o` or `--stdout` writes into the folder the configuration names (`format.outputDirectory`)".into(),
    ))
}
