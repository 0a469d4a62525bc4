//! Shell coverage: whether a `shell` call's script runs only commands that start with a granted
//! prefix, word by word.
//!
//! The script is read with `brush-parser` (tokenizer and parser), and every word is then resolved
//! here with the shell's own quoting rules. The rule is simple and errs on the side of "not
//! covered": a script is covered only if the checker understands all of it and every simple
//! command in it (in pipelines, lists, subshells, brace groups and `sh -c`/`bash -c`/`dash -c`
//! with a literal script, recursively) starts with a granted prefix.
//!
//! Decisions, written down so that the grant decision and the owner know what to expect:
//!
//! - **Empty scripts** (nothing, blanks, only comments) are not covered ([`NotCovered::Empty`]);
//!   so is an inner `sh -c ''`.
//! - **Unquoted glob characters** (`*`, `?`, `[…]`) and **brace expansion** (`{a,b}`, `{1..3}`)
//!   are not covered in *any* word, arguments included: the shell would expand them against the
//!   file system, so the words that run are not the words that were checked (and later path
//!   checks could not see them). Quoted, they are literal characters and fine anywhere, also in a
//!   prefix word (`"*"` is compared as a star). `{}` and `@{u}` are not brace expansions.
//! - **Tilde** (`~`, `~/x`) is accepted in arguments after the prefix (it names a path, as a
//!   literal path could), never in a word compared with a prefix word, nor in an `sh -c` script.
//! - **ANSI-C quoting** (`$'…'`) is read differently by bash and by dash, so a word that uses it
//!   is accepted only as an argument after the prefix; `$"…"` (translated text) is refused.
//! - **Refused whatever the grants say**: `eval`, `source`, `.`, `exec`, and the builtins that
//!   change what later commands mean (`alias`, `enable`, `hash`, `trap`, `shopt`, `set`,
//!   `declare`/`typeset`/`export`/`readonly`/`local`, `unset`, `let`, `read`, `mapfile`/`readarray`,
//!   `getopts`, `fc`, `coproc`, `compgen`/`complete`/`compopt`, `bind`), plus `printf -v`,
//!   `test -v`/`[ -v` (bash evaluates array subscripts there) and `wait -p`.
//! - **Control flow** (`if`, `while`, `until`, `for`, `case`, `select`), `[[ … ]]`, `(( … ))`,
//!   function definitions, assignments, any redirection (heredocs, here-strings, `2>&1`, `|&`),
//!   process substitution and a background `&` are not covered.
//! - `!` (negation) and `time` in front of a pipeline are understood and allowed.
//! - An empty prefix covers nothing.
//! - Limits: scripts longer than [`MAX_SCRIPT_BYTES`] are not read; `sh -c` nests at most
//!   [`MAX_SHELL_DEPTH`] deep; subshells nest at most [`MAX_NESTING`] deep, and so do brace
//!   groups. brush's parser backtracks exponentially on nested parentheses and `case`, and
//!   recurses on the stack, so these limits are checked on the tokens before it runs; a `<<`
//!   anywhere is refused before the tokenizer runs (it can loop without end on some heredocs).
//!   Any panic inside brush is caught and reported as [`NotCovered::Unparsable`].

use std::collections::VecDeque;
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

use brush_parser::ast;
use brush_parser::{ParserOptions, SourceInfo, Token};

/// The longest script the checker reads, in bytes.
pub const MAX_SCRIPT_BYTES: usize = 64 * 1024;
/// How deeply `sh -c '…'` may nest inside a script (`sh -c "sh -c 'ls'"` is 2).
pub const MAX_SHELL_DEPTH: usize = 4;
/// How deeply subshells `( … )` may nest in one script, and, separately, brace groups `{ …; }`.
pub const MAX_NESTING: usize = 8;
/// At most this many `$(` and `${` in one script: brush's tokenizer recurses on each.
const MAX_EXPANSION_MARKS: usize = 32;
/// The longest construct quoted back in a reason, in characters.
const MAX_SHOWN: usize = 120;

/// Why a script is not covered, for the owner and the audit log (Display: one sentence naming
/// the command or construct).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NotCovered {
    /// The script is not valid shell syntax as the checker reads it (the detail says where).
    Unparsable(String),
    /// The script is longer than [`MAX_SCRIPT_BYTES`] (its length in bytes).
    TooLong(usize),
    /// A word asks for a substitution: `$VAR`, `${…}`, `$(…)`, backticks, `$((…))`, `<(…)`.
    Substitution(String),
    /// A variable assignment, before a command (`PATH=/tmp git`) or alone (`X=1`).
    Assignment(String),
    /// A redirection, heredoc or here-string (refused until the sandbox enforces paths).
    Redirection(String),
    /// A command sent to the background with `&`.
    Background,
    /// A shell function definition (the function's name).
    FunctionDefinition(String),
    /// A builtin that runs text as commands or changes how later commands run (`eval`, …).
    Builtin(String),
    /// A word with unquoted glob or brace expansion characters.
    Glob(String),
    /// Control flow: `if`, `while`, `until`, `for`, `case`, `select`.
    ControlFlow(String),
    /// Something else the checker does not follow (`[[ … ]]`, `(( … ))`, `$'…'` in a command
    /// word, …), described.
    Unsupported(String),
    /// A command that no granted prefix covers (its words).
    NoPrefix(String),
    /// Subshells, brace groups or `sh -c` scripts nest more deeply than the checker follows.
    TooDeep,
    /// The script runs no command at all (empty, blanks or only comments).
    Empty,
}

impl fmt::Display for NotCovered {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Unparsable(detail) => {
                write!(
                    f,
                    "the script is not shell syntax the checker can read ({detail})"
                )
            }
            Self::TooLong(len) => write!(
                f,
                "the script is {len} bytes long, more than the {MAX_SCRIPT_BYTES} bytes the checker reads"
            ),
            Self::Substitution(word) => write!(
                f,
                "`{word}` asks the shell to substitute a value (a variable, a command's output or a file), which the checker cannot see through"
            ),
            Self::Assignment(word) => write!(
                f,
                "`{word}` assigns a shell variable, which could change what the commands do"
            ),
            Self::Redirection(redirect) => write!(
                f,
                "`{redirect}` redirects input or output, which is refused until the sandbox enforces paths"
            ),
            Self::Background => write!(f, "a command is sent to the background with `&`"),
            Self::FunctionDefinition(name) => write!(
                f,
                "`{name}` is defined as a shell function, which could stand in for a granted command"
            ),
            Self::Builtin(name) => write!(
                f,
                "`{name}` runs text as commands or changes how the shell runs later commands, so it is never covered"
            ),
            Self::Glob(word) => write!(
                f,
                "`{word}` has unquoted glob or brace expansion characters, which the shell would expand (quote them to mean them literally)"
            ),
            Self::ControlFlow(keyword) => write!(
                f,
                "`{keyword}` is control flow, which the checker does not follow"
            ),
            Self::Unsupported(what) => write!(f, "the checker does not follow {what}"),
            Self::NoPrefix(command) => {
                write!(f, "no granted prefix covers the command `{command}`")
            }
            Self::TooDeep => write!(
                f,
                "the script nests subshells, groups or `sh -c` scripts more deeply than the checker follows"
            ),
            Self::Empty => write!(
                f,
                "the script runs no command (it is empty or only comments)"
            ),
        }
    }
}

impl std::error::Error for NotCovered {}

/// Whether every simple command of `script` starts with one of `prefixes`, word by word.
pub fn covers_script(script: &str, prefixes: &[Vec<String>]) -> Result<(), NotCovered> {
    walk_script(script, prefixes, Mode::Cover).map(|_| ())
}

/// Whether some simple command of `script` (in `sh -c` scripts too) starts with one of
/// `prefixes`: what a deny grant's `commands` forbid. A script the checker cannot read touches
/// nothing here; no allow grant covers it either, so it is refused all the same.
pub fn touches_script(script: &str, prefixes: &[Vec<String>]) -> bool {
    walk_script(script, prefixes, Mode::Touch).is_ok_and(|hits| hits > 0)
}

/// What the walk is for: every command covered, or any command touched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Cover,
    Touch,
}

/// Walks `script` and its `sh -c` scripts; returns how many commands a prefix matched.
fn walk_script(script: &str, prefixes: &[Vec<String>], mode: Mode) -> Result<usize, NotCovered> {
    let mut inner: VecDeque<(String, usize)> = VecDeque::new();
    let mut hits = check_one(script, prefixes, 0, &mut inner, mode)?;
    // Scripts of `sh -c '…'` are checked after their parent, one after another (never on top of
    // the parent's stack frames), each one level deeper.
    while let Some((text, depth)) = inner.pop_front() {
        hits += check_one(&text, prefixes, depth, &mut inner, mode)?;
    }
    Ok(hits)
}

/// A warning for a granted prefix whose first word runs other programs (env, xargs, find, git,
/// sudo, shells, interpreters, build tools, …), or that can never cover anything; None when the
/// prefix looks narrow.
pub fn prefix_warning(prefix: &[String]) -> Option<String> {
    let Some(first) = prefix.first() else {
        return Some("the prefix is empty, so it covers no command".to_owned());
    };
    let name = first.rsplit('/').next().unwrap_or(first);
    let shown = show(&render_words(prefix));
    if refused_builtin_name(first) {
        return Some(format!(
            "`{first}` is never covered: the checker refuses it whatever the grants say"
        ));
    }
    if CONTROL_KEYWORDS.contains(&first.as_str()) || OTHER_KEYWORDS.contains(&first.as_str()) {
        return Some(format!(
            "`{first}` is a shell keyword, so a command never starts with it and `{shown}` covers nothing"
        ));
    }
    if name == "git" {
        return git_warning(prefix, &shown);
    }
    if name == "sed" || name == "gsed" {
        if prefix.iter().any(|w| w == "--sandbox") {
            return None;
        }
        return Some(format!(
            "`{shown}` can run other programs (GNU sed's `e` command and `s///e` flag) and write files (`w`); add `--sandbox` to the prefix to forbid them"
        ));
    }
    runner_reason(name).map(|how| {
        format!("`{shown}` can run other programs ({how}), so this grant covers whatever they run")
    })
}

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

// ----------------------------------------------------------------------------------------------
// One script
// ----------------------------------------------------------------------------------------------

/// Checks one script (the call's, or an `sh -c` script inside it), queueing its own `sh -c`
/// scripts.
fn check_one(
    script: &str,
    prefixes: &[Vec<String>],
    depth: usize,
    inner: &mut VecDeque<(String, usize)>,
    mode: Mode,
) -> Result<usize, NotCovered> {
    if depth > MAX_SHELL_DEPTH {
        return Err(NotCovered::TooDeep);
    }
    let program = parse(script)?;
    let mut walker = Walker {
        prefixes,
        nesting: 0,
        commands: 0,
        hits: 0,
        mode,
        depth,
        inner,
    };
    for list in &program.complete_commands {
        walker.list(list)?;
    }
    if walker.commands == 0 {
        return Err(NotCovered::Empty);
    }
    Ok(walker.hits)
}

/// Options for brush: bash syntax, no extended globbing (as in `bash -c`).
fn parser_options() -> ParserOptions {
    ParserOptions {
        enable_extended_globbing: false,
        posix_mode: false,
        sh_mode: false,
        tilde_expansion: true,
    }
}

/// Tokenizes, screens the tokens, and parses. Any panic inside brush is caught and reported as
/// [`NotCovered::Unparsable`].
fn parse(script: &str) -> Result<ast::Program, NotCovered> {
    if script.len() > MAX_SCRIPT_BYTES {
        return Err(NotCovered::TooLong(script.len()));
    }
    if script.contains('\0') {
        return Err(NotCovered::Unparsable("it contains a NUL byte".into()));
    }
    // brush's tokenizer can loop without end (allocating) or panic on some unterminated
    // heredocs, so `<<` is refused before it runs; a heredoc or here-string is a redirection
    // anyway (this also refuses a quoted `<<`, which is rare).
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
    screen_tokens(&tokens)?;
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

/// Reserved words that start control flow.
const CONTROL_KEYWORDS: &[&str] = &[
    "if", "then", "elif", "else", "fi", "while", "until", "for", "do", "done", "case", "esac",
    "select", "in",
];
/// Other reserved words a command never starts with.
const OTHER_KEYWORDS: &[&str] = &["!", "{", "}", "[[", "]]", "function", "time", "coproc"];

/// Operators that redirect (their next word is a file, a descriptor or a heredoc tag).
fn is_redirect_operator(op: &str) -> bool {
    matches!(
        op,
        "<" | ">" | ">>" | "<<" | "<<-" | "<<<" | "<&" | ">&" | "<>" | ">|" | "&>" | "&>>" | "|&"
    )
}

/// Checks on the token stream, before the parser runs: a background `&` anywhere; then, in
/// source order, redirections and process substitution, reserved words that start control flow,
/// `[[`, `function`, `((`, and nesting deeper than [`MAX_NESTING`]. Besides giving the precise
/// reason, this keeps the parser away from the constructs on which it backtracks exponentially
/// (nested `case`, `((`) and bounds its recursion.
fn screen_tokens(tokens: &[Token]) -> Result<(), NotCovered> {
    if tokens
        .iter()
        .any(|t| matches!(t, Token::Operator(op, _) if op == "&"))
    {
        return Err(NotCovered::Background);
    }
    let mut command_position = true;
    let mut after_time = false;
    let mut parens = 0usize;
    let mut braces = 0usize;
    for (index, token) in tokens.iter().enumerate() {
        match token {
            Token::Operator(op, location) => {
                if is_redirect_operator(op) {
                    let next = tokens.get(index + 1);
                    if (op == "<" || op == ">")
                        && matches!(next, Some(Token::Operator(o, _)) if o == "(")
                    {
                        return Err(NotCovered::Substitution(format!("{op}(…)")));
                    }
                    let mut shown = String::new();
                    if let Some(Token::Word(word, before)) =
                        index.checked_sub(1).and_then(|i| tokens.get(i))
                        && before.end.index == location.start.index
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
            }
            Token::Word(word, _) => {
                let word = word.as_str();
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

/// Walks one parsed script.
struct Walker<'a> {
    prefixes: &'a [Vec<String>],
    /// Current nesting of subshells and brace groups.
    nesting: usize,
    /// Simple commands seen.
    commands: usize,
    /// Simple commands a prefix matched.
    hits: usize,
    /// Whether a command no prefix matches stops the walk.
    mode: Mode,
    /// `sh -c` depth of this script.
    depth: usize,
    /// Where inner `sh -c` scripts are queued.
    inner: &'a mut VecDeque<(String, usize)>,
}

impl Walker<'_> {
    fn list(&mut self, list: &ast::CompoundList) -> Result<(), NotCovered> {
        for ast::CompoundListItem(and_or, separator) in &list.0 {
            if matches!(separator, ast::SeparatorOperator::Async) {
                return Err(NotCovered::Background);
            }
            self.pipeline(&and_or.first)?;
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) => {
                        self.pipeline(pipeline)?;
                    }
                }
            }
        }
        Ok(())
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline) -> Result<(), NotCovered> {
        if pipeline.seq.is_empty() {
            return Err(NotCovered::Unsupported(
                "`!` or `time` without a command after it".into(),
            ));
        }
        for command in &pipeline.seq {
            self.command(command)?;
        }
        Ok(())
    }

    fn nested(&mut self, list: &ast::CompoundList) -> Result<(), NotCovered> {
        self.nesting += 1;
        // The token screen already bounds parentheses and braces separately.
        if self.nesting > 2 * MAX_NESTING {
            return Err(NotCovered::TooDeep);
        }
        self.list(list)?;
        self.nesting -= 1;
        Ok(())
    }

    fn command(&mut self, command: &ast::Command) -> Result<(), NotCovered> {
        match command {
            ast::Command::Simple(simple) => self.simple(simple),
            ast::Command::Compound(compound, redirects) => {
                if let Some(redirect) = redirects.as_ref().and_then(|r| r.0.first()) {
                    return Err(NotCovered::Redirection(show(&redirect.to_string())));
                }
                match compound {
                    ast::CompoundCommand::BraceGroup(group) => self.nested(&group.list),
                    ast::CompoundCommand::Subshell(subshell) => self.nested(&subshell.list),
                    ast::CompoundCommand::Arithmetic(_) => Err(NotCovered::Unsupported(
                        "an arithmetic command `(( … ))`".into(),
                    )),
                    ast::CompoundCommand::ArithmeticForClause(_)
                    | ast::CompoundCommand::ForClause(_) => {
                        Err(NotCovered::ControlFlow("for".into()))
                    }
                    ast::CompoundCommand::CaseClause(_) => {
                        Err(NotCovered::ControlFlow("case".into()))
                    }
                    ast::CompoundCommand::IfClause(_) => Err(NotCovered::ControlFlow("if".into())),
                    ast::CompoundCommand::WhileClause(_) => {
                        Err(NotCovered::ControlFlow("while".into()))
                    }
                    ast::CompoundCommand::UntilClause(_) => {
                        Err(NotCovered::ControlFlow("until".into()))
                    }
                }
            }
            ast::Command::Function(function) => {
                Err(NotCovered::FunctionDefinition(show(&function.fname.value)))
            }
            ast::Command::ExtendedTest(_) => {
                Err(NotCovered::Unsupported("a test `[[ … ]]`".into()))
            }
        }
    }

    fn simple(&mut self, command: &ast::SimpleCommand) -> Result<(), NotCovered> {
        if let Some(item) = command.prefix.as_ref().and_then(|p| p.0.first()) {
            return Err(item_problem(item));
        }
        let Some(name) = &command.word_or_name else {
            return Err(NotCovered::Unparsable("a command without words".into()));
        };
        let mut raw: Vec<&str> = vec![name.value.as_str()];
        if let Some(suffix) = &command.suffix {
            for item in &suffix.0 {
                match item {
                    ast::CommandPrefixOrSuffixItem::Word(word) => raw.push(&word.value),
                    ast::CommandPrefixOrSuffixItem::AssignmentWord(assignment, word) => {
                        if matches!(assignment.value, ast::AssignmentValue::Array(_)) {
                            return Err(NotCovered::Unparsable(format!(
                                "`{}` is an array assignment where an argument belongs",
                                show(&word.value)
                            )));
                        }
                        raw.push(&word.value);
                    }
                    other => return Err(item_problem(other)),
                }
            }
        }
        if looks_like_assignment(raw[0]) {
            return Err(NotCovered::Assignment(show(raw[0])));
        }
        let mut words = Vec::with_capacity(raw.len());
        for word in &raw {
            words.push(decode_word(word).map_err(|problem| problem.not_covered(word))?);
        }
        self.commands += 1;

        refuse_builtins(&words)?;
        if self
            .prefixes
            .iter()
            .any(|prefix| prefix_matches(prefix, &words))
        {
            self.hits += 1;
            return Ok(());
        }
        if let Some(script) = shell_c_script(&words)? {
            self.inner.push_back((script, self.depth + 1));
            return Ok(());
        }
        if self.mode == Mode::Touch {
            return Ok(());
        }
        let compared = self.prefixes.iter().map(Vec::len).max().unwrap_or(0);
        for (word, raw) in words.iter().zip(&raw).take(compared) {
            if !word.exact {
                return Err(NotCovered::Unsupported(format!(
                    "`{}` in a word compared with a prefix: `~` and `$'…'` are only accepted in arguments after it",
                    show(raw)
                )));
            }
        }
        Err(NotCovered::NoPrefix(show(&render_words(
            words.iter().map(|w| &w.text),
        ))))
    }
}

/// The reason a redirection, assignment or process substitution around a command is refused.
fn item_problem(item: &ast::CommandPrefixOrSuffixItem) -> NotCovered {
    match item {
        ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
            NotCovered::Redirection(show(&redirect.to_string()))
        }
        ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
            NotCovered::Assignment(show(&word.value))
        }
        ast::CommandPrefixOrSuffixItem::ProcessSubstitution(kind, _) => {
            NotCovered::Substitution(format!("{kind}(…)"))
        }
        ast::CommandPrefixOrSuffixItem::Word(word) => {
            NotCovered::Unparsable(format!("`{}` before the command", show(&word.value)))
        }
    }
}

/// Whether `prefix` (non-empty) covers the command `words`, word by word.
fn prefix_matches(prefix: &[String], words: &[Literal]) -> bool {
    !prefix.is_empty()
        && prefix.len() <= words.len()
        && prefix
            .iter()
            .zip(words)
            .all(|(want, word)| word.exact && word.text == *want)
}

/// Shells whose `-c` script the checker reads (all read the bash/POSIX syntax checked here).
const SHELLS: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "/bin/sh",
    "/bin/bash",
    "/bin/dash",
    "/usr/bin/sh",
    "/usr/bin/bash",
    "/usr/bin/dash",
];

/// The script of `sh -c SCRIPT [NAME [ARG…]]` (exactly that form), if `words` is one.
fn shell_c_script(words: &[Literal]) -> Result<Option<String>, NotCovered> {
    let [shell, flag, script, ..] = words else {
        return Ok(None);
    };
    if !(shell.exact && flag.exact && SHELLS.contains(&shell.text.as_str()) && flag.text == "-c") {
        return Ok(None);
    }
    if !script.exact {
        return Err(NotCovered::Unsupported(format!(
            "the script of `{} -c` written with `~` or `$'…'`",
            shell.text
        )));
    }
    Ok(Some(script.text.clone()))
}

/// Builtins refused whatever the grants say.
const REFUSED_BUILTINS: &[&str] = &[
    "eval",
    "source",
    ".",
    "exec",
    "alias",
    "enable",
    "hash",
    "trap",
    "shopt",
    "set",
    "declare",
    "typeset",
    "export",
    "readonly",
    "local",
    "unset",
    "let",
    "read",
    "mapfile",
    "readarray",
    "getopts",
    "fc",
    "coproc",
    "compgen",
    "complete",
    "compopt",
    "bind",
];

fn refused_builtin_name(word: &str) -> bool {
    REFUSED_BUILTINS.contains(&word)
}

/// Refuses the builtins in [`REFUSED_BUILTINS`], and `printf -v`, `test -v`/`-R`, `[ -v`/`-R`
/// and `wait -p`, whose arguments bash may evaluate as code or use to set variables.
fn refuse_builtins(words: &[Literal]) -> Result<(), NotCovered> {
    let Some(first) = words.first() else {
        return Ok(());
    };
    if !first.exact {
        return Ok(());
    }
    let name = first.text.as_str();
    if refused_builtin_name(name) {
        return Err(NotCovered::Builtin(name.to_owned()));
    }
    let args = &words[1..];
    let refused = match name {
        "printf" => args
            .iter()
            .any(|a| a.text.starts_with("-v"))
            .then_some("printf -v"),
        "test" => args
            .iter()
            .any(|a| a.text == "-v" || a.text == "-R")
            .then_some("test -v"),
        "[" => args
            .iter()
            .any(|a| a.text == "-v" || a.text == "-R")
            .then_some("[ -v"),
        "wait" => args
            .iter()
            .any(|a| a.text.starts_with('-') && a.text.contains('p'))
            .then_some("wait -p"),
        _ => None,
    };
    match refused {
        Some(what) => Err(NotCovered::Builtin(what.to_owned())),
        None => Ok(()),
    }
}

/// `NAME=…`, `NAME+=…` or `NAME[…]=…`, unquoted, as the shell recognizes an assignment.
fn looks_like_assignment(raw: &str) -> bool {
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

// ----------------------------------------------------------------------------------------------
// Words
// ----------------------------------------------------------------------------------------------

/// A word after quote removal.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Literal {
    /// The word as the shell passes it to the command.
    text: String,
    /// False when the value depends on the shell or its environment (`~`, `$'…'`): such a word
    /// is never compared with a prefix word.
    exact: bool,
}

/// Why a word is not a literal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WordProblem {
    /// `$…`, backticks, `$"…"`.
    Substitution,
    /// Unquoted `*`, `?`, `[…]`, or a brace expansion.
    Glob,
    /// An unquoted character that cannot be part of one shell word (the tokenizer and the shell
    /// disagree about this word).
    Metachar(char),
    /// An unterminated quote or a trailing backslash.
    Unterminated,
}

impl WordProblem {
    fn not_covered(self, raw: &str) -> NotCovered {
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
        }
    }
}

/// Resolves a word's quoting exactly as bash does for a literal word: `'…'`, `"…"` (where `\`
/// escapes only `$`, `` ` ``, `"`, `\` and a newline), `\x`, and `$'…'`. Anything that would
/// expand is a problem, except `~` and `$'…'`, which make the word inexact.
fn decode_word(raw: &str) -> Result<Literal, WordProblem> {
    let chars: Vec<char> = raw.chars().collect();
    let mut text = String::with_capacity(raw.len());
    let mut exact = true;
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
    Ok(Literal { text, exact })
}

/// Decodes the body of `$'…'` starting at `start` (just after the opening quote) into `text`;
/// returns the index just past the closing quote. The value is bash's for the common escapes
/// (it is only ever used as an argument, never compared).
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

// ----------------------------------------------------------------------------------------------
// Warnings
// ----------------------------------------------------------------------------------------------

/// git subcommands that run no other program (no hooks, pagers off without a terminal).
const GIT_QUIET: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "tag",
    "add",
    "rm",
    "mv",
    "restore",
    "reset",
    "stash",
    "blame",
    "shortlog",
    "describe",
    "rev-parse",
    "rev-list",
    "ls-files",
    "ls-tree",
    "cat-file",
    "diff-tree",
    "diff-files",
    "diff-index",
    "for-each-ref",
    "show-ref",
    "reflog",
    "init",
    "version",
    "--version",
    "count-objects",
    "fsck",
    "notes",
    "range-diff",
    "format-patch",
    "apply",
    "check-ignore",
    "check-attr",
    "whatchanged",
    "name-rev",
    "merge-base",
    "symbolic-ref",
];

fn git_warning(prefix: &[String], shown: &str) -> Option<String> {
    match prefix.get(1) {
        None => Some(format!(
            "`{shown}` can run other programs (`git -c` settings, aliases, hooks, `--upload-pack`, `rebase --exec`, …), so this grant covers whatever they run; grant subcommands such as `git status`"
        )),
        Some(sub) if sub.starts_with('-') => Some(format!(
            "`{shown}` starts with a global git option; with `-c`, `--exec-path` or `--config-env` git runs whatever the setting names"
        )),
        Some(sub) if GIT_QUIET.contains(&sub.as_str()) => None,
        Some(sub) => Some(format!(
            "`{shown}` can run other programs (hooks, aliases, or options such as `--exec`, `--upload-pack`, `-x`), so this grant covers whatever git `{sub}` runs"
        )),
    }
}

/// How a program named `name` runs other programs, if it does.
fn runner_reason(name: &str) -> Option<&'static str> {
    const WRAPPERS: &[&str] = &[
        "env",
        "xargs",
        "sudo",
        "doas",
        "su",
        "pkexec",
        "run0",
        "runuser",
        "setpriv",
        "capsh",
        "nice",
        "ionice",
        "nohup",
        "timeout",
        "watch",
        "time",
        "strace",
        "ltrace",
        "gdb",
        "lldb",
        "valgrind",
        "perf",
        "chroot",
        "unshare",
        "nsenter",
        "setsid",
        "stdbuf",
        "taskset",
        "chrt",
        "flock",
        "script",
        "expect",
        "parallel",
        "entr",
        "systemd-run",
        "at",
        "batch",
        "crontab",
        "tmux",
        "screen",
        "firejail",
        "bwrap",
        "flatpak",
        "nix",
        "nix-shell",
        "command",
        "builtin",
        "docker",
        "podman",
        "kubectl",
        "xdg-open",
        "open",
    ];
    const SHELL_NAMES: &[&str] = &[
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "mksh",
        "fish",
        "csh",
        "tcsh",
        "busybox",
        "nu",
        "elvish",
        "xonsh",
        "pwsh",
        "powershell",
    ];
    const INTERPRETER_PREFIXES: &[&str] = &[
        "python",
        "pypy",
        "perl",
        "ruby",
        "node",
        "php",
        "lua",
        "tclsh",
        "wish",
        "rscript",
        "julia",
        "java",
        "jshell",
        "deno",
        "bun",
        "osascript",
        "guile",
        "racket",
        "sbcl",
        "runghc",
        "tsx",
        "ts-node",
        "awk",
        "gawk",
        "mawk",
        "nawk",
    ];
    const BUILD_TOOLS: &[&str] = &[
        "make", "gmake", "cmake", "ninja", "meson", "just", "rake", "gradle", "gradlew", "mvn",
        "ant", "bazel", "cargo", "go", "npm", "npx", "yarn", "pnpm", "pip", "pip3", "pipx", "uv",
        "poetry", "bundle", "gem", "mix", "dotnet",
    ];
    let lower = name.to_ascii_lowercase();
    if WRAPPERS.contains(&name) {
        return Some("it runs the command given in its arguments");
    }
    if SHELL_NAMES.contains(&name) {
        return Some("a shell runs any command");
    }
    if INTERPRETER_PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return Some("an interpreter runs any code it is given");
    }
    if BUILD_TOOLS.contains(&name) {
        return Some("it runs build scripts, tests, tasks or plugins from the project");
    }
    match name {
        "find" => Some("`-exec`, `-execdir`, `-ok`"),
        "fd" | "fdfind" => Some("`-x`, `--exec`, `--exec-batch`"),
        "rg" => Some("`--pre`"),
        "sort" => Some("`--compress-program`"),
        "tar" => Some("`--to-command`, `-I`, `--use-compress-program`, `--checkpoint-action=exec`"),
        "zip" => Some("`-TT`, `--unzip-command`"),
        "rsync" => Some("`-e`, `--rsh`, `--rsync-path`"),
        "ssh" | "scp" | "sftp" => Some("remote commands, `ProxyCommand`, `-S`"),
        "vi" | "vim" | "nvim" | "view" | "emacs" | "ed" | "ex" | "less" | "more" | "man" => {
            Some("shell escapes such as `!cmd` and pager or filter settings")
        }
        "apt" | "apt-get" | "dpkg" => Some("hooks set with `-o`"),
        _ => None,
    }
}

// ----------------------------------------------------------------------------------------------
// Showing things in reasons
// ----------------------------------------------------------------------------------------------

/// `text` cut to [`MAX_SHOWN`] characters, with control characters escaped.
fn show(text: &str) -> String {
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
fn render_words<I, S>(words: I) -> String
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
