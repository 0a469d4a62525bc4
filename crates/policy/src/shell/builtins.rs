//! Builtins the checker refuses whatever the grants say.

use super::NotCovered;
use super::words::Literal;

/// Builtins refused whatever the grants say.
const REFUSED_BUILTINS: &[&str] = &[
    "eval",
    "source",
    ".",
    "exec",
    "alias",
    "enable",
    "hash",
    "trap",
    "shopt",
    "set",
    "declare",
    "typeset",
    "export",
    "readonly",
    "local",
    "unset",
    "let",
    "read",
    "mapfile",
    "readarray",
    "getopts",
    "fc",
    "coproc",
    "compgen",
    "complete",
    "compopt",
    "bind",
];

pub(super) fn refused_builtin_name(word: &str) -> bool {
    REFUSED_BUILTINS.contains(&word)
}

/// Refuses the builtins in [`REFUSED_BUILTINS`], and `printf -v`, `test -v`/`-R`, `[ -v`/`-R`
/// and `wait -p`, whose arguments bash may evaluate as code or use to set variables.
pub(super) fn refuse_builtins(words: &[Literal]) -> Result<(), NotCovered> {
    let Some(first) = words.first() else {
        return Ok(());
    };
    if !first.exact {
        return Ok(());
    }
    let name = first.text.as_str();
    if refused_builtin_name(name) {
        return Err(NotCovered::Builtin(name.to_owned()));
    }
    let args = &words[1..];
    let refused = match name {
        "printf" => args
            .iter()
            .any(|a| a.text.starts_with("-v"))
            .then_some("printf -v"),
        "test" => args
            .iter()
            .any(|a| a.text == "-v" || a.text == "-R")
            .then_some("test -v"),
        "[" => args
            .iter()
            .any(|a| a.text == "-v" || a.text == "-R")
            .then_some("[ -v"),
        "wait" => args
            .iter()
            .any(|a| a.text.starts_with('-') && a.text.contains('p'))
            .then_some("wait -p"),
        _ => None,
    };
    match refused {
        Some(what) => Err(NotCovered::Builtin(what.to_owned())),
        None => Ok(()),
    }
}
