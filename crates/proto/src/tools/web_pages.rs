//! The web reading tools' schemas and bounds (seed 003's `web_open`, `web_read`, `web_grep`):
//! a page is fetched once into the session's page cache, as Markdown, and read from there.

use serde_json::json;

use crate::ToolSchema;

/// The most pages a session's cache holds; opening one more drops the least recently opened.
pub const MAX_PAGES: usize = 16;
/// The most bytes of Markdown a session's cache holds, every page together; opening a page
/// drops the least recently opened ones until it fits.
pub const MAX_CACHE_BYTES: usize = 8 * 1024 * 1024;
/// The most lines one `web_read` call returns.
pub const MAX_READ_LINES: usize = 400;
/// The most matching lines one `web_grep` call returns.
pub const MAX_GREP_MATCHES: usize = 100;
/// The most numbered links a `web_open` result lists (the page keeps every number).
pub const MAX_LISTED_LINKS: usize = 200;

/// `web_open`'s schema.
pub fn web_open_schema() -> ToolSchema {
    ToolSchema {
        name: "web_open".to_string(),
        description: "Fetch an https page once into this session's page cache, as Markdown; returns its page number, title, outline (headings with line numbers) and numbered links. Read it with web_read, search it with web_grep. Needs a grant from the owner for the host.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "url": { "type": "string", "description": "The URL. It must start with https://." }
            },
            "required": ["url"]
        }),
    }
}

/// `web_read`'s schema.
pub fn web_read_schema() -> ToolSchema {
    ToolSchema {
        name: "web_read".to_string(),
        description: format!(
            "Read part of a page web_open cached in this session: lines start_line to end_line, or the section under a heading (up to {MAX_READ_LINES} lines)."
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "page": { "type": "integer", "minimum": 1, "description": "The page number web_open returned." },
                "start_line": { "type": "integer", "minimum": 1, "description": "The first line to read (default: 1)." },
                "end_line": { "type": "integer", "minimum": 1, "description": "The last line to read (default: start_line + 199)." },
                "heading": { "type": "string", "description": "Read the section under this heading instead of lines (its text, or its number in the outline)." }
            },
            "required": ["page"]
        }),
    }
}

/// `web_grep`'s schema.
pub fn web_grep_schema() -> ToolSchema {
    ToolSchema {
        name: "web_grep".to_string(),
        description: format!(
            "Search the pages web_open cached in this session for a regular expression; returns each matching line with its page and line number (up to {MAX_GREP_MATCHES})."
        ),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": { "type": "string", "description": "The regular expression." },
                "page": { "type": "integer", "minimum": 1, "description": "Search only this page (default: every cached page)." },
                "case_insensitive": { "type": "boolean", "description": "Ignore case (default: false)." }
            },
            "required": ["pattern"]
        }),
    }
}
