//! Rules on a call's arguments (`[grant.args.NAME]` under a `[[grant]]`), for boxmaker's tools
//! and downstream tools alike: which values an argument may hold (`allow`, `hosts`, or
//! `provenance = "owned"`), numeric bounds (`min`, `max`), that it must be absent, and what
//! happens to a call whose value falls outside (`otherwise`: refused, or the owner asked). The
//! check of a call against them is `crate::decide::on_arguments`.

use toml::de::{DeTable, DeValue};

use super::reader::{GrantReader, Value};
use super::rules::HostRule;
use crate::provenance::normal::{email_form, iban_form, text_form};

/// The keys an argument's rule may have.
pub const ARGUMENT_KEYS: &[&str] = &[
    "allow",
    "hosts",
    "min",
    "max",
    "absent",
    "provenance",
    "otherwise",
];

/// The longest value (in characters) an `allow` pattern is matched against; a longer one
/// matches none.
const MAX_MATCHED_CHARS: usize = 4096;

/// What happens to a call one of whose values falls outside its argument's rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Otherwise {
    /// It is refused (`DeniedByGrant`), naming the argument: the default.
    Deny,
    /// The owner is asked, shown the argument and the value.
    Ask,
}

/// How an argument's values meet the session's provenance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArgumentProvenance {
    /// As the grant's `on_untrusted` says (the default).
    Checked,
    /// A value passes when it is owned: in the owner's words, in a trusted result, or among
    /// the grants' literals; one the model wrote itself or took from an untrusted result does
    /// not (with `allow` or `hosts`, a value passes when it is either).
    Owned,
    /// Its values are left out of the grant's provenance check (`on_untrusted =
    /// "provenance"`, `max_taint = "carried"` still sees them).
    Ignored,
}

/// One `allow` entry: a value, or a pattern in which `*` is any run of characters other than
/// blanks, `@` and the separators of a list (`, ; < > " ' ( ) |`), and `?` one such character.
/// Compared case-insensitively with blanks collapsed; an IBAN also without its blanks; an email
/// address also without `mailto:`.
#[derive(Debug, Clone, PartialEq)]
pub struct ValuePattern {
    /// As the owner wrote it.
    pub written: String,
    /// Its forms: the text form, and the IBAN form of an IBAN written without wildcards.
    forms: Vec<Vec<char>>,
}

impl ValuePattern {
    /// The pattern `written`.
    pub fn new(written: &str) -> ValuePattern {
        let text = text_form(written);
        let mut forms = vec![text.chars().collect()];
        if !written.contains(['*', '?'])
            && let Some(iban) = iban_form(written)
        {
            forms.push(iban.to_lowercase().chars().collect());
        }
        ValuePattern {
            written: written.to_string(),
            forms,
        }
    }

    /// Whether `value` (one item: a list's items are matched each alone) matches.
    pub fn matches(&self, value: &str) -> bool {
        if value.chars().count() > MAX_MATCHED_CHARS {
            return false;
        }
        let text = text_form(value);
        let mut candidates = vec![text.clone()];
        if let Some(iban) = iban_form(value) {
            candidates.push(iban.to_lowercase());
        }
        if let Some(email) = email_form(&text) {
            candidates.push(email);
        }
        candidates.iter().any(|candidate| {
            let candidate: Vec<char> = candidate.chars().collect();
            self.forms.iter().any(|form| wildcard(form, &candidate))
        })
    }
}

/// Whether `c` ends what a `*` or `?` of a pattern may stand for.
fn separator(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '@' | ',' | ';' | '<' | '>' | '"' | '\'' | '(' | ')' | '|'
        )
}

/// `*`/`?` matching of `text` by `pattern`, neither crossing a [`separator`]: a table over
/// (pattern position, text position), linear in the text for each pattern character.
fn wildcard(pattern: &[char], text: &[char]) -> bool {
    // row[j]: whether pattern[..i] matches text[..j].
    let mut row = vec![false; text.len() + 1];
    row[0] = true;
    for &p in pattern {
        let mut next = vec![false; text.len() + 1];
        match p {
            '*' => {
                next[0] = row[0];
                for (j, &c) in text.iter().enumerate() {
                    next[j + 1] = row[j + 1] || (next[j] && !separator(c));
                }
            }
            '?' => {
                for (j, &c) in text.iter().enumerate() {
                    next[j + 1] = row[j] && !separator(c);
                }
            }
            literal => {
                for (j, &c) in text.iter().enumerate() {
                    next[j + 1] = row[j] && c == literal;
                }
            }
        }
        row = next;
    }
    row[text.len()]
}

/// The rule a grant puts on one argument.
#[derive(Debug, Clone, PartialEq)]
pub struct ArgumentRule {
    /// The argument's name (a top-level key of the call's arguments).
    pub argument: String,
    /// The values it may hold (none: any, unless `hosts` or `provenance = "owned"` say).
    pub allow: Vec<ValuePattern>,
    /// For a URL or host argument: the hosts it may name.
    pub hosts: Vec<HostRule>,
    /// The smallest number it may be.
    pub min: Option<f64>,
    /// The largest number it may be.
    pub max: Option<f64>,
    /// Whether the call must not give it at all (`null` counts as not given).
    pub absent: bool,
    /// How its values meet the session's provenance.
    pub provenance: ArgumentProvenance,
    /// What happens to a call whose value falls outside.
    pub otherwise: Otherwise,
}

impl ArgumentRule {
    /// Whether the rule names which values pass (`allow`, `hosts` or `provenance = "owned"`),
    /// rather than letting every value through its bounds.
    pub fn names_values(&self) -> bool {
        !self.allow.is_empty()
            || !self.hosts.is_empty()
            || self.provenance == ArgumentProvenance::Owned
    }
}

impl GrantReader<'_> {
    /// `args = { NAME = { … } }` (written `[grant.args.NAME]`): each argument's rule, checked
    /// whole (that a built-in tool takes the argument is checked per tool by the reader).
    pub(super) fn argument_rules(&mut self, value: &Value<'_>) -> Vec<ArgumentRule> {
        let DeValue::Table(table) = value.get_ref() else {
            let line = self.line_of(value);
            self.say(
                line,
                "args must be a table of arguments, written [grant.args.NAME]".to_string(),
            );
            return Vec::new();
        };
        let mut rules = Vec::new();
        for (key, rule) in table.iter() {
            let argument = key.get_ref().as_ref();
            let line = self.lines.of(key.span().start);
            let DeValue::Table(rule) = rule.get_ref() else {
                self.say(
                    line,
                    format!("args.{argument} must be a table, written [grant.args.{argument}]"),
                );
                continue;
            };
            if let Some(rule) = self.argument_rule(argument, rule, line) {
                rules.push(rule);
            }
        }
        rules
    }

    fn argument_rule(
        &mut self,
        argument: &str,
        table: &DeTable<'_>,
        line: usize,
    ) -> Option<ArgumentRule> {
        let before = self.problem_count();
        for (key, _) in table.iter() {
            let name = key.get_ref().as_ref();
            if !ARGUMENT_KEYS.contains(&name) {
                let at = self.lines.of(key.span().start);
                self.say(
                    at,
                    format!(
                        "unknown key {name:?} in the rule of argument {argument}; the keys are {}",
                        ARGUMENT_KEYS.join(", ")
                    ),
                );
            }
        }
        let field = |name: &str| -> Option<&Value<'_>> {
            table
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == name)
                .map(|(_, v)| v)
        };
        let allow: Vec<ValuePattern> = field("allow")
            .map(|v| self.strings(v, "allow"))
            .unwrap_or_default()
            .into_iter()
            .map(|(written, _)| ValuePattern::new(&written))
            .collect();
        let hosts = field("hosts").map(|v| self.hosts(v)).unwrap_or_default();
        let min = field("min").and_then(|v| self.number(v, "min"));
        let max = field("max").and_then(|v| self.number(v, "max"));
        let absent = field("absent")
            .and_then(|v| self.boolean(v, "absent"))
            .unwrap_or(false);
        let provenance = field("provenance")
            .and_then(|v| self.word(v, "provenance", &["checked", "owned", "ignored"]))
            .map_or(ArgumentProvenance::Checked, |w| match w {
                "owned" => ArgumentProvenance::Owned,
                "ignored" => ArgumentProvenance::Ignored,
                _ => ArgumentProvenance::Checked,
            });
        let otherwise = field("otherwise")
            .and_then(|v| self.word(v, "otherwise", &["deny", "ask"]))
            .map_or(Otherwise::Deny, |w| match w {
                "ask" => Otherwise::Ask,
                _ => Otherwise::Deny,
            });
        if let (Some(min), Some(max)) = (min, max)
            && min > max
        {
            self.say(
                line,
                format!("the rule of argument {argument} has min {min} above max {max}"),
            );
        }
        let says_values = !allow.is_empty()
            || !hosts.is_empty()
            || min.is_some()
            || max.is_some()
            || provenance == ArgumentProvenance::Owned;
        if absent && says_values {
            self.say(
                line,
                format!(
                    "the rule of argument {argument} says absent = true and also which values it may hold; a rule says one or the other"
                ),
            );
        }
        if !absent && !says_values && provenance == ArgumentProvenance::Checked {
            self.say(
                line,
                format!(
                    "the rule of argument {argument} says nothing: give allow, hosts, min, max, absent or provenance"
                ),
            );
        }
        if field("allow").is_some() && allow.is_empty() && self.problem_count() == before {
            self.say(
                line,
                format!(
                    "the rule of argument {argument} has an empty allow list, which no value matches; to refuse the argument, say absent = true"
                ),
            );
        }
        (self.problem_count() == before).then(|| ArgumentRule {
            argument: argument.to_string(),
            allow,
            hosts,
            min,
            max,
            absent,
            provenance,
            otherwise,
        })
    }

    /// A number: an integer or a float, finite.
    fn number(&mut self, value: &Value<'_>, key: &str) -> Option<f64> {
        let number = match value.get_ref() {
            DeValue::Integer(i) => i.as_str().replace('_', "").parse::<f64>().ok(),
            DeValue::Float(f) => f.as_str().replace('_', "").parse::<f64>().ok(),
            _ => None,
        };
        match number.filter(|n| n.is_finite()) {
            Some(n) => Some(n),
            None => {
                let line = self.line_of(value);
                self.say(line, format!("{key} must be a number"));
                None
            }
        }
    }

    /// `per_session = N`: how many calls the grant lets run in one session before the owner
    /// is asked about each further one.
    pub(super) fn per_session(&mut self, value: &Value<'_>) -> Option<u64> {
        let count = match value.get_ref() {
            DeValue::Integer(i) => i.as_str().replace('_', "").parse::<u64>().ok(),
            _ => None,
        };
        if count.is_none() {
            let line = self.line_of(value);
            self.say(
                line,
                "per_session must be a whole number of calls, 0 or more".to_string(),
            );
        }
        count
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_star_stands_for_a_run_without_blanks_at_signs_or_list_separators() {
        let company = ValuePattern::new("*@Kestrel-Works.example");
        assert!(company.matches("ana@kestrel-works.example"));
        assert!(company.matches("ANA.M@KESTREL-WORKS.EXAMPLE"));
        assert!(company.matches("mailto:ana@kestrel-works.example"));
        for other in [
            "ana@evil.example",
            "x@evil.example,ana@kestrel-works.example",
            "x@evil.example ana@kestrel-works.example",
            "x@evil.example@kestrel-works.example",
            "Ana <ana@kestrel-works.example>",
            "ana@kestrel-works.example.evil.example",
        ] {
            assert!(!company.matches(other), "{other}");
        }
    }

    #[test]
    fn an_iban_matches_with_or_without_its_blanks_and_a_name_in_any_case() {
        let iban = ValuePattern::new("DE21 7015 0000 0941 2288 13");
        assert!(iban.matches("DE21701500000941228813"));
        assert!(iban.matches("de21 7015 0000 0941 2288 13"));
        assert!(!iban.matches("DE21701500000941228814"));
        let name = ValuePattern::new("Sofia  Lindgren");
        assert!(name.matches("sofia lindgren"));
        assert!(!name.matches("sofia lindgren jr"));
        let channel = ValuePattern::new("#team-?");
        assert!(channel.matches("#team-a"));
        assert!(!channel.matches("#team-ab"));
    }
}
