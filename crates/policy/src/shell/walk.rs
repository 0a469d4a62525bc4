//! The walk over one parsed script: every simple command is decoded word by word and, depending
//! on the mode, compared with the granted prefixes, matched against deny prefixes, or read for
//! the files it writes; `sh -c` scripts are queued to be read in turn, each with its shell's
//! dialect.

use std::collections::VecDeque;

use brush_parser::ast;

use super::builtins::refuse_builtins;
use super::runners::{SHELL_NAMES, basename};
use super::screen::parse;
use super::show::{render_words, show};
use super::touch::command_touches;
use super::words::{Literal, decode_word, looks_like_assignment};
use super::writes::Writes;
use super::{Dialect, MAX_NESTING, MAX_SHELL_DEPTH, Mode, NotCovered, PathEnforcement, git};

/// A script waiting to be read: its text, its `sh -c` depth and the shell that runs it.
pub(super) type Pending = (String, usize, Dialect);

/// What one walk (a script and its `sh -c` scripts) shares.
pub(super) struct Context<'a> {
    pub(super) prefixes: &'a [Vec<String>],
    pub(super) mode: Mode,
    /// Whether the box enforces paths (then redirections are read, not refused).
    pub(super) walls: PathEnforcement,
    /// Scripts of `sh -c` waiting to be read.
    pub(super) inner: VecDeque<Pending>,
    /// What the commands write (in [`Mode::Writes`]).
    pub(super) writes: Writes,
}

/// Checks one script (the call's, or an `sh -c` script inside it), queueing its own `sh -c`
/// scripts; returns how many commands a prefix matched.
pub(super) fn check_one(
    ctx: &mut Context<'_>,
    script: &str,
    depth: usize,
    dialect: Dialect,
) -> Result<usize, NotCovered> {
    if depth > MAX_SHELL_DEPTH {
        return Err(NotCovered::TooDeep);
    }
    let program = parse(script, dialect, ctx.walls)?;
    let mut walker = Walker {
        ctx,
        nesting: 0,
        commands: 0,
        hits: 0,
        depth,
        dialect,
    };
    for list in &program.complete_commands {
        walker.list(list)?;
    }
    if walker.commands == 0 {
        return Err(NotCovered::Empty);
    }
    Ok(walker.hits)
}

/// Walks one parsed script.
struct Walker<'a, 'b> {
    ctx: &'a mut Context<'b>,
    /// Current nesting of subshells and brace groups.
    nesting: usize,
    /// Simple commands seen.
    commands: usize,
    /// Simple commands a prefix matched.
    hits: usize,
    /// `sh -c` depth of this script.
    depth: usize,
    /// The shell that runs this script.
    dialect: Dialect,
}

impl Walker<'_, '_> {
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
                for redirect in redirects.iter().flat_map(|r| &r.0) {
                    self.redirect(redirect)?;
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
        for item in command.prefix.iter().flat_map(|p| &p.0) {
            match item {
                ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => self.redirect(redirect)?,
                other => return Err(item_problem(other)),
            }
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
                    ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => {
                        self.redirect(redirect)?;
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
            let literal = decode_word(word).map_err(|problem| problem.not_covered(word))?;
            if self.dialect == Dialect::Posix && literal.inner_tilde {
                return Err(NotCovered::ShellDialect(format!(
                    "`{}` (a `~` inside a word: bash expands it after `=` or `:`, sh never does)",
                    show(word)
                )));
            }
            words.push(literal);
        }
        self.commands += 1;

        refuse_builtins(&words)?;
        match self.ctx.mode {
            Mode::Cover => self.cover(&words, &raw),
            Mode::Touch => {
                let depth = self.depth + 1;
                let Context {
                    prefixes, inner, ..
                } = &mut *self.ctx;
                let mut queue = |text: String, dialect: Dialect| {
                    inner.push_back((text, depth, dialect));
                };
                if command_touches(prefixes, &words, &mut queue) {
                    self.hits += 1;
                }
                Ok(())
            }
            Mode::Writes => self.writes(&words),
        }
    }

    /// A redirection: refused where the box does not enforce paths; otherwise the file it names
    /// is a place the call writes (read or written, checked the same way), and a descriptor's
    /// duplication or closing is nothing to check. Heredocs, here-strings and process
    /// substitution are refused.
    fn redirect(&mut self, redirect: &ast::IoRedirect) -> Result<(), NotCovered> {
        let refused = || NotCovered::Redirection(show(&redirect.to_string()));
        if self.ctx.walls == PathEnforcement::Unenforced {
            return Err(refused());
        }
        let file = match redirect {
            ast::IoRedirect::File(_, _, ast::IoFileRedirectTarget::Filename(word)) => word,
            ast::IoRedirect::File(_, _, ast::IoFileRedirectTarget::Fd(_)) => return Ok(()),
            ast::IoRedirect::File(_, _, ast::IoFileRedirectTarget::Duplicate(word)) => {
                let fd = word.value.strip_suffix('-').unwrap_or(&word.value);
                if fd.bytes().all(|b| b.is_ascii_digit()) {
                    // `>&2`, `2>&1`, `<&-`, `>&3-`: descriptors only.
                    return Ok(());
                }
                // bash's `>&FILE` is `&>FILE`.
                word
            }
            ast::IoRedirect::File(
                _,
                _,
                ast::IoFileRedirectTarget::ProcessSubstitution(kind, _),
            ) => return Err(NotCovered::Substitution(format!("{kind}(…)"))),
            ast::IoRedirect::OutputAndError(word, _) => word,
            ast::IoRedirect::HereDocument(..) | ast::IoRedirect::HereString(..) => {
                return Err(refused());
            }
        };
        let literal =
            decode_word(&file.value).map_err(|problem| problem.not_covered(&file.value))?;
        if self.ctx.mode == Mode::Writes {
            self.ctx.writes.redirect(&literal)?;
        }
        Ok(())
    }

    /// An allow grant: the command must start with a granted prefix (git without the options
    /// that change its repository, configuration or programs), or be `sh -c SCRIPT`.
    fn cover(&mut self, words: &[Literal], raw: &[&str]) -> Result<(), NotCovered> {
        if self
            .ctx
            .prefixes
            .iter()
            .any(|prefix| prefix_matches(prefix, words))
        {
            if let Some(first) = words.first()
                && basename(&first.text) == "git"
                && let Some(problem) = git::cover_problem(&words[1..])
            {
                return Err(problem);
            }
            self.hits += 1;
            return Ok(());
        }
        if let Some((script, dialect)) = shell_c_script(words)? {
            self.ctx.inner.push_back((script, self.depth + 1, dialect));
            return Ok(());
        }
        let compared = self.ctx.prefixes.iter().map(Vec::len).max().unwrap_or(0);
        for (word, raw) in words.iter().zip(raw).take(compared) {
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

    /// Write targets: what the command writes; the script of `sh -c SCRIPT` is read in turn, and
    /// a shell that reads a script the checker cannot see makes the writes unknown.
    fn writes(&mut self, words: &[Literal]) -> Result<(), NotCovered> {
        let depth = self.depth + 1;
        if let Some(first) = words.first()
            && SHELL_NAMES.contains(&basename(&first.text))
        {
            let dialect = match basename(&first.text) {
                "bash" => Dialect::Bash,
                _ => Dialect::Posix,
            };
            return match (basename(&first.text), words.get(1), words.get(2)) {
                ("sh" | "dash" | "bash", Some(flag), Some(script)) if flag.text == "-c" => {
                    self.ctx
                        .inner
                        .push_back((script.text.clone(), depth, dialect));
                    Ok(())
                }
                _ => Err(NotCovered::UnknownWrite(format!(
                    "`{}` runs a script the checker cannot see",
                    show(&first.text)
                ))),
            };
        }
        let Context { inner, writes, .. } = &mut *self.ctx;
        let mut queue = |text: String, dialect: Dialect| {
            inner.push_back((text, depth, dialect));
        };
        writes.command(words, &mut queue)
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

/// Shells whose `-c` script an allow grant's walk reads, by the words that run them (a shell
/// elsewhere could be any program).
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

/// The script of `sh -c SCRIPT [NAME [ARG…]]` (exactly that form), if `words` is one, with the
/// dialect it is read in: POSIX for `sh` and `dash`, bash for `bash`.
fn shell_c_script(words: &[Literal]) -> Result<Option<(String, Dialect)>, NotCovered> {
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
    let dialect = match basename(&shell.text) {
        "bash" => Dialect::Bash,
        _ => Dialect::Posix,
    };
    Ok(Some((script.text.clone(), dialect)))
}
