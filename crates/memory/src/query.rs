//! How a model's query is read. `recall` first hands the query to FTS5 as written (so `"exact
//! phrase"`, `pref*`, `a OR b`, `NEAR(a b)` work); when FTS5 refuses it (unbalanced quotes or
//! parentheses, a lone `*`, a column that does not exist, only symbols), the query is read
//! again as plain terms: its words, each quoted so that no word is an operator, joined with
//! `OR` and ranked by BM25. A query is never an error.

/// The most terms a plain term search uses (the rest of a very long query is ignored).
pub const MAX_TERMS: usize = 64;

/// How a query was read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReadAs {
    /// As FTS5 syntax, as written.
    Fts5,
    /// As plain terms (FTS5 refused the syntax, or the caller asked for terms).
    Terms,
    /// It holds no word at all: nothing can match.
    Nothing,
}

impl ReadAs {
    /// The name shown in a result's header: `fts5`, `terms` or `nothing`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReadAs::Fts5 => "fts5",
            ReadAs::Terms => "terms",
            ReadAs::Nothing => "nothing",
        }
    }
}

/// The words of `text` as FTS5's `unicode61` tokenizer splits them (runs of letters and
/// digits), at most [`MAX_TERMS`], each once, in order.
pub fn terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() || out.iter().any(|w| w == word) {
            continue;
        }
        out.push(word.to_string());
        if out.len() == MAX_TERMS {
            break;
        }
    }
    out
}

/// The FTS5 expression of a plain term search for `text`: each word quoted, joined with `OR`;
/// `None` when `text` holds no word.
pub fn terms_expression(text: &str) -> Option<String> {
    let words = terms(text);
    if words.is_empty() {
        return None;
    }
    // A word is letters and digits only, so it cannot hold a double quote.
    let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
    Some(quoted.join(" OR "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terms_are_the_words_once_each_and_operators_become_plain_words() {
        assert_eq!(
            terms("NEAR(blue \"sky\" blue) * ( -x_y"),
            ["NEAR", "blue", "sky", "x", "y"]
        );
        assert_eq!(terms("!!! *** ((("), Vec::<String>::new());
        assert_eq!(terms("café naïve"), ["café", "naïve"]);
        assert_eq!(terms_expression("a (b").as_deref(), Some("\"a\" OR \"b\""));
        assert_eq!(terms_expression("()"), None);
        let many = (0..200)
            .map(|n| format!("w{n}"))
            .collect::<Vec<_>>()
            .join(" ");
        assert_eq!(terms(&many).len(), MAX_TERMS);
    }
}
