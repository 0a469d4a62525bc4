//! The memory router (the seed's `Routed`): `recall`, `memory` and `ask_memory` go to the memory
//! store in the state folder (`crates/memory`), never to a runner or a box; and the owner's
//! `bx memory` requests on the owner socket.
//!
//! Labels travel through the store: an entry keeps the writing session's labels, and a recall
//! answers with the highest labels of the entries it returns, so a secret written in one
//! session taints the session that recalls it. `ask_memory` sends only the entries whose class
//! the session's `consult` grant admits (`max_taint`).
//!
//! The store is opened at its first use, and again after a failure: a damaged store fails the
//! memory calls (and `bx memory`) with a sentence naming the file, and nothing else.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ::memory::{Forgot, Hit, MemoryError, NewEntry, ReadAs, Recall, Scope, Store};
use proto::{Class, MemoryEntry, SessionId, Timestamp};
use serde_json::{Map, Value, json};

use crate::consult::{ConsultClient, QUESTION_CAP};
use policy::args::ToolArgs;
use policy::decide::{Allowed, Decision, Labels, Scope as GrantScope, decide};

use super::runner::{Outcome, RunContext};

mod owner;

pub use owner::{
    EXPORT_CHUNK, LIST_CAP, owner_export, owner_forget, owner_list, owner_purge, owner_show,
};

/// The store's file name in the memory folder.
pub const STORE_FILE: &str = "memory.sqlite";

/// How many entries `ask_memory` recalls for its question.
pub const ASK_ENTRIES: usize = 8;

pub use super::runner::IN_STORE;

/// The memory store as the broker holds it.
pub struct MemoryService {
    path: PathBuf,
    store: Mutex<Option<Store>>,
    consult: Option<ConsultClient>,
}

impl MemoryService {
    /// The service over the store at `path` (opened at first use); `consult` is the model
    /// `ask_memory` asks, when one is configured.
    pub fn new(path: PathBuf, consult: Option<ConsultClient>) -> MemoryService {
        MemoryService {
            path,
            store: Mutex::new(None),
            consult,
        }
    }

    /// The store's file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }

    /// Whether `ask_memory` asks a consult model (and so has side effects).
    pub fn consults(&self) -> bool {
        self.consult.is_some()
    }

    /// Runs `f` on the store, opening it first if needed. A failure is the sentence the call
    /// fails with; the store is opened again at the next use.
    pub fn with_store<T>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, MemoryError>,
    ) -> Result<T, String> {
        let mut held = self.store.lock().unwrap_or_else(PoisonError::into_inner);
        let mut store = match held.take() {
            Some(store) => store,
            None => Store::open(&self.path).map_err(unusable)?,
        };
        let result = f(&mut store);
        // A store SQLite failed on is let go, and opened again at the next use.
        if !matches!(result, Err(MemoryError::Sqlite { .. })) {
            *held = Some(store);
        }
        result.map_err(unusable)
    }
}

fn unusable(error: MemoryError) -> String {
    format!("the memory store cannot be used: {error}; the other tools still work")
}

/// What the router gives for a memory call (and the job table for a job call): the outcome and
/// the labels of its result.
#[derive(Debug, Clone, PartialEq)]
pub struct Routed {
    /// The outcome, rendered by the caller like any other.
    pub outcome: Outcome,
    /// The result's class: the highest of the entries it carries.
    pub class: Class,
    /// Whether any entry it carries was written after untrusted input (or the consult
    /// model's answer is untrusted).
    pub untrusted: bool,
}

impl Routed {
    fn plain(outcome: Outcome) -> Routed {
        Routed {
            outcome,
            class: Class::Public,
            untrusted: false,
        }
    }
}

/// Runs a decided memory call for `session` (whose labels are `context.labels`) within
/// `limit`, off the async threads.
pub async fn route(
    service: &Arc<MemoryService>,
    session: &SessionId,
    allowed: &Allowed,
    context: RunContext,
    limit: Duration,
) -> Routed {
    let service = Arc::clone(service);
    let session = session.clone();
    let allowed = allowed.clone();
    let ran = tokio::time::timeout(
        limit + Duration::from_secs(2),
        tokio::task::spawn_blocking(move || run(&service, &session, &allowed, &context)),
    )
    .await;
    match ran {
        Ok(Ok(routed)) => routed,
        Ok(Err(join)) => Routed::plain(Outcome::Failed(format!(
            "the memory call stopped unexpectedly: {join}"
        ))),
        Err(_) => Routed::plain(Outcome::Failed(format!(
            "the memory call did not finish within its limit of {} ms",
            limit.as_millis()
        ))),
    }
}

/// The tags the deciding grant limits the session to.
fn scope_of(allowed: &Allowed) -> Scope<'_> {
    match &allowed.scope {
        Some(GrantScope::Tags(tags)) => Scope::Tags(tags),
        _ => Scope::All,
    }
}

fn run(
    service: &MemoryService,
    session: &SessionId,
    allowed: &Allowed,
    context: &RunContext,
) -> Routed {
    let scope = scope_of(allowed);
    match &allowed.args {
        ToolArgs::Memory(args) => match args.action() {
            policy::memory::MemoryAction::Add { text, tags } => {
                // An entry without tags under a grant limited to tags gets the grant's tags.
                let tags: &[String] = match (tags.is_empty(), scope) {
                    (true, Scope::Tags(scope)) => scope,
                    _ => tags,
                };
                let entry = NewEntry {
                    text,
                    tags,
                    session: session.as_str(),
                    class: context.labels.taint,
                    untrusted: context.labels.untrusted,
                    at: Timestamp::now(),
                };
                Routed::plain(match service.with_store(|s| s.add(&entry)) {
                    Ok(id) => Outcome::Ran {
                        fields: fields(json!({ "id": id, "tags": tags })),
                        body: format!(
                            "Remembered as entry {id} (labelled {}{}).",
                            entry.class.as_str(),
                            if entry.untrusted { ", untrusted" } else { "" }
                        ),
                    },
                    Err(message) => Outcome::Failed(message),
                })
            }
            policy::memory::MemoryAction::Forget(id) => {
                let forgot = service.with_store(|s| s.forget(id, scope, Timestamp::now()));
                Routed::plain(match forgot {
                    Ok(Forgot::Forgotten) => Outcome::Ran {
                        fields: fields(json!({ "forgotten": id })),
                        body: format!("Entry {id} is forgotten."),
                    },
                    Ok(Forgot::NotFound) => Outcome::Failed(format!(
                        "there is no entry {id} that this session may forget"
                    )),
                    Err(message) => Outcome::Failed(message),
                })
            }
        },
        ToolArgs::Recall(args) => {
            let recall = Recall {
                query: &args.query,
                tags: &args.tags,
                scope,
                limit: args.limit(),
                terms_only: false,
            };
            match service.with_store(|s| s.recall(&recall)) {
                Ok(found) => entries_result(&found.hits, found.read_as, Map::new()),
                Err(message) => Routed::plain(Outcome::Failed(message)),
            }
        }
        ToolArgs::AskMemory(args) => {
            let recall = Recall {
                query: &args.question,
                tags: &[],
                scope,
                limit: ASK_ENTRIES,
                terms_only: true,
            };
            let found = match service.with_store(|s| s.recall(&recall)) {
                Ok(found) => found,
                Err(message) => return Routed::plain(Outcome::Failed(message)),
            };
            match &service.consult {
                None => {
                    let mut extra = Map::new();
                    extra.insert("consulted".into(), Value::from(false));
                    entries_result(&found.hits, found.read_as, extra)
                }
                Some(client) => ask(client, &args.question, &found.hits, context),
            }
        }
        _ => Routed::plain(Outcome::Failed(
            "the memory router was handed a tool that is not a memory tool".to_string(),
        )),
    }
}

/// The highest labels of `entries`.
fn labels_of<'a>(entries: impl IntoIterator<Item = &'a MemoryEntry>) -> (Class, bool) {
    entries
        .into_iter()
        .fold((Class::Public, false), |(class, untrusted), e| {
            (class.max(e.class), untrusted || e.untrusted)
        })
}

/// The entries found, each with its id, tags, labels, snippet and (when short) whole text,
/// labelled with the highest of their labels.
fn entries_result(hits: &[Hit], read_as: ReadAs, extra: Map<String, Value>) -> Routed {
    let (class, untrusted) = labels_of(hits.iter().map(|h| &h.entry));
    let ids: Vec<u64> = hits.iter().map(|h| h.entry.id).collect();
    let mut header = fields(json!({
        "query_read_as": read_as.as_str(),
        "entries": hits.len(),
        "ids": ids,
    }));
    header.extend(extra);
    let body = if hits.is_empty() {
        "No memory entry matches.".to_string()
    } else {
        hits.iter().map(show_hit).collect::<Vec<_>>().join("\n")
    };
    Routed {
        outcome: Outcome::Ran {
            fields: header,
            body,
        },
        class,
        untrusted,
    }
}

/// Entries up to this size are shown whole beside their snippet.
const WHOLE_TEXT: usize = 2048;

fn show_hit(hit: &Hit) -> String {
    let e = &hit.entry;
    let tags = if e.tags.is_empty() {
        "no tags".to_string()
    } else {
        format!("tags {}", e.tags.join(", "))
    };
    let mut out = format!(
        "[{}] {tags}; written {} by session {}; {}{}\n  snippet: {}\n",
        e.id,
        e.at,
        e.session,
        e.class.as_str(),
        if e.untrusted { ", untrusted" } else { "" },
        hit.snippet
    );
    if e.text.len() <= WHOLE_TEXT {
        out.push_str(&format!("  text: {}\n", e.text));
    } else {
        out.push_str(&format!(
            "  text: {} bytes; the snippet is its best part\n",
            e.text.len()
        ));
    }
    out
}

/// `ask_memory` with a consult model: the entries the session's `consult` grant admits are
/// sent with the question; the answer names the ids it used.
fn ask(client: &ConsultClient, question: &str, hits: &[Hit], context: &RunContext) -> Routed {
    let consult_args = ToolArgs::Consult {
        question: question.to_string(),
    };
    let mut sent: Vec<&MemoryEntry> = Vec::new();
    let mut withheld: Vec<String> = Vec::new();
    let mut consult_labels: Option<(Class, bool)> = None;
    let mut prompt = format!(
        "Answer the question below using only the memory entries that follow it. End your answer with one line of the form `ids: 3, 7` naming the ids of the entries you used (`ids: none` if none helped).\n\nQuestion: {question}\n\nMemory entries:\n"
    );
    for hit in hits {
        let entry = &hit.entry;
        // Would a `consult` by this session, once it holds this entry, run unasked? The
        // integrity half (on_untrusted) is ask_memory's own grant's, decided already.
        let after = Labels {
            taint: context.labels.taint.max(entry.class),
            untrusted: false,
        };
        match decide(
            &consult_args,
            &context.grants,
            after,
            Timestamp::now(),
            &context.protected,
        ) {
            Decision::Allow(allowed) => {
                let line = format!("[{}] {}\n", entry.id, entry.text);
                if prompt.len() + line.len() > QUESTION_CAP {
                    withheld.push(format!(
                        "entry {}: longer than the question may be",
                        entry.id
                    ));
                    continue;
                }
                prompt.push_str(&line);
                let (class, untrusted) = consult_labels.unwrap_or((Class::Public, false));
                consult_labels = Some((class.max(allowed.class), untrusted || allowed.untrusted));
                sent.push(entry);
            }
            Decision::Ask(..) => withheld.push(format!(
                "entry {}: the consult grant asks the owner first",
                entry.id
            )),
            Decision::Deny(denied) => {
                withheld.push(format!("entry {}: {}", entry.id, denied.detail));
            }
        }
    }
    if sent.is_empty() {
        let body = if hits.is_empty() {
            "No memory entry matches the question.".to_string()
        } else {
            format!(
                "{} memory entries match, but none may be sent to the consult model ({}). recall reads them without it.",
                hits.len(),
                withheld.join("; ")
            )
        };
        return Routed::plain(Outcome::Ran {
            fields: fields(json!({ "consulted": false, "sent": [], "withheld": withheld.len() })),
            body,
        });
    }
    let (entry_class, entry_untrusted) = labels_of(sent.iter().copied());
    let (model_class, model_untrusted) = consult_labels.unwrap_or((Class::Public, false));
    let class = entry_class.max(model_class);
    let untrusted = entry_untrusted || model_untrusted;
    let ids: Vec<u64> = sent.iter().map(|e| e.id).collect();
    let arguments = json!({ "question": prompt }).to_string();
    let outcome = match client.run(&arguments) {
        Ok((answer, truncated)) => Outcome::Ran {
            fields: fields(json!({
                "consulted": true,
                "sent": ids,
                "used": used_ids(&answer, &ids),
                "withheld": withheld.len(),
                "truncated": truncated,
            })),
            body: answer,
        },
        Err(error) => Outcome::Failed(error.to_string()),
    };
    Routed {
        outcome,
        class,
        untrusted,
    }
}

/// The ids the answer's last `ids:` line names, among those sent.
fn used_ids(answer: &str, sent: &[u64]) -> Vec<u64> {
    let Some(line) = answer
        .lines()
        .rev()
        .find(|l| l.trim_start().to_ascii_lowercase().starts_with("ids:"))
    else {
        return Vec::new();
    };
    let mut used: Vec<u64> = Vec::new();
    for word in line.split(|c: char| !c.is_ascii_digit()) {
        if let Ok(id) = word.parse::<u64>()
            && sent.contains(&id)
            && !used.contains(&id)
        {
            used.push(id);
        }
    }
    used
}

fn fields(value: Value) -> Map<String, Value> {
    match value {
        Value::Object(map) => map,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ids_used_are_read_from_the_answers_last_ids_line_among_those_sent() {
        assert_eq!(used_ids("Blue.\nids: 3, 7, 99", &[3, 7]), [3, 7]);
        assert_eq!(used_ids("IDs: [7]", &[3, 7]), [7]);
        assert_eq!(used_ids("no line", &[3]), Vec::<u64>::new());
        assert_eq!(used_ids("ids: none", &[3]), Vec::<u64>::new());
    }
}
