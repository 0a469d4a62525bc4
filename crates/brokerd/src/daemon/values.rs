//! The values each session was handed (issue 33, items 3 and 4): per session, a
//! [`ValueIndex`] with a random key, kept in the session's slot and read by every decision
//! (`on_untrusted = "provenance"`, `max_taint = "carried"`).
//!
//! **Fed** with every text the agent is handed, exactly as handed (rendered and capped), when
//! its record is on disk ([`Handed`]): a call's result or failure with the labels it carries;
//! a write's diff with its `+` lines left out (they are the call's own arguments) and its
//! other lines (the file's old content) labelled as the grant labels the file; the owner's
//! answer to the model's `ask` and the owner's words (`owner_words` frames) as the owner's;
//! the downstream tools' definitions a session is listed, as an untrusted result of call 0.
//!
//! **Rebuilt** from the ledger the first time a broker needs a session's index (a resumed
//! session, a session after a restart): the ledger holds each call's whole answer and the
//! owner's words, so the same texts are added again ([`rebuild`]). Where the ledger lost an
//! answer (it kept only a digest: a ledger caught up from the audit log), the index is marked
//! unproven from that call on, so no value turns clean for want of it.

use std::sync::PoisonError;
use std::sync::atomic::Ordering;

use ledger::{ANSWER_LOST, Event, Field, Ledger, LedgerError};
use policy::provenance::{Caps, Source, ValueIndex};
use proto::tools::ToolName;
use proto::{Class, ErrorCode, SessionId, ToolResponse, ToolSchema};

use super::sessions::Refusal;
use super::{Broker, SessionSlot};

/// The tool name a downstream tools listing is indexed under (as call 0).
pub const LISTED_TOOLS: &str = "list_tools";

/// How a text the agent was handed is indexed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handed {
    /// Not at all: a denial carries no text.
    Nothing,
    /// As a result with these labels (a result, or a failure that may carry outside text).
    Result {
        /// Its class.
        class: Class,
        /// Whether it is untrusted.
        untrusted: bool,
    },
    /// As a write's diff: the `+` lines are the call's arguments and are not indexed; every
    /// other line (the file's old content, the header) is untrusted, whatever the write grant
    /// says: `untrusted = false` on a write grant speaks for what the write puts there, never
    /// for what the file held before, which an edit's context would otherwise launder into the
    /// owner's (a value also in an owned source stays owned).
    Write {
        /// The class of the file (the grant's).
        class: Class,
    },
    /// As the owner's words (the owner's answer to the model's question).
    OwnerWords,
}

/// A new, empty index with a random key, or why the system gave no randomness.
pub fn fresh() -> Result<ValueIndex, String> {
    let mut key = [0u8; 16];
    getrandom::fill(&mut key).map_err(|e| format!("no randomness for a value index: {e}"))?;
    Ok(ValueIndex::new(key, Caps::default()))
}

/// Adds `text`, the answer to `call_id` of `tool`, as `handed` says.
pub fn feed(index: &mut ValueIndex, call_id: u64, tool: &str, handed: Handed, text: &str) {
    match handed {
        Handed::Nothing => {}
        Handed::Result { class, untrusted } => {
            let source = Source::Result {
                call_id,
                tool,
                class,
                untrusted,
            };
            index.add(source, text);
        }
        Handed::Write { class } => {
            let source = Source::Result {
                call_id,
                tool,
                class,
                untrusted: true,
            };
            index.add(source, &not_added(text));
        }
        Handed::OwnerWords => index.add(Source::OwnerWords, text),
    }
}

/// The lines of a write's answer that are not its own arguments: every line but the diff's
/// `+` lines (what the write added, and the `+++` line naming the path it wrote).
pub fn not_added(text: &str) -> String {
    text.lines()
        .filter(|line| !line.starts_with('+'))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Adds the downstream tools' definitions a session is listed: a server's text the model
/// reads, untrusted, as the answer of call 0.
pub fn feed_listing(index: &mut ValueIndex, tools: &[ToolSchema]) {
    for tool in tools {
        let text = serde_json::to_string(tool).unwrap_or_else(|_| tool.description.clone());
        let source = Source::Result {
            call_id: 0,
            tool: LISTED_TOOLS,
            class: Class::Public,
            untrusted: true,
        };
        index.add(source, &text);
    }
}

/// The owner's words cut into pieces the audit record keeps whole (each at most
/// [`ledger::audit::INLINE_LIMIT`] bytes, cut after a blank where there is one), so that the index
/// rebuilt from the records holds what the live one did: each piece is added on its own.
pub fn owner_pieces(text: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = text;
    while rest.len() > ledger::audit::INLINE_LIMIT {
        let cut = proto::text::cut_at_boundary(rest, ledger::audit::INLINE_LIMIT);
        let at = match cut.rfind(char::is_whitespace) {
            Some(blank) => blank + cut[blank..].chars().next().map_or(1, char::len_utf8),
            _ => cut.len(),
        };
        // A first character wider than the limit cannot happen (a char is at most 4 bytes).
        let at = at.max(1).min(rest.len());
        let (piece, after) = rest.split_at(at);
        pieces.push(piece);
        rest = after;
    }
    if !rest.is_empty() {
        pieces.push(rest);
    }
    pieces
}

/// Records the owner's words for `session` (in pieces the record keeps whole) and adds them
/// to its values as the owner's, once they are on disk.
pub async fn owner_words(broker: &Broker, session: &SessionId, text: &str) -> Result<(), Refusal> {
    let pieces = owner_pieces(text);
    let events = pieces
        .iter()
        .map(|piece| Event::OwnerWords {
            session: session.clone(),
            text: Field::of(piece),
        })
        .collect();
    broker.journal.record(events).await.map_err(|error| {
        Refusal::new(
            ErrorCode::Internal,
            format!("the owner's words could not be recorded: {error}"),
        )
    })?;
    let slot = broker.session_slot(session);
    slot.with_values(broker, session, |values| {
        if let Some(index) = values {
            for piece in &pieces {
                index.add(Source::OwnerWords, piece);
            }
        }
    });
    tracing::info!(%session, bytes = text.len(), "owner's words recorded");
    Ok(())
}

/// How a recorded answer of `tool` is indexed when the index is rebuilt: a result with its
/// labels (a write's as a write, with the file untrusted: the record does not say what the
/// grant said), the owner's answer to `ask` as the owner's words, a failure with the session's
/// labels (`session`: a failure's own labels are not recorded, and the session's are at least
/// as high), a denial not at all.
fn recorded<'a>(
    tool: &str,
    response: &'a ToolResponse,
    session: (Class, bool),
) -> Option<(Handed, &'a str)> {
    match response {
        ToolResponse::Result {
            content,
            class,
            untrusted,
            ..
        } => {
            let handed = if tool == policy::ask::ASK {
                Handed::OwnerWords
            } else if ToolName::parse(tool).is_some_and(ToolName::echoes_arguments) {
                Handed::Write { class: *class }
            } else {
                Handed::Result {
                    class: *class,
                    untrusted: *untrusted,
                }
            };
            Some((handed, content))
        }
        ToolResponse::Failed { message } => Some((
            Handed::Result {
                class: session.0,
                untrusted: session.1,
            },
            message,
        )),
        _ => None,
    }
}

/// The index of `session` rebuilt from the ledger: the owner's words, then every recorded
/// answer in call order. An answer the ledger lost (kept only as a digest) marks the index
/// unproven from that call on (with the session's labels), so that no value it held turns
/// clean. Also whether the session had any answer (then the downstream listing it was handed,
/// which no record keeps, is to be indexed again: [`relist`]).
pub fn rebuild(
    ledger: &Ledger,
    session: &SessionId,
) -> Result<Result<(ValueIndex, bool), String>, LedgerError> {
    let mut index = match fresh() {
        Ok(index) => index,
        Err(problem) => return Ok(Err(problem)),
    };
    let labels = ledger
        .session(session)?
        .map_or((Class::Secret, true), |row| (row.taint, row.untrusted));
    for words in ledger.owner_words(session)? {
        index.add(Source::OwnerWords, &words);
    }
    let answers = ledger.answers(session)?;
    let had_answers = !answers.is_empty();
    for (call_id, tool, response) in answers {
        if matches!(&response, ToolResponse::Failed { message } if message == ANSWER_LOST) {
            index.lost(call_id.0, labels.0, labels.1);
            continue;
        }
        if let Some((handed, text)) = recorded(&tool, &response, labels) {
            feed(&mut index, call_id.0, &tool, handed, text);
        }
    }
    Ok(Ok((index, had_answers)))
}

/// Before a decision in a session whose index was rebuilt with answers in it: the downstream
/// tools listing, handed out in an earlier broker's time and kept in no record, is listed
/// again and indexed as the untrusted text it is (a server's words), so that a value from a
/// description does not turn clean across a restart.
pub async fn relist(broker: &Broker, session: &SessionId, slot: &SessionSlot) {
    if !slot.relist.swap(false, Ordering::AcqRel) || broker.gateway.names().is_empty() {
        return;
    }
    let super::GrantsState::Loaded(_, downstream) = broker.grants_now() else {
        return;
    };
    let runner = broker.runner.as_ref();
    let protected = broker.protected.as_ref();
    let listed = broker
        .gateway
        .catalog(runner, protected, session, &downstream)
        .await;
    slot.with_values(broker, session, |values| {
        if let Some(index) = values {
            feed_listing(index, &listed);
        }
    });
}

impl SessionSlot {
    /// Gives a new session `index` to start from (a child session: a copy of its parent's).
    pub fn start_values(&self, index: ValueIndex) {
        *self.values.lock().unwrap_or_else(PoisonError::into_inner) = Some(index);
    }

    /// Runs `f` on the session's index: built (rebuilt from the ledger) the first time this
    /// broker needs it; `None` when it cannot be had (the ledger unreadable, no randomness),
    /// and then no value is proven clean.
    pub fn with_values<T>(
        &self,
        broker: &Broker,
        session: &SessionId,
        f: impl FnOnce(Option<&mut ValueIndex>) -> T,
    ) -> T {
        let mut values = self.values.lock().unwrap_or_else(PoisonError::into_inner);
        if values.is_none() {
            match broker.with_reader(|l| rebuild(l, session)) {
                Ok(Ok((index, had_answers))) => {
                    *values = Some(index);
                    self.relist.store(had_answers, Ordering::Release);
                }
                Ok(Err(problem)) => tracing::error!(%session, %problem, "no value index"),
                Err(error) => {
                    tracing::error!(%session, %error, "the value index cannot be rebuilt")
                }
            }
        }
        f(values.as_mut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_writes_added_lines_are_left_out_and_every_other_line_kept() {
        let answer = "{\"tool\":\"write_file\"}\n--- /w/a.txt\n+++ /w/a.txt\n@@ -1,2 +1,2 @@\n kept line\n-old line\n+new line\n";
        let left = not_added(answer);
        assert!(left.contains("kept line") && left.contains("old line"));
        assert!(!left.contains("new line") && !left.contains("+++"));
    }

    #[test]
    fn owner_words_are_cut_into_pieces_the_record_keeps_whole_and_nothing_is_lost() {
        let long = "word ".repeat(3000) + "é".repeat(3000).as_str();
        let pieces = owner_pieces(&long);
        assert!(pieces.len() > 1);
        assert!(
            pieces
                .iter()
                .all(|p| p.len() <= ledger::audit::INLINE_LIMIT && !p.is_empty())
        );
        assert_eq!(pieces.concat(), long);
        assert_eq!(owner_pieces("run the tests"), vec!["run the tests"]);
        assert!(owner_pieces("").is_empty());
    }
}
