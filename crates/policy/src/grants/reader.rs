//! Walking one grant file's TOML with its spans, so that every problem carries its line: the
//! reader and the values every kind of grant table is made of (strings, words, paths, hosts,
//! command prefixes).

use std::path::Path;

use proto::{Class, Timestamp};
use serde_spanned::Spanned;
use toml::de::DeValue;

use super::rules::{HostRule, PathRule, host_rule, path_rule};
use super::{Problem, problem};
use crate::shell::{prefix_warning, prefix_words};

/// Byte offsets of line starts, to turn a span into a line number.
pub(super) struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    pub(super) fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
        Lines { starts }
    }

    pub(super) fn of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

pub(super) type Value<'a> = Spanned<DeValue<'a>>;

/// Reads the tables of one grant file, each problem named with the file and its line.
pub(super) struct GrantReader<'r> {
    pub(super) file: &'r Path,
    pub(super) home: &'r Path,
    pub(super) lines: &'r Lines,
    pub(super) problems: &'r mut Vec<Problem>,
    pub(super) warnings: &'r mut Vec<Problem>,
}

impl GrantReader<'_> {
    pub(super) fn say(&mut self, line: usize, message: String) {
        self.problems.push(problem(self.file, Some(line), message));
    }

    /// How many problems this file has so far.
    pub(super) fn problem_count(&self) -> usize {
        self.problems.len()
    }

    pub(super) fn line_of(&self, value: &Value<'_>) -> usize {
        self.lines.of(value.span().start)
    }

    pub(super) fn string<'v>(&mut self, value: &'v Value<'_>, key: &str) -> Option<&'v str> {
        match value.get_ref() {
            DeValue::String(text) => Some(text.as_ref()),
            _ => {
                let line = self.line_of(value);
                self.say(line, format!("{key} must be a string"));
                None
            }
        }
    }

    pub(super) fn strings(&mut self, value: &Value<'_>, key: &str) -> Vec<(String, usize)> {
        let DeValue::Array(items) = value.get_ref() else {
            let line = self.line_of(value);
            self.say(line, format!("{key} must be a list of strings"));
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items.iter() {
            let line = self.line_of(item);
            match item.get_ref() {
                DeValue::String(text) => out.push((text.to_string(), line)),
                _ => self.say(line, format!("{key} must be a list of strings")),
            }
        }
        out
    }

    pub(super) fn id(&mut self, value: &Value<'_>) -> Option<String> {
        let text = self.string(value, "id")?.to_string();
        let valid = !text.is_empty()
            && text.len() <= 64
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if valid {
            Some(text)
        } else {
            let line = self.line_of(value);
            self.say(
                line,
                format!("id {text:?} must be 1 to 64 letters, digits, '-', '_' or '.'"),
            );
            None
        }
    }

    pub(super) fn class(&mut self, value: &Value<'_>, key: &str) -> Option<Class> {
        let word = self.word(value, key, &["public", "private", "secret"])?;
        Some(match word {
            "public" => Class::Public,
            "secret" => Class::Secret,
            _ => Class::Private,
        })
    }

    pub(super) fn word(
        &mut self,
        value: &Value<'_>,
        key: &str,
        allowed: &[&'static str],
    ) -> Option<&'static str> {
        let text = self.string(value, key)?;
        let found = allowed.iter().copied().find(|w| *w == text);
        if found.is_none() {
            let line = self.line_of(value);
            self.say(
                line,
                format!(
                    "{key} is {text:?}; it must be one of {}",
                    allowed.join(", ")
                ),
            );
        }
        found
    }

    pub(super) fn boolean(&mut self, value: &Value<'_>, key: &str) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                let line = self.line_of(value);
                self.say(line, format!("{key} must be true or false"));
                None
            }
        }
    }

    pub(super) fn expires(&mut self, value: &Value<'_>) -> Option<Timestamp> {
        let text = match value.get_ref() {
            DeValue::Datetime(at) => at.to_string(),
            DeValue::String(text) => text.to_string(),
            _ => {
                let line = self.line_of(value);
                self.say(
                    line,
                    "expires must be an RFC 3339 date and time".to_string(),
                );
                return None;
            }
        };
        match Timestamp::parse(&text) {
            Ok(at) => Some(at),
            Err(_) => {
                let line = self.line_of(value);
                self.say(
                    line,
                    format!(
                        "expires {text:?} is not an RFC 3339 date and time with an offset, such as 2026-12-31T00:00:00Z"
                    ),
                );
                None
            }
        }
    }

    pub(super) fn paths(&mut self, value: &Value<'_>, deny: bool) -> Vec<PathRule> {
        let mut rules = Vec::new();
        for (written, line) in self.strings(value, "paths") {
            match path_rule(&written, self.home, deny) {
                Ok(rule) => {
                    if let Some(literal) = rule.literal_exists(self.home).filter(|_| !deny) {
                        self.warnings.push(problem(
                            self.file,
                            Some(line),
                            format!(
                                "path {written:?} reads as a glob, but {} exists: to mean that folder, escape each of * ? [ {{ with a backslash",
                                literal.display()
                            ),
                        ));
                    }
                    rules.push(rule);
                }
                Err(error) => self.say(line, error.to_string()),
            }
        }
        rules
    }

    pub(super) fn hosts(&mut self, value: &Value<'_>) -> Vec<HostRule> {
        let mut rules = Vec::new();
        for (written, line) in self.strings(value, "hosts") {
            match host_rule(&written) {
                Ok(rule) => rules.push(rule),
                Err(error) => self.say(line, error.to_string()),
            }
        }
        rules
    }

    pub(super) fn commands(&mut self, value: &Value<'_>) -> Vec<Vec<String>> {
        let mut prefixes = Vec::new();
        for (written, line) in self.strings(value, "commands") {
            match prefix_words(&written) {
                Ok(words) if words.is_empty() => {
                    self.say(line, "a command prefix cannot be empty".to_string());
                }
                Ok(words) => {
                    if let Some(warning) = prefix_warning(&words) {
                        self.warnings.push(problem(self.file, Some(line), warning));
                    }
                    prefixes.push(words);
                }
                Err(message) => self.say(line, format!("command prefix {written:?}: {message}")),
            }
        }
        prefixes
    }
}
