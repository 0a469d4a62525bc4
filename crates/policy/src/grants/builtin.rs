//! A `[[grant]]` table of boxmaker's own tools: one grant per tool it names, with the
//! constraints each tool takes (paths, hosts, commands, tags, rules on its arguments).

use toml::de::{DeTable, DeValue};

use super::on_arguments::ArgumentRule;
use super::reader::{GrantReader, Value};
use super::rules::{HostRule, PathRule};
use super::terms::Terms;
use super::{Grant, KEYS, Origin};
use crate::args::ToolName;

impl GrantReader<'_> {
    /// The grants of one `[[grant]]` table: one per tool it names (a string, a group or a
    /// list of both), all with the table's id and origin; none when anything is wrong.
    pub(super) fn read(&mut self, table: &DeTable<'_>, line: usize) -> Vec<Grant> {
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
}
