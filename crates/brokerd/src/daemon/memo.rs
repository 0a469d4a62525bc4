//! What a session's next call must know before the ledger has applied the previous answer.
//!
//! An answer leaves once its record is on disk; the ledger follows a moment later, on the
//! journal's applier thread. Rather than hold the session until then, the broker keeps, under the
//! session's lock, the labels its answers raised and the answers the ledger may not have yet.
//! The next call joins those with what the ledger says, so it never sees a session less tainted
//! than its answers made it, and a re-sent call id finds its answer either here or there.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use proto::{CallId, ToolResponse};

use crate::policy::Labels;

/// A session's state between an answer and the ledger's copy of it; held by the session's lock.
#[derive(Debug, Default)]
pub struct SessionMemo {
    labels: Option<Labels>,
    unapplied: Vec<Unapplied>,
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
    applied: Arc<AtomicBool>,
}

impl SessionMemo {
    /// The session's labels: the ledger's `row`, raised by every answer given since.
    pub fn labels(&self, row: Labels) -> Labels {
        match self.labels {
            Some(seen) => Labels {
                taint: row.taint.max(seen.taint),
                untrusted: row.untrusted || seen.untrusted,
            },
            None => row,
        }
    }

    /// Records an answer, the labels it left the session with and the file content it saw;
    /// the returned flag is set once the ledger holds it.
    pub fn answered(
        &mut self,
        call_id: CallId,
        tool: &str,
        identity: &str,
        response: &ToolResponse,
        labels: Option<Labels>,
        seen: Option<(String, String)>,
    ) -> Arc<AtomicBool> {
        if let Some(labels) = labels {
            self.labels = Some(self.labels(labels));
        }
        self.unapplied
            .retain(|answer| !answer.applied.load(Ordering::Acquire));
        let applied = Arc::new(AtomicBool::new(false));
        self.unapplied.push(Unapplied {
            call_id,
            tool: tool.to_string(),
            identity: identity.to_string(),
            response: response.clone(),
            seen,
            applied: Arc::clone(&applied),
        });
        applied
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

/// Marks an answer applied: the ledger holds it now.
pub fn mark_applied(flag: &AtomicBool) {
    flag.store(true, Ordering::Release);
}

#[cfg(test)]
mod tests {
    use proto::Class;

    use super::*;

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
        memo.answered(
            CallId(1),
            "read_file",
            "h1",
            &result("k"),
            Some(secret),
            None,
        );
        // A ledger that has not applied the answer yet still reads public.
        assert_eq!(memo.labels(public).taint, Class::Secret);
        let untrusted = Labels {
            taint: Class::Public,
            untrusted: true,
        };
        memo.answered(
            CallId(2),
            "http_fetch",
            "h2",
            &result("p"),
            Some(untrusted),
            None,
        );
        assert_eq!(
            memo.labels(public),
            Labels {
                taint: Class::Secret,
                untrusted: true
            }
        );
    }

    #[test]
    fn an_answer_is_found_until_the_ledger_holds_it() {
        let mut memo = SessionMemo::default();
        let applied = memo.answered(CallId(7), "read_file", "h", &result("a"), None, None);
        let found = memo.earlier(CallId(7)).map(|a| a.response.clone());
        assert_eq!(found, Some(result("a")));
        assert!(memo.earlier(CallId(8)).is_none());
        mark_applied(&applied);
        assert!(memo.earlier(CallId(7)).is_none());
        // Applied answers are dropped at the next answer.
        memo.answered(CallId(8), "read_file", "h", &result("b"), None, None);
        assert_eq!(memo.unapplied.len(), 1);
    }

    #[test]
    fn the_newest_unapplied_content_seen_wins_until_the_ledger_holds_it() {
        let mut memo = SessionMemo::default();
        let seen = |sha: &str| Some(("/w/a.txt".to_string(), sha.to_string()));
        let first = memo.answered(CallId(1), "read_file", "h", &result("a"), None, seen("s1"));
        assert_eq!(memo.seen("/w/a.txt"), Some("s1"));
        let second = memo.answered(CallId(2), "write_file", "h", &result("b"), None, seen("s2"));
        assert_eq!(memo.seen("/w/a.txt"), Some("s2"));
        assert_eq!(memo.seen("/w/other.txt"), None);
        mark_applied(&first);
        mark_applied(&second);
        assert_eq!(memo.seen("/w/a.txt"), None, "the ledger has it now");
    }
}
