//! Words: decoding a word with the shell's quoting rules, recognizing an assignment, and
//! splitting a grant's prefix string into words.

use super::NotCovered;
use super::show::show;

/// Splits a grant's command prefix string ("git status") into words, with shell quoting
/// ("'my tool' run"). Err names the problem.
pub fn prefix_words(text: &str) -> Result<Vec<String>, String> {
    let raw_words = split_raw_words(text)?;
    if raw_words.is_empty() {
        return Err(
            "the prefix is empty: write the command it allows, such as `git status`".into(),
        );
    }
    let mut words = Vec::with_capacity(raw_words.len());
    for raw in &raw_words {
        let shown = show(raw);
        if raw.starts_with('#') {
            return Err(format!(
                "`{shown}` would start a comment in a shell; quote it to mean a literal `#`"
            ));
        }
        let literal = decode_word(raw).map_err(|problem| match problem {
            WordProblem::Substitution => format!(
                "`{shown}` asks for a substitution; a prefix is compared word by word and never expanded"
            ),
            WordProblem::Glob => format!(
                "`{shown}` has glob or brace characters; a prefix is never expanded, so quote them to mean them literally"
            ),
            WordProblem::Metachar(c) => format!(
                "`{shown}` has an unquoted `{}`; a prefix is a list of words, not a script",
                c.escape_default()
            ),
            WordProblem::Unterminated => format!("`{shown}` has an unterminated quote or escape"),
            WordProblem::AnsiCEscape => {
                format!("`{shown}` has a `$'…'` escape by number, which a prefix never uses")
            }
        })?;
        if !literal.exact {
            return Err(format!(
                "`{shown}` uses `~` or `$'…'`, which the checker never compares with a prefix; write the word out in full"
            ));
        }
        if literal.text.is_empty() {
            return Err("the prefix has an empty word (`''`)".into());
        }
        words.push(literal.text);
    }
    if let Some(first) = raw_words.first()
        && looks_like_assignment(first)
    {
        return Err(format!(
            "`{}` is a variable assignment, which the checker refuses; a prefix starts with the command",
            show(first)
        ));
    }
    Ok(words)
}

/// A word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Literal {
    /// The word as the shell passes it to the command.
    pub(super) text: String,
    /// False when the value depends on the shell or its environment (`~`, `$'…'`): such a word
    /// is never compared with a prefix word.
    pub(super) exact: bool,
    /// An unquoted `~` after the word's first character: bash expands it after `=` or `:` in a
    /// word that looks like an assignment, sh never does.
    pub(super) inner_tilde: bool,
    /// The word starts with an unquoted `~`, which the shell expands (to the home folder, for
    /// `~` and `~/…`).
    pub(super) leading_tilde: bool,
}

/// Why a word is not a literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum WordProblem {
    /// `$…`, backticks, `$"…"`.
    Substitution,
    /// Unquoted `*`, `?`, `[…]`, or a brace expansion.
    Glob,
    /// An unquoted character that cannot be part of one shell word (the tokenizer and the shell
    /// disagree about this word).
    Metachar(char),
    /// An unterminated quote or a trailing backslash.
    Unterminated,
    /// A `$'…'` escape whose value the checker does not compute (`\x`, `\u`, `\U`, octal, `\c`).
    AnsiCEscape,
}

impl WordProblem {
    pub(super) fn not_covered(self, raw: &str) -> NotCovered {
        let shown = show(raw);
        match self {
            Self::Substitution => NotCovered::Substitution(shown),
            Self::Glob => NotCovered::Glob(shown),
            Self::Metachar(c) => NotCovered::Unparsable(format!(
                "`{shown}` holds an unquoted `{}`, which the shell would read differently",
                c.escape_default()
            )),
            Self::Unterminated => {
                NotCovered::Unparsable(format!("`{shown}` has an unterminated quote"))
            }
            Self::AnsiCEscape => NotCovered::Unsupported(format!(
                "`{shown}`: a `$'…'` escape by number or control letter (`\\x`, `\\u`, `\\0`, `\\c`)"
            )),
        }
    }
}

/// Resolves a word's quoting exactly as bash does for a literal word: `'…'`, `"…"` (where `\`
/// escapes only `$`, `` ` ``, `"`, `\` and a newline), `\x`, and `$'…'` (with the escapes whose
/// value is one fixed character; escapes by number are refused, so the decoded text is always the
/// value bash passes). Anything that would expand is a problem, except `~` and `$'…'`, which make
/// the word inexact.
pub(super) fn decode_word(raw: &str) -> Result<Literal, WordProblem> {
    let chars: Vec<char> = raw.chars().collect();
    let mut text = String::with_capacity(raw.len());
    let mut exact = true;
    let mut inner_tilde = false;
    let mut leading_tilde = false;
    // Brace expansion needs an unquoted `{`, then an unquoted `,` or `..`, then an unquoted `}`.
    let mut open_brace = false;
    let mut brace_separator = false;
    let mut unquoted_dot_before = false;
    // A bracket expression needs an unquoted `[` and a later `]`.
    let mut open_bracket = false;
    let mut i = 0;
    while let Some(&c) = chars.get(i) {
        let mut unquoted_dot = false;
        match c {
            '\\' => match chars.get(i + 1) {
                None => return Err(WordProblem::Unterminated),
                Some('\n') => i += 2,
                Some(&next) => {
                    if next == ']' && open_bracket {
                        return Err(WordProblem::Glob);
                    }
                    text.push(next);
                    i += 2;
                }
            },
            '\'' => {
                let start = i + 1;
                let len = chars[start..]
                    .iter()
                    .position(|&q| q == '\'')
                    .ok_or(WordProblem::Unterminated)?;
                let quoted = &chars[start..start + len];
                if open_bracket && quoted.contains(&']') {
                    return Err(WordProblem::Glob);
                }
                text.extend(quoted);
                i = start + len + 1;
            }
            '"' => {
                i += 1;
                loop {
                    match chars.get(i) {
                        None => return Err(WordProblem::Unterminated),
                        Some('"') => {
                            i += 1;
                            break;
                        }
                        Some('$' | '`') => return Err(WordProblem::Substitution),
                        Some('\\') => match chars.get(i + 1) {
                            None => return Err(WordProblem::Unterminated),
                            Some('\n') => i += 2,
                            Some(&next @ ('$' | '`' | '"' | '\\')) => {
                                text.push(next);
                                i += 2;
                            }
                            Some(_) => {
                                text.push('\\');
                                i += 1;
                            }
                        },
                        Some(&inside) => {
                            if inside == ']' && open_bracket {
                                return Err(WordProblem::Glob);
                            }
                            text.push(inside);
                            i += 1;
                        }
                    }
                }
            }
            '$' => match chars.get(i + 1) {
                Some('\'') => {
                    exact = false;
                    i = decode_ansi_c(&chars, i + 2, &mut text)?;
                }
                _ => return Err(WordProblem::Substitution),
            },
            '`' => return Err(WordProblem::Substitution),
            '*' | '?' => return Err(WordProblem::Glob),
            '[' => {
                open_bracket = true;
                text.push(c);
                i += 1;
            }
            ']' => {
                if open_bracket {
                    return Err(WordProblem::Glob);
                }
                text.push(c);
                i += 1;
            }
            '{' => {
                open_brace = true;
                text.push(c);
                i += 1;
            }
            ',' => {
                if open_brace {
                    brace_separator = true;
                }
                text.push(c);
                i += 1;
            }
            '.' => {
                if open_brace && unquoted_dot_before {
                    brace_separator = true;
                }
                unquoted_dot = true;
                text.push(c);
                i += 1;
            }
            '}' => {
                if brace_separator {
                    return Err(WordProblem::Glob);
                }
                text.push(c);
                i += 1;
            }
            '~' => {
                exact = false;
                if i > 0 {
                    inner_tilde = true;
                } else {
                    leading_tilde = true;
                }
                text.push(c);
                i += 1;
            }
            ' ' | '\t' | '\n' | ';' | '&' | '|' | '<' | '>' | '(' | ')' | '\0' => {
                return Err(WordProblem::Metachar(c));
            }
            _ => {
                text.push(c);
                i += 1;
            }
        }
        unquoted_dot_before = unquoted_dot;
    }
    Ok(Literal {
        text,
        exact,
        inner_tilde,
        leading_tilde,
    })
}

/// Decodes the body of `$'…'` starting at `start` (just after the opening quote) into `text`;
/// returns the index just past the closing quote. The value is bash's: the one-character escapes
/// are decoded, an unknown escape keeps its backslash (as bash does), and the escapes by number or
/// control letter (`\x`, `\u`, `\U`, `\0`–`\7`, `\c`) are refused rather than guessed, so that
/// later checks on the text (options, paths) see what the command will see.
fn decode_ansi_c(chars: &[char], start: usize, text: &mut String) -> Result<usize, WordProblem> {
    let mut i = start;
    loop {
        match chars.get(i) {
            None => return Err(WordProblem::Unterminated),
            Some('\'') => return Ok(i + 1),
            Some('\\') => {
                let Some(&escaped) = chars.get(i + 1) else {
                    return Err(WordProblem::Unterminated);
                };
                match escaped {
                    'n' => text.push('\n'),
                    't' => text.push('\t'),
                    'r' => text.push('\r'),
                    'a' => text.push('\u{7}'),
                    'b' => text.push('\u{8}'),
                    'e' | 'E' => text.push('\u{1b}'),
                    'f' => text.push('\u{c}'),
                    'v' => text.push('\u{b}'),
                    '\\' | '\'' | '"' | '?' => text.push(escaped),
                    'x' | 'u' | 'U' | 'c' | '0'..='7' => return Err(WordProblem::AnsiCEscape),
                    other => {
                        text.push('\\');
                        text.push(other);
                    }
                }
                i += 2;
            }
            Some(&c) => {
                text.push(c);
                i += 1;
            }
        }
    }
}

/// Splits a prefix string into raw words at unquoted blanks, keeping the quotes for
/// [`decode_word`].
fn split_raw_words(text: &str) -> Result<Vec<String>, String> {
    #[derive(Clone, Copy, PartialEq)]
    enum Quote {
        None,
        Single,
        Double,
        AnsiC,
    }
    let mut words = Vec::new();
    let mut current = String::new();
    let mut started = false;
    let mut quote = Quote::None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Quote::None => match c {
                ' ' | '\t' | '\n' | '\r' => {
                    if started {
                        words.push(std::mem::take(&mut current));
                        started = false;
                    }
                    continue;
                }
                '\\' => {
                    current.push(c);
                    match chars.next() {
                        Some(next) => current.push(next),
                        None => return Err("the prefix ends with a lone backslash".into()),
                    }
                }
                '\'' => {
                    quote = if current.ends_with('$') && !ends_with_escaped_dollar(&current) {
                        Quote::AnsiC
                    } else {
                        Quote::Single
                    };
                    current.push(c);
                }
                '"' => {
                    quote = Quote::Double;
                    current.push(c);
                }
                _ => current.push(c),
            },
            Quote::Single => {
                current.push(c);
                if c == '\'' {
                    quote = Quote::None;
                }
            }
            Quote::Double | Quote::AnsiC => {
                current.push(c);
                if c == '\\' {
                    if let Some(next) = chars.next() {
                        current.push(next);
                    }
                } else if (c == '"' && quote == Quote::Double)
                    || (c == '\'' && quote == Quote::AnsiC)
                {
                    quote = Quote::None;
                }
            }
        }
        started = true;
    }
    if quote != Quote::None {
        return Err("the prefix has an unterminated quote".into());
    }
    if started {
        words.push(current);
    }
    Ok(words)
}

/// Whether `current` ends with a `$` that is escaped by an odd number of backslashes.
fn ends_with_escaped_dollar(current: &str) -> bool {
    let before = current.strip_suffix('$').unwrap_or(current);
    before.chars().rev().take_while(|&c| c == '\\').count() % 2 == 1
}

/// `NAME=…`, `NAME+=…` or `NAME[…]=…`, unquoted, as the shell recognizes an assignment.
pub(super) fn looks_like_assignment(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    let Some(&first) = bytes.first() else {
        return false;
    };
    if !(first.is_ascii_alphabetic() || first == b'_') {
        return false;
    }
    let mut i = 1;
    while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
        i += 1;
    }
    if bytes.get(i) == Some(&b'[') {
        match bytes[i..].iter().position(|&b| b == b']') {
            Some(close) => i += close + 1,
            None => return false,
        }
    }
    if bytes.get(i) == Some(&b'+') {
        i += 1;
    }
    bytes.get(i) == Some(&b'=')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lit(raw: &str) -> Result<(String, bool), WordProblem> {
        decode_word(raw).map(|l| (l.text, l.exact))
    }

    #[test]
    fn quoting_is_resolved_as_the_shell_does() {
        assert_eq!(lit("'git'"), Ok(("git".into(), true)));
        assert_eq!(lit("g'i't"), Ok(("git".into(), true)));
        assert_eq!(lit(r#""g\it""#), Ok((r"g\it".into(), true)));
        assert_eq!(lit(r#""a\"b""#), Ok((r#"a"b"#.into(), true)));
        assert_eq!(lit(r"git\ status"), Ok(("git status".into(), true)));
        assert_eq!(lit(r"\*"), Ok(("*".into(), true)));
        assert_eq!(lit("\"*\""), Ok(("*".into(), true)));
        assert_eq!(lit("$'a\\nb'"), Ok(("a\nb".into(), false)));
        assert_eq!(lit("~/x"), Ok(("~/x".into(), false)));
    }

    #[test]
    fn expansions_are_problems() {
        assert_eq!(lit("$X"), Err(WordProblem::Substitution));
        assert_eq!(lit("\"$X\""), Err(WordProblem::Substitution));
        assert_eq!(lit("$\"x\""), Err(WordProblem::Substitution));
        assert_eq!(lit("a`b`"), Err(WordProblem::Substitution));
        assert_eq!(lit("*.rs"), Err(WordProblem::Glob));
        assert_eq!(lit("a[bc]"), Err(WordProblem::Glob));
        assert_eq!(lit("a{b,c}"), Err(WordProblem::Glob));
        assert_eq!(lit("{1..3}"), Err(WordProblem::Glob));
        assert_eq!(lit("{}"), Ok(("{}".into(), true)));
        assert_eq!(lit("@{u}"), Ok(("@{u}".into(), true)));
        assert_eq!(lit("a'{b,c}'"), Ok(("a{b,c}".into(), true)));
        assert_eq!(lit("["), Ok(("[".into(), true)));
        assert_eq!(lit("'unterminated"), Err(WordProblem::Unterminated));
        assert_eq!(lit("\\$'\\' ; x"), Err(WordProblem::Metachar(' ')));
    }

    #[test]
    fn assignments_are_recognized_as_the_shell_does() {
        assert!(looks_like_assignment("PATH=/tmp"));
        assert!(looks_like_assignment("a+=1"));
        assert!(looks_like_assignment("a[1]=x"));
        assert!(!looks_like_assignment("'a'=1"));
        assert!(!looks_like_assignment("1a=1"));
        assert!(!looks_like_assignment("--opt=1"));
    }
}
