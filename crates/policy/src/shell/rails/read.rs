//! Reading a script for the guard rails: brush parses it with a screen that refuses only what
//! makes brush hang, panic or backtrack without bound (so the rails read every script coverage
//! reads, and control flow, functions and redirections besides), and each word is decoded
//! leniently: a substitution does not stop the reading, it only marks the word as not literal.

use std::panic::{AssertUnwindSafe, catch_unwind};

use brush_parser::ast;
use brush_parser::{SourceInfo, Token};

use super::super::screen::{CONTROL_KEYWORDS, io_number_out_of_range, parser_options};
use super::super::{MAX_NESTING, MAX_SCRIPT_BYTES};

/// At most this many `$(` and `${` in one script: brush's tokenizer recurses on each.
const MAX_EXPANSION_MARKS: usize = 32;

/// The tokens of `script`, or None when brush cannot or should not read it.
pub(super) fn tokens(script: &str) -> Option<Vec<Token>> {
    if script.len() > MAX_SCRIPT_BYTES || script.contains('\0') || script.contains("<<") {
        return None;
    }
    if script.matches("$(").count() + script.matches("${").count() > MAX_EXPANSION_MARKS {
        return None;
    }
    let options = parser_options();
    catch_unwind(AssertUnwindSafe(|| {
        brush_parser::uncached_tokenize_str(script, &options.tokenizer_options())
    }))
    .ok()?
    .ok()
}

/// `script` parsed, or None when it cannot be read (then coverage refuses it too: its own
/// screen refuses at least what this one does).
pub(super) fn parse(script: &str) -> Option<ast::Program> {
    let tokens = tokens(script)?;
    if !bounded(&tokens) || io_number_out_of_range(&tokens).is_some() {
        return None;
    }
    let options = parser_options();
    catch_unwind(AssertUnwindSafe(|| {
        brush_parser::parse_tokens(&tokens, &options, &SourceInfo::default())
    }))
    .ok()?
    .ok()
}

/// Whether the parser can be trusted to finish on `tokens`: no `((`, at most two `case`
/// (brush backtracks exponentially on nested ones), and parentheses, braces and compound
/// commands nested at most [`MAX_NESTING`] deep each.
fn bounded(tokens: &[Token]) -> bool {
    let mut command_position = true;
    let (mut parens, mut braces, mut blocks, mut cases) = (0usize, 0usize, 0usize, 0usize);
    for (index, token) in tokens.iter().enumerate() {
        match token {
            Token::Operator(op, _) => {
                if op == "(" {
                    if matches!(tokens.get(index + 1), Some(Token::Operator(o, _)) if o == "(") {
                        return false;
                    }
                    parens += 1;
                } else if op == ")" {
                    parens = parens.saturating_sub(1);
                }
                command_position = !matches!(op.as_str(), ">" | "<" | ">>" | ">|" | "<>" | "&>");
            }
            Token::Word(word, _) => {
                let word = word.as_str();
                if command_position {
                    match word {
                        "{" => braces += 1,
                        "}" => braces = braces.saturating_sub(1),
                        "case" => {
                            cases += 1;
                            blocks += 1;
                        }
                        "if" | "while" | "until" | "for" | "select" => blocks += 1,
                        "fi" | "done" | "esac" => blocks = blocks.saturating_sub(1),
                        _ => {}
                    }
                }
                command_position = command_position
                    && (matches!(word, "!" | "{" | "}" | "time")
                        || CONTROL_KEYWORDS.contains(&word));
            }
        }
        if parens > MAX_NESTING || braces > MAX_NESTING || blocks > MAX_NESTING || cases > 2 {
            return false;
        }
    }
    true
}

/// A word as the rails read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Word {
    /// The text after quote removal; a leading home reference (`~`, `$HOME`, `${HOME}`, quoted
    /// or not) is written `~`, other substitutions are kept as written.
    pub(super) text: String,
    /// No substitution other than a leading home reference: the text is what the command gets
    /// (but for `~` and globs).
    pub(super) literal: bool,
    /// Starts with a home reference (`text` then starts with `~`).
    pub(super) home: bool,
    /// Has an unquoted glob character (`*`, `?`, `[`).
    pub(super) glob: bool,
    /// The text up to the first unquoted glob character.
    pub(super) before_glob: String,
}

/// Decodes `raw` as the shell would, leniently: quotes removed, substitutions kept as written and
/// marked.
pub(super) fn word(raw: &str) -> Word {
    let (home, rest) = home_prefix(raw);
    let mut out = Word {
        text: if home { "~".into() } else { String::new() },
        literal: true,
        home,
        glob: false,
        before_glob: String::new(),
    };
    let chars: Vec<char> = rest.chars().collect();
    let mut i = 0;
    let push = |out: &mut Word, c: char| {
        out.text.push(c);
    };
    while let Some(&c) = chars.get(i) {
        match c {
            '\\' => {
                if let Some(&next) = chars.get(i + 1)
                    && next != '\n'
                {
                    push(&mut out, next);
                }
                i += 2;
            }
            '\'' => {
                i += 1;
                while let Some(&q) = chars.get(i) {
                    i += 1;
                    if q == '\'' {
                        break;
                    }
                    push(&mut out, q);
                }
            }
            '"' => {
                i += 1;
                while let Some(&q) = chars.get(i) {
                    i += 1;
                    match q {
                        '"' => break,
                        '\\' => {
                            if let Some(&next) = chars.get(i) {
                                if !matches!(next, '$' | '`' | '"' | '\\' | '\n') {
                                    push(&mut out, '\\');
                                }
                                if next != '\n' {
                                    push(&mut out, next);
                                }
                                i += 1;
                            }
                        }
                        '$' | '`' => {
                            out.literal = false;
                            push(&mut out, q);
                        }
                        other => push(&mut out, other),
                    }
                }
            }
            '$' if chars.get(i + 1) == Some(&'\'') => {
                // ANSI-C quoting: its escapes are not decoded here, so the word is not literal.
                out.literal = false;
                i += 2;
                while let Some(&q) = chars.get(i) {
                    i += 1;
                    match q {
                        '\'' => break,
                        '\\' => i += 1,
                        other => push(&mut out, other),
                    }
                }
            }
            '$' | '`' => {
                out.literal = false;
                push(&mut out, c);
                i += 1;
            }
            '*' | '?' | '[' => {
                if !out.glob {
                    out.glob = true;
                    out.before_glob = out.text.clone();
                }
                push(&mut out, c);
                i += 1;
            }
            '~' if i == 0 && !home => {
                // `~user`: another user's home, still a home.
                out.home = true;
                push(&mut out, c);
                i += 1;
            }
            other => {
                push(&mut out, other);
                i += 1;
            }
        }
    }
    if !out.glob {
        out.before_glob = out.text.clone();
    }
    out
}

/// Whether `raw` starts with a reference to the home folder (`$HOME`, `${HOME}`, quoted or not),
/// and the rest of the word after it (a double quote still open reopened).
fn home_prefix(raw: &str) -> (bool, String) {
    for (prefix, open_quote) in [
        ("\"$HOME\"", false),
        ("\"${HOME}\"", false),
        ("\"$HOME", true),
        ("\"${HOME}", true),
        ("${HOME}", false),
        ("$HOME", false),
    ] {
        let Some(rest) = raw.strip_prefix(prefix) else {
            continue;
        };
        // `$HOMEX` is another variable.
        if prefix.ends_with("HOME")
            && rest
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            continue;
        }
        return (
            true,
            if open_quote {
                format!("\"{rest}")
            } else {
                rest.to_owned()
            },
        );
    }
    (false, raw.to_owned())
}
