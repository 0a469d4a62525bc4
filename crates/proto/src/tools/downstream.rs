//! The facts of a downstream MCP server's tool: built from the server's input schema and what
//! the owner's grant declares, since boxmaker has no row for it.
//!
//! An argument is [`Role::FreeText`] unless the grant declares its role or its schema's
//! `format` names one (`email` a recipient, `uri` a URL, `hostname` or an IP address a host).
//! A tool has side effects ([`Effect::Outbound`]: it runs in another program) unless the grant
//! declares it read-only. Its results get the grants' default labels (private, untrusted unless
//! the grant says otherwise), as every downstream result does.

use std::borrow::Cow;

use serde_json::Value;

use super::{Arg, Effect, GRANT_DEFAULT_LABELS, Hints, Role, TimeLimit, ToolFacts};

/// What a grant declares about a downstream tool beyond its schema.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Declared<'a> {
    /// The role of some arguments, by name; names the schema does not have are not arguments
    /// and are left out (the grant's reader reports them).
    pub roles: &'a [(&'a str, Role)],
    /// Whether the owner says the tool changes nothing.
    pub read_only: bool,
}

/// The role a JSON Schema `format` gives a string property, if it gives one.
pub fn role_of_format(format: &str) -> Option<Role> {
    match format {
        "email" | "idn-email" => Some(Role::Recipient),
        "uri" | "iri" | "uri-reference" | "iri-reference" | "url" => Some(Role::Url),
        "hostname" | "idn-hostname" | "ipv4" | "ipv6" => Some(Role::Host),
        _ => None,
    }
}

/// The facts of a downstream tool whose arguments `input_schema` describes (an object schema;
/// anything else has no arguments), with what its grant `declared`.
pub fn facts(input_schema: &Value, declared: Declared<'_>) -> ToolFacts {
    let args: Vec<Arg> = input_schema
        .get("properties")
        .and_then(Value::as_object)
        .map(|properties| {
            properties
                .iter()
                .map(|(name, spec)| {
                    let from_grant = declared
                        .roles
                        .iter()
                        .find(|(n, _)| n == name)
                        .map(|(_, role)| *role);
                    let from_format = spec
                        .get("format")
                        .and_then(Value::as_str)
                        .and_then(role_of_format);
                    Arg {
                        name: Cow::Owned(name.clone()),
                        role: from_grant.or(from_format).unwrap_or(Role::FreeText),
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    let read_only = declared.read_only;
    ToolFacts {
        args: Cow::Owned(args),
        effect: if read_only {
            Effect::Read
        } else {
            Effect::Outbound
        },
        labels: GRANT_DEFAULT_LABELS,
        time_limit: TimeLimit::Downstream,
        hints: Hints::new(read_only, !read_only, false, true),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Class;
    use crate::tools::Untrusted;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "to": { "type": "string", "format": "email" },
                "link": { "type": "string", "format": "uri" },
                "server": { "type": "string", "format": "hostname" },
                "amount": { "type": "number" },
                "body": { "type": "string" }
            },
            "required": ["to"]
        })
    }

    #[test]
    fn every_argument_is_free_text_unless_its_format_or_the_grant_says_more() {
        let facts = facts(&schema(), Declared::default());
        let roles: Vec<(&str, Role)> = facts.args.iter().map(|a| (&*a.name, a.role)).collect();
        assert_eq!(
            roles,
            [
                ("to", Role::Recipient),
                ("link", Role::Url),
                ("server", Role::Host),
                ("amount", Role::FreeText),
                ("body", Role::FreeText),
            ]
        );
        let declared = Declared {
            roles: &[
                ("amount", Role::Amount),
                ("to", Role::Identifier),
                ("nope", Role::Path),
            ],
            read_only: false,
        };
        let facts = super::facts(&schema(), declared);
        assert_eq!(facts.role("amount"), Some(Role::Amount));
        assert_eq!(facts.role("to"), Some(Role::Identifier), "the grant wins");
        assert_eq!(facts.role("nope"), None, "only the schema's properties");
        assert_eq!(facts.args.len(), 5);
    }

    #[test]
    fn a_downstream_tool_has_side_effects_unless_declared_read_only_and_gets_the_grants_labels() {
        let facts = facts(&schema(), Declared::default());
        assert_eq!(facts.effect, Effect::Outbound);
        assert!(facts.effect.has_side_effects());
        assert_eq!(facts.labels.class, Class::Private);
        assert_eq!(facts.labels.untrusted, Untrusted::UnlessGranted);
        assert_eq!(facts.time_limit, TimeLimit::Downstream);
        assert!(!facts.hints.read_only && facts.hints.open_world);
        let read = super::facts(
            &schema(),
            Declared {
                roles: &[],
                read_only: true,
            },
        );
        assert_eq!(read.effect, Effect::Read);
        assert!(read.hints.read_only && !read.hints.destructive);
    }

    #[test]
    fn a_schema_without_properties_gives_a_tool_without_arguments() {
        for schema in [
            json!({"type": "object"}),
            json!(true),
            json!({"properties": 3}),
        ] {
            assert!(
                facts(&schema, Declared::default()).args.is_empty(),
                "{schema}"
            );
        }
    }
}
