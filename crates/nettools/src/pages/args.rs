//! The web reading tools' arguments, as the broker parses them.

use serde::{Deserialize, Serialize};

use crate::web::HttpFetchArgs;
use proto::tools::schemas::MAX_MAX_LENGTH;

/// `web_open`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebOpenArgs {
    /// The page's URL; it must start with `https://`.
    pub url: String,
}

impl WebOpenArgs {
    /// The `http_fetch` that brings the page: its whole text, as Markdown, from the start (at
    /// most [`MAX_MAX_LENGTH`] characters).
    pub fn fetch_args(&self) -> HttpFetchArgs {
        HttpFetchArgs {
            url: self.url.clone(),
            max_length: Some(MAX_MAX_LENGTH),
            start_index: None,
        }
    }
}

/// `web_read`'s arguments: lines, or a heading's section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebReadArgs {
    /// The page's number in the session's cache.
    pub page: u32,
    /// The first line (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_line: Option<usize>,
    /// The last line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_line: Option<usize>,
    /// The heading whose section to read, instead of lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heading: Option<String>,
}

impl WebReadArgs {
    /// Why these arguments cannot be read, if they cannot.
    pub fn check(&self) -> Result<(), String> {
        if self.page == 0 {
            return Err("page is 0: give the page number web_open returned (1 or more)".into());
        }
        if self.heading.is_some() && (self.start_line.is_some() || self.end_line.is_some()) {
            return Err("give heading or start_line/end_line, not both".into());
        }
        if self.start_line == Some(0) || self.end_line == Some(0) {
            return Err("lines are numbered from 1".into());
        }
        if let (Some(start), Some(end)) = (self.start_line, self.end_line)
            && end < start
        {
            return Err(format!("end_line {end} is before start_line {start}"));
        }
        if self.heading.as_deref().is_some_and(|h| h.trim().is_empty()) {
            return Err("heading is empty: give a heading's text or its number".into());
        }
        Ok(())
    }
}

/// `web_grep`'s arguments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebGrepArgs {
    /// The regular expression.
    pub pattern: String,
    /// Only this page (default: every cached page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<u32>,
    /// Ignore case.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub case_insensitive: Option<bool>,
}

impl WebGrepArgs {
    /// Why these arguments cannot be searched with, if they cannot (the pattern is compiled
    /// once here to say so).
    pub fn check(&self) -> Result<(), String> {
        if self.pattern.is_empty() {
            return Err("pattern is empty: say what to search for".into());
        }
        if self.page == Some(0) {
            return Err("page is 0: give the page number web_open returned (1 or more)".into());
        }
        super::grep(
            &[],
            &self.pattern,
            self.case_insensitive.unwrap_or(false),
            0,
        )
        .map(|_| ())
    }
}
