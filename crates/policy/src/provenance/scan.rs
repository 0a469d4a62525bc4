//! A text cut into candidate values: its tokens (whitespace-separated chunks without their
//! quotes, brackets and sentence punctuation), the values inside a token (an address after
//! `to=`, a URL in brackets), the alphanumeric words of each, and IBANs written in groups
//! across tokens. Results, the owner's words, grant literals and a call's values are all cut
//! the same way, so that what is looked up is spelled as what was indexed.

use std::borrow::Cow;

use super::RUN_WORDS;
use super::normal::{
    alnum_words, email_form, host_form, iban_form, number_form, text_form, trim_token, url_form,
};

/// One candidate value of a text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Candidate<'a> {
    /// The value as written (trimmed), for messages.
    pub shown: Cow<'a, str>,
    /// Its normal forms; the value is in a source when one of them is.
    pub forms: Vec<String>,
    /// When it is a URL or a host name: the host, checked on its own (the place a call reaches).
    pub host: Option<String>,
    /// An address, URL, host name or IBAN: a value worth checking even inside free text.
    pub structured: bool,
    /// Letters and digits mixed, a long number or a long token: what a secret (a password, a
    /// key, an account number) looks like, checked for confidentiality inside free text.
    pub distinctive: bool,
}

/// A text cut for the index.
#[cfg(test)]
#[derive(Debug, Default)]
pub struct Scanned<'a> {
    /// Every candidate: each token, each value inside one, each IBAN across tokens.
    pub candidates: Vec<Candidate<'a>>,
    /// The alphanumeric words inside tokens that differ from the token (`smith` in `Smith's`).
    pub inner_words: Vec<String>,
    /// The tokens' text forms in order: pairs of neighbours are the runs a multi-word value
    /// is matched against.
    pub tokens: Vec<String>,
    /// The alphanumeric words in order: what free-text runs are made of.
    pub words: Vec<String>,
}

/// Characters that separate values inside one token (`to=x@y.example`, `a@x.example,b@y.example`).
const INNER: &[char] = &[
    ',', ';', '<', '>', '(', ')', '[', ']', '{', '}', '"', '\'', '|', '=',
];

/// Whether `byte` separates values inside a token ([`INNER`]).
fn inner_separator(byte: u8) -> bool {
    INNER.iter().any(|&c| c as u32 == u32::from(byte))
}

/// The tokens of `text`: its whitespace-separated chunks without their quotes, brackets and
/// trailing sentence punctuation, those with an alphanumeric character.
pub(super) fn tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace()
        .map(trim_token)
        .filter(|t| t.chars().any(char::is_alphanumeric))
}

/// `f` of the tokens of `text` ([`tokens`]), gathered on the stack when there are few.
pub(super) fn with_tokens<R>(text: &str, f: impl FnOnce(&[&str]) -> R) -> R {
    let mut few = [""; 8];
    let mut count = 0;
    let mut rest = tokens(text);
    for token in rest.by_ref() {
        let Some(slot) = few.get_mut(count) else {
            let mut many = few.to_vec();
            many.push(token);
            many.extend(rest);
            return f(&many);
        };
        *slot = token;
        count += 1;
    }
    f(&few[..count])
}

/// A candidate as [`pieces_after`] finds it.
pub(super) enum Piece<'a> {
    /// A value inside a token (its candidate is `candidate(piece, text_form(piece))`, built
    /// only when needed).
    Inner(&'a str),
    /// An IBAN written in groups across tokens.
    Joined(Candidate<'a>),
}

/// The candidates [`scan`] finds after the token `chunks[i]` itself, in its order: the
/// values inside that token, then the IBANs in groups that start at it.
pub(super) fn pieces_after<'a>(chunks: &[&'a str], i: usize, f: &mut impl FnMut(Piece<'a>)) {
    let Some(token) = chunks.get(i) else {
        return;
    };
    for piece in inner_pieces(token) {
        f(Piece::Inner(piece));
    }
    let mut joined = Vec::new();
    iban_groups(&chunks[i..], &mut joined);
    for candidate in joined {
        f(Piece::Joined(candidate));
    }
}

/// What [`each_value`] finds in a text: everything it is indexed under.
pub(super) enum Found<'t, 'b> {
    /// A token or a value inside one whose only form is its text form (not built).
    Plain(&'t str),
    /// Any other token, value inside one, or IBAN across tokens.
    Candidate(Candidate<'t>),
    /// An alphanumeric word inside a token that is not the whole token, lowercase.
    InnerWord(&'b str),
    /// Two neighbouring tokens' text forms joined by a space.
    Pair(&'b str),
    /// A run of [`RUN_WORDS`] alphanumeric words joined by spaces.
    Run(&'b str),
}

/// Everything `text` is indexed under, cut as [`scan`] cuts it (not in its order), with the
/// text forms and words written once into two strings rather than a string each.
pub(super) fn each_value(text: &str, mut f: impl FnMut(Found<'_, '_>)) {
    let chunks: Vec<&str> = tokens(text).collect();
    // The tokens' text forms joined by spaces, and where each is.
    let mut forms = String::with_capacity(text.len());
    let mut form_at: Vec<(usize, usize)> = Vec::with_capacity(chunks.len());
    // The words joined by spaces, and where each is.
    let mut words = String::with_capacity(text.len());
    let mut word_at: Vec<(usize, usize)> = Vec::with_capacity(chunks.len() + chunks.len() / 2);
    for (i, token) in chunks.iter().enumerate() {
        f(found(token));
        pieces_after(&chunks, i, &mut |piece| match piece {
            Piece::Inner(piece) => f(found(piece)),
            Piece::Joined(joined) => f(Found::Candidate(joined)),
        });
        if !forms.is_empty() {
            forms.push(' ');
        }
        let start = forms.len();
        push_text_form(&mut forms, token);
        let lower = forms.get(start..).unwrap_or_default();
        form_at.push((start, forms.len()));
        let first = word_at.len();
        for word in alnum_words(lower) {
            if !words.is_empty() {
                words.push(' ');
            }
            let at = words.len();
            words.push_str(word);
            word_at.push((at, words.len()));
        }
        let mine = word_at.get(first..).unwrap_or_default();
        let whole = matches!(mine, [(s, e)] if words.get(*s..*e) == Some(lower));
        if !whole {
            for &(s, e) in mine {
                f(Found::InnerWord(words.get(s..e).unwrap_or_default()));
            }
        }
    }
    for pair in form_at.windows(2) {
        if let [(start, _), (_, end)] = pair {
            f(Found::Pair(forms.get(*start..*end).unwrap_or_default()));
        }
    }
    for (&(start, _), &(_, end)) in word_at.iter().zip(word_at.iter().skip(RUN_WORDS - 1)) {
        f(Found::Run(words.get(start..end).unwrap_or_default()));
    }
}

/// A token or piece as [`each_value`] reports it.
fn found(token: &str) -> Found<'_, 'static> {
    if plain(token) {
        Found::Plain(token)
    } else {
        Found::Candidate(candidate(token, text_form(token)))
    }
}

/// Appends the text form of `token` (which holds no blank) to `out`.
fn push_text_form(out: &mut String, token: &str) {
    if token.is_ascii() && !token.bytes().any(|b| char::from(b).is_whitespace()) {
        let start = out.len();
        out.push_str(token);
        if let Some(added) = out.get_mut(start..) {
            added.make_ascii_lowercase();
        }
    } else {
        out.push_str(&text_form(token));
    }
}

/// `text` cut into candidates, tokens and words (what [`each_value`] reports, kept apart:
/// the tests' view of the cut).
#[cfg(test)]
pub fn scan(text: &str) -> Scanned<'_> {
    let mut out = Scanned::default();
    let chunks: Vec<&str> = tokens(text).collect();
    for (i, token) in chunks.iter().enumerate() {
        let lower = text_form(token);
        out.tokens.push(lower.clone());
        out.candidates.push(candidate(token, lower.clone()));
        for piece in inner_pieces(token) {
            out.candidates.push(candidate(piece, text_form(piece)));
        }
        let mut count = 0;
        for word in alnum_words(&lower) {
            count += 1;
            out.words.push(word.to_owned());
        }
        if count > 1 || out.words.last() != out.tokens.last() {
            let first = out.words.len() - count;
            out.inner_words.extend(out.words[first..].iter().cloned());
        }
        iban_groups(&chunks[i..], &mut out.candidates);
    }
    out
}

/// The candidates of `text` that are structured or distinctive (what free text is checked
/// for beside its runs), cut as [`scan`] cuts them; plain words cost nothing here.
pub fn notable<'a>(text: &'a str) -> Vec<Candidate<'a>> {
    let chunks: Vec<&str> = tokens(text).collect();
    let mut out = Vec::new();
    let mut keep = |candidate: Candidate<'a>| {
        if candidate.structured || candidate.distinctive {
            out.push(candidate);
        }
    };
    for (i, token) in chunks.iter().enumerate() {
        if plain(token) {
            continue;
        }
        keep(candidate(token, text_form(token)));
        pieces_after(&chunks, i, &mut |piece| match piece {
            // A plain piece's candidate is neither structured nor distinctive.
            Piece::Inner(piece) if plain(piece) => {}
            Piece::Inner(piece) => keep(candidate(piece, text_form(piece))),
            Piece::Joined(joined) => keep(joined),
        });
    }
    out
}

/// A plain word (shorter than 20 bytes, no digit, no `.`, `@` or `:`): it has only its text
/// form, since every other form needs one of those, and it is neither structured nor
/// distinctive.
pub(super) fn plain(token: &str) -> bool {
    token.len() < 20
        && !token
            .bytes()
            .any(|b| b.is_ascii_digit() || matches!(b, b'.' | b'@' | b':'))
}

/// Whether the candidate of `token` is structured (an address, URL, host name or IBAN), told
/// without building it.
pub(super) fn structured(token: &str) -> bool {
    !plain(token)
        && (email_form(token).is_some()
            || url_form(token).is_some()
            || host_form(token).is_some()
            || iban_form(token).is_some())
}

/// The candidate for one token or piece.
pub(super) fn candidate(token: &str, lower: String) -> Candidate<'_> {
    if plain(token) {
        return Candidate {
            shown: Cow::Borrowed(token),
            forms: vec![lower],
            ..Candidate::default()
        };
    }
    let mut forms = Vec::with_capacity(4);
    forms.push(lower);
    let mut structured = false;
    let mut host = None;
    if let Some(email) = email_form(token) {
        structured = true;
        forms.push(email);
    } else if let Some(url) = url_form(token) {
        structured = true;
        forms.push(url.normal);
        host = Some(url.host);
    } else if let Some(name) = host_form(token) {
        structured = true;
        host = Some(name);
    }
    let number = number_form(token);
    if let Some(iban) = iban_form(token) {
        structured = true;
        forms.push(iban);
    }
    let digits = token.chars().filter(char::is_ascii_digit).count();
    let letters = token.chars().filter(|c| c.is_alphabetic()).count();
    let distinctive = structured
        || (token.len() >= 6 && digits > 0 && letters > 0)
        || digits >= 6
        || token.len() >= 20;
    if let Some(number) = number {
        forms.push(number);
    }
    forms.sort();
    forms.dedup();
    Candidate {
        shown: Cow::Borrowed(token),
        forms,
        host,
        structured,
        distinctive,
    }
}

/// The values inside a token, split at [`INNER`] (and at `:` when the token is not a URL):
/// the pieces that differ from the token, with any alphanumeric character.
fn inner_pieces(token: &str) -> Vec<&str> {
    let separated = token.bytes().any(inner_separator);
    if !separated && !token.contains(':') {
        return Vec::new();
    }
    let url = token.contains("://");
    if !separated && url {
        return Vec::new();
    }
    token
        .split(|c: char| INNER.contains(&c) || (!url && c == ':'))
        .map(trim_token)
        .filter(|p| p.len() < token.len() && p.chars().any(char::is_alphanumeric))
        .collect()
}

/// An IBAN written in groups (`DE89 3704 0044 0532 0130 00`) starting at `chunks[0]`: every
/// join of the first group with the groups after it that is IBAN-shaped (the end of the
/// number cannot be told from a short word after it, so each length is a candidate).
fn iban_groups<'a>(chunks: &[&'a str], out: &mut Vec<Candidate<'a>>) {
    let Some(first) = chunks.first() else {
        return;
    };
    let b = first.as_bytes();
    let starts = b.len() == 4
        && b[..2].iter().all(u8::is_ascii_alphabetic)
        && b[2..].iter().all(u8::is_ascii_digit);
    if !starts {
        return;
    }
    let mut shown = String::with_capacity(48);
    shown.push_str(first);
    for group in &chunks[1..] {
        if group.is_empty() || group.len() > 4 || !group.bytes().all(|c| c.is_ascii_alphanumeric())
        {
            return;
        }
        shown.push(' ');
        shown.push_str(group);
        if let Some(iban) = iban_form(&shown) {
            out.push(Candidate {
                shown: Cow::Owned(shown.clone()),
                forms: vec![iban, text_form(&shown)],
                host: None,
                structured: true,
                distinctive: true,
            });
        } else if shown.len() > 34 + 8 {
            return;
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn forms(text: &str) -> Vec<String> {
        scan(text)
            .candidates
            .into_iter()
            .flat_map(|c| c.forms.into_iter().chain(c.host))
            .collect()
    }

    #[test]
    fn a_text_gives_its_addresses_urls_hosts_numbers_and_words() {
        let all = forms(
            "Hi! Send $1,000.50 to <Mark@Evil.Example> or see https://Evil.Example:443/pay/ now.",
        );
        for want in [
            "hi",
            "send",
            "1000.5",
            "mark@evil.example",
            "https://evil.example/pay",
            "evil.example",
            "now",
        ] {
            assert!(all.iter().any(|f| f == want), "{want} not in {all:?}");
        }
    }

    #[test]
    fn values_inside_a_token_are_candidates_too() {
        let all = forms("to=x@y.example,z@w.example (contact:ceo@corp.example)");
        for want in ["x@y.example", "z@w.example", "ceo@corp.example"] {
            assert!(all.iter().any(|f| f == want), "{want} not in {all:?}");
        }
    }

    #[test]
    fn an_iban_in_groups_is_one_candidate() {
        let all = forms("pay into DE89 3704 0044 0532 0130 00 today");
        assert!(all.iter().any(|f| f == "DE89370400440532013000"), "{all:?}");
    }

    /// What [`each_value`] reports, each as the string it is indexed under.
    fn reported(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        each_value(text, |found| match found {
            Found::Plain(token) => out.push(text_form(token)),
            Found::Candidate(c) => out.extend(c.forms.into_iter().chain(c.host)),
            Found::InnerWord(s) | Found::Pair(s) | Found::Run(s) => out.push(s.to_owned()),
        });
        out.sort();
        out.dedup();
        out
    }

    /// What [`scan`] cuts, each as the string it is indexed under.
    fn cut(text: &str) -> Vec<String> {
        let s = scan(text);
        let mut out = forms(text);
        out.extend(s.inner_words.iter().cloned());
        out.extend(s.tokens.windows(2).map(|pair| pair.join(" ")));
        out.extend(s.words.windows(RUN_WORDS).map(|run| run.join(" ")));
        out.sort();
        out.dedup();
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(1000))]
        /// The index's cut (one string for all text forms, one for all words) reports what
        /// the plain cut finds, and nothing else.
        #[test]
        fn each_value_reports_what_scan_cuts(
            parts in proptest::collection::vec(
                proptest::sample::select(vec![
                    "Pay", "the", "Smith's", "evil-corp.example", "x@y.example,", "<M@E.Example>",
                    "https://E.Example:443/P/", "DE89", "3704", "0044", "0532", "0130", "00",
                    "$1,000.50", "EUR1000.50", "007", "to=a@b.example;c", "(x:y)", "\"q\"",
                    "ΣΑΣ", "İx", "École", "a\u{b}b", "end.", "...", "—", "w1", "w2", "w3",
                    "w4", "w5", "w6", "w7", "w8", "w9", "A12345",
                ]),
                0..30,
            ),
            seps in proptest::collection::vec(
                proptest::sample::select(vec![" ", "  ", "\n", "\u{a0}", ", ", ""]),
                30,
            ),
        ) {
            let text: String = parts.iter().zip(&seps).flat_map(|(p, s)| [*p, *s]).collect();
            proptest::prop_assert_eq!(reported(&text), cut(&text));
        }
    }

    #[test]
    fn tokens_and_words_keep_their_order() {
        let s = scan("Don't stop -- \"now\".");
        assert_eq!(s.tokens, ["don't", "stop", "now"]);
        assert_eq!(s.words, ["don", "t", "stop", "now"]);
        assert_eq!(s.inner_words, ["don", "t"]);
    }
}
