//! A checker's output read as diagnostics, in the format the owner named. Output of any other
//! shape is skipped line by line, never an error: a checker prints what it prints.

use serde::Deserialize;

/// How a checker prints its diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Format {
    /// `cargo check --message-format=json`: one JSON object a line; the `compiler-message`
    /// ones, at their primary span.
    JsonCargo,
    /// `FILE:LINE[:COLUMN]: MESSAGE` (gcc, clang, ruff's concise output, most linters), and
    /// `FILE: line LINE: MESSAGE` (`bash -n`, `sh -n`).
    Gcc,
    /// Every non-empty line is one diagnostic of the written file, with no line number.
    Lines,
}

/// One diagnostic, as the checker named it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file, as printed (relative to the checker's folder, or absolute); `None` for
    /// [`Format::Lines`], which names none.
    pub file: Option<String>,
    /// The line, when the checker gave one.
    pub line: Option<u64>,
    /// What is wrong (on one line).
    pub message: String,
}

/// The marker the shell runner puts between a command's standard output and its error output.
const STDERR_MARKER: &str = "[stderr]";

/// The diagnostics in `output`, in its order.
pub fn parse(format: Format, output: &str) -> Vec<Diagnostic> {
    let lines = output
        .lines()
        .map(str::trim_end)
        .filter(|line| !line.trim().is_empty() && *line != STDERR_MARKER);
    match format {
        Format::JsonCargo => lines.filter_map(cargo_line).collect(),
        Format::Gcc => lines.filter_map(gcc_line).collect(),
        Format::Lines => lines
            .map(|line| Diagnostic {
                file: None,
                line: None,
                message: line.trim().to_string(),
            })
            .collect(),
    }
}

/// `FILE:LINE[:COLUMN]: MESSAGE` or `FILE: line LINE: MESSAGE`: the first colon after which a
/// line number follows.
fn gcc_line(line: &str) -> Option<Diagnostic> {
    for (at, _) in line.match_indices(':').filter(|(at, _)| *at > 0) {
        let rest = &line[at + 1..];
        let numbered = rest.strip_prefix(" line ").unwrap_or(rest);
        let Some((number, after)) = leading_number(numbered) else {
            continue;
        };
        let Some(after) = after.strip_prefix(':') else {
            continue;
        };
        // An optional column.
        let message = match leading_number(after) {
            Some((_, after_column)) if after_column.starts_with(':') => &after_column[1..],
            _ => after,
        };
        return Some(Diagnostic {
            file: Some(line[..at].to_string()),
            line: Some(number),
            message: message.trim().to_string(),
        });
    }
    None
}

/// The decimal number `text` starts with, and what follows it.
fn leading_number(text: &str) -> Option<(u64, &str)> {
    let digits = text.bytes().take_while(u8::is_ascii_digit).count();
    let number = text[..digits].parse().ok()?;
    Some((number, &text[digits..]))
}

/// One line of cargo's JSON messages.
#[derive(Deserialize)]
struct CargoLine {
    reason: String,
    message: Option<CargoMessage>,
}

#[derive(Deserialize)]
struct CargoMessage {
    message: String,
    level: String,
    #[serde(default)]
    spans: Vec<CargoSpan>,
}

#[derive(Deserialize)]
struct CargoSpan {
    file_name: String,
    line_start: u64,
    is_primary: bool,
}

/// A `compiler-message` line at its primary span; anything else (other reasons, lines that
/// are not JSON, messages without a span) is none.
fn cargo_line(line: &str) -> Option<Diagnostic> {
    let parsed: CargoLine = serde_json::from_str(line).ok()?;
    if parsed.reason != "compiler-message" {
        return None;
    }
    let message = parsed.message?;
    let span = message.spans.iter().find(|s| s.is_primary)?;
    Some(Diagnostic {
        file: Some(span.file_name.clone()),
        line: Some(span.line_start),
        message: format!("{}: {}", message.level, message.message),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(file: &str, line: u64, message: &str) -> Diagnostic {
        Diagnostic {
            file: Some(file.to_string()),
            line: Some(line),
            message: message.to_string(),
        }
    }

    #[test]
    fn gcc_lines_with_and_without_a_column_and_bash_lines_are_read() {
        let output = "a.c:3:5: error: expected ';'\nb.py:7: invalid syntax\n[stderr]\nrun.sh: line 2: syntax error near `fi'\n";
        assert_eq!(
            parse(Format::Gcc, output),
            vec![
                one("a.c", 3, "error: expected ';'"),
                one("b.py", 7, "invalid syntax"),
                one("run.sh", 2, "syntax error near `fi'"),
            ]
        );
    }

    #[test]
    fn odd_output_is_skipped_never_a_panic() {
        let odd = ":\n:1\n::\nno colon\nfile:notanumber: x\nfile:99999999999999999999999: x\n\u{1b}[31m:\u{e9}:\n{\"reason\":\"compiler-message\"}\n{\"reason\":\"compiler-message\",\"message\":{\"message\":\"m\",\"level\":\"error\",\"spans\":[]}}\n[1,2]\n";
        assert!(parse(Format::Gcc, odd).is_empty());
        assert!(parse(Format::JsonCargo, odd).is_empty());
        assert_eq!(parse(Format::Lines, odd).len(), odd.lines().count());
    }

    #[test]
    fn cargo_messages_are_read_at_their_primary_span() {
        let output = concat!(
            "{\"reason\":\"compiler-artifact\",\"target\":{}}\n",
            "{\"reason\":\"compiler-message\",\"message\":{\"message\":\"mismatched types\",\"level\":\"error\",",
            "\"spans\":[{\"file_name\":\"src/x.rs\",\"line_start\":1,\"is_primary\":false},",
            "{\"file_name\":\"src/main.rs\",\"line_start\":4,\"is_primary\":true}]}}\n",
            "warning: not json\n",
        );
        assert_eq!(
            parse(Format::JsonCargo, output),
            vec![one("src/main.rs", 4, "error: mismatched types")]
        );
    }
}
