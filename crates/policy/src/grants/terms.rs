//! The keys every allow or deny grant shares, whatever it covers: labels, approval, the rule
//! after untrusted input, expiry, rules on arguments and the count per session.

use proto::{Class, Timestamp};

use super::on_arguments::ArgumentRule;
use super::reader::{GrantReader, Value};
use super::{Approval, OnUntrusted};

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

impl GrantReader<'_> {
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
}
