//! Numbering a Markdown line's links: `[text](url "title")` becomes `text [n]`, an image
//! `![alt](src)` becomes `(image: alt)`; what is not a whole link is kept as it is.

use super::Link;

/// `line` with each inline link written `text [n]` (numbers continue from `links`, which
/// each new link joins) and each image `(image: alt)`.
pub(super) fn number_links(line: &str, base: Option<&url::Url>, links: &mut Vec<Link>) -> String {
    let mut out = String::with_capacity(line.len());
    let mut rest = line;
    while let Some(at) = rest.find('[') {
        let image = at > 0 && rest.as_bytes()[at - 1] == b'!';
        let start = if image { at - 1 } else { at };
        match inline_link(&rest[at..]) {
            Some((text, destination, used)) => {
                out.push_str(&rest[..start]);
                let text = number_links(text, base, links);
                if image {
                    out.push_str(&format!("(image: {})", text.trim()));
                } else {
                    let number = links.len() + 1;
                    links.push(Link {
                        number,
                        text: text.trim().to_string(),
                        url: absolute(destination, base),
                    });
                    if text.trim().is_empty() {
                        out.push_str(&format!("[{number}]"));
                    } else {
                        out.push_str(&format!("{} [{number}]", text.trim()));
                    }
                }
                rest = &rest[at + used..];
            }
            None => {
                out.push_str(&rest[..=at]);
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// The text, destination and length of the link `s` starts with (`s` begins with `[`).
fn inline_link(s: &str) -> Option<(&str, &str, usize)> {
    let close = matching(s, b'[', b']')?;
    let after = &s[close + 1..];
    if !after.starts_with('(') {
        return None;
    }
    let end = matching(after, b'(', b')')?;
    let inside = after[1..end].trim();
    let destination = match inside.strip_prefix('<') {
        Some(angled) => angled.split_once('>')?.0,
        None => inside.split_whitespace().next().unwrap_or_default(),
    };
    Some((&s[1..close], destination, close + 1 + end + 1))
}

/// Where the bracket `open` at `s`'s start is closed, counting nested pairs and skipping
/// escaped ones.
fn matching(s: &str, open: u8, close: u8) -> Option<usize> {
    let bytes = s.as_bytes();
    let mut depth = 0usize;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 1,
            b if b == open => depth += 1,
            b if b == close => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
        i += 1;
    }
    None
}

/// `destination` made absolute against `base`, or as written when it cannot be.
fn absolute(destination: &str, base: Option<&url::Url>) -> String {
    base.and_then(|b| b.join(destination).ok())
        .map_or_else(|| destination.to_string(), |u| u.to_string())
}
