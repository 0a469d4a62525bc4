//! The literal words of a script, for the decision's paths: every word and redirection target
//! as written, nested shell scripts included, a glob cut before its first glob component.

use super::read::{self, Word, word};
use super::walk::flatten;
use crate::shell::MAX_SHELL_DEPTH;
use crate::shell::runners::{SHELL_NAMES, basename};

/// Every literal word of the script's commands (the value after `=` of a word holding one
/// too), every literal redirection target, and the same of nested `sh -c` scripts, as written
/// (`~` unexpanded, relative to the call's folder); a glob is cut before its first glob
/// component. Empty when the script cannot be read.
pub fn path_words(script: &str) -> Vec<String> {
    let mut out = Vec::new();
    collect_words(script, 0, &mut out);
    out.sort();
    out.dedup();
    out
}

/// Every word of the script's commands and every redirection target, decoded as the shell
/// would (quotes removed; a substitution kept as written), and the same of nested `sh -c`
/// scripts, in order of appearance: the values of a `shell` call for the provenance check
/// ([`crate::provenance`]). None when the script cannot be read.
pub fn script_words(script: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    all_words(script, 0, &mut out)?;
    Some(out)
}

fn all_words(script: &str, depth: usize, out: &mut Vec<String>) -> Option<()> {
    if depth > MAX_SHELL_DEPTH {
        return None;
    }
    let flat = flatten(&read::parse(script)?);
    out.extend(flat.redirects.iter().map(|(_, raw)| word(raw).text));
    for command in &flat.commands {
        let words: Vec<Word> = command.iter().map(|raw| word(raw)).collect();
        if let Some(first) = words.first()
            && SHELL_NAMES.contains(&basename(&first.text))
        {
            for arg in words[1..].iter().filter(|w| !w.text.starts_with('-')) {
                // A shell's argument that is not a script it can read is still a word.
                let _ = all_words(&arg.text, depth + 1, out);
            }
        }
        out.extend(words.into_iter().map(|w| w.text));
    }
    Some(())
}

fn collect_words(script: &str, depth: usize, out: &mut Vec<String>) {
    if depth > MAX_SHELL_DEPTH {
        return;
    }
    let Some(program) = read::parse(script) else {
        return;
    };
    let flat = flatten(&program);
    for (_, raw) in &flat.redirects {
        push_word(&word(raw), out);
    }
    for command in &flat.commands {
        let words: Vec<Word> = command.iter().map(|raw| word(raw)).collect();
        for w in &words {
            push_word(w, out);
        }
        if let Some(first) = words.first()
            && SHELL_NAMES.contains(&basename(&first.text))
        {
            for arg in words[1..].iter().filter(|w| !w.text.starts_with('-')) {
                collect_words(&arg.text, depth + 1, out);
            }
        }
    }
}

/// A literal word's text (and the value after its `=`, when it has one).
fn push_word(w: &Word, out: &mut Vec<String>) {
    if w.literal && !w.text.is_empty() {
        out.push(literal_part(w));
        if let Some((_, value)) = w.text.split_once('=')
            && !value.is_empty()
            && !w.glob
        {
            out.push(value.to_owned());
        }
    }
}

/// The literal part of a word: the whole text, or a glob's folders before its first glob
/// component.
fn literal_part(w: &Word) -> String {
    if !w.glob {
        return w.text.clone();
    }
    match w.before_glob.rfind('/') {
        Some(0) => "/".to_owned(),
        Some(slash) => w.before_glob[..slash].to_owned(),
        None => ".".to_owned(),
    }
}
