//! `web_read`: a range of a cached page, by lines or by the section under a heading.

use proto::tools::web_pages::MAX_READ_LINES;

use super::Page;

/// Lines of a page, and where they sit in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Excerpt {
    /// The first line returned, from 1.
    pub start_line: usize,
    /// The last line returned.
    pub end_line: usize,
    /// The page's number of lines.
    pub total_lines: usize,
    /// The line to start at for the rest of the range asked for, when it was longer than
    /// [`MAX_READ_LINES`].
    pub next_line: Option<usize>,
    /// The heading whose section this is, for a read by heading.
    pub heading: Option<String>,
    /// The lines, joined by newlines.
    pub text: String,
}

/// Why a range cannot be read; each message says what to give instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// `start_line` is past the page's end.
    #[error("start_line {start} is past the page's last line, {total}")]
    PastEnd {
        /// The line asked for.
        start: usize,
        /// The page's lines.
        total: usize,
    },
    /// No heading has that text or number.
    #[error("the page has no heading {0:?}; web_open's outline lists its headings")]
    NoHeading(String),
    /// More than one heading has that text.
    #[error("{count} headings read {heading:?}; give its number in web_open's outline")]
    Ambiguous {
        /// The text asked for.
        heading: String,
        /// How many headings have it.
        count: usize,
    },
}

/// Lines reads 200 lines when no end is given.
const DEFAULT_LINES: usize = 200;

impl Page {
    /// Lines `start` to `end` (inclusive, from 1; `end` defaults to `start + 199`), at most
    /// [`MAX_READ_LINES`] of them.
    pub fn read_lines(&self, start: usize, end: Option<usize>) -> Result<Excerpt, ReadError> {
        let total = self.lines.len();
        if start > total.max(1) {
            return Err(ReadError::PastEnd { start, total });
        }
        let end = end.unwrap_or(start + DEFAULT_LINES - 1);
        Ok(self.excerpt(start, end, None))
    }

    /// The section under the heading whose text is `heading` (case and spaces aside; or its
    /// number in the outline, `"3"`): its line to the line before the next heading of its
    /// level or above.
    pub fn section(&self, heading: &str) -> Result<Excerpt, ReadError> {
        let wanted = normal(heading);
        let by_number = heading
            .trim()
            .parse::<usize>()
            .ok()
            .and_then(|n| n.checked_sub(1))
            .and_then(|n| self.headings.get(n));
        let index = match by_number {
            Some(h) => self.headings.iter().position(|x| x == h),
            None => {
                let same: Vec<usize> = (0..self.headings.len())
                    .filter(|&i| normal(&self.headings[i].text) == wanted)
                    .collect();
                match same.as_slice() {
                    [one] => Some(*one),
                    [] => None,
                    more => {
                        return Err(ReadError::Ambiguous {
                            heading: heading.to_string(),
                            count: more.len(),
                        });
                    }
                }
            }
        };
        let Some(index) = index else {
            return Err(ReadError::NoHeading(heading.to_string()));
        };
        let found = &self.headings[index];
        let end = self.headings[index + 1..]
            .iter()
            .find(|h| h.level <= found.level)
            .map_or(self.lines.len(), |h| h.line - 1);
        Ok(self.excerpt(found.line, end, Some(found.text.clone())))
    }

    fn excerpt(&self, start: usize, end: usize, heading: Option<String>) -> Excerpt {
        let total = self.lines.len();
        let start = start.max(1);
        let asked_end = end.min(total).max(start.min(total));
        let end = asked_end.min(start + MAX_READ_LINES - 1);
        let text = if total == 0 {
            String::new()
        } else {
            self.lines[start - 1..end].join("\n")
        };
        Excerpt {
            start_line: start,
            end_line: end,
            total_lines: total,
            next_line: (end < asked_end).then_some(end + 1),
            heading,
            text,
        }
    }
}

/// `text` in lower case with its runs of spaces made one.
fn normal(text: &str) -> String {
    text.split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .to_lowercase()
}
