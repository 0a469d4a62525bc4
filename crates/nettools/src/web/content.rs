//! What a fetched body becomes for the model: HTML converted to Markdown (by `htmd`), other
//! text as it is, a binary type refused; then one page of the text, by characters.

use std::thread;

/// How a body is read, by its `Content-Type` (or, without one, by a look at its bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// HTML or XHTML: converted to Markdown.
    Html,
    /// Text the model reads as it is (plain text, JSON, XML, scripts, …).
    Text,
    /// Anything else: refused with its type and size.
    Binary,
}

/// The media types outside `text/` that are text.
const TEXT_TYPES: &[&str] = &[
    "application/json",
    "application/xml",
    "application/javascript",
    "application/ecmascript",
    "application/x-javascript",
    "application/x-sh",
    "application/x-shellscript",
    "application/toml",
    "application/yaml",
    "application/x-yaml",
    "application/sql",
    "application/graphql",
    "application/x-ndjson",
    "application/jsonl",
    "application/csv",
    "image/svg+xml",
];

/// The kind of a body whose `Content-Type` is `content_type`; `start` (the body's first bytes)
/// decides when there is none.
pub(super) fn kind(content_type: Option<&str>, start: &[u8]) -> Kind {
    let Some(content_type) = content_type else {
        return sniff(start);
    };
    let media = content_type
        .split_once(';')
        .map_or(content_type, |(media, _)| media)
        .trim()
        .to_ascii_lowercase();
    match media.as_str() {
        "text/html" | "application/xhtml+xml" => Kind::Html,
        "" => sniff(start),
        m if m.starts_with("text/")
            || TEXT_TYPES.contains(&m)
            || m.ends_with("+json")
            || m.ends_with("+xml") =>
        {
            Kind::Text
        }
        _ => Kind::Binary,
    }
}

fn sniff(start: &[u8]) -> Kind {
    let head = &start[..start.len().min(8192)];
    if head.contains(&0) || std::str::from_utf8(trim_partial(head)).is_err() {
        return Kind::Binary;
    }
    let lower = String::from_utf8_lossy(&head[..head.len().min(512)]).to_ascii_lowercase();
    let lower = lower.trim_start();
    if lower.starts_with("<!doctype html") || lower.starts_with("<html") {
        Kind::Html
    } else {
        Kind::Text
    }
}

/// `bytes` without a UTF-8 sequence cut at its end.
fn trim_partial(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes,
        Err(error) if error.error_len().is_none() => &bytes[..error.valid_up_to()],
        Err(_) => bytes,
    }
}

/// The deepest element nesting converted to Markdown; a deeper page is returned as its HTML
/// text, since the converter walks the tree recursively.
pub const MAX_HTML_DEPTH: usize = 512;

/// Elements never converted (their text is not the page's content).
const SKIPPED: &[&str] = &[
    "script", "style", "noscript", "template", "iframe", "svg", "canvas", "head",
];

/// `html` as Markdown, or None when it nests deeper than [`MAX_HTML_DEPTH`] or the converter
/// fails (then the caller keeps the HTML as text).
pub(super) fn markdown(html: &str) -> Option<String> {
    if nesting(html) > MAX_HTML_DEPTH {
        return None;
    }
    let html = html.to_owned();
    // The converter recurses once per level: a thread of its own with room for the deepest
    // page allowed.
    let worker = thread::Builder::new()
        .name("html-to-markdown".into())
        .stack_size(64 * 1024 * 1024)
        .spawn(move || {
            htmd::HtmlToMarkdown::builder()
                .skip_tags(SKIPPED.to_vec())
                .build()
                .convert(&html)
                .ok()
        })
        .ok()?;
    worker.join().ok().flatten().map(|md| md.trim().to_owned())
}

/// Elements that never hold others.
const VOID: &[&str] = &[
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param", "source",
    "track", "wbr",
];

/// Elements whose end tag may be left out: the parser closes them when the next one starts, so
/// they do not deepen the tree by themselves.
const IMPLIED_END: &[&str] = &[
    "p", "li", "dt", "dd", "tr", "td", "th", "option", "optgroup", "thead", "tbody", "tfoot",
    "colgroup", "rb", "rt", "rp", "rtc",
];

/// An estimate of how deeply `html`'s elements nest: every start tag that is not void,
/// self-closed or of an element whose end is implied opens a level, every end tag closes one
/// (never below zero); the text of `script` and `style` is skipped.
fn nesting(html: &str) -> usize {
    let bytes = html.as_bytes();
    let (mut depth, mut deepest) = (0usize, 0usize);
    let mut i = 0;
    while let Some(offset) = memchr::memchr(b'<', &bytes[i..]) {
        i += offset + 1;
        let rest = &bytes[i..];
        if rest.first() == Some(&b'/') {
            depth = depth.saturating_sub(1);
            continue;
        }
        let name_len = rest
            .iter()
            .position(|b| !b.is_ascii_alphanumeric())
            .unwrap_or(rest.len());
        if name_len == 0 {
            continue;
        }
        let name = String::from_utf8_lossy(&rest[..name_len]).to_ascii_lowercase();
        let end = memchr::memchr(b'>', rest).unwrap_or(rest.len());
        let self_closed = end > 0 && rest.get(end - 1) == Some(&b'/');
        if matches!(name.as_str(), "script" | "style") && !self_closed {
            // Their text is not markup: on to their end tag.
            i = end_tag(bytes, i, name.as_bytes());
            continue;
        }
        if !VOID.contains(&name.as_str()) && !IMPLIED_END.contains(&name.as_str()) && !self_closed {
            depth += 1;
            deepest = deepest.max(depth);
        }
    }
    deepest
}

/// Where the end tag `</name` (any case) starts at or after `from`, or the end.
fn end_tag(bytes: &[u8], from: usize, name: &[u8]) -> usize {
    let mut at = from;
    while let Some(offset) = memchr::memchr(b'<', &bytes[at..]) {
        at += offset;
        let after = &bytes[at + 1..];
        if after.first() == Some(&b'/')
            && after.len() > name.len()
            && after[1..=name.len()].eq_ignore_ascii_case(name)
        {
            return at;
        }
        at += 1;
    }
    bytes.len()
}

/// One page of `text`: up to `max` characters from character `start`; the whole text's length
/// in characters; and where the next page starts, when there is more.
pub(super) fn page(text: &str, start: usize, max: usize) -> (String, usize, Option<usize>) {
    let total = text.chars().count();
    let from = text
        .char_indices()
        .nth(start)
        .map_or(text.len(), |(at, _)| at);
    let rest = &text[from..];
    let to = rest
        .char_indices()
        .nth(max)
        .map_or(rest.len(), |(at, _)| at);
    let end = start.saturating_add(max);
    (rest[..to].to_owned(), total, (end < total).then_some(end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kind_follows_the_content_type_then_the_bytes() {
        assert_eq!(kind(Some("text/html; charset=utf-8"), b""), Kind::Html);
        assert_eq!(kind(Some("application/xhtml+xml"), b""), Kind::Html);
        assert_eq!(kind(Some("text/plain"), b"\0"), Kind::Text);
        assert_eq!(kind(Some("application/json"), b""), Kind::Text);
        assert_eq!(kind(Some("application/vnd.api+json"), b""), Kind::Text);
        assert_eq!(kind(Some("image/png"), b"abc"), Kind::Binary);
        assert_eq!(kind(Some("application/octet-stream"), b"abc"), Kind::Binary);
        assert_eq!(kind(None, b"\x89PNG\0"), Kind::Binary);
        assert_eq!(kind(None, b"  <!DOCTYPE html><p>x"), Kind::Html);
        assert_eq!(kind(None, "plain é".as_bytes()), Kind::Text);
    }

    #[test]
    fn html_becomes_markdown_without_its_scripts_and_styles() {
        let md = markdown(
            "<html><head><title>T</title><style>p{}</style></head><body><h1>Title</h1>\
             <p>Some <b>bold</b> and a <a href=\"https://x.test/\">link</a>.</p>\
             <script>alert(1)</script><ul><li>one</li><li>two</li></ul></body></html>",
        )
        .unwrap();
        assert!(md.starts_with("# Title"), "{md}");
        assert!(
            md.contains("Some **bold** and a [link](https://x.test/)."),
            "{md}"
        );
        assert!(md.contains("one") && md.contains("two"), "{md}");
        assert!(!md.contains("alert") && !md.contains("p{}"), "{md}");
    }

    #[test]
    fn a_page_nested_too_deeply_is_not_converted() {
        let deep = "<div>".repeat(MAX_HTML_DEPTH + 1);
        assert_eq!(markdown(&deep), None);
        assert_eq!(nesting("<div><br><img src=x/><b>a</b></div>"), 2);
        let list: String = "<ul>".to_owned() + &"<li>item".repeat(2 * MAX_HTML_DEPTH) + "</ul>";
        assert_eq!(nesting(&list), 1);
        let script = "<script>for (i=0;i<n;i++) { if (a<b) {} }</script><div>x</div>";
        assert_eq!(nesting(&script.repeat(600)), 1);
        assert!(markdown(&list).is_some());
    }

    #[test]
    fn pages_are_cut_by_characters_and_say_where_the_next_starts() {
        assert_eq!(page("héllo world", 0, 5), ("héllo".into(), 11, Some(5)));
        assert_eq!(page("héllo world", 6, 5), ("world".into(), 11, None));
        assert_eq!(page("héllo", 9, 5), (String::new(), 5, None));
        assert_eq!(page("", 0, 5), (String::new(), 0, None));
    }
}
