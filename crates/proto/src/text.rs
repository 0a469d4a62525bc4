//! Cutting text to a byte budget without splitting a character: the one place every cap in
//! boxmaker (a `consult` question and answer, a rendered result, a turn's tool result) cuts.

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

#[cfg(test)]
mod tests {
    use super::*;

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
}
