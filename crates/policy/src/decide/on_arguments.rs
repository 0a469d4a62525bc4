//! The check of a call against the rules its covering grants put on its arguments
//! ([`crate::grants::ArgumentRule`]), and the count of calls a grant lets run in a session
//! (`per_session`). Built-in and downstream calls take the same path, on their arguments as
//! JSON.
//!
//! An argument's value is judged item by item: each element of a list, and each part of a
//! string cut at `,`, `;` and line breaks (`"a@x.example, b@y.example"` is two recipients), so
//! that one allowed address never carries another along; a bounded argument (`min`, `max`) is
//! not cut at `,`, which a number may hold (`1,000.50`). A number is its JSON text. An
//! argument the call does not give (or gives as `null`) passes every rule but `absent`'s
//! opposite: there is nothing to judge.

use std::collections::BTreeMap;
use std::fmt;

use proto::text::escape_terminal;
use serde_json::Value as Json;

use crate::grants::{ArgumentProvenance, ArgumentRule, Otherwise};
use crate::hosts::https_host;
use crate::provenance::ValueIndex;
use crate::provenance::normal::{host_form, number_form};

/// The most characters of a value a miss shows.
const SHOWN: usize = 120;

/// One value of a call outside a covering grant's rule on its argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleMiss {
    /// The grant whose rule it is.
    pub grant: String,
    /// The argument.
    pub argument: String,
    /// The value (one item of it), as the call gives it.
    pub value: String,
    /// What the rule says of it, as a phrase ("is above max 500").
    pub why: String,
    /// What the rule does about it.
    pub otherwise: Otherwise,
}

impl fmt::Display for RuleMiss {
    /// "amount 900 is above max 500 (grant bank-pay)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let cut: String = self.value.chars().take(SHOWN).collect();
        let ellipsis = if cut.len() < self.value.len() {
            "…"
        } else {
            ""
        };
        write!(
            f,
            "{} {}{ellipsis} {} (grant {})",
            self.argument,
            escape_terminal(&cut),
            self.why,
            self.grant
        )
    }
}

/// How many calls of each grant (by id) have run in a session: what `per_session` counts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GrantUses {
    counts: BTreeMap<String, u64>,
}

impl GrantUses {
    /// The count of calls that ran under `grant` in the session.
    pub fn of(&self, grant: &str) -> u64 {
        self.counts.get(grant).copied().unwrap_or(0)
    }

    /// Counts one more call under `grant`.
    pub fn add(&mut self, grant: &str) {
        *self.counts.entry(grant.to_string()).or_insert(0) += 1;
    }

    /// Sets the count of `grant` (as read back from the ledger).
    pub fn set(&mut self, grant: &str, count: u64) {
        self.counts.insert(grant.to_string(), count);
    }
}

/// The misses of a call's `arguments` (a JSON object) against `rules` of grant `grant`; the
/// session's `index` says which values are owned (none is, without one).
pub(crate) fn misses(
    grant: &str,
    rules: &[ArgumentRule],
    arguments: &Json,
    index: Option<&ValueIndex>,
) -> Vec<RuleMiss> {
    let mut out = Vec::new();
    for rule in rules {
        let given = arguments.get(&rule.argument).filter(|v| !v.is_null());
        let miss = |value: String, why: String| RuleMiss {
            grant: grant.to_string(),
            argument: rule.argument.clone(),
            value,
            why,
            otherwise: rule.otherwise,
        };
        let Some(given) = given else {
            continue;
        };
        if rule.absent {
            out.push(miss(
                given.to_string(),
                "is given, and the grant says the argument must be absent".to_string(),
            ));
            continue;
        }
        // A bounded argument is a number, whose thousands commas are not a list's.
        let bounded = rule.min.is_some() || rule.max.is_some();
        for item in items(given, !bounded) {
            if let Some(why) = outside(rule, &item, index) {
                out.push(miss(item, why));
            }
        }
    }
    out
}

/// The items of a value: a list's elements, a string's parts cut at `;`, line breaks and (with
/// `commas`) `,`, a number's text, anything else's JSON text.
fn items(value: &Json, commas: bool) -> Vec<String> {
    match value {
        Json::String(text) => text
            .split(|c: char| matches!(c, ';' | '\n' | '\r') || (commas && c == ','))
            .map(str::trim)
            .filter(|part| !part.is_empty())
            .map(str::to_string)
            .collect(),
        Json::Array(elements) => elements.iter().flat_map(|e| items(e, commas)).collect(),
        Json::Number(number) => vec![number.to_string()],
        Json::Null => Vec::new(),
        other => vec![other.to_string()],
    }
}

/// Why `item` falls outside `rule`, if it does.
fn outside(rule: &ArgumentRule, item: &str, index: Option<&ValueIndex>) -> Option<String> {
    if rule.min.is_some() || rule.max.is_some() {
        let Some(number) = number(item) else {
            return Some("is not a number, and the rule bounds it".to_string());
        };
        if let Some(min) = rule.min
            && number < min
        {
            return Some(format!("is below min {min}"));
        }
        if let Some(max) = rule.max
            && number > max
        {
            return Some(format!("is above max {max}"));
        }
    }
    if !rule.names_values() || named(rule, item) {
        return None;
    }
    if rule.provenance == ArgumentProvenance::Owned && index.is_some_and(|i| i.owns(item)) {
        return None;
    }
    let mut ways = Vec::new();
    if !rule.allow.is_empty() {
        let allowed: Vec<&str> = rule.allow.iter().map(|p| p.written.as_str()).collect();
        ways.push(format!("matches none of allow [{}]", allowed.join(", ")));
    }
    if !rule.hosts.is_empty() {
        let hosts: Vec<&str> = rule.hosts.iter().map(|h| h.written.as_str()).collect();
        ways.push(format!("names none of hosts [{}]", hosts.join(", ")));
    }
    if rule.provenance == ArgumentProvenance::Owned {
        ways.push("is not owned (in the owner's words, a trusted result or a grant)".to_string());
    }
    Some(ways.join(" and "))
}

/// Whether `item` is one the rule's `allow` or `hosts` name, or a number within a `max` it
/// sets (and its `min`): what a grant vouches for.
pub(crate) fn named(rule: &ArgumentRule, item: &str) -> bool {
    let bounded = rule.max.is_some()
        && number(item).is_some_and(|n| {
            rule.min.is_none_or(|min| n >= min) && rule.max.is_none_or(|max| n <= max)
        });
    bounded
        || rule.allow.iter().any(|pattern| pattern.matches(item))
        || (!rule.hosts.is_empty()
            && host_of(item)
                .is_some_and(|(host, port)| rule.hosts.iter().any(|h| h.covers(&host, port))))
}

/// The host and port an https URL or a bare host name reaches.
fn host_of(item: &str) -> Option<(String, u16)> {
    if let Ok(found) = https_host(item) {
        return Some(found);
    }
    let host = host_form(item)?;
    (host.len() == item.trim_end_matches('.').len()).then_some((host, 443))
}

/// `item` as a number: a JSON number's text, or an amount in the number form the provenance
/// index uses (`$1,000.50`).
fn number(item: &str) -> Option<f64> {
    let form = number_form(item.trim())?;
    form.parse::<f64>().ok().filter(|n| n.is_finite())
}

/// The covering grant (by id) whose `per_session` count the call would pass, with its limit.
pub(crate) fn over_count<'g>(
    limits: impl Iterator<Item = (&'g str, Option<u64>)>,
    uses: Option<&GrantUses>,
) -> Option<(&'g str, u64, u64)> {
    limits
        .filter_map(|(id, limit)| limit.map(|l| (id, l)))
        .find_map(|(id, limit)| {
            let used = uses.map_or(0, |u| u.of(id));
            (used >= limit).then_some((id, limit, used))
        })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::grants::ValuePattern;

    fn rule(argument: &str) -> ArgumentRule {
        ArgumentRule {
            argument: argument.to_string(),
            allow: Vec::new(),
            hosts: Vec::new(),
            min: None,
            max: None,
            absent: false,
            provenance: ArgumentProvenance::Checked,
            otherwise: Otherwise::Ask,
        }
    }

    #[test]
    fn every_item_of_a_list_or_of_a_string_cut_at_separators_is_judged_alone() {
        let mut to = rule("to");
        to.allow = vec![ValuePattern::new("*@kestrel-works.example")];
        let judged = |value: Json| misses("g", &[to.clone()], &json!({ "to": value }), None);
        assert!(judged(json!("ana@kestrel-works.example")).is_empty());
        assert!(
            judged(json!([
                "ana@kestrel-works.example",
                "bo@kestrel-works.example"
            ]))
            .is_empty()
        );
        let two = judged(json!("ana@kestrel-works.example, x@evil.example"));
        assert_eq!(two.len(), 1);
        assert_eq!(two[0].value, "x@evil.example");
        let listed = judged(json!(["ana@kestrel-works.example", "x@evil.example"]));
        assert_eq!(listed.len(), 1);
        assert!(judged(Json::Null).is_empty(), "not given");
    }

    #[test]
    fn bounds_take_amounts_in_their_number_form_and_refuse_what_is_not_a_number() {
        let mut amount = rule("amount");
        amount.min = Some(0.0);
        amount.max = Some(500.0);
        let judged =
            |value: Json| misses("g", &[amount.clone()], &json!({ "amount": value }), None);
        assert!(judged(json!(120.5)).is_empty());
        assert!(judged(json!("$1,00")).len() == 1, "not a number form");
        assert!(judged(json!("499.99")).is_empty());
        let over = judged(json!("$1,000.50"));
        assert_eq!(over[0].why, "is above max 500");
        assert_eq!(judged(json!(-3))[0].why, "is below min 0");
        assert!(judged(json!("all of it"))[0].why.contains("not a number"));
    }

    #[test]
    fn an_absent_argument_given_at_all_is_a_miss_and_a_count_stops_at_its_limit() {
        let mut recipient = rule("recipient");
        recipient.absent = true;
        let given = misses(
            "g",
            &[recipient.clone()],
            &json!({ "recipient": "x" }),
            None,
        );
        assert_eq!(given.len(), 1);
        assert!(misses("g", &[recipient], &json!({ "amount": 5 }), None).is_empty());
        let mut uses = GrantUses::default();
        let limits = || [("mail-delete", Some(2)), ("other", None)].into_iter();
        assert_eq!(over_count(limits(), Some(&uses)), None);
        uses.add("mail-delete");
        uses.add("mail-delete");
        assert_eq!(
            over_count(limits(), Some(&uses)),
            Some(("mail-delete", 2, 2))
        );
    }

    #[test]
    fn a_url_passes_hosts_by_its_host_and_a_bare_host_name_counts_as_one() {
        let mut url = rule("url");
        url.hosts = vec![crate::grants::host_rule("*.kestrel-works.example").unwrap()];
        let judged = |value: &str| misses("g", &[url.clone()], &json!({ "url": value }), None);
        assert!(judged("https://wiki.kestrel-works.example/page?q=1").is_empty());
        assert!(judged("wiki.kestrel-works.example").is_empty());
        assert_eq!(
            judged("https://evil.example/?wiki.kestrel-works.example").len(),
            1
        );
        assert_eq!(
            judged("http://wiki.kestrel-works.example/").len(),
            1,
            "not https"
        );
    }
}
