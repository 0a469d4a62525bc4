//! A call's values, read from its arguments by their roles ([`proto::tools::Role`]): what the
//! provenance check looks at.
//!
//! - A path, URL, host, recipient, amount or identifier is one value ([`ValueKind::Identifier`]).
//! - A command is a script ([`ValueKind::ShellCommand`]).
//! - Free text is prose ([`ValueKind::FreeText`]), except a string of one token (no blank in
//!   it: an IBAN, an address, a number, a name of one word), which is an identifier whatever
//!   the schema calls it: a downstream tool's arguments are free text unless its schema or its
//!   grant says more, and a lone token is a value, not prose.
//! - A search pattern or a setting (a limit, a flag) is not a value: it chooses how much or
//!   how a call reads, never what it sends or where.
//!
//! A list gives each element, an object each string, number and element inside it, under the
//! argument's role; JSON numbers are values as their text; booleans and nulls are not values.
//! An argument the tool's facts do not name is free text.

use proto::tools::{Role, ToolFacts};
use serde_json::Value as Json;

use super::{Value, ValueKind};

/// The most values taken from one call: a call with more (a list of ten thousand addresses)
/// has the rest checked as one free text per argument.
const MAX_VALUES: usize = 1024;

/// A call's values, owned: [`CallValues::values`] lends them to [`super::ValueIndex::check`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallValues {
    items: Vec<(String, ValueKind, String)>,
}

impl CallValues {
    /// The values of a call whose arguments are `arguments` (a JSON object) to a tool with
    /// `facts`.
    pub fn of(facts: &ToolFacts, arguments: &Json) -> CallValues {
        let mut out = CallValues::default();
        let Some(object) = arguments.as_object() else {
            return out;
        };
        for (name, value) in object {
            let kind = match facts.role(name) {
                Some(Role::Pattern | Role::Setting) => continue,
                Some(Role::Command) => ValueKind::ShellCommand,
                Some(Role::FreeText) | None => ValueKind::FreeText,
                Some(
                    Role::Path
                    | Role::Url
                    | Role::Host
                    | Role::Recipient
                    | Role::Amount
                    | Role::Identifier,
                ) => ValueKind::Identifier,
            };
            out.take(name, kind, value);
        }
        out
    }

    fn take(&mut self, name: &str, kind: ValueKind, value: &Json) {
        match value {
            Json::String(text) => self.push(name, kind, text.clone()),
            Json::Number(number) => self.push(name, ValueKind::Identifier, number.to_string()),
            Json::Array(items) => items.iter().for_each(|item| self.take(name, kind, item)),
            Json::Object(fields) => fields
                .values()
                .for_each(|field| self.take(name, kind, field)),
            Json::Bool(_) | Json::Null => {}
        }
    }

    fn push(&mut self, name: &str, kind: ValueKind, text: String) {
        if text.trim().is_empty() {
            return;
        }
        let kind = match kind {
            ValueKind::FreeText if !text.trim().contains(char::is_whitespace) => {
                ValueKind::Identifier
            }
            kind => kind,
        };
        if self.items.len() < MAX_VALUES {
            self.items.push((name.to_owned(), kind, text));
        } else if let Some(last) = self.items.last_mut()
            && last.0 == name
            && last.1 == ValueKind::FreeText
        {
            last.2.push('\n');
            last.2.push_str(&text);
        } else if let Some(last) = self.items.last_mut() {
            // Past the cap, the rest of the call is one free text, checked for its runs and
            // for the addresses, URLs and accounts in it.
            *last = (
                name.to_owned(),
                ValueKind::FreeText,
                format!("{}\n{text}", last.2),
            );
        }
    }

    /// The values, borrowed, in the order of the arguments.
    pub fn values(&self) -> Vec<Value<'_>> {
        self.items
            .iter()
            .map(|(name, kind, text)| Value {
                name,
                kind: *kind,
                text,
            })
            .collect()
    }

    /// Whether the call has no value to check.
    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use proto::tools::ToolName;
    use proto::tools::downstream::{Declared, facts};
    use serde_json::json;

    use super::*;

    fn listed(values: &CallValues) -> Vec<(&str, ValueKind, &str)> {
        values
            .items
            .iter()
            .map(|(n, k, t)| (n.as_str(), *k, t.as_str()))
            .collect()
    }

    #[test]
    fn a_shell_call_gives_its_script_and_its_folder_and_not_its_settings() {
        let args = json!({"command": "cargo test", "cwd": "/w", "timeout_secs": 30});
        let values = CallValues::of(ToolName::Shell.facts(), &args);
        assert_eq!(
            listed(&values),
            [
                ("command", ValueKind::ShellCommand, "cargo test"),
                ("cwd", ValueKind::Identifier, "/w"),
            ]
        );
    }

    #[test]
    fn a_lone_token_of_free_text_is_an_identifier_and_prose_stays_free_text() {
        let schema = json!({"type": "object", "properties": {
            "iban": {"type": "string"}, "amount": {"type": "number"},
            "note": {"type": "string"}, "to": {"type": "array", "items": {"type": "string"}},
            "urgent": {"type": "boolean"}
        }});
        let facts = facts(&schema, Declared::default());
        let args = json!({
            "iban": "DE89370400440532013000", "amount": 120.5,
            "note": "rent for march", "to": ["a@x.example", "b@y.example"], "urgent": true
        });
        let values = CallValues::of(&facts, &args);
        let mut got = listed(&values);
        got.sort_by_key(|(n, _, t)| (*n, *t));
        assert_eq!(
            got,
            [
                ("amount", ValueKind::Identifier, "120.5"),
                ("iban", ValueKind::Identifier, "DE89370400440532013000"),
                ("note", ValueKind::FreeText, "rent for march"),
                ("to", ValueKind::Identifier, "a@x.example"),
                ("to", ValueKind::Identifier, "b@y.example"),
            ]
        );
    }

    #[test]
    fn an_edit_gives_each_string_inside_its_objects() {
        let args =
            json!({"path": "a.rs", "edits": [{"old_string": "x", "new_string": "let y = 1;"}]});
        let values = CallValues::of(ToolName::EditFile.facts(), &args);
        let mut got = listed(&values);
        got.sort_by_key(|(n, _, t)| (*n, *t));
        assert_eq!(
            got,
            [
                ("edits", ValueKind::FreeText, "let y = 1;"),
                ("edits", ValueKind::Identifier, "x"),
                ("path", ValueKind::Identifier, "a.rs"),
            ]
        );
    }

    #[test]
    fn past_the_cap_the_rest_of_a_call_is_one_free_text_and_nothing_is_lost() {
        let many: Vec<String> = (0..MAX_VALUES + 10)
            .map(|i| format!("p{i}@x.example"))
            .collect();
        let schema = json!({"type": "object", "properties": {"to": {"type": "array"}}});
        let facts = facts(&schema, Declared::default());
        let values = CallValues::of(&facts, &json!({ "to": many }));
        assert_eq!(values.items.len(), MAX_VALUES);
        let last = &values.items[MAX_VALUES - 1];
        assert_eq!(last.1, ValueKind::FreeText);
        for i in MAX_VALUES - 1..MAX_VALUES + 10 {
            assert!(last.2.contains(&format!("p{i}@x.example")), "{i} kept");
        }
    }
}
