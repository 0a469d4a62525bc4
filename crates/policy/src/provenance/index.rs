//! The session's index of values: keyed hashes of normal forms, each with where it came from.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use serde::{Deserialize, Serialize};
use siphasher::sip::SipHasher13;

use proto::Class;

use super::normal::text_form;
use super::scan::{Found, each_value};
use super::{Caps, Origin, Source};

/// The entries by key. The keys are keyed hashes already, so the table uses them as they are
/// (nobody without the index's key can choose them).
type Entries = HashMap<u64, Entry, BuildHasherDefault<KeyHasher>>;

/// The table's hasher: a key as it is.
#[derive(Default)]
pub(super) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// What the index knows of one value.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Entry {
    /// Some owned source (the owner's words, a grant, a trusted result) holds it.
    #[serde(rename = "o")]
    pub(super) owned: bool,
    /// The lowest class of the sources that hold it (owner's words and grants count as
    /// public): a value is a secret only when every source of it is secret.
    #[serde(rename = "c")]
    pub(super) class: Class,
    /// The first untrusted result that held it (an index into the origins).
    #[serde(rename = "u", default, skip_serializing_if = "Option::is_none")]
    pub(super) untrusted: Option<u32>,
    /// The first secret result that held it.
    #[serde(rename = "s", default, skip_serializing_if = "Option::is_none")]
    pub(super) secret: Option<u32>,
}

/// Where the index stopped growing: past its caps, values are no longer added, so one it
/// does not hold may have been handed out after all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Overflow {
    /// The call whose values first did not fit.
    pub first_call: u64,
    /// The highest class of the sources whose values did not all fit.
    pub class: Class,
    /// Whether an untrusted source's values did not all fit.
    pub untrusted: bool,
}

/// One result the index holds values of, as stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Stored {
    pub(super) call_id: u64,
    pub(super) tool: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) within: Option<u64>,
    pub(super) class: Class,
}

/// Per session: the values handed out to the agent and the values the owner supplied, each
/// by keyed hash of its normal forms, with the labels and the call of the result it came from.
/// Bounded by [`Caps`]; serialisable, so a resumed session keeps it; a child session's index
/// merges into its parent's ([`ValueIndex::merge_child`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "Persisted", into = "Persisted")]
pub struct ValueIndex {
    pub(super) key: [u64; 2],
    pub(super) caps: Caps,
    pub(super) entries: Entries,
    pub(super) origins: Vec<Stored>,
    pub(super) tools: Vec<String>,
    tool_ids: HashMap<String, u32>,
    tool_bytes: usize,
    pub(super) overflow: Option<Overflow>,
    /// One bit per key (by its low bits), set for every key held: most runs of new free text
    /// are not held, and the filter (a few hundred KiB at most, in cache) says so without a
    /// look into the table. Rebuilt when the index is read back; never a false "not held".
    filter: Filter,
}

/// The filter's bits.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Filter {
    words: Vec<u64>,
}

impl Filter {
    /// A filter with about eight bits per value the caps allow, at most 2^21 bits (256 KiB).
    fn for_caps(caps: Caps) -> Filter {
        let bits = caps
            .entries
            .saturating_mul(8)
            .clamp(64, 1 << 21)
            .next_power_of_two();
        Filter {
            words: vec![0; bits / 64],
        }
    }

    fn slot(&self, key: u64) -> (usize, u64) {
        let bits = self.words.len() * 64;
        let bit = (key as usize) & (bits - 1);
        (bit / 64, 1u64 << (bit % 64))
    }

    fn set(&mut self, key: u64) {
        let (word, mask) = self.slot(key);
        if let Some(w) = self.words.get_mut(word) {
            *w |= mask;
        }
    }

    fn may_hold(&self, key: u64) -> bool {
        let (word, mask) = self.slot(key);
        self.words.get(word).is_none_or(|w| w & mask != 0)
    }
}

/// Why an index cannot be read back or merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexProblem {
    /// The child was made with another hash key (not by [`ValueIndex::child`]).
    #[error(
        "the child session's value index was made with another hash key than its parent's; make it with the parent's ValueIndex::child"
    )]
    OtherKey,
    /// A stored index refers to a result or a tool it does not hold.
    #[error(
        "the stored value index is damaged ({0}); delete the session's stored index to start an empty one"
    )]
    Damaged(&'static str),
}

/// Bytes an entry costs, with the hash table's own overhead (an estimate that errs high).
const ENTRY_BYTES: usize = 40;
/// Bytes a stored origin costs, beside its tool's name.
const ORIGIN_BYTES: usize = 32;

impl ValueIndex {
    /// An empty index whose hashes are keyed with `key` (random bytes from the broker, kept
    /// with the index: without the key, nobody can make a value whose hash meets another's).
    pub fn new(key: [u8; 16], caps: Caps) -> ValueIndex {
        let mut k0 = [0u8; 8];
        let mut k1 = [0u8; 8];
        k0.copy_from_slice(&key[..8]);
        k1.copy_from_slice(&key[8..]);
        ValueIndex {
            key: [u64::from_le_bytes(k0), u64::from_le_bytes(k1)],
            caps,
            entries: Entries::default(),
            origins: Vec::new(),
            tools: Vec::new(),
            tool_ids: HashMap::new(),
            tool_bytes: 0,
            overflow: None,
            filter: Filter::for_caps(caps),
        }
    }

    /// An empty index for a child session: the same key and caps, so that it can be merged
    /// back ([`ValueIndex::merge_child`]).
    pub fn child(&self) -> ValueIndex {
        let mut child = ValueIndex::new([0; 16], self.caps);
        child.key = self.key;
        child
    }

    /// How many values (normal forms, runs) the index holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bytes the index is counted as using against [`Caps::bytes`].
    pub fn bytes(&self) -> usize {
        self.entries.len() * ENTRY_BYTES + self.origins.len() * ORIGIN_BYTES + self.tool_bytes
    }

    /// Where the index stopped growing, if it did.
    pub fn overflow(&self) -> Option<Overflow> {
        self.overflow
    }

    /// Indexes the values of `text`, a result or the owner's supply, as `source` says.
    pub fn add(&mut self, source: Source<'_>, text: &str) {
        let origin = self.origin(&source);
        let (owned, untrusted, class) = source.labels();
        let keys = self.keys_of(text);
        let room = self.caps.entries.saturating_sub(self.entries.len());
        self.entries.reserve(keys.len().min(room));
        let mut missed = false;
        for key in keys {
            missed |= !self.put(key, owned, untrusted, class, origin);
        }
        if missed {
            self.note_overflow(source.call_id(), class, untrusted);
        }
    }

    /// The keyed hash of one string.
    pub(super) fn hash_str(&self, text: &str) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.key[0], self.key[1]);
        h.write(text.as_bytes());
        h.finish()
    }

    /// The keyed hash of the text forms of `tokens` joined by single spaces: the same as
    /// [`ValueIndex::hash_str`] of [`text_form`] of their join, without building either.
    pub(super) fn hash_text_forms(&self, tokens: &[&str]) -> u64 {
        let mut h = SipHasher13::new_with_keys(self.key[0], self.key[1]);
        for (i, token) in tokens.iter().enumerate() {
            if i > 0 {
                h.write(b" ");
            }
            write_text_form(&mut h, token);
        }
        h.finish()
    }

    /// The entry of `key`, if held.
    pub(super) fn get(&self, key: u64) -> Option<&Entry> {
        if !self.filter.may_hold(key) {
            return None;
        }
        self.entries.get(&key)
    }

    /// The origin `index` as callers see it.
    pub(super) fn origin_at(&self, index: u32) -> Option<Origin> {
        let stored = self.origins.get(usize::try_from(index).ok()?)?;
        Some(Origin {
            call_id: stored.call_id,
            tool: self.tools.get(usize::try_from(stored.tool).ok()?)?.clone(),
            within: stored.within,
            class: stored.class,
        })
    }

    /// Every key `text` is indexed under, sorted: its candidates' forms and hosts, its inner
    /// words, its pairs of tokens and its runs of [`RUN_WORDS`](super::RUN_WORDS) words.
    fn keys_of(&self, text: &str) -> Vec<u64> {
        let mut keys = Vec::with_capacity(text.len() / 2);
        each_value(text, |found| match found {
            Found::Plain(token) => keys.push(self.hash_text_forms(&[token])),
            Found::Candidate(candidate) => {
                keys.extend(candidate.forms.iter().map(|f| self.hash_str(f)));
                keys.extend(candidate.host.iter().map(|h| self.hash_str(h)));
            }
            Found::InnerWord(text) | Found::Pair(text) | Found::Run(text) => {
                keys.push(self.hash_str(text));
            }
        });
        keys.sort_unstable();
        keys.dedup();
        keys
    }

    /// Records one key from a source; false when it is new and does not fit.
    fn put(&mut self, key: u64, owned: bool, untrusted: bool, class: Class, origin: u32) -> bool {
        if let Some(entry) = self.entries.get_mut(&key) {
            merge_entry(entry, owned, untrusted, class, origin);
            return true;
        }
        if self.entries.len() >= self.caps.entries || self.bytes() + ENTRY_BYTES > self.caps.bytes {
            return false;
        }
        let mut entry = Entry {
            owned,
            class,
            untrusted: None,
            secret: None,
        };
        merge_entry(&mut entry, owned, untrusted, class, origin);
        self.insert(key, entry);
        true
    }

    /// Adds a new entry, and its bit to the filter.
    fn insert(&mut self, key: u64, entry: Entry) {
        self.filter.set(key);
        self.entries.insert(key, entry);
    }

    pub(super) fn note_overflow(&mut self, call_id: u64, class: Class, untrusted: bool) {
        let overflow = self.overflow.get_or_insert(Overflow {
            first_call: call_id,
            class,
            untrusted,
        });
        overflow.class = overflow.class.max(class);
        overflow.untrusted |= untrusted;
    }

    /// The origin index for `source` (results only; owned supplies are never named), stored
    /// once per call.
    fn origin(&mut self, source: &Source<'_>) -> u32 {
        let Source::Result {
            call_id,
            tool,
            class,
            ..
        } = *source
        else {
            return u32::MAX;
        };
        if let Some(last) = self.origins.last()
            && last.call_id == call_id
            && last.within.is_none()
            && self.tools.get(last.tool as usize).map(String::as_str) == Some(tool)
        {
            return u32::try_from(self.origins.len() - 1).unwrap_or(u32::MAX);
        }
        let tool = self.tool_id(tool);
        self.push_origin(Stored {
            call_id,
            tool,
            within: None,
            class,
        })
    }

    fn push_origin(&mut self, stored: Stored) -> u32 {
        self.origins.push(stored);
        u32::try_from(self.origins.len() - 1).unwrap_or(u32::MAX)
    }

    fn tool_id(&mut self, tool: &str) -> u32 {
        if let Some(id) = self.tool_ids.get(tool) {
            return *id;
        }
        let id = u32::try_from(self.tools.len()).unwrap_or(u32::MAX);
        self.tools.push(tool.to_owned());
        self.tool_ids.insert(tool.to_owned(), id);
        self.tool_bytes += tool.len() + ORIGIN_BYTES;
        id
    }

    /// Takes in a child session's index, as its result comes back through call `via` of this
    /// session: the child's values keep their labels; the results they came from are named as
    /// the child's calls within `via`. The parent's caps hold: what does not fit marks the
    /// parent overflowed, and a child that overflowed makes its parent so too.
    pub fn merge_child(&mut self, child: &ValueIndex, via: u64) -> Result<(), IndexProblem> {
        if child.key != self.key {
            return Err(IndexProblem::OtherKey);
        }
        let mut mapped = Vec::with_capacity(child.origins.len());
        for stored in &child.origins {
            let name = child
                .tools
                .get(stored.tool as usize)
                .ok_or(IndexProblem::Damaged(
                    "an origin names a tool it does not hold",
                ))?;
            let tool = self.tool_id(name);
            mapped.push(self.push_origin(Stored {
                call_id: via,
                tool,
                within: Some(stored.within.unwrap_or(stored.call_id)),
                class: stored.class,
            }));
        }
        let remap = |index: Option<u32>| index.and_then(|i| mapped.get(i as usize).copied());
        let mut missed: Option<(Class, bool)> = None;
        let mut keys: Vec<(&u64, &Entry)> = child.entries.iter().collect();
        keys.sort_unstable_by_key(|(key, _)| **key);
        for (key, entry) in keys {
            let untrusted = remap(entry.untrusted);
            let secret = remap(entry.secret);
            if let Some(mine) = self.entries.get_mut(key) {
                mine.owned |= entry.owned;
                mine.class = mine.class.min(entry.class);
                mine.untrusted = mine.untrusted.or(untrusted);
                mine.secret = mine.secret.or(secret);
                continue;
            }
            if self.entries.len() >= self.caps.entries
                || self.bytes() + ENTRY_BYTES > self.caps.bytes
            {
                let (class, was_untrusted) = missed.unwrap_or((Class::Public, false));
                missed = Some((class.max(entry.class), was_untrusted || untrusted.is_some()));
                continue;
            }
            self.insert(
                *key,
                Entry {
                    owned: entry.owned,
                    class: entry.class,
                    untrusted,
                    secret,
                },
            );
        }
        if let Some((class, untrusted)) = missed {
            self.note_overflow(via, class, untrusted);
        }
        if let Some(theirs) = child.overflow {
            self.note_overflow(via, theirs.class, theirs.untrusted);
        }
        Ok(())
    }
}

/// Feeds the text form of `token` to `h`: an ASCII token without blanks lowered a slice at a
/// time on the stack, any other through [`text_form`].
fn write_text_form(h: &mut SipHasher13, token: &str) {
    if !token.is_ascii() || token.bytes().any(|b| char::from(b).is_whitespace()) {
        h.write(text_form(token).as_bytes());
        return;
    }
    let mut buf = [0u8; 64];
    for chunk in token.as_bytes().chunks(buf.len()) {
        let lowered = &mut buf[..chunk.len()];
        lowered.copy_from_slice(chunk);
        lowered.make_ascii_lowercase();
        h.write(lowered);
    }
}

/// Adds one source's labels to an entry.
fn merge_entry(entry: &mut Entry, owned: bool, untrusted: bool, class: Class, origin: u32) {
    entry.owned |= owned;
    entry.class = entry.class.min(class);
    if untrusted && entry.untrusted.is_none() && origin != u32::MAX {
        entry.untrusted = Some(origin);
    }
    if class == Class::Secret && entry.secret.is_none() && origin != u32::MAX {
        entry.secret = Some(origin);
    }
}

/// The index as persisted: entries sorted by key, so the same index is always written the
/// same way.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Persisted {
    key: [u64; 2],
    caps: Caps,
    tools: Vec<String>,
    origins: Vec<Stored>,
    entries: Vec<(u64, Entry)>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    overflow: Option<Overflow>,
}

impl From<ValueIndex> for Persisted {
    fn from(index: ValueIndex) -> Persisted {
        let mut entries: Vec<(u64, Entry)> = index.entries.into_iter().collect();
        entries.sort_unstable_by_key(|(key, _)| *key);
        Persisted {
            key: index.key,
            caps: index.caps,
            tools: index.tools,
            origins: index.origins,
            entries,
            overflow: index.overflow,
        }
    }
}

impl TryFrom<Persisted> for ValueIndex {
    type Error = IndexProblem;

    fn try_from(stored: Persisted) -> Result<ValueIndex, IndexProblem> {
        let tools = stored.tools.len();
        if stored.origins.iter().any(|o| o.tool as usize >= tools) {
            return Err(IndexProblem::Damaged(
                "an origin names a tool it does not hold",
            ));
        }
        let origins = stored.origins.len();
        let valid = |i: Option<u32>| i.is_none_or(|i| (i as usize) < origins);
        if stored
            .entries
            .iter()
            .any(|(_, e)| !valid(e.untrusted) || !valid(e.secret))
        {
            return Err(IndexProblem::Damaged(
                "an entry names a result it does not hold",
            ));
        }
        let tool_ids = stored
            .tools
            .iter()
            .enumerate()
            .map(|(i, t)| (t.clone(), u32::try_from(i).unwrap_or(u32::MAX)))
            .collect();
        let tool_bytes = stored.tools.iter().map(|t| t.len() + ORIGIN_BYTES).sum();
        let mut filter = Filter::for_caps(stored.caps);
        for (key, _) in &stored.entries {
            filter.set(*key);
        }
        Ok(ValueIndex {
            filter,
            key: stored.key,
            caps: stored.caps,
            entries: stored.entries.into_iter().collect(),
            origins: stored.origins,
            tools: stored.tools,
            tool_ids,
            tool_bytes,
            overflow: stored.overflow,
        })
    }
}
