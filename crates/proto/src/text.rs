//! Text handled the same way everywhere: cut to a byte budget without splitting a character
//! ([`cut_at_boundary`], [`tail_at_boundary`]: the one place every cap in boxmaker cuts), and
//! text from outside (a model, a server, a tool, a file) made safe to print on a terminal
//! ([`escape_terminal`]).
//!
//! Every program of boxmaker that prints such text for a person (`loopd chat`, later `bx`)
//! passes it through [`escape_terminal`], so that no byte a model or a server chose can move
//! the cursor, change colours, set the window title, rewrite a line, reorder what is shown, or
//! start a new line that looks like the program's own.

use std::borrow::Cow;
use std::fmt::Write;

/// The longest start of `text` that is at most `max` bytes long and ends on a character
/// boundary: `text` itself when it fits.
pub fn cut_at_boundary(text: &str, max: usize) -> &str {
    let end = text.floor_char_boundary(max);
    // Invariant: `floor_char_boundary` returns a character boundary no larger than the text's
    // length, so this slice cannot panic.
    &text[..end]
}

/// The longest end of `text` that is at most `max` bytes long and starts on a character
/// boundary: `text` itself when it fits.
pub fn tail_at_boundary(text: &str, max: usize) -> &str {
    let start = text.ceil_char_boundary(text.len().saturating_sub(max));
    // Invariant: `ceil_char_boundary` returns a character boundary no larger than the text's
    // length, so this slice cannot panic.
    &text[start..]
}

/// `text` with every character that a terminal would act on instead of showing replaced by a
/// visible escape; text without one is returned as it is.
///
/// Escaped: every C0 control (U+0000-U+001F, newline and tab included: `\n`, `\r`, `\t`, and
/// `\x1b` for the others), DEL (`\x7f`), every C1 control (U+0080-U+009F, as `\u{9b}`), the
/// bidirectional controls (U+061C, U+200E, U+200F, U+202A-U+202E, U+2066-U+2069, as
/// `\u{202e}`) and the Unicode line and paragraph separators (U+2028, U+2029). A caller that
/// wants line breaks splits on `'\n'` first and escapes each line.
pub fn escape_terminal(text: &str) -> Cow<'_, str> {
    let Some(first) = text.find(needs_escape) else {
        return Cow::Borrowed(text);
    };
    let (clean, rest) = text.split_at(first);
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(clean);
    for c in rest.chars() {
        if needs_escape(c) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` that is JSON or TOML (or one line of it) with every character [`escape_terminal`]
/// escapes written as that format's `\uXXXX` escape, so what is printed is still valid, means
/// the same value when copied, and shows nothing a terminal would act on. A line feed is kept:
/// in JSON and TOML written by a serializer, one stands only between values. Every such
/// character can only stand inside a string there, where `\uXXXX` is that character.
pub fn escape_unicode(text: &str) -> Cow<'_, str> {
    let escaped = |c: char| c != '\n' && needs_escape(c);
    let Some(first) = text.find(escaped) else {
        return Cow::Borrowed(text);
    };
    let (clean, rest) = text.split_at(first);
    let mut out = String::with_capacity(text.len() + 8);
    out.push_str(clean);
    for c in rest.chars() {
        if escaped(c) {
            let _ = write!(out, "\\u{:04X}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether `c` is a character a terminal acts on instead of showing (see [`escape_terminal`]):
/// the one list every escaping of outside text uses.
pub fn needs_escape(c: char) -> bool {
    matches!(
        c,
        '\u{0}'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{61c}'
            | '\u{200e}'
            | '\u{200f}'
            | '\u{2028}'..='\u{202e}'
            | '\u{2066}'..='\u{2069}'
    )
}

fn push_escape(out: &mut String, c: char) {
    match c {
        '\n' => out.push_str("\\n"),
        '\r' => out.push_str("\\r"),
        '\t' => out.push_str("\\t"),
        '\u{0}'..='\u{1f}' | '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        _ => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_cut_never_splits_a_character_and_never_exceeds_the_budget() {
        assert_eq!(cut_at_boundary("aé", 2), "a");
        assert_eq!(cut_at_boundary("aé", 3), "aé");
        assert_eq!(cut_at_boundary("aé", 99), "aé");
        assert_eq!(cut_at_boundary("é", 0), "");
        assert_eq!(tail_at_boundary("éa", 2), "a");
        assert_eq!(tail_at_boundary("éa", 3), "éa");
        assert_eq!(tail_at_boundary("éa", 0), "");
    }

    #[test]
    fn every_c0_c1_and_bidirectional_control_is_escaped() {
        let controls = ('\u{0}'..='\u{1f}')
            .chain('\u{7f}'..='\u{9f}')
            .chain(['\u{61c}', '\u{200e}', '\u{200f}', '\u{2028}', '\u{2029}'])
            .chain('\u{202a}'..='\u{202e}')
            .chain('\u{2066}'..='\u{2069}');
        for c in controls {
            let text = format!("a{c}b");
            let shown = escape_terminal(&text);
            assert!(!shown.contains(c), "{:x}: {shown}", u32::from(c));
            assert!(shown.is_ascii(), "{:x}: {shown}", u32::from(c));
            let json = serde_json::to_string(&text).unwrap();
            let copied = escape_unicode(&json);
            assert!(copied.is_ascii(), "{:x}: {copied}", u32::from(c));
            assert_eq!(serde_json::from_str::<String>(&copied).unwrap(), text);
        }
    }

    #[test]
    fn json_keeps_its_line_feeds_between_values_and_plain_json_is_borrowed() {
        let pretty = "{\n  \"a\": \"b\"\n}";
        assert!(matches!(escape_unicode(pretty), Cow::Borrowed(t) if t == pretty));
        assert_eq!(escape_unicode("\"\u{202e}x\""), "\"\\u202Ex\"");
    }

    #[test]
    fn plain_text_is_borrowed_unchanged() {
        let text = "Grüße, 世界 — ok? (a\\b) \u{1F600}";
        assert!(matches!(escape_terminal(text), Cow::Borrowed(t) if t == text));
    }

    #[test]
    fn ansi_osc_and_cursor_controls_become_visible() {
        assert_eq!(
            escape_terminal("\u{1b}[31mred\u{1b}]0;title\u{7}\r\u{8}x\u{0}"),
            "\\x1b[31mred\\x1b]0;title\\x07\\r\\x08x\\x00"
        );
    }

    #[test]
    fn newline_and_tab_are_escaped_so_no_new_line_can_start() {
        assert_eq!(escape_terminal("a\n  denied x\tb"), "a\\n  denied x\\tb");
    }

    #[test]
    fn del_c1_and_bidirectional_controls_are_escaped() {
        assert_eq!(
            escape_terminal("\u{7f}\u{9b}31m\u{85}abc\u{202e}cba\u{2066}\u{200f}\u{61c}\u{2028}"),
            "\\x7f\\u{9b}31m\\u{85}abc\\u{202e}cba\\u{2066}\\u{200f}\\u{61c}\\u{2028}"
        );
    }

    proptest! {
        #[test]
        fn the_escaped_text_holds_no_character_a_terminal_acts_on(text in any::<String>()) {
            let escaped = escape_terminal(&text);
            prop_assert!(!escaped.chars().any(needs_escape));
            prop_assert!(escaped.len() >= text.len());
        }

        // The range leaves out U+061C, the one bidirectional control below U+2000.
        #[test]
        fn text_without_controls_is_unchanged(
            text in "[a-zA-Z0-9 .,;:!?\\\\/\u{a0}-\u{61b}\u{61d}-\u{2000}]*"
        ) {
            prop_assert_eq!(escape_terminal(&text), text.as_str());
        }
    }
}
