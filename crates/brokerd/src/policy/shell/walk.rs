//! The walk over one parsed script: every simple command is decoded word by word and compared
//! with the granted prefixes; `sh -c` scripts are queued to be read in turn.

use std::collections::VecDeque;

use brush_parser::ast;

use super::builtins::refuse_builtins;
use super::screen::parse;
use super::show::{render_words, show};
use super::words::{Literal, decode_word, looks_like_assignment};
use super::{MAX_NESTING, MAX_SHELL_DEPTH, Mode, NotCovered};

/// Checks one script (the call's, or an `sh -c` script inside it), queueing its own `sh -c`
/// scripts.
pub(super) fn check_one(
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
        let matches = match self.mode {
            Mode::Cover => prefix_matches,
            Mode::Touch => prefix_touches,
        };
        if self.prefixes.iter().any(|prefix| matches(prefix, &words)) {
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

/// Whether a deny prefix (non-empty) touches the command `words`: the program is the prefix's
/// first word (by name, so `/usr/bin/git` is `git`), and the prefix's other words appear in the
/// command in order, anywhere after it. So `git push` touches `git --no-pager push` and
/// `git -C . push origin`; it also touches `git log --grep push`, which errs on the side of the
/// refusal a deny grant asks for.
fn prefix_touches(prefix: &[String], words: &[Literal]) -> bool {
    let (Some(program), Some(first)) = (prefix.first(), words.first()) else {
        return false;
    };
    let name = first.text.rsplit('/').next().unwrap_or(&first.text);
    if first.text != *program && name != program {
        return false;
    }
    let mut rest = words.iter().skip(1);
    prefix
        .iter()
        .skip(1)
        .all(|want| rest.any(|word| word.text == *want))
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
