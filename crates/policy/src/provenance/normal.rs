//! The normal forms a value is indexed and looked up under (see the module documentation of
//! [`crate::provenance`] for which re-spellings they equate and which they do not).
//!
//! Every form is a string; two spellings of one value meet when one of their forms is equal.
//! Forms are not tagged with their kind: the text form of `x@y.example` and its email form are
//! one string, so one entry.

/// The text form: lowercase, blanks collapsed to one space, trimmed.
pub fn text_form(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for word in value.split_whitespace() {
        if !out.is_empty() {
            out.push(' ');
        }
        if word.is_ascii() {
            out.push_str(word);
        } else {
            out.push_str(&word.to_lowercase());
        }
    }
    // Only ASCII letters are left to lower (the rest was lowered word by word).
    out.make_ascii_lowercase();
    out
}

/// Characters trimmed from both ends of a whitespace-separated chunk before it counts as a
/// token: quotes, brackets and emphasis marks.
const WRAPPERS: &[char] = &['"', '\'', '(', ')', '[', ']', '{', '}', '<', '>', '*', '`'];
/// Characters trimmed from the end only: sentence punctuation.
const TRAILING: &[char] = &['.', ',', ';', ':', '!', '?'];

/// A chunk of text without its surrounding quotes, brackets and trailing sentence
/// punctuation (`"(x@y.example)."` is `x@y.example`).
pub fn trim_token(chunk: &str) -> &str {
    // Every character trimmed is ASCII, so cutting at a byte that is one keeps the text whole.
    let wrapper = |b: u8| WRAPPERS.contains(&char::from(b));
    let trailing = |b: u8| TRAILING.contains(&char::from(b));
    let bytes = chunk.as_bytes();
    let start = bytes
        .iter()
        .position(|&b| !wrapper(b))
        .unwrap_or(bytes.len());
    let end = bytes[start..]
        .iter()
        .rposition(|&b| !wrapper(b) && !trailing(b))
        .map_or(start, |i| start + i + 1);
    chunk.get(start..end).unwrap_or_default()
}

/// The email form of `token` (lowercase, `mailto:` dropped), when it is an address: one `@`,
/// a local part of letters, digits and `._%+-`, and a host name after it.
pub fn email_form(token: &str) -> Option<String> {
    if !token.contains('@') {
        return None;
    }
    let mut lower = token.to_lowercase();
    let prefix = if lower.starts_with("mailto:") { 7 } else { 0 };
    let address = &lower[prefix..];
    let (local, domain) = address.split_once('@')?;
    let local_ok = !local.is_empty()
        && local
            .chars()
            .all(|c| c.is_alphanumeric() || "._%+-".contains(c));
    if !local_ok || host_form(domain).as_deref() != Some(domain) {
        return None;
    }
    lower.drain(..prefix);
    Some(lower)
}

/// The host form of `token` (lowercase, a final dot dropped), when it is a host name: two or
/// more labels of letters, digits and `-`, the last one letters only (`evil.example`,
/// `www.Example.ORG.`). A token that goes on after the name (`evil.example/p`,
/// `evil.example:8080`) gives the name.
pub fn host_form(token: &str) -> Option<String> {
    let end = token.find(['/', ':', '?', '#']).unwrap_or(token.len());
    let name = token[..end].strip_suffix('.').unwrap_or(&token[..end]);
    let last = name.rsplit('.').next()?;
    let ok = name.len() > last.len()
        && name.split('.').all(|l| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
        && last.chars().count() >= 2
        && last.chars().all(char::is_alphabetic);
    ok.then(|| name.to_lowercase())
}

/// A URL split into its parts, and its normal form.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UrlForm {
    /// The normal form: scheme and host lowercase, the scheme's default port dropped,
    /// unreserved characters percent-decoded (`%7E` is `~`) and other escapes in uppercase hex,
    /// an empty path and a trailing `/` dropped, the fragment dropped.
    pub normal: String,
    /// The host (lowercase), the place the URL reaches.
    pub host: String,
}

/// The URL form of `token`, when it is `scheme://authority…` with a host name or address.
pub fn url_form(token: &str) -> Option<UrlForm> {
    let (scheme, rest) = token.split_once("://")?;
    if scheme.is_empty()
        || !scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return None;
    }
    let scheme = scheme.to_ascii_lowercase();
    let rest = rest.split_once('#').map_or(rest, |(before, _)| before);
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let (userinfo, hostport) = match authority.rsplit_once('@') {
        Some((user, hp)) => (Some(user), hp),
        None => (None, authority),
    };
    let (host, port) = split_port(hostport);
    let host = host.strip_suffix('.').unwrap_or(host).to_lowercase();
    if host.is_empty() {
        return None;
    }
    let default = match scheme.as_str() {
        "http" | "ws" => Some("80"),
        "https" | "wss" => Some("443"),
        "ftp" => Some("21"),
        _ => None,
    };
    let port = port.filter(|p| !p.is_empty() && Some(*p) != default);
    let (path, query) = match tail.split_once('?') {
        Some((path, query)) => (path, Some(query)),
        None => (tail, None),
    };
    let path = percent_unreserved(path);
    let path = path.strip_suffix('/').unwrap_or(&path);
    let mut normal = format!("{scheme}://");
    if let Some(user) = userinfo {
        normal.push_str(&percent_unreserved(user));
        normal.push('@');
    }
    normal.push_str(&host);
    if let Some(port) = port {
        normal.push(':');
        normal.push_str(port);
    }
    normal.push_str(path);
    if let Some(query) = query.filter(|q| !q.is_empty()) {
        normal.push('?');
        normal.push_str(&percent_unreserved(query));
    }
    Some(UrlForm { normal, host })
}

/// `host[:port]` split, an IPv6 literal's brackets kept.
fn split_port(hostport: &str) -> (&str, Option<&str>) {
    if hostport.starts_with('[') {
        return match hostport.find(']') {
            Some(end) => {
                let port = hostport[end + 1..].strip_prefix(':');
                (&hostport[..=end], port)
            }
            None => (hostport, None),
        };
    }
    match hostport.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => (host, Some(port)),
        _ => (hostport, None),
    }
}

/// `text` with `%XX` escapes of unreserved characters (letters, digits, `-._~`) decoded and
/// every other escape's hex digits in uppercase.
fn percent_unreserved(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).and_then(|b| hex(*b)),
                bytes.get(i + 2).and_then(|b| hex(*b)),
            )
        {
            let byte = hi * 16 + lo;
            if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
                out.push(char::from(byte));
            } else {
                out.push('%');
                out.push(char::from(bytes[i + 1].to_ascii_uppercase()));
                out.push(char::from(bytes[i + 2].to_ascii_uppercase()));
            }
            i += 3;
            continue;
        }
        // Copy the next character whole (it may be longer than a byte).
        let rest = &text[i..];
        if let Some(c) = rest.chars().next() {
            out.push(c);
            i += c.len_utf8();
        } else {
            break;
        }
    }
    out
}

fn hex(b: u8) -> Option<u8> {
    char::from(b)
        .to_digit(16)
        .and_then(|d| u8::try_from(d).ok())
}

/// The number form of `token`, when it is an amount: digits with optional thousands commas
/// (groups of three) and an optional decimal point, a currency sign or a three-letter code in
/// capitals around it allowed (`$1,000.50`, `1000.5`, `EUR1000.50` are all `1000.5`). Trailing zeros of the fraction and
/// the point are dropped. Digits with a leading zero (`007`, an account or a code, not an
/// amount) and decimal commas (`1.000,50`) are not numbers here.
pub fn number_form(token: &str) -> Option<String> {
    let start = token.find(|c: char| c.is_ascii_digit())?;
    let (sign, body) = token.split_at(start);
    let body_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == ',' || c == '.'))
        .unwrap_or(body.len());
    let (number, after) = body.split_at(body_end);
    // Around the number only a currency: a sign or letters, a minus before it.
    let sign = sign.strip_suffix('-').unwrap_or(sign);
    let currency = |s: &str| {
        s.is_empty()
            || matches!(s, "$" | "€" | "£" | "¥")
            || (s.len() == 3 && s.bytes().all(|b| b.is_ascii_uppercase()))
    };
    if !currency(sign) || !currency(after) {
        return None;
    }
    let negative = token[..start].ends_with('-');
    let (whole, fraction) = match number.split_once('.') {
        Some((w, f)) => (w, Some(f)),
        None => (number, None),
    };
    if fraction.is_some_and(|f| f.is_empty() || !f.chars().all(|c| c.is_ascii_digit())) {
        return None;
    }
    let groups: Vec<&str> = whole.split(',').collect();
    let first = groups.first().copied().unwrap_or_default();
    let grouped = groups.len() == 1
        || (!first.is_empty() && first.len() <= 3 && groups[1..].iter().all(|g| g.len() == 3));
    if !grouped || first.is_empty() || (first.len() > 1 && first.starts_with('0')) {
        return None;
    }
    let mut out = String::new();
    if negative {
        out.push('-');
    }
    out.extend(groups.iter().flat_map(|g| g.chars()));
    if let Some(fraction) = fraction.map(|f| f.trim_end_matches('0'))
        && !fraction.is_empty()
    {
        out.push('.');
        out.push_str(fraction);
    }
    Some(out)
}

/// The IBAN form of `text` (blanks removed, uppercase), when it looks like one: two letters,
/// two digits, then letters and digits, 15 to 34 in all. The check digits are not verified: an
/// invented account is still someone's value.
pub fn iban_form(text: &str) -> Option<String> {
    // Checked on the characters first, so that what is not one costs no copy.
    let mut count = 0usize;
    for c in text.chars().filter(|c| !c.is_whitespace()) {
        let ok = match count {
            0 | 1 => c.is_ascii_alphabetic(),
            2 | 3 => c.is_ascii_digit(),
            _ => c.is_ascii_alphanumeric(),
        };
        count += 1;
        if !ok || count > 34 {
            return None;
        }
    }
    (count >= 15).then(|| {
        text.chars()
            .filter(|c| !c.is_whitespace())
            .map(|c| c.to_ascii_uppercase())
            .collect()
    })
}

/// The alphanumeric words of `lowered` (text already lowercase, [`str::to_lowercase`]), in
/// order: what free-text runs are made of (punctuation and blanks between them ignored). The
/// index and the check both lowercase first and split after, so both cut alike.
pub fn alnum_words(lowered: &str) -> impl Iterator<Item = &str> + '_ {
    lowered
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

/// The alphanumeric words of `text` lowercased ([`alnum_words`] of its
/// [`str::to_lowercase`]) joined by single spaces, and where each word is in that string: a
/// run of words is one slice of it. An ASCII text is lowered and cut in one pass.
pub fn joined_words(text: &str) -> (String, Vec<(usize, usize)>) {
    let mut joined = String::with_capacity(text.len());
    // A word and the blank or punctuation after it take two bytes at least.
    let mut at = Vec::with_capacity(text.len() / 2 + 1);
    let mut push = |joined: &mut String, word: &str| {
        if !joined.is_empty() {
            joined.push(' ');
        }
        let start = joined.len();
        joined.push_str(word);
        at.push((start, joined.len()));
        start
    };
    if text.is_ascii() {
        for word in text.split(|c: char| !c.is_ascii_alphanumeric()) {
            if !word.is_empty() {
                let start = push(&mut joined, word);
                if let Some(added) = joined.get_mut(start..) {
                    added.make_ascii_lowercase();
                }
            }
        }
    } else {
        let lowered = text.to_lowercase();
        for word in alnum_words(&lowered) {
            push(&mut joined, word);
        }
    }
    (joined, at)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn text_form_folds_case_and_collapses_blanks() {
        assert_eq!(text_form("  Alice \t\n SMITH "), "alice smith");
        assert_eq!(text_form("ÉCOLE"), "école");
    }

    #[test]
    fn tokens_lose_quotes_brackets_and_sentence_punctuation_only() {
        assert_eq!(trim_token("\"(x@y.example)\"."), "x@y.example");
        assert_eq!(trim_token("**Acme**,"), "Acme");
        assert_eq!(trim_token("a.b-c"), "a.b-c");
        assert_eq!(trim_token("..."), "");
    }

    #[test]
    fn email_form_is_lowercase_without_mailto() {
        assert_eq!(
            email_form("MailTo:Bob.Smith+x@Mail.Example").as_deref(),
            Some("bob.smith+x@mail.example")
        );
        assert_eq!(email_form("bob@localhost"), None);
        assert_eq!(email_form("@x.example"), None);
        assert_eq!(email_form("a@b@c.example"), None);
    }

    #[test]
    fn host_form_needs_two_labels_and_a_letter_top_label() {
        assert_eq!(
            host_form("WWW.Evil.Example.").as_deref(),
            Some("www.evil.example")
        );
        assert_eq!(
            host_form("evil.example/path").as_deref(),
            Some("evil.example")
        );
        assert_eq!(
            host_form("evil.example:8080").as_deref(),
            Some("evil.example")
        );
        assert_eq!(host_form("1.5"), None);
        assert_eq!(host_form("word"), None);
        assert_eq!(host_form("a..example"), None);
    }

    #[test]
    fn url_form_equates_the_usual_respellings() {
        let same = [
            "https://Evil.Example/a/b",
            "HTTPS://evil.example:443/a/b/",
            "https://evil.example/%61/b",
            "https://evil.example/a/b#top",
        ];
        for url in same {
            let form = url_form(url).unwrap();
            assert_eq!(form.normal, "https://evil.example/a/b", "{url}");
            assert_eq!(form.host, "evil.example");
        }
        assert_eq!(
            url_form("http://x.example").unwrap().normal,
            url_form("http://X.example:80/").unwrap().normal
        );
        // A port that is not the default, and an escape of a reserved character, stay.
        assert_eq!(
            url_form("http://x.example:8080/a%2fb?q=%7e")
                .unwrap()
                .normal,
            "http://x.example:8080/a%2Fb?q=~"
        );
        assert_eq!(url_form("x.example/a"), None);
        assert_eq!(url_form("://x.example"), None);
    }

    #[test]
    fn number_form_equates_grouping_trailing_zeros_and_currency() {
        for spelled in ["1,000.50", "1000.5", "$1,000.50", "1000.500", "EUR1000.50"] {
            assert_eq!(number_form(spelled).as_deref(), Some("1000.5"), "{spelled}");
        }
        assert_eq!(number_form("42").as_deref(), Some("42"));
        assert_eq!(number_form("100.00").as_deref(), Some("100"));
        assert_eq!(number_form("-3.10").as_deref(), Some("-3.1"));
        assert_eq!(number_form("0.5").as_deref(), Some("0.5"));
        // Not amounts: a leading zero, a decimal comma, bad grouping, words around.
        assert_eq!(number_form("007"), None);
        assert_eq!(number_form("1.000,50"), None);
        assert_eq!(number_form("1,00"), None);
        assert_eq!(number_form("abcd12"), None);
        assert_eq!(number_form("12abcd"), None);
        assert_eq!(number_form("A12345"), None);
    }

    #[test]
    fn iban_form_drops_blanks_and_uppercases() {
        assert_eq!(
            iban_form("de89 3704 0044 0532 0130 00").as_deref(),
            Some("DE89370400440532013000")
        );
        assert_eq!(
            iban_form("DE89370400440532013000").as_deref(),
            Some("DE89370400440532013000")
        );
        assert_eq!(iban_form("DE89 3704"), None);
        assert_eq!(iban_form("D189370400440532013000"), None);
    }

    #[test]
    fn joined_words_are_the_lowered_alphanumeric_words() {
        for text in [
            "Don't -- STOP, now!",
            "ÉCOLE d'été: Straße 12",
            "",
            " ,. ",
            "a\u{b}B",
        ] {
            let lowered = text.to_lowercase();
            let words: Vec<&str> = alnum_words(&lowered).collect();
            let (joined, at) = joined_words(text);
            assert_eq!(joined, words.join(" "), "{text:?}");
            let cut: Vec<&str> = at.iter().map(|&(s, e)| &joined[s..e]).collect();
            assert_eq!(cut, words, "{text:?}");
        }
    }

    #[test]
    fn alnum_words_ignore_punctuation() {
        let lowered = "Don't -- STOP, now!".to_lowercase();
        let words: Vec<&str> = alnum_words(&lowered).collect();
        assert_eq!(words, ["don", "t", "stop", "now"]);
    }
}
