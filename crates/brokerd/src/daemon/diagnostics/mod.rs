//! Diagnostics after a write (issue 38, item 2): `[[diagnostics]]` in `brokerd.toml` names,
//! per workspace, the checker of a language; after a `write_file` or `edit_file` of a file
//! with one of its extensions the broker runs it, bounded in time, and appends what it said of
//! that file to the write's answer (at most `max` lines), or one line saying why it did not.
//!
//! This module holds the owner's words (the configuration and its check), the command line
//! a checker runs, and the block appended to the answer; running it, under the write grant's
//! walls or as a `shell` call a shell grant covers, is `calls::checker`'s.

use std::path::{Path, PathBuf};

use serde::Deserialize;

mod parse;

pub use parse::{Diagnostic, Format, parse};

/// `[[diagnostics]]`: one checker of one workspace.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DiagnosticsConfig {
    /// The folder it applies to (absolute, or `~/`): a written file under it, with one of
    /// `extensions`, is checked; the checker runs in it.
    pub workspace: PathBuf,
    /// The file name extensions it checks, without the dot (`["py"]`, `["rs"]`).
    pub extensions: Vec<String>,
    /// The program and its arguments; `{file}` in an argument is the written file's absolute
    /// path. Run by `bash -c` with each word quoted.
    pub command: Vec<String>,
    /// Whether it can run the project's code (`cargo check` runs build scripts and proc
    /// macros, `tsc` loads plugins): then it runs only as a `shell` call that a shell grant
    /// covers, decided and recorded as one. Required: the owner says it.
    pub runs_project_code: bool,
    /// How it prints its diagnostics.
    pub format: Format,
    /// Its name in the answer (default: the program's file name).
    #[serde(default)]
    pub name: Option<String>,
    /// Its time limit, in milliseconds.
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// The most diagnostics appended.
    #[serde(default = "default_max")]
    pub max: usize,
}

fn default_timeout_ms() -> u64 {
    10_000
}

fn default_max() -> usize {
    20
}

/// The longest a checker may be given, in milliseconds (the write's answer waits for it).
pub const MAX_TIMEOUT_MS: u64 = 600_000;

/// The most characters of one diagnostic's message kept.
const MESSAGE_CHARS: usize = 300;

/// Checks every entry (`home` expands `~/`), naming the first problem by its index.
pub fn check(entries: &mut [DiagnosticsConfig], home: Option<&Path>) -> Result<(), String> {
    for (i, entry) in entries.iter_mut().enumerate() {
        let at = format!("[[diagnostics]] entry {}", i + 1);
        if let (Some(home), Ok(rest)) = (home, entry.workspace.strip_prefix("~")) {
            entry.workspace = home.join(rest);
        }
        if !entry.workspace.is_absolute() {
            return Err(format!(
                "{at}: workspace {} must be an absolute path or start with ~/",
                entry.workspace.display()
            ));
        }
        if entry.extensions.is_empty() {
            return Err(format!("{at}: extensions must name at least one"));
        }
        if let Some(bad) = entry
            .extensions
            .iter()
            .find(|e| e.is_empty() || e.contains(['.', '/']))
        {
            return Err(format!(
                "{at}: extension {bad:?} must be a name without a dot or a slash, like \"py\""
            ));
        }
        if entry
            .command
            .first()
            .is_none_or(|program| program.is_empty())
        {
            return Err(format!("{at}: command must name a program"));
        }
        if let Some(bad) = entry.command.iter().find(|word| word.contains('\0')) {
            return Err(format!("{at}: command word {bad:?} holds a NUL byte"));
        }
        if entry.timeout_ms == 0 || entry.timeout_ms > MAX_TIMEOUT_MS {
            return Err(format!(
                "{at}: timeout_ms is {}; it must be between 1 and {MAX_TIMEOUT_MS}",
                entry.timeout_ms
            ));
        }
        if entry.max == 0 {
            return Err(format!("{at}: max must be at least 1"));
        }
    }
    Ok(())
}

impl DiagnosticsConfig {
    /// Its name in the answer.
    pub fn name(&self) -> &str {
        match &self.name {
            Some(name) => name,
            None => self.command.first().map_or("checker", |program| {
                program.rsplit('/').next().unwrap_or(program)
            }),
        }
    }

    /// Whether it checks `file` (a resolved, absolute path).
    pub fn covers(&self, file: &Path) -> bool {
        let extension = file.extension().and_then(|e| e.to_str());
        file.starts_with(&self.workspace)
            && extension.is_some_and(|e| self.extensions.iter().any(|x| x == e))
    }

    /// The script `bash -c` runs: each word quoted, `{file}` replaced by `file`.
    pub fn script(&self, file: &Path) -> String {
        let file = file.display().to_string();
        self.command
            .iter()
            .map(|word| quoted(&word.replace("{file}", &file)))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The first entry that checks `file`.
pub fn checker_for<'a>(
    entries: &'a [DiagnosticsConfig],
    file: &Path,
) -> Option<&'a DiagnosticsConfig> {
    entries.iter().find(|entry| entry.covers(file))
}

/// `word` as one shell word: as it is when it holds only characters no shell reads
/// specially, else in single quotes.
fn quoted(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "-_./=,:@%+".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// What a checker's run came to, as the answer says it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ran {
    /// It ran to its end: its exit code (`None` when a signal stopped it) and its output.
    Finished {
        /// Its exit code.
        exit_code: Option<i64>,
        /// Its standard output, then its error output.
        output: String,
    },
    /// It did not finish within its time limit.
    TimedOut,
    /// It could not run, or was not run: why.
    NotRun(String),
}

/// The block appended to a write's answer for `file` (resolved), which `checker` checked and
/// whose run came to `ran`. No line of it starts with `+` (a write's answer indexes every line
/// but its diff's `+` lines as the file's).
pub fn block(checker: &DiagnosticsConfig, file: &Path, ran: &Ran) -> String {
    let name = checker.name();
    let shown_file = file
        .strip_prefix(&checker.workspace)
        .unwrap_or(file)
        .display()
        .to_string();
    let head = format!("diagnostics ({name}) for {shown_file}:");
    let output = match ran {
        Ran::TimedOut => {
            return format!(
                "{head} the checker did not finish within its limit of {} ms; none shown",
                checker.timeout_ms
            );
        }
        Ran::NotRun(why) => return format!("{head} not run: {}", one_line(why)),
        Ran::Finished { output, .. } => output,
    };
    let found: Vec<Diagnostic> = parse(checker.format, output)
        .into_iter()
        .filter(|d| names_file(checker, d, file))
        .collect();
    let exit_code = match ran {
        Ran::Finished { exit_code, .. } => *exit_code,
        _ => None,
    };
    if found.is_empty() {
        return match exit_code {
            Some(0) => format!("{head} none"),
            code => {
                let how = code.map_or("was stopped by a signal".to_string(), |c| {
                    format!("failed with exit code {c}")
                });
                let first = output
                    .lines()
                    .find(|l| !l.trim().is_empty() && l.trim() != "[stderr]")
                    .map(|l| format!(": {}", one_line(l)))
                    .unwrap_or_default();
                format!("{head} the checker {how} and reported nothing for this file{first}")
            }
        };
    }
    let total = found.len();
    let shown = total.min(checker.max);
    let mut text = if shown < total {
        format!("{head} {total}, the first {shown} shown")
    } else {
        format!("{head} {total}")
    };
    for d in found.iter().take(shown) {
        let line = d.line.map_or(String::new(), |l| format!(":{l}"));
        text.push_str(&format!("\n  {shown_file}{line}: {}", one_line(&d.message)));
    }
    text
}

/// Whether diagnostic `d` is about `file`: [`Format::Lines`] names no file (every line is the
/// written file's); a relative name is taken in the workspace.
fn names_file(checker: &DiagnosticsConfig, d: &Diagnostic, file: &Path) -> bool {
    let Some(named) = &d.file else {
        return true;
    };
    let named = checker.workspace.join(named);
    if named == file {
        return true;
    }
    match (named.canonicalize(), file.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    }
}

/// `text` on one line, cut to [`MESSAGE_CHARS`] characters.
fn one_line(text: &str) -> String {
    let joined = text.split_whitespace().collect::<Vec<_>>().join(" ");
    match joined.char_indices().nth(MESSAGE_CHARS) {
        Some((at, _)) => format!("{}…", &joined[..at]),
        None => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn python(max: usize) -> DiagnosticsConfig {
        DiagnosticsConfig {
            workspace: PathBuf::from("/w"),
            extensions: vec!["py".to_string()],
            command: vec![
                "python3".into(),
                "-c".into(),
                "it's".into(),
                "{file}".into(),
            ],
            runs_project_code: false,
            format: Format::Gcc,
            name: None,
            timeout_ms: 500,
            max,
        }
    }

    #[test]
    fn the_script_quotes_each_word_and_names_the_file() {
        let c = python(1);
        assert_eq!(
            c.script(Path::new("/w/a b.py")),
            r"python3 -c 'it'\''s' '/w/a b.py'"
        );
        assert!(c.covers(Path::new("/w/x/a.py")));
        assert!(!c.covers(Path::new("/w/a.rs")));
        assert!(!c.covers(Path::new("/other/a.py")));
        assert_eq!(c.name(), "python3");
    }

    #[test]
    fn the_block_keeps_the_files_diagnostics_capped_at_max() {
        let output = "/w/a.py:1: one\na.py:2: two\nb.py:3: other file\n/w/a.py:4: three\n";
        let ran = Ran::Finished {
            exit_code: Some(1),
            output: output.to_string(),
        };
        let block = block(&python(2), Path::new("/w/a.py"), &ran);
        assert_eq!(
            block,
            "diagnostics (python3) for a.py: 3, the first 2 shown\n  a.py:1: one\n  a.py:2: two"
        );
        assert!(block.lines().all(|l| !l.starts_with('+')));
    }

    #[test]
    fn a_failure_a_timeout_and_nothing_found_are_one_line_each() {
        let c = python(5);
        let file = Path::new("/w/a.py");
        let failed = Ran::Finished {
            exit_code: Some(2),
            output: "[stderr]\npython3: can't open file\n".to_string(),
        };
        assert_eq!(
            block(&c, file, &failed),
            "diagnostics (python3) for a.py: the checker failed with exit code 2 and reported nothing for this file: python3: can't open file"
        );
        assert!(
            block(&c, file, &Ran::TimedOut).contains("did not finish within its limit of 500 ms")
        );
        let clean = Ran::Finished {
            exit_code: Some(0),
            output: String::new(),
        };
        assert_eq!(
            block(&c, file, &clean),
            "diagnostics (python3) for a.py: none"
        );
    }

    #[test]
    fn the_check_names_the_entry_and_what_is_wrong() {
        let mut entries = vec![python(1)];
        entries[0].extensions = vec![".py".to_string()];
        let error = check(&mut entries, None).unwrap_err();
        assert!(
            error.contains("entry 1") && error.contains("\".py\""),
            "{error}"
        );
        let mut entries = vec![python(0)];
        assert!(check(&mut entries, None).unwrap_err().contains("max"));
        let mut entries = vec![python(1)];
        entries[0].workspace = PathBuf::from("~/src");
        check(&mut entries, Some(Path::new("/home/o"))).unwrap();
        assert_eq!(entries[0].workspace, PathBuf::from("/home/o/src"));
    }
}
