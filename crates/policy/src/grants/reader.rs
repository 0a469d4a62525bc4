//! Walking one grant file's TOML with its spans, so that every problem carries its line.

use std::path::Path;

use proto::{Class, Timestamp};
use serde_spanned::Spanned;
use toml::de::{DeTable, DeValue};

use super::on_arguments::ArgumentRule;
use super::rules::{HostRule, PathRule, host_rule, path_rule};
use super::{Approval, Grant, KEYS, OnUntrusted, Origin, ParsedFile, Problem, problem};
use crate::args::ToolName;
use crate::shell::{prefix_warning, prefix_words};

/// Reads one grant file's text; `file` names it in problems, `home` expands `~`.
pub fn parse_file(text: &str, file: &Path, home: &Path) -> ParsedFile {
    let lines = Lines::new(text);
    let mut out = ParsedFile::default();
    let root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(error) => {
            let line = error.span().map(|s| lines.of(s.start));
            let message = error.message().trim().to_string();
            out.problems
                .push(problem(file, line, format!("not valid TOML: {message}")));
            return out;
        }
    };
    for (key, value) in root.get_ref().iter() {
        let line = Some(lines.of(key.span().start));
        if key.get_ref().as_ref() != "grant" {
            out.problems.push(problem(
                file,
                line,
                format!(
                    "unknown top-level key {:?}; a grant file holds [[grant]] tables",
                    key.get_ref().as_ref()
                ),
            ));
            continue;
        }
        let DeValue::Array(tables) = value.get_ref() else {
            out.problems.push(problem(
                file,
                line,
                "grant must be written as [[grant]] tables".to_string(),
            ));
            continue;
        };
        for table in tables.iter() {
            let line = lines.of(table.span().start);
            let DeValue::Table(table) = table.get_ref() else {
                out.problems.push(problem(
                    file,
                    Some(line),
                    "each grant must be a table".to_string(),
                ));
                continue;
            };
            let mut reader = GrantReader {
                file,
                home,
                lines: &lines,
                problems: &mut out.problems,
                warnings: &mut out.warnings,
            };
            if super::downstream::names_downstream(table) {
                reader.read_downstream(table, line, &mut out.downstream);
            } else {
                out.grants.extend(reader.read(table, line));
            }
        }
    }
    // Tables come back in key order, not file order: report in the order of the file.
    out.problems.sort_by_key(|p| p.line);
    out.warnings.sort_by_key(|p| p.line);
    out
}

/// Byte offsets of line starts, to turn a span into a line number.
pub(super) struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
        Lines { starts }
    }

    pub(super) fn of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

pub(super) type Value<'a> = Spanned<DeValue<'a>>;

/// What `max_taint` says: a class, or that only the values a call carries count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MaxTaint {
    Class(Class),
    Carried,
}

impl MaxTaint {
    fn class(self) -> Option<Class> {
        match self {
            MaxTaint::Class(class) => Some(class),
            MaxTaint::Carried => None,
        }
    }
}

/// What [`GrantReader::terms`] reads: the keys of a grant that are not about what it covers.
pub(super) struct Terms {
    pub(super) class: Class,
    pub(super) max_taint: Option<Class>,
    pub(super) carried: bool,
    pub(super) untrusted: bool,
    pub(super) approval: Approval,
    pub(super) on_untrusted: OnUntrusted,
    pub(super) expires: Option<Timestamp>,
    pub(super) args: Vec<ArgumentRule>,
    pub(super) per_session: Option<u64>,
}

pub(super) struct GrantReader<'r> {
    pub(super) file: &'r Path,
    home: &'r Path,
    pub(super) lines: &'r Lines,
    problems: &'r mut Vec<Problem>,
    warnings: &'r mut Vec<Problem>,
}

impl GrantReader<'_> {
    pub(super) fn say(&mut self, line: usize, message: String) {
        self.problems.push(problem(self.file, Some(line), message));
    }

    /// How many problems this file has so far.
    pub(super) fn problem_count(&self) -> usize {
        self.problems.len()
    }

    pub(super) fn line_of(&self, value: &Value<'_>) -> usize {
        self.lines.of(value.span().start)
    }

    /// The grants of one `[[grant]]` table: one per tool it names (a string, a group or a
    /// list of both), all with the table's id and origin; none when anything is wrong.
    fn read(&mut self, table: &DeTable<'_>, line: usize) -> Vec<Grant> {
        let before = self.problems.len();
        let field = |name: &str| -> Option<&Value<'_>> {
            table
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == name)
                .map(|(_, v)| v)
        };
        for (key, _) in table.iter() {
            let name = key.get_ref().as_ref();
            if !KEYS.contains(&name) {
                let at = self.lines.of(key.span().start);
                self.say(
                    at,
                    format!(
                        "unknown key {name:?} in a grant; the keys are {}",
                        KEYS.join(", ")
                    ),
                );
            }
        }
        let id = match field("id") {
            None => {
                self.say(line, "a grant needs an id".to_string());
                None
            }
            Some(v) => self.id(v),
        };
        let tool = match field("tool") {
            None => {
                self.say(line, "a grant needs a tool".to_string());
                None
            }
            Some(v) => self.tools(v),
        };
        let deny = field("deny")
            .and_then(|v| self.boolean(v, "deny"))
            .unwrap_or(false);
        let paths = field("paths")
            .map(|v| self.paths(v, deny))
            .unwrap_or_default();
        let hosts = field("hosts").map(|v| self.hosts(v)).unwrap_or_default();
        let commands = field("commands")
            .map(|v| self.commands(v))
            .unwrap_or_default();
        let terms = self.terms(&field);
        self.check_deny_terms(deny, &terms, line, &field);
        let Terms {
            class,
            max_taint,
            carried,
            untrusted,
            approval,
            on_untrusted,
            expires,
            args,
            per_session,
        } = terms;
        let tags = field("tags").map(|v| self.tags(v)).unwrap_or_default();
        let Some(tools) = tool else {
            return Vec::new();
        };
        for &tool in &tools {
            self.check_constraints(tool, deny, line, &paths, &hosts, &commands, &field);
            self.check_tags(tool, deny, line, &tags, &field);
            self.check_arguments(tool, &args, line, &field);
        }
        let Some(id) = id else {
            return Vec::new();
        };
        if self.problems.len() > before {
            return Vec::new();
        }
        let grant = Grant {
            id,
            tool: ToolName::ReadFile,
            paths,
            hosts,
            commands,
            class,
            untrusted,
            approval,
            max_taint,
            carried,
            on_untrusted,
            expires,
            deny,
            tags,
            args,
            per_session,
            origin: Origin {
                file: self.file.to_path_buf(),
                line,
            },
        };
        tools
            .into_iter()
            .map(|tool| Grant {
                tool,
                ..grant.clone()
            })
            .collect()
    }

    #[allow(clippy::too_many_arguments)]
    fn check_constraints<'v>(
        &mut self,
        tool: ToolName,
        deny: bool,
        line: usize,
        paths: &[PathRule],
        hosts: &[HostRule],
        commands: &[Vec<String>],
        field: &dyn Fn(&str) -> Option<&'v Value<'v>>,
    ) {
        let name = tool.as_str();
        let at = |key: &str, this: &Self| field(key).map_or(line, |v| this.line_of(v));
        let runs_scripts = tool.runs_commands();
        let takes_paths = tool.is_path_tool() || runs_scripts;
        if !paths.is_empty() && !takes_paths {
            let line = at("paths", self);
            self.say(line, format!("{name} does not take paths"));
        }
        if !hosts.is_empty() && !tool.fetches_urls() {
            let line = at("hosts", self);
            if !runs_scripts {
                self.say(line, format!("{name} does not take hosts"));
            } else if deny {
                // On shell and bash_bg, hosts give an allowed command's box network; they never
                // choose which calls a grant covers, so a deny grant cannot use them.
                self.say(
                    line,
                    format!(
                        "a deny grant of {name} does not take hosts: hosts give the box of an allowed {name} call network, they do not narrow what a grant covers"
                    ),
                );
            }
        }
        if !commands.is_empty() && !runs_scripts {
            let line = at("commands", self);
            self.say(line, format!("{name} does not take commands"));
        }
        if deny {
            return; // a deny grant without constraints forbids every call of its tool
        }
        // "needs" only when the key is missing or an empty list: a key whose entries were all
        // wrong has its own problems already.
        let unset = |key: &str| match field(key).map(|v| v.get_ref()) {
            None => true,
            Some(DeValue::Array(items)) => items.is_empty(),
            Some(_) => false,
        };
        // One problem per grant: a tool's hosts first (`git_clone` needs paths too).
        if tool.fetches_urls() && hosts.is_empty() && unset("hosts") {
            let verb = if tool == ToolName::GitClone {
                "clone"
            } else {
                "fetch"
            };
            self.say(
                line,
                format!("{name} needs hosts: the hosts it may {verb} from"),
            );
        } else if tool.is_path_tool() && paths.is_empty() && unset("paths") {
            self.say(
                line,
                format!("{name} needs paths: the files and folders it may open"),
            );
        } else if runs_scripts && commands.is_empty() && unset("commands") {
            self.say(
                line,
                format!("{name} needs commands: the command prefixes it may run"),
            );
        }
    }

    /// Each rule on an argument names one `tool` takes (a table naming several tools: each
    /// of them).
    fn check_arguments<'v>(
        &mut self,
        tool: ToolName,
        rules: &[ArgumentRule],
        line: usize,
        field: &dyn Fn(&str) -> Option<&'v Value<'v>>,
    ) {
        let names: Vec<&str> = tool.facts().args.iter().map(|a| a.name.as_ref()).collect();
        for rule in rules {
            if !names.contains(&rule.argument.as_str()) {
                let at = field("args").map_or(line, |v| self.line_of(v));
                self.say(
                    at,
                    format!(
                        "args names {:?}, which {} does not take; its arguments are {}",
                        rule.argument,
                        tool.as_str(),
                        names.join(", ")
                    ),
                );
            }
        }
    }

    /// `tags` limit an allow grant of a memory tool; any other grant cannot take them.
    fn check_tags<'v>(
        &mut self,
        tool: ToolName,
        deny: bool,
        line: usize,
        tags: &[String],
        field: &dyn Fn(&str) -> Option<&'v Value<'v>>,
    ) {
        if tags.is_empty() {
            return;
        }
        let line = field("tags").map_or(line, |v| self.line_of(v));
        if !tool.is_memory() {
            self.say(line, format!("{} does not take tags", tool.as_str()));
        } else if deny {
            self.say(
                line,
                format!(
                    "a deny grant forbids all of {}; tags only limit an allow grant",
                    tool.as_str()
                ),
            );
        }
    }

    fn tags(&mut self, value: &Value<'_>) -> Vec<String> {
        let written: Vec<String> = self
            .strings(value, "tags")
            .into_iter()
            .map(|(tag, _)| tag)
            .collect();
        match crate::memory::check_tags(&written) {
            Ok(tags) => tags,
            Err(message) => {
                let line = self.line_of(value);
                self.say(line, message);
                Vec::new()
            }
        }
    }

    pub(super) fn string<'v>(&mut self, value: &'v Value<'_>, key: &str) -> Option<&'v str> {
        match value.get_ref() {
            DeValue::String(text) => Some(text.as_ref()),
            _ => {
                let line = self.line_of(value);
                self.say(line, format!("{key} must be a string"));
                None
            }
        }
    }

    pub(super) fn strings(&mut self, value: &Value<'_>, key: &str) -> Vec<(String, usize)> {
        let DeValue::Array(items) = value.get_ref() else {
            let line = self.line_of(value);
            self.say(line, format!("{key} must be a list of strings"));
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items.iter() {
            let line = self.line_of(item);
            match item.get_ref() {
                DeValue::String(text) => out.push((text.to_string(), line)),
                _ => self.say(line, format!("{key} must be a list of strings")),
            }
        }
        out
    }

    pub(super) fn id(&mut self, value: &Value<'_>) -> Option<String> {
        let text = self.string(value, "id")?.to_string();
        let valid = !text.is_empty()
            && text.len() <= 64
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if valid {
            Some(text)
        } else {
            let line = self.line_of(value);
            self.say(
                line,
                format!("id {text:?} must be 1 to 64 letters, digits, '-', '_' or '.'"),
            );
            None
        }
    }

    /// `tool = "read_file"`, `tool = "read"` (a group) or `tool = ["read", "edit_file"]`: the
    /// tools named, each once, in the order written.
    fn tools(&mut self, value: &Value<'_>) -> Option<Vec<ToolName>> {
        let names: Vec<(String, usize)> = match value.get_ref() {
            DeValue::String(text) => vec![(text.to_string(), self.line_of(value))],
            DeValue::Array(_) => self.strings(value, "tool"),
            _ => {
                let line = self.line_of(value);
                self.say(
                    line,
                    "tool must be a string or a list of strings".to_string(),
                );
                return None;
            }
        };
        if names.is_empty() {
            let line = self.line_of(value);
            self.say(line, "tool names no tool".to_string());
            return None;
        }
        let mut tools = Vec::new();
        let mut wrong = false;
        for (text, line) in names {
            let named: Vec<ToolName> = match text.as_str() {
                "read" => ToolName::READ_GROUP.to_vec(),
                "write" => ToolName::WRITE_GROUP.to_vec(),
                other => match ToolName::parse(other) {
                    Some(tool) if tool.granted_by() != tool => {
                        self.say(
                            line,
                            format!(
                                "{text} is not granted by name: a {} grant covers it for the session's own jobs",
                                tool.granted_by().as_str()
                            ),
                        );
                        wrong = true;
                        continue;
                    }
                    Some(tool) => vec![tool],
                    None => {
                        self.say(
                            line,
                            format!(
                                "unknown tool {text:?}; the known tools are {}, and the groups read and write",
                                ToolName::known_list()
                            ),
                        );
                        wrong = true;
                        continue;
                    }
                },
            };
            for tool in named {
                if !tools.contains(&tool) {
                    tools.push(tool);
                }
            }
        }
        (!wrong).then_some(tools)
    }

    /// The keys every allow or deny grant shares, each with its default: the labels, the
    /// approval, the rule after untrusted input, the expiry.
    pub(super) fn terms<'v>(&mut self, field: &dyn Fn(&str) -> Option<&'v Value<'v>>) -> Terms {
        let max_taint = field("max_taint").and_then(|v| self.max_taint(v));
        Terms {
            class: field("class")
                .and_then(|v| self.class(v, "class"))
                .unwrap_or(Class::Private),
            max_taint: max_taint.and_then(MaxTaint::class),
            carried: max_taint == Some(MaxTaint::Carried),
            untrusted: field("untrusted")
                .and_then(|v| self.boolean(v, "untrusted"))
                .unwrap_or(true),
            approval: field("approval")
                .and_then(|v| self.approval(v))
                .unwrap_or(Approval::Auto),
            on_untrusted: field("on_untrusted")
                .and_then(|v| self.on_untrusted(v))
                .unwrap_or(OnUntrusted::Ask),
            expires: field("expires").and_then(|v| self.expires(v)),
            args: field("args")
                .map(|v| self.argument_rules(v))
                .unwrap_or_default(),
            per_session: field("per_session").and_then(|v| self.per_session(v)),
        }
    }

    /// A deny grant forbids every call it covers: rules on arguments and a count per session
    /// would narrow nothing, so it takes neither.
    pub(super) fn check_deny_terms<'v>(
        &mut self,
        deny: bool,
        terms: &Terms,
        line: usize,
        field: &dyn Fn(&str) -> Option<&'v Value<'v>>,
    ) {
        if !deny {
            return;
        }
        for (key, set) in [
            ("args", !terms.args.is_empty()),
            ("per_session", terms.per_session.is_some()),
        ] {
            if set {
                let at = field(key).map_or(line, |v| self.line_of(v));
                self.say(
                    at,
                    format!("a deny grant forbids every call it covers; it takes no {key}"),
                );
            }
        }
    }

    fn approval(&mut self, value: &Value<'_>) -> Option<Approval> {
        self.word(value, "approval", &["auto", "ask"])
            .map(|w| match w {
                "ask" => Approval::Ask,
                _ => Approval::Auto,
            })
    }

    fn on_untrusted(&mut self, value: &Value<'_>) -> Option<OnUntrusted> {
        self.word(
            value,
            "on_untrusted",
            &["allow", "ask", "deny", "provenance"],
        )
        .map(|w| match w {
            "allow" => OnUntrusted::Allow,
            "deny" => OnUntrusted::Deny,
            "provenance" => OnUntrusted::Provenance,
            _ => OnUntrusted::Ask,
        })
    }

    /// `max_taint`: a class, or `"carried"`.
    fn max_taint(&mut self, value: &Value<'_>) -> Option<MaxTaint> {
        let word = self.word(
            value,
            "max_taint",
            &["public", "private", "secret", "carried"],
        )?;
        Some(match word {
            "public" => MaxTaint::Class(Class::Public),
            "private" => MaxTaint::Class(Class::Private),
            "secret" => MaxTaint::Class(Class::Secret),
            _ => MaxTaint::Carried,
        })
    }

    pub(super) fn class(&mut self, value: &Value<'_>, key: &str) -> Option<Class> {
        let word = self.word(value, key, &["public", "private", "secret"])?;
        Some(match word {
            "public" => Class::Public,
            "secret" => Class::Secret,
            _ => Class::Private,
        })
    }

    pub(super) fn word(
        &mut self,
        value: &Value<'_>,
        key: &str,
        allowed: &[&'static str],
    ) -> Option<&'static str> {
        let text = self.string(value, key)?;
        let found = allowed.iter().copied().find(|w| *w == text);
        if found.is_none() {
            let line = self.line_of(value);
            self.say(
                line,
                format!(
                    "{key} is {text:?}; it must be one of {}",
                    allowed.join(", ")
                ),
            );
        }
        found
    }

    pub(super) fn boolean(&mut self, value: &Value<'_>, key: &str) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                let line = self.line_of(value);
                self.say(line, format!("{key} must be true or false"));
                None
            }
        }
    }

    pub(super) fn expires(&mut self, value: &Value<'_>) -> Option<Timestamp> {
        let text = match value.get_ref() {
            DeValue::Datetime(at) => at.to_string(),
            DeValue::String(text) => text.to_string(),
            _ => {
                let line = self.line_of(value);
                self.say(
                    line,
                    "expires must be an RFC 3339 date and time".to_string(),
                );
                return None;
            }
        };
        match Timestamp::parse(&text) {
            Ok(at) => Some(at),
            Err(_) => {
                let line = self.line_of(value);
                self.say(
                    line,
                    format!(
                        "expires {text:?} is not an RFC 3339 date and time with an offset, such as 2026-12-31T00:00:00Z"
                    ),
                );
                None
            }
        }
    }

    pub(super) fn paths(&mut self, value: &Value<'_>, deny: bool) -> Vec<PathRule> {
        let mut rules = Vec::new();
        for (written, line) in self.strings(value, "paths") {
            match path_rule(&written, self.home, deny) {
                Ok(rule) => {
                    if let Some(literal) = rule.literal_exists(self.home).filter(|_| !deny) {
                        self.warnings.push(problem(
                            self.file,
                            Some(line),
                            format!(
                                "path {written:?} reads as a glob, but {} exists: to mean that folder, escape each of * ? [ {{ with a backslash",
                                literal.display()
                            ),
                        ));
                    }
                    rules.push(rule);
                }
                Err(error) => self.say(line, error.to_string()),
            }
        }
        rules
    }

    pub(super) fn hosts(&mut self, value: &Value<'_>) -> Vec<HostRule> {
        let mut rules = Vec::new();
        for (written, line) in self.strings(value, "hosts") {
            match host_rule(&written) {
                Ok(rule) => rules.push(rule),
                Err(error) => self.say(line, error.to_string()),
            }
        }
        rules
    }

    fn commands(&mut self, value: &Value<'_>) -> Vec<Vec<String>> {
        let mut prefixes = Vec::new();
        for (written, line) in self.strings(value, "commands") {
            match prefix_words(&written) {
                Ok(words) if words.is_empty() => {
                    self.say(line, "a command prefix cannot be empty".to_string());
                }
                Ok(words) => {
                    if let Some(warning) = prefix_warning(&words) {
                        self.warnings.push(problem(self.file, Some(line), warning));
                    }
                    prefixes.push(words);
                }
                Err(message) => self.say(line, format!("command prefix {written:?}: {message}")),
            }
        }
        prefixes
    }
}
