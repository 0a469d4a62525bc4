//! The text a client receives for a result: rendered once, by the broker, so loopd and MCP
//! clients see the same bytes.
//!
//! The envelope: the first line is a JSON object of the result's metadata (`tool`, `class`,
//! `untrusted`, then the tool's own fields such as `exit_code`, `size`, `truncated`); every
//! line after it is the body as plain text. The whole is at most the configured cap: a long
//! body keeps its head and its tail with a marker line between that says how much was cut.
//! A body cannot forge the header, which is always the first line; `untrusted: true` there
//! tells the agent the body came from outside the owner's control.
//!
//! The header carries what a model acts on. The sentence a runner writes about a run's walls
//! (`sandbox`) is the owner's: [`owner_walls`] leaves the model a token (`box` or `none`) and
//! hands the sentence to the owner's views (the audit record's detail and `bx watch`; `bx
//! status` lists every wall).

use serde_json::{Map, Value};

/// The rendered answer and whether the cap cut it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rendered {
    /// Header line, newline, body.
    pub text: String,
    /// Whether the body was cut.
    pub truncated: bool,
}

/// Renders `body` under a header of `fields` (after `tool`, `class` and `untrusted`), within
/// `cap` bytes.
pub fn render(
    tool: &str,
    class: proto::Class,
    untrusted: bool,
    fields: Map<String, Value>,
    body: &str,
    cap: usize,
) -> Rendered {
    let mut header = Map::new();
    header.insert("tool".into(), Value::from(tool));
    header.insert("class".into(), Value::from(class.as_str()));
    header.insert("untrusted".into(), Value::from(untrusted));
    header.extend(fields);
    let body_room = |header: &Map<String, Value>| {
        cap.saturating_sub(Value::Object(header.clone()).to_string().len() + 1)
    };
    // The header says whether the body was cut; its own length is measured with the flag set.
    header.insert("cut_bytes".into(), Value::from(0u64));
    let room = body_room(&header);
    let (body, cut) = head_and_tail(body, room);
    if cut == 0 {
        header.remove("cut_bytes");
    } else {
        header.insert("cut_bytes".into(), Value::from(cut as u64));
    }
    Rendered {
        text: format!("{}\n{body}", Value::Object(header)),
        truncated: cut > 0,
    }
}

/// The header field in which a runner describes the walls a run had.
pub const SANDBOX: &str = "sandbox";

/// Takes the walls sentence out of `fields` and returns it for the owner, leaving in its place
/// the token a model acts on: `none` when the run had no box (every such sentence starts with
/// `none:`), else `box`. Fields without a sentence are left as they are.
pub fn owner_walls(fields: &mut Map<String, Value>) -> Option<String> {
    let Some(Value::String(sentence)) = fields.remove(SANDBOX) else {
        return None;
    };
    let token = if sentence.starts_with("none:") {
        "none"
    } else {
        "box"
    };
    fields.insert(SANDBOX.to_string(), Value::from(token));
    Some(sentence)
}

/// The owner's detail of a result whose run had the walls `sentence`.
pub fn walls_detail(sentence: &str) -> String {
    format!("{SANDBOX}: {sentence}")
}

/// `text` within `room` bytes: whole, or its first quarter and last three quarters of the room
/// around a marker line, each cut on a character boundary. Returns the text and the bytes cut.
pub fn head_and_tail(text: &str, room: usize) -> (String, usize) {
    if text.len() <= room {
        return (text.to_string(), 0);
    }
    let marker_room = 64;
    let keep = room.saturating_sub(marker_room);
    let head_len = floor_boundary(text, keep / 4);
    let tail_start = ceil_boundary(text, text.len() - (keep - keep / 4));
    let cut = tail_start.saturating_sub(head_len);
    let head = text.get(..head_len).unwrap_or("");
    let tail = text.get(tail_start..).unwrap_or("");
    (format!("{head}\n[... {cut} bytes cut ...]\n{tail}"), cut)
}

fn floor_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_boundary(text: &str, mut at: usize) -> usize {
    at = at.min(text.len());
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_short_body_follows_its_header_whole() {
        let mut fields = Map::new();
        fields.insert("exit_code".into(), Value::from(0));
        let r = render("shell", proto::Class::Private, true, fields, "hi\n", 1024);
        assert_eq!(
            r.text,
            "{\"tool\":\"shell\",\"class\":\"private\",\"untrusted\":true,\"exit_code\":0}\nhi\n"
        );
        assert!(!r.truncated);
    }

    #[test]
    fn the_walls_sentence_leaves_the_header_for_the_owner_and_a_token_stays() {
        for (sentence, token) in [
            (
                crate::daemon::sandboxed::boxed(
                    sandbox::FileWalls::Bubblewrap,
                    sandbox::Enforcement::Full,
                ),
                "box",
            ),
            (crate::daemon::sandboxed::UNBOXED.to_string(), "none"),
            (crate::daemon::sandboxed::FILE_UNBOXED.to_string(), "none"),
            (crate::daemon::sandboxed::GIT_UNBOXED.to_string(), "none"),
            (crate::daemon::sandboxed::FETCH_UNBOXED.to_string(), "none"),
            (
                format!("none: {}", crate::daemon::runner::GIT_CLONE_WALLS),
                "none",
            ),
        ] {
            let mut fields = Map::new();
            fields.insert("exit_code".into(), Value::from(0));
            fields.insert(SANDBOX.into(), Value::from(sentence.clone()));
            assert_eq!(owner_walls(&mut fields), Some(sentence.clone()));
            let r = render("shell", proto::Class::Private, true, fields, "", 1024);
            assert_eq!(
                r.text,
                format!(
                    "{{\"tool\":\"shell\",\"class\":\"private\",\"untrusted\":true,\"exit_code\":0,\"sandbox\":\"{token}\"}}\n"
                ),
                "{sentence}"
            );
        }
        let mut none = Map::new();
        assert_eq!(owner_walls(&mut none), None);
        assert!(none.is_empty());
    }

    #[test]
    fn a_long_body_keeps_head_and_tail_within_the_cap() {
        let body = "é".repeat(10_000);
        let r = render(
            "read_file",
            proto::Class::Public,
            false,
            Map::new(),
            &body,
            4096,
        );
        assert!(r.text.len() <= 4096, "{}", r.text.len());
        assert!(r.truncated);
        assert!(r.text.contains("bytes cut"));
        assert!(
            r.text
                .lines()
                .next()
                .unwrap_or("")
                .contains("\"cut_bytes\":")
        );
        assert!(r.text.ends_with('é'));
    }
}
