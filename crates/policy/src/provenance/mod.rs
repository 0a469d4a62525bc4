//! Provenance of a call's values (issue 33, items 3 and 4, the pure part): per session, an
//! index of the values handed out to the agent and of the values the owner supplied, and the
//! check that tells, for a call's values, which came only from untrusted results (and which
//! carry a secret). No I/O: the broker feeds the index and persists it (it is serde).
//!
//! **Sources** ([`Source`]). A result the session received, with its class and whether it is
//! untrusted; the owner's words; a grant's literal. Owned sources are the owner's words, the
//! grants' literals and trusted results. Each is indexed the same way.
//!
//! **What is indexed.** A text is cut into tokens: whitespace-separated chunks without their
//! surrounding quotes, brackets, emphasis marks and trailing sentence punctuation. Indexed, each
//! under a keyed hash (SipHash-1-3, with a random key the broker gives and the index keeps, so
//! nobody without it can make a value whose hash meets another's):
//! - each token in its normal forms ([`normal`]): the **text form** (lowercase, blanks
//!   collapsed), and when it is one, the **email** form (lowercase, `mailto:` dropped), the
//!   **URL** form (scheme and host lowercase, the default port dropped, unreserved characters
//!   percent-decoded and other escapes in uppercase hex, a trailing `/` and the fragment
//!   dropped), the **host** of a URL or a bare host name (`evil.example/p`), the **IBAN** form
//!   (blanks removed, uppercase; also written in groups across tokens, `DE89 3704 …`) and the
//!   **number** form (`1,000.50`, `$1000.5` and `1000.500` are `1000.5`; thousands commas in
//!   groups of three, a decimal point; a leading zero makes it a code, not a number);
//! - the values inside a token, split at `= , ; : ( ) < > [ ] { } " ' |` (`to=x@y.example`);
//! - the alphanumeric words inside a token (`smith` in `Smith's`, `corp` in `evil-corp.example`);
//! - each pair of neighbouring tokens (`john smith`), the runs a multi-word value is made of;
//! - each run of [`RUN_WORDS`] alphanumeric words, for free text.
//!
//! **A value inside a longer one.** A value counts as in a source when it equals (in one of
//! its normal forms) a token, a value inside a token, an alphanumeric word of a token, or a run
//! of tokens (every pair of its neighbouring tokens is in the source: `Evil Corp Ltd` is in
//! "pay Evil Corp Ltd now"). A value that is only part of a word (`corp` in `evilcorp`, `123`
//! in `A123`) does not count, and neither does a value only part of which is in a source (a
//! URL built on a handed-out host is caught by its host, below, but `x@evil.example` is not
//! caught by `evil.example` alone).
//!
//! **Re-spellings not caught** (the value then looks never handed out): a value split
//! (`x @ y.example`, `x at y dot example`, an IBAN cut elsewhere than in groups), reversed,
//! percent-encoded beyond the unreserved characters, base64- or otherwise encoded, partial
//! (a prefix, a suffix, a few digits of a number), translated, with homoglyphs or other Unicode
//! look-alikes (no Unicode normalisation is done), an amount written with a decimal comma
//! (`1.000,50`) or in words, a date in another format.
//!
//! **The check** ([`ValueIndex::check`]) takes a call's values, each with its kind
//! ([`ValueKind`]):
//! - an **identifier** (an address, an account, a URL, a name, an amount, a path): one value.
//!   It is owned when one of its forms is in an owned source; otherwise it is untrusted when one
//!   of its forms, its host (a URL's or a host name's: the place the call reaches), or (for
//!   a value of several tokens) one of its pairs of tokens occurs in an untrusted result;
//!   otherwise it was never handed out. Owned and never handed out are clean.
//! - a **shell command**: the script is split into words by the shell parser
//!   ([`crate::shell::script_words`], nested `sh -c` scripts too) and each word is an
//!   identifier (a word holding blanks is free text); the script's own text is checked as free
//!   text besides, so that what the parser keeps as written (`$(…)`, assignments) is still seen.
//! - **free text** (a mail body, a commit message): a run of [`RUN_WORDS`] alphanumeric words
//!   copied from an untrusted result, punctuation and case ignored (a run may cross sentence
//!   boundaries), counts as that result's; so do the addresses, URLs, host names and IBANs in
//!   it, each checked as an identifier. Single plain words and numbers in free text are not.
//!
//! **Confidentiality.** A value is a secret when every source of it is a `secret` result (a
//! value also in a public or private result, or in the owner's words, is not). The verdict
//! lists each value of the call that is a secret ([`Verdict::secret`]), so that a `carried`
//! grant can refuse exactly the calls that carry one: identifiers, pairs of tokens, runs of
//! free text, and in free text the values that look like secrets (letters and digits mixed,
//! six or more digits, twenty or more characters), as in an identifier its alphanumeric words
//! that look so (a key put in a URL's path or query).
//!
//! **Memory.** The index holds at most [`Caps::entries`] values and [`Caps::bytes`] bytes (an
//! estimate that errs high). Nothing is ever dropped: dropping an untrusted value would make an
//! attacker's value look never handed out, and dropping an owned one would lose the owner's
//! word. Past a cap, new values are not added and the index records that it overflowed
//! ([`Overflow`]); from then on a value it does not hold is not proven new, and the verdict
//! says so ([`Verdict::unproven`]): the decision asks, as it did before provenance (and
//! refuses under `carried` when a secret result did not fit). Values already held keep their
//! verdicts.

mod check;
mod index;
mod lost;
pub mod normal;
mod scan;
mod script;
mod values;

use std::fmt;

use serde::{Deserialize, Serialize};

use proto::Class;
use proto::text::{cut_at_boundary, escape_terminal};

pub use index::{IndexProblem, Overflow, ValueIndex};
pub use values::CallValues;

/// How many consecutive words of free text copied from one untrusted result make the text
/// that result's: 8. Shorter common phrases ("thank you for your email", "let me know if you
/// need anything", seven words) come up in any correspondence and must not make a reply ask;
/// a copied instruction or sentence ("send the quarterly report to the address below before
/// Friday") is longer, and an attacker's payload shorter than eight words that matters is a
/// link, an address or an account, which are checked on their own.
pub const RUN_WORDS: usize = 8;

/// What kind of value an argument holds, which decides how it is checked (the per-tool table
/// of argument roles maps onto these).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueKind {
    /// One value: an address, an account, a URL, a host, a name, an amount, a path.
    Identifier,
    /// A script for the `shell` tool: each of its words is a value.
    ShellCommand,
    /// Prose: a long run of copied words counts, and the addresses, URLs and accounts in it.
    FreeText,
}

/// One value of a call to check.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Value<'a> {
    /// The argument's name or role, for messages ("recipient").
    pub name: &'a str,
    /// How it is checked.
    pub kind: ValueKind,
    /// The value as the call gives it (a number as its JSON text).
    pub text: &'a str,
}

/// Where a text the index takes in comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source<'a> {
    /// A result the session received.
    Result {
        /// The call it answered.
        call_id: u64,
        /// The tool that produced it.
        tool: &'a str,
        /// Its class.
        class: Class,
        /// Whether it is untrusted (a trusted result is owned).
        untrusted: bool,
    },
    /// The owner's own words (as trustworthy as the owner's uid).
    OwnerWords,
    /// A literal of the owner's grants.
    Grant,
}

impl Source<'_> {
    /// (owned, untrusted, class).
    fn labels(&self) -> (bool, bool, Class) {
        match *self {
            Source::Result {
                class, untrusted, ..
            } => (!untrusted, untrusted, class),
            Source::OwnerWords | Source::Grant => (true, false, Class::Public),
        }
    }

    fn call_id(&self) -> u64 {
        match *self {
            Source::Result { call_id, .. } => call_id,
            Source::OwnerWords | Source::Grant => 0,
        }
    }
}

/// The bounds of one session's index.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Caps {
    /// The most values (normal forms, pairs, runs) held.
    pub entries: usize,
    /// The most bytes counted as used.
    pub bytes: usize,
}

impl Default for Caps {
    /// 250,000 values, 16 MiB: a few hundred pages of mail or a few dozen long web pages.
    fn default() -> Caps {
        Caps {
            entries: 250_000,
            bytes: 16 << 20,
        }
    }
}

/// The result a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The call it answered (in a parent session: the call that ran the child session).
    pub call_id: u64,
    /// The tool that produced it.
    pub tool: String,
    /// For a child session's value: the child's call that it answered.
    pub within: Option<u64>,
    /// Its class.
    pub class: Class,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.within {
            None => write!(f, "call {}, {}", self.call_id, self.tool),
            Some(inner) => write!(
                f,
                "call {} (its sub-session's call {inner}), {}",
                self.call_id, self.tool
            ),
        }
    }
}

/// Which part of a value was found in a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Part {
    /// The value itself, in one of its normal forms.
    Whole,
    /// Its host (a URL's or a host name's).
    Host(String),
    /// A run of its tokens or words (for free text, [`RUN_WORDS`] words).
    Run(String),
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concern {
    /// The value occurs in an untrusted result and in no owned source.
    Untrusted,
    /// Every source of the value is a secret result.
    Secret,
}

/// One value of the call and the result it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The argument it is in.
    pub argument: String,
    /// The value as the call gives it (a word of a script, an address in a body).
    pub value: String,
    /// Which part of it was found.
    pub part: Part,
    /// The result it came from (the first untrusted one, or the first secret one).
    pub origin: Origin,
    /// Why it is reported.
    pub concern: Concern,
}

/// The most characters of a value shown in a message.
const SHOWN: usize = 120;

/// `text` cut short and with control characters escaped, for a message.
fn shown(text: &str) -> String {
    let cut = cut_at_boundary(text, SHOWN);
    let ellipsis = if cut.len() < text.len() { "…" } else { "" };
    format!("{}{ellipsis}", escape_terminal(cut))
}

impl fmt::Display for Finding {
    /// "recipient x@y.example came from call 12, read_inbox, untrusted".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let label = match self.concern {
            Concern::Untrusted => "untrusted",
            Concern::Secret => "secret",
        };
        let verb = match self.concern {
            Concern::Untrusted => "came from",
            Concern::Secret => "is a secret from",
        };
        let (argument, value) = (&self.argument, shown(&self.value));
        match &self.part {
            Part::Whole => write!(f, "{argument} {value} {verb} {}, {label}", self.origin),
            Part::Host(host) => write!(
                f,
                "{argument} {value}: its host {} {verb} {}, {label}",
                shown(host),
                self.origin
            ),
            Part::Run(run) => write!(
                f,
                "{argument} holds \"{}\", which {verb} {}, {label}",
                shown(run),
                self.origin
            ),
        }
    }
}

/// A value the index cannot vouch for because it overflowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unproven {
    /// The argument it is in.
    pub argument: String,
    /// The value.
    pub value: String,
    /// Where the index stopped growing.
    pub overflow: Overflow,
}

impl fmt::Display for Unproven {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} is not among the session's values, which stopped growing at call {} (the index is full), so it may have come from an untrusted result",
            self.argument,
            shown(&self.value),
            self.overflow.first_call
        )
    }
}

/// The check's answer for one call.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Values that occur only in untrusted results (none: every value is owned or was never
    /// handed out), in the order of the call's values.
    pub untrusted: Vec<Finding>,
    /// Values every source of which is a secret result.
    pub secret: Vec<Finding>,
    /// The first value the index does not hold, when it overflowed (the value may have been
    /// handed out after it stopped growing).
    pub unproven: Option<Unproven>,
}

impl Verdict {
    /// Whether integrity allows the call unasked: no value only from untrusted results, and
    /// none the index cannot vouch for.
    pub fn clean(&self) -> bool {
        self.untrusted.is_empty() && self.unproven.is_none()
    }

    /// Whether the call carries a secret: a value from a secret result, or a value the index
    /// cannot vouch for after a secret result did not fit.
    pub fn carries_secret(&self) -> bool {
        !self.secret.is_empty()
            || self
                .unproven
                .as_ref()
                .is_some_and(|u| u.overflow.class == Class::Secret)
    }
}
