//! Showing scripts and words in reasons: cut short, control characters escaped, words quoted.

/// The longest construct quoted back in a reason, in characters.
const MAX_SHOWN: usize = 120;

/// `text` cut to [`MAX_SHOWN`] characters, with control characters escaped.
pub(super) fn show(text: &str) -> String {
    let mut shown = String::new();
    for (count, c) in text.chars().enumerate() {
        if count == MAX_SHOWN {
            shown.push('…');
            break;
        }
        if c.is_control() {
            shown.extend(c.escape_default());
        } else {
            shown.push(c);
        }
    }
    shown
}

/// Words joined with spaces, each quoted as the shell would need it.
pub(super) fn render_words<I, S>(words: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut out = String::new();
    for word in words {
        let word = word.as_ref();
        if !out.is_empty() {
            out.push(' ');
        }
        let plain = !word.is_empty()
            && word.chars().all(|c| {
                c.is_alphanumeric()
                    || matches!(c, '-' | '_' | '.' | '/' | ':' | '=' | '+' | '@' | ',' | '%')
            });
        if plain {
            out.push_str(word);
        } else {
            out.push('\'');
            out.push_str(&word.replace('\'', r"'\''"));
            out.push('\'');
        }
        if out.len() > MAX_SHOWN * 4 {
            break;
        }
    }
    out
}
