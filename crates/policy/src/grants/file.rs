//! One grant file: its TOML parsed with spans, each `[[grant]]` table read as boxmaker's tools'
//! grant or a downstream server's, every problem with its line.

use std::path::Path;

use toml::de::{DeTable, DeValue};

use super::reader::{GrantReader, Lines};
use super::{ParsedFile, problem};

/// Reads one grant file's text; `file` names it in problems, `home` expands `~`.
pub fn parse_file(text: &str, file: &Path, home: &Path) -> ParsedFile {
    let lines = Lines::new(text);
    let mut out = ParsedFile::default();
    let root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(error) => {
            let line = error.span().map(|s| lines.of(s.start));
            let message = error.message().trim().to_string();
            out.problems
                .push(problem(file, line, format!("not valid TOML: {message}")));
            return out;
        }
    };
    for (key, value) in root.get_ref().iter() {
        let line = Some(lines.of(key.span().start));
        if key.get_ref().as_ref() != "grant" {
            out.problems.push(problem(
                file,
                line,
                format!(
                    "unknown top-level key {:?}; a grant file holds [[grant]] tables",
                    key.get_ref().as_ref()
                ),
            ));
            continue;
        }
        let DeValue::Array(tables) = value.get_ref() else {
            out.problems.push(problem(
                file,
                line,
                "grant must be written as [[grant]] tables".to_string(),
            ));
            continue;
        };
        for table in tables.iter() {
            let line = lines.of(table.span().start);
            let DeValue::Table(table) = table.get_ref() else {
                out.problems.push(problem(
                    file,
                    Some(line),
                    "each grant must be a table".to_string(),
                ));
                continue;
            };
            let mut reader = GrantReader {
                file,
                home,
                lines: &lines,
                problems: &mut out.problems,
                warnings: &mut out.warnings,
            };
            if super::downstream::names_downstream(table) {
                reader.read_downstream(table, line, &mut out.downstream);
            } else {
                out.grants.extend(reader.read(table, line));
            }
        }
    }
    // Tables come back in key order, not file order: report in the order of the file.
    out.problems.sort_by_key(|p| p.line);
    out.warnings.sort_by_key(|p| p.line);
    out
}
