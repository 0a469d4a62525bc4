//! `web_grep`: a regular expression over a session's cached pages, line by line.

use grep_matcher::Matcher;
use grep_regex::RegexMatcherBuilder;

use super::Page;

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GrepMatch {
    /// The page's number in the session's cache.
    pub page: u32,
    /// The line, from 1.
    pub line: usize,
    /// The line's text.
    pub text: String,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Grepped {
    /// The first `max` matching lines, page by page in the order given.
    pub matches: Vec<GrepMatch>,
    /// Every matching line, the ones left out included.
    pub total: usize,
}

/// The lines of `pages` (each with its number) that `pattern` matches, the first `max` of
/// them; or why the pattern is not a regular expression.
pub fn grep(
    pages: &[(u32, &Page)],
    pattern: &str,
    case_insensitive: bool,
    max: usize,
) -> Result<Grepped, String> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(case_insensitive)
        .build(pattern)
        .map_err(|e| format!("pattern {pattern:?} is not a regular expression: {e}"))?;
    let mut found = Grepped {
        matches: Vec::new(),
        total: 0,
    };
    for (number, page) in pages {
        for (i, line) in page.lines.iter().enumerate() {
            if matcher.is_match(line.as_bytes()).unwrap_or(false) {
                found.total += 1;
                if found.matches.len() < max {
                    found.matches.push(GrepMatch {
                        page: *number,
                        line: i + 1,
                        text: line.clone(),
                    });
                }
            }
        }
    }
    Ok(found)
}
