//! The one cleaning of text from outside before the model reads it: a command's output
//! (`shell`, `bash_bg`, git), a fetched page (`http_fetch`), search results (`web_search`) and
//! another model's answer (`consult`) all pass through [`clean_output`], so none reaches the
//! agent with a terminal's control sequences in it.

/// Text from outside as the model reads it (seed 003's cleaning): terminal escape sequences
/// (colours, cursor moves, window titles, device controls) removed by `vte`'s parser (the
/// VT500 state machine terminals use), other control characters but `\n`, `\t` and `\r`
/// dropped (DEL and C1 controls written as characters too), and of each line redrawn with carriage
/// returns (progress bars, spinners) only what was drawn last; a `\r\n` line end becomes `\n`.
/// Invalid UTF-8 becomes U+FFFD. What was asked (a command, a query) is never changed: only
/// what came back is cleaned.
pub fn clean_output(bytes: &[u8]) -> String {
    let mut text = Printed(String::with_capacity(bytes.len()));
    vte::Parser::new().advance(&mut text, bytes);
    let text = text.0;
    if !text.contains('\r') {
        return text;
    }
    let mut out = String::with_capacity(text.len());
    for (index, line) in text.split('\n').enumerate() {
        if index > 0 {
            out.push('\n');
        }
        let line = line.trim_end_matches('\r');
        out.push_str(line.rsplit('\r').next().unwrap_or(line));
    }
    out
}

/// What a terminal would print, without its controls.
struct Printed(String);

impl vte::Perform for Printed {
    fn print(&mut self, c: char) {
        // DEL and the C1 controls reach `print` as characters; a terminal acts on them.
        if !('\u{7f}'..='\u{9f}').contains(&c) {
            self.0.push(c);
        }
    }

    fn execute(&mut self, byte: u8) {
        if matches!(byte, b'\n' | b'\t' | b'\r') {
            self.0.push(char::from(byte));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::clean_output;

    #[test]
    fn colours_cursor_moves_and_titles_are_removed_from_what_the_model_sees() {
        let raw = b"\x1b[1;31merror\x1b[0m: \x1b]0;title\x07bad\x1b[2K\x1b[1Ghere\n";
        assert_eq!(clean_output(raw), "error: badhere\n");
    }

    #[test]
    fn a_line_redrawn_with_carriage_returns_keeps_what_was_drawn_last() {
        let raw = b"start\n 10%\r 50%\r100%\ndone\r\nnext\r";
        assert_eq!(clean_output(raw), "start\n100%\ndone\nnext");
    }

    #[test]
    fn every_control_but_newline_tab_and_carriage_return_is_dropped() {
        let mut raw = String::new();
        for c in ('\u{0}'..='\u{1f}').chain('\u{7f}'..='\u{9f}') {
            raw.push('a');
            raw.push(c);
        }
        let clean = clean_output(raw.as_bytes());
        assert!(
            clean.chars().all(|c| c == 'a' || matches!(c, '\n' | '\t')),
            "{clean:?}"
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_and_plain_text_is_kept_as_it_is() {
        assert_eq!(clean_output(b"a\xffb\tc\n"), "a\u{fffd}b\tc\n");
    }
}
