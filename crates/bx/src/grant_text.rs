//! The text of grant files as the owner reads and writes it: a warning kept knowingly as a
//! comment beside its line, and a value spelled as a TOML string that shows unambiguously.
//! Shared by `bx grants check`, its `--json` form and the pin lines, so none of them depends
//! on another.

use std::path::{Path, PathBuf};

/// The grant files' lines, each file read once, for [`acknowledged`].
#[derive(Default)]
pub(crate) struct FileLines(std::collections::HashMap<PathBuf, Vec<String>>);

impl FileLines {
    /// Line `line` (from 1) of `file`, if it can be read.
    fn line(&mut self, file: &Path, line: usize) -> Option<&str> {
        let lines = self.0.entry(file.to_path_buf()).or_insert_with(|| {
            std::fs::read_to_string(file)
                .map(|text| text.lines().map(str::to_owned).collect())
                .unwrap_or_default()
        });
        lines.get(line.checked_sub(1)?).map(String::as_str)
    }
}

/// Whether the owner keeps `warning` knowingly: its line carries a comment holding
/// `warning: ` and the warning's sentence word for word (as `bx grants preset coding` writes
/// them). A warning whose sentence changes, or that moves to another line, shows again.
pub(crate) fn acknowledged(warning: &policy::grants::Problem, files: &mut FileLines) -> bool {
    let Some(line) = warning.line else {
        return false;
    };
    files
        .line(&warning.file, line)
        .and_then(comment_of)
        .is_some_and(|comment| comment.contains(&format!("warning: {}", warning.message)))
}

/// The comment of one TOML line: the text after the first `#` outside a string.
fn comment_of(line: &str) -> Option<&str> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (at, c) in line.char_indices() {
        match quote {
            Some('"') if escaped => escaped = false,
            Some('"') if c == '\\' => escaped = true,
            Some(open) if c == open => quote = None,
            Some(_) => {}
            None if c == '"' || c == '\'' => quote = Some(c),
            None if c == '#' => return line.get(at + 1..),
            None => {}
        }
    }
    None
}

/// `text` as a TOML basic string, every character a terminal acts on written as TOML's
/// `\uXXXX` (`proto::text::needs_escape`: C0 and C1 controls, DEL, the bidirectional
/// controls), so the line is valid TOML, copies as the same value, and shows unambiguously.
pub(crate) fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if proto::text::needs_escape(c) => {
                out.push_str(&format!("\\u{:04X}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::comment_of;

    #[test]
    fn a_comment_starts_at_the_first_hash_outside_a_string() {
        assert_eq!(comment_of(r#"  "a # b", # c"#), Some(" c"));
        assert_eq!(comment_of(r#"  'a # b' # c"#), Some(" c"));
        assert_eq!(comment_of(r#"  "a \" # b" # c"#), Some(" c"));
        assert_eq!(comment_of(r#"  "a # b","#), None);
    }
}
