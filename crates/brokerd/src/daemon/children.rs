//! Child sessions, bound by their parent (`delegate`, issue 38 item 4).
//!
//! A session opens a child with a task and the ids of the grants the child may use: each must
//! cover the parent (a live allow grant in force, and, for a child opening a grandchild, one of
//! its own ids), so a child is never wider than its parent. Every call of the child is decided
//! against those grants and every deny grant, and nothing else ([`Children::narrowed`]); the
//! downstream servers' tools are not a child's. Children nest at most [`MAX_DEPTH`] deep.
//!
//! Taint flows both ways. The child starts with its parent's labels and a copy of its
//! parent's values seen; when it ends (it reported, its client closed it, it was idle too long,
//! or its parent ended), its labels and values are kept until the parent collects them, and
//! the collect's answer carries the child's labels and merges its values into the parent's
//! ([`policy::provenance::ValueIndex::merge_child`]).
//!
//! A binding lives in this broker's memory only. So that no broker ever serves a child
//! unbound, a child's ledger row keeps the digest of a second token that is never given out,
//! and the digest of the token its client holds is kept here: after a restart a child cannot
//! be resumed at all.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use policy::decide::{IndexedGrants, Labels};
use policy::grants::Grant;
use policy::provenance::ValueIndex;
use proto::{SessionId, Timestamp};
use tokio::sync::watch;

/// How deep children nest: a session's child is at depth 1, its child at depth 2, and a
/// session at depth 2 cannot delegate.
pub const MAX_DEPTH: u32 = 2;

/// How a child session ended, kept for its parent's collect.
#[derive(Debug, Clone)]
pub struct Ended {
    /// Its report, when it sent one before it ended.
    pub report: Option<String>,
    /// Why it ended.
    pub reason: String,
    /// Its labels when it ended.
    pub labels: Labels,
    /// Its values seen when it ended (`None`: its index was unavailable).
    pub values: Option<ValueIndex>,
}

/// What binds a child to its parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Binding {
    /// The session that opened it.
    pub parent: SessionId,
    /// The ids of the grants it may use.
    pub grants: Vec<String>,
    /// How deep it is (1: a child of a session no one delegated).
    pub depth: u32,
}

#[derive(Debug)]
struct Child {
    binding: Binding,
    token_sha256: String,
    report: Option<String>,
    ended: watch::Sender<Option<Arc<Ended>>>,
}

/// The broker's child sessions, by id.
#[derive(Debug, Default)]
pub struct Children {
    children: Mutex<HashMap<SessionId, Child>>,
}

/// Why a child cannot be opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenProblem {
    /// The parent is already at [`MAX_DEPTH`].
    TooDeep(u32),
    /// A grant id that does not cover the parent, and why.
    Wider(String, String),
}

impl std::fmt::Display for OpenProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OpenProblem::TooDeep(depth) => write!(
                f,
                "this session is a child at depth {depth}; children nest at most {MAX_DEPTH} deep, so it cannot delegate"
            ),
            OpenProblem::Wider(id, why) => write!(
                f,
                "grant {id:?} does not cover this session ({why}); a child may use only grants that cover its parent"
            ),
        }
    }
}

impl Children {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionId, Child>> {
        self.children.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What binds `session` to its parent, when it is a child this broker opened.
    pub fn binding(&self, session: &SessionId) -> Option<Binding> {
        self.lock().get(session).map(|c| c.binding.clone())
    }

    /// The binding a child of `parent` would have with `ids`, when `ids` all cover `parent`
    /// under `grants` now and `parent` may delegate.
    pub fn bind(
        &self,
        parent: &SessionId,
        ids: &[String],
        grants: &[Grant],
        now: Timestamp,
    ) -> Result<Binding, OpenProblem> {
        let above = self.binding(parent);
        let depth = above.as_ref().map_or(0, |b| b.depth);
        if depth >= MAX_DEPTH {
            return Err(OpenProblem::TooDeep(depth));
        }
        for id in ids {
            let mut named = grants.iter().filter(|g| &g.id == id).peekable();
            if named.peek().is_none() {
                return Err(OpenProblem::Wider(
                    id.clone(),
                    "no grant has this id".into(),
                ));
            }
            if !named.any(|g| !g.deny && !g.expired(now)) {
                let why = "it is a deny grant or has expired";
                return Err(OpenProblem::Wider(id.clone(), why.into()));
            }
            if let Some(above) = &above
                && !above.grants.contains(id)
            {
                let why = format!("this session is a child of {} without it", above.parent);
                return Err(OpenProblem::Wider(id.clone(), why));
            }
        }
        Ok(Binding {
            parent: parent.clone(),
            grants: ids.to_vec(),
            depth: depth + 1,
        })
    }

    /// Keeps `child`, opened with `binding` and a token whose digest is `token_sha256`.
    pub fn insert(&self, child: SessionId, binding: Binding, token_sha256: String) {
        let child_entry = Child {
            binding,
            token_sha256,
            report: None,
            ended: watch::channel(None).0,
        };
        self.lock().insert(child, child_entry);
    }

    /// Whether `token_sha256` resumes `child`: `None` when this broker holds no such child.
    pub fn token_matches(&self, child: &SessionId, token_sha256: &str) -> Option<bool> {
        self.lock()
            .get(child)
            .map(|c| proto::ids::digests_equal(&c.token_sha256, token_sha256))
    }

    /// Keeps `report` as `child`'s report; `false` when `child` is no child.
    pub fn report(&self, child: &SessionId, report: String) -> bool {
        match self.lock().get_mut(child) {
            Some(entry) => {
                entry.report = Some(report);
                true
            }
            None => false,
        }
    }

    /// The children of `parent` that have not ended.
    pub fn open_children_of(&self, parent: &SessionId) -> Vec<SessionId> {
        self.lock()
            .iter()
            .filter(|(_, c)| &c.binding.parent == parent && c.ended.borrow().is_none())
            .map(|(id, _)| id.clone())
            .collect()
    }

    /// Marks `child` ended, `labels` and `values` as it ended, for its parent to collect.
    pub fn ended(
        &self,
        child: &SessionId,
        reason: &str,
        labels: Labels,
        values: Option<ValueIndex>,
    ) {
        if let Some(entry) = self.lock().get_mut(child) {
            let ended = Ended {
                report: entry.report.clone(),
                reason: reason.to_string(),
                labels,
                values,
            };
            entry.ended.send_if_modified(|slot| {
                let first = slot.is_none();
                if first {
                    *slot = Some(Arc::new(ended));
                }
                first
            });
        }
    }

    /// A receiver of `child`'s end, when `child` is a child of `parent`.
    pub fn watch(
        &self,
        parent: &SessionId,
        child: &SessionId,
    ) -> Option<watch::Receiver<Option<Arc<Ended>>>> {
        self.lock()
            .get(child)
            .filter(|c| &c.binding.parent == parent)
            .map(|c| c.ended.subscribe())
    }

    /// Forgets `child` once its parent collected it.
    pub fn forget(&self, child: &SessionId) {
        self.lock().remove(child);
    }

    /// Forgets every child of `parent` once `parent` has ended (none is collected then).
    pub fn forget_children_of(&self, parent: &SessionId) {
        self.lock().retain(|_, c| &c.binding.parent != parent);
    }

    /// The grants a call of `session` is decided against: all of `grants` for a session no one
    /// delegated; for a child, every deny grant and the allow grants it was given.
    pub fn narrowed(&self, session: &SessionId, grants: Arc<IndexedGrants>) -> Arc<IndexedGrants> {
        let Some(binding) = self.binding(session) else {
            return grants;
        };
        let kept: Vec<Grant> = grants
            .iter()
            .filter(|g| g.deny || binding.grants.contains(&g.id))
            .cloned()
            .collect();
        Arc::new(IndexedGrants::new(kept))
    }
}
