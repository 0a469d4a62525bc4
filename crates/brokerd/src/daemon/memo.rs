//! What a session's next call must know before the ledger has applied the previous answer.
//!
//! An answer leaves once its record is on disk; the ledger follows a moment later, on the
//! journal's applier thread. Rather than hold the session until then, the broker keeps, under the
//! session's lock, the labels its answers raised and the answers the ledger may not have yet.
//! The next call joins those with what the ledger says, so it never sees a session less tainted
//! than its answers made it, and a re-sent call id finds its answer either here or there.
//!
//! The broker is the ledger's only writer and every call of a session passes this memo, so the
//! memo also keeps what the ledger said of the session the first time this broker needed it
//! (its labels, the highest call id it had used): later calls read neither from SQLite. A call
//! id above every id the session has used is new without asking the ledger; any other is
//! looked up there, as before.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use proto::{CallId, ToolResponse};

use policy::decide::Labels;

/// A session's state between an answer and the ledger's copy of it; held by the session's lock.
#[derive(Debug, Default)]
pub struct SessionMemo {
    labels: Option<Labels>,
    unapplied: Vec<Unapplied>,
    /// The ledger's labels of the session when this broker first read them.
    known: Option<Labels>,
    /// The highest call id the session has used: the ledger's when first read, raised by every
    /// new call since (tracked before the ledger is read too).
    highest_call: Option<u64>,
}

/// An answer on disk that the ledger may not have applied yet.
#[derive(Debug)]
pub struct Unapplied {
    /// The call.
    pub call_id: CallId,
    /// Its tool.
    pub tool: String,
    /// SHA-256 of its arguments.
    pub identity: String,
    /// The answer the client got.
    pub response: ToolResponse,
    /// The file content the call saw or left: its path and SHA-256 (read before write).
    pub seen: Option<(String, String)>,
    /// Set (by the ledger's thread) once the ledger holds the answer.
    pub applied: Arc<AtomicBool>,
}

impl SessionMemo {
    /// The session's labels: the ledger's `row`, raised by every answer given since.
    pub fn labels(&self, row: Labels) -> Labels {
        match self.labels {
            Some(seen) => joined(row, seen),
            None => row,
        }
    }

    /// The session's labels without the ledger: what it said when first read, raised by every
    /// answer since; `None` until it has been read.
    pub fn known_labels(&self) -> Option<Labels> {
        self.known.map(|row| self.labels(row))
    }

    /// Keeps what the ledger said of the session: its labels and the highest call id it holds.
    pub fn know(&mut self, row: Labels, highest_call: Option<CallId>) {
        self.known = Some(row);
        self.highest_call = self.highest_call.max(highest_call.map(|id| id.0));
    }

    /// Whether `call_id` is above every id the session has used, so that the ledger cannot
    /// hold it (only once the ledger has been read).
    pub fn surely_new(&self, call_id: CallId) -> bool {
        self.known.is_some() && self.highest_call.is_none_or(|highest| call_id.0 > highest)
    }

    /// Notes a call id the session has now used.
    pub fn used(&mut self, call_id: CallId) {
        self.highest_call = self.highest_call.max(Some(call_id.0));
    }

    /// Records an answer and the labels it left the session with, until the ledger holds it.
    pub fn answered(&mut self, answer: Unapplied, labels: Option<Labels>) {
        if let Some(labels) = labels {
            self.labels = Some(self.labels(labels));
        }
        self.unapplied
            .retain(|answer| !answer.applied.load(Ordering::Acquire));
        self.unapplied.push(answer);
    }

    /// The SHA-256 of `path`'s content that the session's newest answer not yet in the ledger
    /// saw or left; `None`: the ledger knows the newest.
    pub fn seen(&self, path: &str) -> Option<&str> {
        self.unapplied
            .iter()
            .rev()
            .filter(|answer| !answer.applied.load(Ordering::Acquire))
            .find_map(|answer| match &answer.seen {
                Some((seen, sha256)) if seen == path => Some(sha256.as_str()),
                _ => None,
            })
    }

    /// The answer to `call_id` if the ledger may not have it yet.
    pub fn earlier(&self, call_id: CallId) -> Option<&Unapplied> {
        self.unapplied
            .iter()
            .find(|answer| answer.call_id == call_id && !answer.applied.load(Ordering::Acquire))
    }
}

/// The higher of two sessions' labels: the higher class, untrusted if either is.
pub fn joined(a: Labels, b: Labels) -> Labels {
    Labels {
        taint: a.taint.max(b.taint),
        untrusted: a.untrusted || b.untrusted,
    }
}

#[cfg(test)]
mod tests {
    use proto::Class;

    use super::*;

    /// A flag as the ledger's thread sets it.
    fn flag() -> Arc<AtomicBool> {
        Arc::new(AtomicBool::new(false))
    }

    fn mark_applied(flag: &AtomicBool) {
        flag.store(true, Ordering::Release);
    }

    /// An answer to `call_id` whose content `seen` saw, `applied` once the ledger holds it.
    fn unapplied(
        call_id: u64,
        text: &str,
        seen: Option<(String, String)>,
        applied: &Arc<AtomicBool>,
    ) -> Unapplied {
        Unapplied {
            call_id: CallId(call_id),
            tool: "read_file".to_string(),
            identity: "h".to_string(),
            response: result(text),
            seen,
            applied: Arc::clone(applied),
        }
    }

    fn result(text: &str) -> ToolResponse {
        ToolResponse::Result {
            content: text.to_string(),
            class: Class::Secret,
            untrusted: false,
            truncated: false,
        }
    }

    #[test]
    fn labels_are_the_ledgers_raised_by_every_answer_since() {
        let mut memo = SessionMemo::default();
        let public = Labels {
            taint: Class::Public,
            untrusted: false,
        };
        assert_eq!(memo.labels(public), public);
        let secret = Labels {
            taint: Class::Secret,
            untrusted: false,
        };
        memo.answered(unapplied(1, "k", None, &flag()), Some(secret));
        // A ledger that has not applied the answer yet still reads public.
        assert_eq!(memo.labels(public).taint, Class::Secret);
        let untrusted = Labels {
            taint: Class::Public,
            untrusted: true,
        };
        memo.answered(unapplied(2, "p", None, &flag()), Some(untrusted));
        assert_eq!(
            memo.labels(public),
            Labels {
                taint: Class::Secret,
                untrusted: true
            }
        );
    }

    #[test]
    fn a_call_id_is_surely_new_only_above_every_id_used_once_the_ledger_was_read() {
        let mut memo = SessionMemo::default();
        assert!(!memo.surely_new(CallId(100)), "nothing is known yet");
        memo.used(CallId(40));
        assert_eq!(memo.known_labels(), None);
        let row = Labels {
            taint: Class::Private,
            untrusted: false,
        };
        // The ledger's highest is below an id used before it was read: the memo's counts.
        memo.know(row, Some(CallId(30)));
        assert_eq!(memo.known_labels(), Some(row));
        assert!(!memo.surely_new(CallId(40)));
        assert!(!memo.surely_new(CallId(7)));
        assert!(memo.surely_new(CallId(41)));
        memo.used(CallId(u64::MAX));
        assert!(!memo.surely_new(CallId(u64::MAX)));
        let mut fresh = SessionMemo::default();
        fresh.know(row, None);
        assert!(fresh.surely_new(CallId(0)), "a session with no call yet");
        let secret = Labels {
            taint: Class::Secret,
            untrusted: true,
        };
        fresh.answered(unapplied(0, "a", None, &flag()), Some(secret));
        assert_eq!(fresh.known_labels(), Some(secret), "raised by the answer");
    }

    #[test]
    fn an_answer_is_found_until_the_ledger_holds_it() {
        let mut memo = SessionMemo::default();
        let applied = flag();
        memo.answered(unapplied(7, "a", None, &applied), None);
        let found = memo.earlier(CallId(7)).map(|a| a.response.clone());
        assert_eq!(found, Some(result("a")));
        assert!(memo.earlier(CallId(8)).is_none());
        mark_applied(&applied);
        assert!(memo.earlier(CallId(7)).is_none());
        // Applied answers are dropped at the next answer.
        memo.answered(unapplied(8, "b", None, &flag()), None);
        assert_eq!(memo.unapplied.len(), 1);
    }

    #[test]
    fn the_newest_unapplied_content_seen_wins_until_the_ledger_holds_it() {
        let mut memo = SessionMemo::default();
        let seen = |sha: &str| Some(("/w/a.txt".to_string(), sha.to_string()));
        let (first, second) = (flag(), flag());
        memo.answered(unapplied(1, "a", seen("s1"), &first), None);
        assert_eq!(memo.seen("/w/a.txt"), Some("s1"));
        memo.answered(unapplied(2, "b", seen("s2"), &second), None);
        assert_eq!(memo.seen("/w/a.txt"), Some("s2"));
        assert_eq!(memo.seen("/w/other.txt"), None);
        mark_applied(&first);
        mark_applied(&second);
        assert_eq!(memo.seen("/w/a.txt"), None, "the ledger has it now");
    }
}
