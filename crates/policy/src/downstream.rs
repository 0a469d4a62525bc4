//! The tools of third-party MCP servers behind the broker's gateway ("downstream" tools, named
//! `server.tool`): the grants that name them, the pin that ties a grant to one definition of a
//! tool, and the decision on a call. A downstream tool's description and schema are text from
//! outside: a grant covers a tool only while its definition hashes to the pin the owner wrote,
//! so a server that changes a tool after the owner looked hides it instead of redefining it.

use proto::{Class, DenyReason, Timestamp};
use serde_json::Value;

use crate::decide::{
    Arguments, AskReason, Denied, Labels, Provenance, Seen, Traced, Vouched, rules_of,
};
pub use crate::grants::servers::{
    Downstream, MAX_SERVER_NAME, Pattern, ReadOnly, ServerGrant, ToolGrant, split,
    valid_server_name,
};
use crate::grants::{Approval, OnUntrusted};

/// The pin of a tool's definition: the SHA-256 (hex) of its name, description, input schema
/// and annotations as canonical JSON (object keys sorted, no spaces), so the same definition
/// always hashes the same whatever order the server wrote its keys in.
pub fn definition_hash(definition: &Value) -> String {
    proto::ids::sha256_hex(canonical(definition).as_bytes())
}

/// The part of a tool's `tools/list` entry a pin covers: its name, description and input
/// schema (what reaches the model), and its annotations when the server gives any (what a
/// grant with `read_only = "hint"` acts on: a server that changes a hint changes the tool).
/// A tool without annotations has no `annotations` key, so its pin is what it was before
/// annotations were pinned.
pub fn definition(
    name: &str,
    description: Option<&str>,
    input_schema: &Value,
    annotations: Option<&Value>,
) -> Value {
    let mut value = serde_json::json!({
        "name": name,
        "description": description,
        "inputSchema": input_schema,
    });
    if let (Some(annotations), Value::Object(map)) = (annotations, &mut value) {
        map.insert("annotations".to_string(), annotations.clone());
    }
    value
}

/// Whether a [`definition`] says its tool only reads: its annotations' `readOnlyHint` is
/// `true` (MCP's default is `false`).
pub fn read_only_hint(definition: &Value) -> bool {
    definition
        .get("annotations")
        .and_then(|a| a.get("readOnlyHint"))
        .and_then(Value::as_bool)
        .unwrap_or(false)
}

/// `value` as JSON with every object's keys in byte order and no whitespace.
pub fn canonical(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                if let Some(v) = map.get(key) {
                    write_canonical(v, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// Whether `text` (JSON) holds an object with a key twice, anywhere: the broker shows the owner
/// and records the arguments as written, and a parser that keeps the last of two keys would
/// send the server something else than what was shown. `Err` names the key.
pub fn duplicate_key(text: &str) -> Result<(), String> {
    use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

    struct Checked;

    impl<'de> Deserialize<'de> for Checked {
        fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Checked, D::Error> {
            deserializer.deserialize_any(CheckedVisitor)
        }
    }

    struct CheckedVisitor;

    impl<'de> Visitor<'de> for CheckedVisitor {
        type Value = Checked;

        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("JSON")
        }

        fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
            Ok(Checked)
        }
        fn visit_unit<E>(self) -> Result<Checked, E> {
            Ok(Checked)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
            while seq.next_element::<Checked>()?.is_some() {}
            Ok(Checked)
        }

        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
            let mut seen = std::collections::HashSet::new();
            while let Some(key) = map.next_key::<String>()? {
                if !seen.insert(key.clone()) {
                    return Err(serde::de::Error::custom(format!(
                        "the key {key:?} is given twice"
                    )));
                }
                map.next_value::<Checked>()?;
            }
            Ok(Checked)
        }
    }

    serde_json::from_str::<Checked>(text)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

impl ToolGrant {
    /// Whether, under this grant, a call of `listed` only reads (no side effect).
    pub fn reads(&self, listed: &Listed<'_>) -> bool {
        match self.read_only {
            ReadOnly::No => false,
            ReadOnly::Declared => true,
            ReadOnly::Hint => listed.read_only_hint,
        }
    }
}

/// A downstream tool as its server lists it now: what the decision on a call needs of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Listed<'a> {
    /// The server.
    pub server: &'a str,
    /// The tool on it.
    pub tool: &'a str,
    /// Its definition's [`definition_hash`] (empty when not known yet: no pin matches it).
    pub hash: &'a str,
    /// Its definition's [`read_only_hint`].
    pub read_only_hint: bool,
}

impl<'a> Listed<'a> {
    /// `tool` of `server`, its definition hashing to `hash`, with no read-only hint.
    pub fn new(server: &'a str, tool: &'a str, hash: &'a str) -> Listed<'a> {
        Listed {
            server,
            tool,
            hash,
            read_only_hint: false,
        }
    }
}

/// A downstream call that may run: under which grant, with which labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cleared {
    /// The deciding grant's id.
    pub grant: String,
    /// The label of the result.
    pub class: Class,
    /// Whether the result is marked untrusted.
    pub untrusted: bool,
    /// When the provenance of its values asks ([`AskReason::Provenance`]), or a rule on an
    /// argument or a count does ([`AskReason::ArgumentRule`]): which values, and why.
    pub traced: Traced,
    /// The ids of the covering grants that count their calls (`per_session`): the broker
    /// counts this call under each when it runs.
    pub counted: Vec<String>,
}

/// A downstream call's arguments and the schema that gives them their roles
/// ([`proto::tools::downstream::facts`]).
#[derive(Debug, Clone, Copy)]
pub struct CallOf<'a> {
    /// The tool's input schema, as its server lists it.
    pub input_schema: &'a serde_json::Value,
    /// The call's arguments.
    pub arguments: &'a serde_json::Value,
}

/// The decision on a downstream call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Allow(Cleared),
    /// Ask the owner first.
    Ask(Cleared, AskReason),
    /// Refuse it.
    Deny(Denied),
}

/// Whether a session's model may see `tool` of `server` (whose definition hashes to `hash`) in
/// its catalog: an allow grant pins this definition, is live, and no deny grant names it.
pub fn visible(grants: &Downstream, server: &str, tool: &str, hash: &str, now: Timestamp) -> bool {
    matches!(
        decide(
            grants,
            Listed::new(server, tool, hash),
            Labels::default(),
            now
        ),
        Verdict::Allow(_) | Verdict::Ask(..)
    )
}

/// Decides a call of `listed` for a session with `labels`, at `now`, as
/// [`crate::decide::decide`] does for boxmaker's tools: deny wins; an allow grant covers the
/// tool only while it pins its current hash; of the live covering grants the strictest on
/// taint, untrusted input and approval decides, and the labels are the highest class and
/// untrusted if any says so. A downstream call counts as having side effects (so untrusted
/// input brings in `on_untrusted`) unless every live covering grant says the tool only reads
/// ([`ToolGrant::reads`]).
pub fn decide(grants: &Downstream, listed: Listed<'_>, labels: Labels, now: Timestamp) -> Verdict {
    let no_arguments = serde_json::Value::Null;
    let call = CallOf {
        input_schema: &no_arguments,
        arguments: &no_arguments,
    };
    decide_seen(grants, listed, call, Seen::labels_only(labels), now)
}

/// [`decide`] for a call with its arguments, in a session whose values are tracked: grants
/// that say `on_untrusted = "provenance"` or `max_taint = "carried"` read `seen`'s index.
pub fn decide_seen(
    grants: &Downstream,
    listed: Listed<'_>,
    call: CallOf<'_>,
    seen: Seen<'_>,
    now: Timestamp,
) -> Verdict {
    let labels = seen.labels;
    let Listed {
        server, tool, hash, ..
    } = listed;
    let full = format!("{server}.{tool}");
    let naming: Vec<&ToolGrant> = grants
        .tools
        .iter()
        .filter(|g| g.names(server, tool))
        .collect();
    if let Some(grant) = naming.iter().find(|g| g.deny && !g.expired(now)) {
        return refuse(
            DenyReason::DeniedByGrant,
            Some(grant),
            format!("grant {} forbids {full}", grant.id),
        );
    }
    let allowing: Vec<&ToolGrant> = naming.iter().copied().filter(|g| !g.deny).collect();
    let pinned: Vec<&ToolGrant> = allowing
        .iter()
        .copied()
        .filter(|g| g.pin(tool) == Some(hash))
        .collect();
    if pinned.is_empty() {
        let detail = match allowing.first() {
            None => format!("no grant covers {full}"),
            Some(grant) => match grant.pin(tool) {
                None => format!(
                    "grant {} names {full} but pins no definition of it; `bx grants check` shows the definition to pin",
                    grant.id
                ),
                Some(pin) => format!(
                    "{full} changed since grant {} pinned it (pinned {}, now {}); `bx grants check` shows what changed",
                    grant.id,
                    short(pin),
                    short(hash)
                ),
            },
        };
        return refuse(DenyReason::NoGrant, None, detail);
    }
    let live: Vec<&ToolGrant> = pinned.iter().copied().filter(|g| !g.expired(now)).collect();
    let Some(first) = live.first().copied() else {
        let grant = pinned.first().copied();
        let id = grant.map_or("", |g| g.id.as_str());
        return refuse(
            DenyReason::GrantExpired,
            grant,
            format!("grant {id} has expired"),
        );
    };
    if let Some(grant) = live
        .iter()
        .find(|g| g.max_taint.is_some_and(|max| labels.taint > max))
    {
        return refuse(
            DenyReason::TaintTooHigh,
            Some(grant),
            format!(
                "the session has seen {} data; grant {} allows at most {} (max_taint)",
                labels.taint.as_str(),
                grant.id,
                grant.max_taint.map_or("any", Class::as_str)
            ),
        );
    }
    let facts = proto::tools::downstream::facts(
        call.input_schema,
        proto::tools::downstream::Declared::default(),
    );
    let arguments = Arguments::Json(call.arguments);
    let vouched = Vouched {
        rules: live.iter().flat_map(|g| g.args.iter()).collect(),
        ..Vouched::default()
    };
    let provenance = Provenance::new(seen, &facts, arguments, vouched);
    if let Some(grant) = live.iter().find(|g| g.carried)
        && let Err(traced) = provenance.confidentiality()
    {
        return refuse(
            DenyReason::TaintTooHigh,
            Some(grant),
            format!(
                "grant {} refuses a call that carries a secret (max_taint = \"carried\"): {}",
                grant.id,
                traced.lines().first().map_or("", String::as_str)
            ),
        );
    }
    // A rule on an argument the tool does not take would never apply: a typo in a grant must
    // not leave a tool unguarded, so the call is refused until the grant is fixed.
    if let Some((grant, argument)) = rule_on_no_argument(grants, &live, call.input_schema) {
        return refuse(
            DenyReason::GrantsInvalid,
            Some(grant),
            format!(
                "grant {} has a rule on argument {argument:?}, which {full} does not take (its input schema names no such property); fix the grant",
                grant.id
            ),
        );
    }
    let (refused, ruled) = rules_of(
        live.iter()
            .map(|g| (g.id.as_str(), &g.args[..], g.per_session)),
        arguments,
        seen,
    );
    if let Some(miss) = refused {
        let grant = live.iter().copied().find(|g| g.id == miss.grant);
        return refuse(
            DenyReason::DeniedByGrant,
            grant,
            format!("grant {} refuses this call of {full}: {miss}", miss.grant),
        );
    }
    let mut counted: Vec<String> = live
        .iter()
        .filter(|g| g.per_session.is_some())
        .map(|g| g.id.clone())
        .collect();
    counted.dedup();
    let cleared = |grant: &ToolGrant| Cleared {
        grant: grant.id.clone(),
        class: live.iter().map(|g| g.class).max().unwrap_or(grant.class),
        untrusted: live.iter().any(|g| g.untrusted),
        traced: Traced::default(),
        counted: counted.clone(),
    };
    let mut asking: Option<(&ToolGrant, AskReason, Traced)> = None;
    let reads = live.iter().all(|g| g.reads(&listed));
    if labels.untrusted && !reads {
        if let Some(grant) = live.iter().find(|g| g.on_untrusted == OnUntrusted::Deny) {
            return refuse(
                DenyReason::UntrustedInput,
                Some(grant),
                format!(
                    "the session has received untrusted content and grant {} refuses {full} after that",
                    grant.id
                ),
            );
        }
        if let Some(grant) = live.iter().find(|g| g.on_untrusted == OnUntrusted::Ask) {
            return Verdict::Ask(cleared(grant), AskReason::AfterUntrusted);
        }
        if let Some(grant) = live
            .iter()
            .find(|g| g.on_untrusted == OnUntrusted::Provenance)
            && let Err(traced) = provenance.integrity()
        {
            asking = Some((grant, AskReason::Provenance, traced));
        }
    }
    // As for boxmaker's tools: one ask names every value that asks.
    if let Some(id) = ruled.asking_grant()
        && let Some(grant) = live.iter().copied().find(|g| g.id == id)
    {
        let traced = asking.take().map(|(_, _, t)| t).unwrap_or_default();
        asking = Some((grant, AskReason::ArgumentRule, ruled.into_traced(traced)));
    }
    if let Some((grant, reason, traced)) = asking {
        let mut cleared = cleared(grant);
        cleared.traced = traced;
        return Verdict::Ask(cleared, reason);
    }
    if let Some(grant) = live.iter().find(|g| g.approval == Approval::Ask) {
        return Verdict::Ask(cleared(grant), AskReason::GrantAsks);
    }
    Verdict::Allow(cleared(first))
}

impl ToolGrant {
    /// Whether it has expired at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires.is_some_and(|at| at <= now)
    }
}

/// The first live grant written for this one tool (its table names no other) with a rule on
/// an argument that `schema` (the tool's input schema) does not list among its `properties`,
/// with that argument; `None` when the schema lists none (not known: nothing to compare). A
/// table naming several tools may rule on an argument only some of them take.
fn rule_on_no_argument<'g>(
    grants: &Downstream,
    live: &[&'g ToolGrant],
    schema: &Value,
) -> Option<(&'g ToolGrant, &'g str)> {
    let properties = schema.get("properties")?.as_object()?;
    let alone = |grant: &ToolGrant| {
        matches!(grant.pattern, Pattern::Tool(_))
            && grants.tools.iter().filter(|g| g.id == grant.id).count() == 1
    };
    live.iter().filter(|g| alone(g)).find_map(|grant| {
        grant
            .args
            .iter()
            .find(|rule| !properties.contains_key(&rule.argument))
            .map(|rule| (*grant, rule.argument.as_str()))
    })
}

fn short(hash: &str) -> &str {
    hash.get(..12).unwrap_or(hash)
}

fn refuse(reason: DenyReason, grant: Option<&ToolGrant>, detail: String) -> Verdict {
    Verdict::Deny(Denied {
        reason,
        grant: grant.map(|g| g.id.clone()),
        detail,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_hash_ignores_key_order_but_not_content() {
        let a = json!({"name": "t", "description": "d", "inputSchema": {"type": "object", "properties": {"a": {}, "b": {}}}});
        let b = json!({"inputSchema": {"properties": {"b": {}, "a": {}}, "type": "object"}, "description": "d", "name": "t"});
        assert_eq!(definition_hash(&a), definition_hash(&b));
        let c = json!({"name": "t", "description": "d.", "inputSchema": {"type": "object"}});
        assert_ne!(definition_hash(&a), definition_hash(&c));
        assert_eq!(
            canonical(&json!({"b": [1, {"d": null, "c": "x\"y"}], "a": true})),
            r#"{"a":true,"b":[1,{"c":"x\"y","d":null}]}"#
        );
    }

    #[test]
    fn the_pin_covers_the_annotations_so_a_changed_hint_is_a_changed_tool() {
        let schema = json!({"type": "object"});
        let bare = definition("t", Some("d"), &schema, None);
        assert_eq!(
            definition_hash(&bare),
            definition_hash(&json!({"name": "t", "description": "d", "inputSchema": schema})),
            "a tool without annotations keeps the pin it had"
        );
        let reads = json!({"readOnlyHint": true});
        let writes = json!({"readOnlyHint": false});
        let hinted = definition("t", Some("d"), &schema, Some(&reads));
        let unhinted = definition("t", Some("d"), &schema, Some(&writes));
        assert_ne!(definition_hash(&bare), definition_hash(&hinted));
        assert_ne!(definition_hash(&hinted), definition_hash(&unhinted));
        assert!(read_only_hint(&hinted));
        assert!(!read_only_hint(&unhinted));
        assert!(!read_only_hint(&bare));
        let title = json!({"title": "T"});
        assert!(!read_only_hint(&definition(
            "t",
            None,
            &schema,
            Some(&title)
        )));
    }

    #[test]
    fn a_key_given_twice_anywhere_is_named() {
        assert!(duplicate_key(r#"{"a":1,"b":[{"c":2}]}"#).is_ok());
        let twice = duplicate_key(r#"{"repo_path":"/safe","repo_path":"/home/u"}"#).unwrap_err();
        assert!(twice.contains("\"repo_path\" is given twice"), "{twice}");
        assert!(duplicate_key(r#"{"a":[{"b":1,"b":2}]}"#).is_err());
        assert!(duplicate_key(r#"{"a":"\u0062","a\u0000":1}"#).is_ok());
        assert!(duplicate_key(r#"{"a":1,"\u0061":2}"#).is_err());
    }

    #[test]
    fn server_names_are_short_lower_case_words() {
        assert!(valid_server_name("git"));
        assert!(valid_server_name("my-server_2"));
        for bad in ["", "Git", "2git", "g.it", "g it", &"a".repeat(33)] {
            assert!(!valid_server_name(bad), "{bad:?}");
        }
        assert_eq!(split("git.git_status"), Some(("git", "git_status")));
        assert_eq!(split("git.a.b"), Some(("git", "a.b")));
        assert_eq!(split("read_file"), None);
    }
}
