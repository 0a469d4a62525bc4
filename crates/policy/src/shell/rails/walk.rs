//! The parsed script flattened for the rails: every simple command's words (in control flow,
//! function bodies, subshells, groups and process substitutions too), every redirection, and
//! each function definition with the calls its body makes.

use brush_parser::ast;

/// A script flattened.
#[derive(Debug, Default)]
pub(super) struct Flat {
    /// The raw words of each simple command, the command name first.
    pub(super) commands: Vec<Vec<String>>,
    /// Each redirection's target: whether it writes, and the raw word.
    pub(super) redirects: Vec<(bool, String)>,
    /// The functions the script defines.
    pub(super) functions: Vec<Function>,
}

/// A function definition and the commands its body calls.
#[derive(Debug)]
pub(super) struct Function {
    /// The function's name.
    pub(super) name: String,
    /// Each command name its body calls, and whether that call multiplies processes (in a
    /// pipeline of two or more, or sent to the background).
    pub(super) calls: Vec<(String, bool)>,
}

/// `program` flattened.
pub(super) fn flatten(program: &ast::Program) -> Flat {
    let mut walker = Walker {
        flat: Flat::default(),
        open: Vec::new(),
    };
    for list in &program.complete_commands {
        walker.list(list, false);
    }
    walker.flat
}

struct Walker {
    flat: Flat,
    /// The functions whose bodies are being walked (indexes into `flat.functions`).
    open: Vec<usize>,
}

impl Walker {
    fn list(&mut self, list: &ast::CompoundList, multiplied: bool) {
        for ast::CompoundListItem(and_or, separator) in &list.0 {
            let background = multiplied || matches!(separator, ast::SeparatorOperator::Async);
            self.pipeline(&and_or.first, background);
            for next in &and_or.additional {
                match next {
                    ast::AndOr::And(pipeline) | ast::AndOr::Or(pipeline) => {
                        self.pipeline(pipeline, background);
                    }
                }
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, background: bool) {
        let multiplied = background || pipeline.seq.len() > 1;
        for command in &pipeline.seq {
            self.command(command, multiplied);
        }
    }

    fn command(&mut self, command: &ast::Command, multiplied: bool) {
        match command {
            ast::Command::Simple(simple) => self.simple(simple, multiplied),
            ast::Command::Compound(compound, redirects) => {
                if let Some(redirects) = redirects {
                    for redirect in &redirects.0 {
                        self.redirect(redirect);
                    }
                }
                self.compound(compound, multiplied);
            }
            ast::Command::Function(function) => {
                self.flat.functions.push(Function {
                    name: function.fname.value.clone(),
                    calls: Vec::new(),
                });
                self.open.push(self.flat.functions.len() - 1);
                let ast::FunctionBody(body, redirects) = &function.body;
                if let Some(redirects) = redirects {
                    for redirect in &redirects.0 {
                        self.redirect(redirect);
                    }
                }
                self.compound(body, false);
                self.open.pop();
            }
            ast::Command::ExtendedTest(_) => {}
        }
    }

    fn compound(&mut self, compound: &ast::CompoundCommand, multiplied: bool) {
        match compound {
            ast::CompoundCommand::BraceGroup(group) => self.list(&group.list, multiplied),
            ast::CompoundCommand::Subshell(subshell) => self.list(&subshell.list, multiplied),
            ast::CompoundCommand::ForClause(clause) => self.list(&clause.body.list, multiplied),
            ast::CompoundCommand::ArithmeticForClause(clause) => {
                self.list(&clause.body.list, multiplied);
            }
            ast::CompoundCommand::CaseClause(clause) => {
                for item in &clause.cases {
                    if let Some(list) = &item.cmd {
                        self.list(list, multiplied);
                    }
                }
            }
            ast::CompoundCommand::IfClause(clause) => {
                self.list(&clause.condition, multiplied);
                self.list(&clause.then, multiplied);
                for other in clause.elses.iter().flatten() {
                    if let Some(condition) = &other.condition {
                        self.list(condition, multiplied);
                    }
                    self.list(&other.body, multiplied);
                }
            }
            ast::CompoundCommand::WhileClause(ast::WhileOrUntilClauseCommand(cond, body, _))
            | ast::CompoundCommand::UntilClause(ast::WhileOrUntilClauseCommand(cond, body, _)) => {
                self.list(cond, multiplied);
                self.list(&body.list, multiplied);
            }
            ast::CompoundCommand::Arithmetic(_) => {}
        }
    }

    fn simple(&mut self, command: &ast::SimpleCommand, multiplied: bool) {
        let mut all = Vec::new();
        // Before the name: assignments (not words of the command) and redirections.
        for item in command.prefix.iter().flat_map(|p| &p.0) {
            self.item(item, None);
        }
        if let Some(name) = &command.word_or_name {
            all.push(name.value.clone());
        }
        for item in command.suffix.iter().flat_map(|s| &s.0) {
            self.item(item, Some(&mut all));
        }
        if all.is_empty() {
            return;
        }
        if let Some(&open) = self.open.last() {
            self.flat.functions[open]
                .calls
                .push((all[0].clone(), multiplied));
        }
        self.flat.commands.push(all);
    }

    /// One item around a command; its words go to `words` (after the name: `dd of=…` is a
    /// word there, even when it looks like an assignment).
    fn item(&mut self, item: &ast::CommandPrefixOrSuffixItem, words: Option<&mut Vec<String>>) {
        match item {
            ast::CommandPrefixOrSuffixItem::IoRedirect(redirect) => self.redirect(redirect),
            ast::CommandPrefixOrSuffixItem::ProcessSubstitution(_, subshell) => {
                self.list(&subshell.list, true);
            }
            ast::CommandPrefixOrSuffixItem::Word(word)
            | ast::CommandPrefixOrSuffixItem::AssignmentWord(_, word) => {
                if let Some(words) = words {
                    words.push(word.value.clone());
                }
            }
        }
    }

    fn redirect(&mut self, redirect: &ast::IoRedirect) {
        match redirect {
            ast::IoRedirect::File(_, kind, target) => {
                let writes = matches!(
                    kind,
                    ast::IoFileRedirectKind::Write
                        | ast::IoFileRedirectKind::Append
                        | ast::IoFileRedirectKind::ReadAndWrite
                        | ast::IoFileRedirectKind::Clobber
                        | ast::IoFileRedirectKind::DuplicateOutput
                );
                match target {
                    ast::IoFileRedirectTarget::Filename(word)
                    | ast::IoFileRedirectTarget::Duplicate(word) => {
                        self.flat.redirects.push((writes, word.value.clone()));
                    }
                    ast::IoFileRedirectTarget::ProcessSubstitution(_, subshell) => {
                        self.list(&subshell.list, true);
                    }
                    ast::IoFileRedirectTarget::Fd(_) => {}
                }
            }
            ast::IoRedirect::OutputAndError(word, _) => {
                self.flat.redirects.push((true, word.value.clone()));
            }
            ast::IoRedirect::HereDocument(..) | ast::IoRedirect::HereString(..) => {}
        }
    }
}
