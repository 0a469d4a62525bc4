//! Integrity and confidentiality by provenance (issue 33): what a call's values say once the
//! session has seen untrusted or secret results, for a grant that says `on_untrusted =
//! "provenance"` or `max_taint = "carried"`. Built-in and downstream calls take the same path.
//!
//! A value the covering grants themselves vouch for is the owner's, whatever else it occurs
//! in: a word of a `commands` prefix of a live covering grant, a path of a call the grant's
//! folders cover (the call would not be covered otherwise), the URL or host of a call the
//! grant's `hosts` cover. An option word of a script (`-p`, `--release`; not `--out=x`, whose
//! value is checked) is the command's syntax, not a value.

use std::borrow::Cow;
use std::cell::OnceCell;

use proto::Class;
use proto::tools::{Role, ToolFacts};
use serde_json::Value as Json;

use super::Labels;
use super::on_arguments::{GrantUses, RuleMiss, named};
use crate::args::ToolArgs;
use crate::grants::{ArgumentProvenance, ArgumentRule};
use crate::provenance::{CallValues, Finding, Part, Unproven, ValueIndex, Verdict};

/// What a session has seen: its two labels, and the values it was handed (the broker's
/// per-session index; `None` where nobody keeps one, and then no value is proven clean).
#[derive(Debug, Clone, Copy, Default)]
pub struct Seen<'a> {
    /// The session's labels.
    pub labels: Labels,
    /// The values handed out to it, with their sources.
    pub values: Option<&'a ValueIndex>,
    /// How many calls each grant has let run in it (`per_session`; `None`: none counted).
    pub uses: Option<&'a GrantUses>,
}

impl Seen<'_> {
    /// A session with `labels` whose values nobody tracks.
    pub fn labels_only(labels: Labels) -> Seen<'static> {
        Seen {
            labels,
            values: None,
            uses: None,
        }
    }
}

/// Why the provenance of a call's values asks or refuses: the values that came only from
/// untrusted results (or that carry a secret), or the value the full index cannot vouch for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Traced {
    /// The values that decided, each with the result it came from.
    pub findings: Vec<Finding>,
    /// The first value the index could not vouch for, when it overflowed.
    pub unproven: Option<Box<Unproven>>,
    /// Whether no index was kept for the session at all.
    pub untracked: bool,
    /// The values outside a grant's rule on their argument that asks.
    pub misses: Vec<RuleMiss>,
    /// The grant whose count per session the call would pass.
    pub count: Option<Box<CountReached>>,
}

/// A grant's `per_session` count, reached: the call would be one more than it lets run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CountReached {
    /// The grant's id.
    pub grant: String,
    /// Its `per_session`.
    pub limit: u64,
    /// How many of its calls ran in the session.
    pub used: u64,
}

impl std::fmt::Display for CountReached {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "grant {} has let {} call(s) run in this session, its per_session limit {}; this would be call {}",
            self.grant,
            self.used,
            self.limit,
            self.used.saturating_add(1)
        )
    }
}

impl Traced {
    /// One sentence per value, for the owner ("recipient x@y.example came from call 12,
    /// read_inbox, untrusted").
    pub fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = self.findings.iter().map(ToString::to_string).collect();
        if let Some(unproven) = &self.unproven {
            lines.push(unproven.to_string());
        }
        if self.untracked {
            lines.push("the session's values are not tracked, so none is proven clean".into());
        }
        lines.extend(self.misses.iter().map(ToString::to_string));
        lines.extend(self.count.iter().map(ToString::to_string));
        lines
    }

    /// Whether nothing is traced.
    pub fn is_empty(&self) -> bool {
        self.findings.is_empty()
            && self.unproven.is_none()
            && !self.untracked
            && self.misses.is_empty()
            && self.count.is_none()
    }
}

/// What the covering grants vouch for, besides the session's owned sources.
#[derive(Debug, Clone, Default)]
pub(crate) struct Vouched<'g> {
    /// Words of the covering grants' literals (command prefixes), in text form.
    pub(crate) words: Vec<String>,
    /// Whether the call's paths are inside the covering grants' folders.
    pub(crate) paths: bool,
    /// Whether the call's URL or host is one the covering grants' `hosts` name.
    pub(crate) hosts: bool,
    /// The covering grants' rules on arguments: a value their `allow` or `hosts` name is
    /// vouched for, and an argument whose rule says `provenance = "ignored"` is not checked.
    pub(crate) rules: Vec<&'g ArgumentRule>,
}

/// A call's arguments, as the model gave them.
#[derive(Clone, Copy)]
pub(crate) enum Arguments<'a> {
    /// A built-in tool's, parsed (read as JSON only when a check needs them).
    Builtin(&'a ToolArgs),
    /// A downstream tool's, as JSON.
    Json(&'a Json),
}

impl Arguments<'_> {
    /// The arguments as JSON.
    pub(crate) fn json(&self) -> Cow<'_, Json> {
        match self {
            // The canonical JSON of parsed arguments always reads back; a failure would leave
            // no values, which the index then cannot vouch for either way.
            Arguments::Builtin(args) => {
                Cow::Owned(serde_json::from_str(&args.canonical_json()).unwrap_or(Json::Null))
            }
            Arguments::Json(json) => Cow::Borrowed(json),
        }
    }
}

/// The provenance of one call's values, checked once, when first needed.
pub(crate) struct Provenance<'a> {
    seen: Seen<'a>,
    facts: &'a ToolFacts,
    arguments: Arguments<'a>,
    vouched: Vouched<'a>,
    verdict: OnceCell<Option<Verdict>>,
}

impl<'a> Provenance<'a> {
    /// The call of a tool with `facts` and `arguments`, in a session that has `seen` these.
    pub(crate) fn new(
        seen: Seen<'a>,
        facts: &'a ToolFacts,
        arguments: Arguments<'a>,
        vouched: Vouched<'a>,
    ) -> Provenance<'a> {
        Provenance {
            seen,
            facts,
            arguments,
            vouched,
            verdict: OnceCell::new(),
        }
    }

    /// The verdict, without the values the grants vouch for; `None` when no index is kept.
    fn verdict(&self) -> Option<&Verdict> {
        self.verdict
            .get_or_init(|| {
                let index = self.seen.values?;
                let values = CallValues::of(self.facts, &self.arguments.json());
                let mut verdict = index.check(&values.values());
                // The grants vouch for where a call goes, never for what it carries.
                verdict.untrusted.retain(|f| !self.vouches(f));
                Some(verdict)
            })
            .as_ref()
    }

    /// Whether the covering grants vouch for the value of `finding`.
    fn vouches(&self, finding: &Finding) -> bool {
        let ruled = self
            .vouched
            .rules
            .iter()
            .filter(|r| r.argument == finding.argument);
        for rule in ruled {
            if rule.provenance == ArgumentProvenance::Ignored
                || (matches!(finding.part, Part::Whole) && named(rule, &finding.value))
            {
                return true;
            }
        }
        let role = self.facts.role(&finding.argument);
        match role {
            Some(Role::Path) => self.vouched.paths,
            Some(Role::Url | Role::Host) => self.vouched.hosts,
            Some(Role::Command) => {
                option_word(&finding.value)
                    || (matches!(finding.part, Part::Whole)
                        && self
                            .vouched
                            .words
                            .iter()
                            .any(|w| *w == crate::provenance::normal::text_form(&finding.value)))
            }
            _ => false,
        }
    }

    /// Whether integrity lets the call run unasked: every value owned or never handed out.
    /// `Err` names what asks.
    pub(crate) fn integrity(&self) -> Result<(), Traced> {
        match self.verdict() {
            None => Err(Traced {
                untracked: true,
                ..Traced::default()
            }),
            Some(verdict) if verdict.clean() => Ok(()),
            Some(verdict) => Err(Traced {
                findings: verdict.untrusted.clone(),
                unproven: verdict.unproven.clone().map(Box::new),
                ..Traced::default()
            }),
        }
    }

    /// Whether the call carries no secret value. `Err` names what it carries. A session that
    /// has seen no secret carries none.
    pub(crate) fn confidentiality(&self) -> Result<(), Traced> {
        if self.seen.labels.taint < Class::Secret {
            return Ok(());
        }
        match self.verdict() {
            None => Err(Traced {
                untracked: true,
                ..Traced::default()
            }),
            Some(verdict) if !verdict.carries_secret() => Ok(()),
            Some(verdict) => Err(Traced {
                findings: verdict.secret.clone(),
                unproven: verdict
                    .unproven
                    .clone()
                    .filter(|u| u.overflow.class == Class::Secret)
                    .map(Box::new),
                ..Traced::default()
            }),
        }
    }

    /// Whether the call's arguments carry a value that came only from untrusted results: the
    /// label of a write's own result, which echoes them (a session without an index counts
    /// as carrying one once it has seen untrusted content).
    pub(crate) fn carries_untrusted(&self) -> bool {
        if !self.seen.labels.untrusted {
            return false;
        }
        self.verdict().is_none_or(|v| !v.clean())
    }
}

/// `-p`, `--release`, `-rf`: an option's name alone, with no value joined to it.
fn option_word(word: &str) -> bool {
    let name = word.trim_start_matches('-');
    word.starts_with('-')
        && word.len() - name.len() <= 2
        && name.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_option_name_is_syntax_and_an_option_with_a_value_is_not() {
        for word in ["-p", "--release", "-rf", "--no-deps"] {
            assert!(option_word(word), "{word}");
        }
        for word in ["--out=x", "-", "--", "---x", "-1", "evil.example", "--a.b"] {
            assert!(!option_word(word), "{word}");
        }
    }
}
