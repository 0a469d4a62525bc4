//! The web reading tools' pages (`web_open`, `web_read`, `web_grep`): a fetched page's Markdown
//! read once into a [`Page`] (its lines with every link numbered, its headings, its title),
//! then read by lines or by heading ([`read`]) and searched ([`grep`]). No network and no
//! state here: the broker fetches (through `http_fetch`'s checks) and keeps each session's
//! pages.

mod args;
mod grep;
mod links;
mod read;

pub use args::{WebGrepArgs, WebOpenArgs, WebReadArgs};
pub use grep::{GrepMatch, Grepped, grep};
pub use read::{Excerpt, ReadError};

use links::number_links;

/// One heading of a page: its level (1 to 6), its text (links numbered) and its line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Heading {
    /// 1 for `#`, 6 for `######`.
    pub level: usize,
    /// The heading's text, without its `#`s.
    pub text: String,
    /// Its line, from 1.
    pub line: usize,
}

/// One numbered link of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// Its number, from 1, as the page's text writes it (`text [3]`).
    pub number: usize,
    /// The link's text (an image's alternative text, or empty).
    pub text: String,
    /// Where it goes, made absolute against the page's URL when it can be.
    pub url: String,
}

/// A page as the cache keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The URL that answered, after redirects.
    pub url: String,
    /// The page's first level-1 heading, else its first heading, else its URL (the converter
    /// skips `<head>`, where `<title>` is).
    pub title: String,
    /// The Markdown's lines, each link written `text [n]`.
    pub lines: Vec<String>,
    /// Its headings, in order, outside fenced code.
    pub headings: Vec<Heading>,
    /// Its links, numbered in order.
    pub links: Vec<Link>,
}

impl Page {
    /// `markdown` fetched from `url` (the URL that answered), read into a page.
    pub fn new(url: &str, markdown: &str) -> Page {
        let base = url::Url::parse(url).ok();
        let mut links = Vec::new();
        let mut lines = Vec::new();
        let mut headings = Vec::new();
        let mut fence: Option<&str> = None;
        for raw in markdown.lines() {
            let trimmed = raw.trim_start();
            let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
            match (fence, marker) {
                (Some(open), Some(m)) if open == m => fence = None,
                (None, Some(m)) => fence = Some(m),
                _ => {}
            }
            if fence.is_some() || marker.is_some() {
                lines.push(raw.to_string());
                continue;
            }
            let line = number_links(raw, base.as_ref(), &mut links);
            if let Some((level, text)) = heading(&line) {
                headings.push(Heading {
                    level,
                    text,
                    line: lines.len() + 1,
                });
            }
            lines.push(line);
        }
        let title = headings
            .iter()
            .find(|h| h.level == 1)
            .or(headings.first())
            .map_or_else(|| url.to_string(), |h| h.text.clone());
        Page {
            url: url.to_string(),
            title,
            lines,
            headings,
            links,
        }
    }

    /// The bytes the page holds, as the cache counts them.
    pub fn bytes(&self) -> usize {
        self.lines.iter().map(|l| l.len() + 1).sum::<usize>()
            + self
                .links
                .iter()
                .map(|l| l.text.len() + l.url.len())
                .sum::<usize>()
            + self.url.len()
    }

    /// What `web_open` shows of the page beside its header: the outline (each heading with its
    /// line) and the numbered links (at most `max_links` of them).
    pub fn summary(&self, max_links: usize) -> String {
        let mut out = String::new();
        out.push_str("Outline:\n");
        if self.headings.is_empty() {
            out.push_str("(no headings)\n");
        }
        for (n, h) in self.headings.iter().enumerate() {
            out.push_str(&format!(
                "{}. {} {} (line {})\n",
                n + 1,
                "#".repeat(h.level),
                h.text,
                h.line
            ));
        }
        out.push_str("Links:\n");
        if self.links.is_empty() {
            out.push_str("(no links)\n");
        }
        for link in self.links.iter().take(max_links) {
            out.push_str(&format!(
                "[{}] {} -> {}\n",
                link.number, link.text, link.url
            ));
        }
        if self.links.len() > max_links {
            out.push_str(&format!(
                "({} more links; web_grep finds them in the text)\n",
                self.links.len() - max_links
            ));
        }
        out
    }
}

/// A Markdown ATX heading's level and text, if `line` is one.
fn heading(line: &str) -> Option<(usize, String)> {
    let trimmed = line.trim_start_matches(' ');
    if line.len() - trimmed.len() > 3 {
        return None;
    }
    let level = trimmed.bytes().take_while(|b| *b == b'#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &trimmed[level..];
    if !rest.is_empty() && !rest.starts_with([' ', '\t']) {
        return None;
    }
    let text = rest.trim().trim_end_matches('#').trim_end().to_string();
    Some((level, text))
}

#[cfg(test)]
mod tests;
