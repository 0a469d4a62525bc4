//! Reading one script: brush tokenizes it, the tokens are screened for what the checker refuses
//! (and for what would make brush's parser backtrack or recurse without bound), then brush parses
//! them.

use std::panic::{AssertUnwindSafe, catch_unwind};

use brush_parser::ast;
use brush_parser::{ParserOptions, SourceInfo, Token};

use super::show::show;
use super::{Dialect, MAX_NESTING, MAX_SCRIPT_BYTES, NotCovered, PathEnforcement};

/// At most this many `$(` and `${` in one script: brush's tokenizer recurses on each.
const MAX_EXPANSION_MARKS: usize = 32;

/// Options for brush: bash syntax, no extended globbing (as in `bash -c`).
pub(super) fn parser_options() -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: false,
        posix_mode: false,
        sh_mode: false,
        tilde_expansion: true,
    }
}

/// Tokenizes, screens the tokens, and parses, by bash's rules; for [`Dialect::Posix`], whatever
/// bash and sh would read differently is refused first, on the raw text and on the tokens, so that
/// what brush reads is what sh runs. Any panic inside brush is caught and reported as
/// [`NotCovered::Unparsable`].
pub(super) fn parse(
    script: &str,
    dialect: Dialect,
    walls: PathEnforcement,
) -> Result<ast::Program, NotCovered> {
    if script.len() > MAX_SCRIPT_BYTES {
        return Err(NotCovered::TooLong(script.len()));
    }
    if script.contains('\0') {
        return Err(NotCovered::Unparsable("it contains a NUL byte".into()));
    }
    if dialect == Dialect::Posix {
        // bash reads `$'…'` (ANSI-C quoting) and `$"…"` (translated text) as one quoted word;
        // dash reads a `$` and then an ordinary quote, so the two shells disagree about where
        // the quoted text ends and everything after it could run in one and not the other. The
        // raw text is searched, inside quotes too: refusing a rare `'…$'` is the safe side.
        for marker in ["$'", "$\""] {
            if script.contains(marker) {
                return Err(NotCovered::ShellDialect(format!("{marker}…")));
            }
        }
    }
    // brush's tokenizer can loop without end (allocating) or panic on some unterminated
    // heredocs, so `<<` is refused before it runs; a heredoc or here-string is a redirection
    // anyway (this also refuses a quoted `<<`, which is rare). A here-string `<<<` is named as
    // such, and under sh's rules as the bash operator it is (sh reads `<<` and then `<`).
    if script.contains("<<<") {
        return Err(match dialect {
            Dialect::Posix => NotCovered::ShellDialect("<<<".into()),
            Dialect::Bash => NotCovered::Redirection("<<<".into()),
        });
    }
    if script.contains("<<") {
        return Err(NotCovered::Redirection("<<".into()));
    }
    if script.matches("$(").count() + script.matches("${").count() > MAX_EXPANSION_MARKS {
        return Err(NotCovered::TooDeep);
    }
    let options = parser_options();
    let tokenized = catch_unwind(AssertUnwindSafe(|| {
        brush_parser::uncached_tokenize_str(script, &options.tokenizer_options())
    }));
    let tokens = match tokenized {
        Ok(Ok(tokens)) => tokens,
        Ok(Err(error)) => return Err(NotCovered::Unparsable(show(&error.to_string()))),
        Err(_) => {
            return Err(NotCovered::Unparsable(
                "the shell tokenizer failed on it".into(),
            ));
        }
    };
    screen_tokens(&tokens, dialect, walls)?;
    if let Some(number) = io_number_out_of_range(&tokens) {
        return Err(NotCovered::Unparsable(format!(
            "the file descriptor number {} is out of range",
            show(number)
        )));
    }
    let parsed = catch_unwind(AssertUnwindSafe(|| {
        brush_parser::parse_tokens(&tokens, &options, &SourceInfo::default())
    }));
    match parsed {
        Ok(Ok(program)) => Ok(program),
        Ok(Err(error)) => Err(NotCovered::Unparsable(show(&error.to_string()))),
        Err(_) => Err(NotCovered::Unparsable(
            "the shell parser failed on it".into(),
        )),
    }
}

/// A word of digits before a redirection that brush would read as a file descriptor number
/// and that does not fit one (brush panics on it; caught, but a panic is not an answer).
pub(super) fn io_number_out_of_range(tokens: &[Token]) -> Option<&str> {
    tokens.windows(2).find_map(|pair| match pair {
        [Token::Word(word, _), Token::Operator(op, _)]
            if op.starts_with(['<', '>'])
                && !word.is_empty()
                && word.bytes().all(|b| b.is_ascii_digit())
                && word.parse::<i32>().is_err() =>
        {
            Some(word.as_str())
        }
        _ => None,
    })
}

/// Reserved words that start control flow.
pub(super) const CONTROL_KEYWORDS: &[&str] = &[
    "if", "then", "elif", "else", "fi", "while", "until", "for", "do", "done", "case", "esac",
    "select", "in",
];
/// Other reserved words a command never starts with.
pub(super) const OTHER_KEYWORDS: &[&str] =
    &["!", "{", "}", "[[", "]]", "function", "time", "coproc"];

/// Operators that redirect (their next word is a file, a descriptor or a heredoc tag).
fn is_redirect_operator(op: &str) -> bool {
    matches!(
        op,
        "<" | ">" | ">>" | "<<" | "<<-" | "<<<" | "<&" | ">&" | "<>" | ">|" | "&>" | "&>>" | "|&"
    )
}

/// Operators that only bash has: sh splits them into other operators.
const BASH_OPERATORS: &[&str] = &["&>", "&>>", "|&", "<<<", ";&", ";;&"];

/// Checks on the token stream, before the parser runs: a background `&` anywhere; then, in
/// source order, redirections and process substitution, reserved words that start control flow,
/// `[[`, `function`, `((`, and nesting deeper than [`MAX_NESTING`] (redirections pass where
/// `walls` is [`PathEnforcement::Enforced`], for the walk to read). Besides giving the precise
/// reason, this keeps the parser away from the constructs on which it backtracks exponentially
/// (nested `case`, `((`) and bounds its recursion. For [`Dialect::Posix`], bash's own operators,
/// `((`, process substitution, `time` (a keyword in bash, a program for sh) and `! !` (sh refuses
/// it) are refused as dialect differences first.
fn screen_tokens(
    tokens: &[Token],
    dialect: Dialect,
    walls: PathEnforcement,
) -> Result<(), NotCovered> {
    let posix = dialect == Dialect::Posix;
    if tokens
        .iter()
        .any(|t| matches!(t, Token::Operator(op, _) if op == "&"))
    {
        return Err(NotCovered::Background);
    }
    let mut command_position = true;
    let mut after_time = false;
    let mut after_bang = false;
    let mut parens = 0usize;
    let mut braces = 0usize;
    for (index, token) in tokens.iter().enumerate() {
        match token {
            Token::Operator(op, location) => {
                if posix {
                    posix_operator(op, tokens.get(index + 1))?;
                }
                if is_redirect_operator(op) {
                    let next = tokens.get(index + 1);
                    if (op == "<" || op == ">")
                        && matches!(next, Some(Token::Operator(o, _)) if o == "(")
                    {
                        return Err(NotCovered::Substitution(format!("{op}(…)")));
                    }
                    if walls == PathEnforcement::Enforced {
                        // The walk reads its target; the word after it is not a command.
                        command_position = op == "|&";
                        after_time = false;
                        after_bang = false;
                        continue;
                    }
                    let mut shown = String::new();
                    if let Some(Token::Word(word, before)) =
                        index.checked_sub(1).and_then(|i| tokens.get(i))
                        && before.end.index == location.start.index
                        && !word.is_empty()
                        && word.bytes().all(|b| b.is_ascii_digit())
                    {
                        shown.push_str(word);
                    }
                    shown.push_str(op);
                    if op != "|&"
                        && let Some(Token::Word(target, _)) = next
                    {
                        shown.push_str(target);
                    }
                    return Err(NotCovered::Redirection(show(&shown)));
                }
                if op == "(" {
                    if matches!(tokens.get(index + 1), Some(Token::Operator(o, _)) if o == "(") {
                        return Err(NotCovered::Unsupported(
                            "`((`: an arithmetic command, or a subshell directly inside another (put a space and a command between)".into(),
                        ));
                    }
                    parens += 1;
                    if parens > MAX_NESTING {
                        return Err(NotCovered::TooDeep);
                    }
                } else if op == ")" {
                    parens = parens.saturating_sub(1);
                }
                command_position = true;
                after_time = false;
                after_bang = false;
            }
            Token::Word(word, _) => {
                let word = word.as_str();
                if posix && command_position {
                    if word == "time" {
                        return Err(NotCovered::ShellDialect("time".into()));
                    }
                    if word == "!" && after_bang {
                        return Err(NotCovered::ShellDialect("! !".into()));
                    }
                }
                after_bang = command_position && word == "!";
                if command_position {
                    if CONTROL_KEYWORDS.contains(&word) {
                        return Err(NotCovered::ControlFlow(word.to_owned()));
                    }
                    match word {
                        "[[" | "]]" => {
                            return Err(NotCovered::Unsupported("a test `[[ … ]]`".into()));
                        }
                        "function" => {
                            let name = match tokens.get(index + 1) {
                                Some(Token::Word(name, _)) => show(name),
                                _ => "function".to_owned(),
                            };
                            return Err(NotCovered::FunctionDefinition(name));
                        }
                        "{" => {
                            braces += 1;
                            if braces > MAX_NESTING {
                                return Err(NotCovered::TooDeep);
                            }
                        }
                        "}" => braces = braces.saturating_sub(1),
                        _ => {}
                    }
                }
                let was_time = after_time;
                after_time = command_position && word == "time";
                command_position = (command_position && matches!(word, "!" | "{" | "}" | "time"))
                    || (was_time && word == "-p");
            }
        }
    }
    Ok(())
}

/// Refuses, for sh, an operator that bash reads differently: its own operators, `((`, and process
/// substitution.
fn posix_operator(op: &str, next: Option<&Token>) -> Result<(), NotCovered> {
    if BASH_OPERATORS.contains(&op) {
        return Err(NotCovered::ShellDialect(op.to_owned()));
    }
    if matches!(op, "(" | "<" | ">") && matches!(next, Some(Token::Operator(o, _)) if o == "(") {
        return Err(NotCovered::ShellDialect(format!("{op}(")));
    }
    Ok(())
}
