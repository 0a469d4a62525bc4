//! The broker daemon: its folders and settings, the journal (audit log and ledger), sessions,
//! the call pipeline, approvals, the runner, the agent socket and the owner socket. [`start`] brings it up; `brokerd serve`
//! calls it.

pub mod accept;
pub mod approvals;
pub mod audit;
pub mod box_error;
pub mod calls;
pub mod children;
pub mod config;
pub mod delegate;
pub mod diagnostics;
pub mod dirs;
pub mod fetch;
pub mod gateway;
pub mod grants_watch;
pub mod jobs;
pub mod journal;
pub mod ledger_settings;
pub mod memo;
pub mod memory;
pub mod misfit;
pub mod nearest;
pub mod outgoing;
pub mod owner;
pub mod podman;
/// The broker-side proxy of granted hosts (the `proxy` crate), at the path the daemon uses.
pub use ::proxy;
mod reads;
pub mod render;
pub mod runner;
pub mod sandboxed;
pub mod sealing;
pub mod search;
pub mod server;
pub mod sessions;
pub mod startup;
pub mod uses;
pub mod values;
pub mod warm;
pub mod worker;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use ledger::Ledger;
use proto::dirs::Dirs;
use proto::{OwnerEvent, SessionId};

use policy::decide::{Labels, Protected};
use policy::grants::Problem;

use self::memory::MemoryService;
use approvals::Approvals;
use config::Config;
use journal::Journal;
use memo::SessionMemo;
use runner::Runner;

pub use startup::{StartError, StartOptions, start};

/// How many events a slow watcher may fall behind before it is told it missed some.
const EVENT_BACKLOG: usize = 4096;

/// The grants in force: all of them, or none and the problems that stopped them.
#[derive(Debug, Clone)]
pub enum GrantsState {
    /// Loaded without problems: the grants of boxmaker's tools, and those of the downstream
    /// MCP servers.
    Loaded(
        Arc<policy::decide::IndexedGrants>,
        Arc<policy::downstream::Downstream>,
    ),
    /// The folder has problems; every call gets `GrantsInvalid` until it is fixed.
    Invalid(Arc<Vec<Problem>>),
}

/// Everything a connection needs, shared.
pub struct Broker {
    /// The settings.
    pub config: Config,
    /// The folders.
    pub dirs: Dirs,
    /// The grants in force.
    pub grants: RwLock<GrantsState>,
    /// boxmaker's own folders and the owner's git configuration.
    pub protected: Arc<Protected>,
    /// The audit log and the ledger's one writer.
    pub journal: Journal,
    /// The ledger, for reads that must see the writer's latest state (sessions opening).
    pub ledger: Arc<Mutex<Ledger>>,
    /// A second, read-only connection for the calls' reads, so they never wait for the
    /// journal's writes (WAL lets readers and the writer go on at once).
    reader: Mutex<Ledger>,
    /// What runs decided calls.
    pub runner: Arc<dyn Runner>,
    /// The calls and questions waiting for the owner.
    pub approvals: Approvals,
    /// The owner's live event stream (`bx watch`).
    pub events: tokio::sync::broadcast::Sender<OwnerEvent>,
    /// The memory store behind `recall`, `memory` and `ask_memory` (and `bx memory`).
    pub memory: Arc<MemoryService>,
    /// Every session's background jobs.
    pub jobs: Arc<jobs::Jobs>,
    /// The downstream MCP servers.
    pub gateway: gateway::Gateway,
    /// The child sessions `delegate` opened, bound by their parents.
    pub children: children::Children,
    session_slots: Mutex<HashMap<SessionId, Arc<SessionSlot>>>,
}

/// One session's place in the broker: the lock that runs its calls one at a time (so its labels
/// rise in order), holding its memo; and, readable without that lock, whether it has ended and
/// the labels its recorded answers raised.
#[derive(Debug, Default)]
pub struct SessionSlot {
    /// The session's memo, behind the lock its calls take in turn.
    pub memo: tokio::sync::Mutex<SessionMemo>,
    ended: AtomicBool,
    /// Raised by every answer as it is written to disk, by whichever thread writes it, so a
    /// run whose caller went away (its answer recorded all the same) still raises them.
    raised: Mutex<Option<Labels>>,
    /// The values the session was handed (`None` until this broker first needs them; see
    /// [`values`]), fed by whichever thread records an answer.
    values: Mutex<Option<policy::provenance::ValueIndex>>,
    /// How many calls each grant let run in the session (`None` until this broker first
    /// needs them; see [`uses`]).
    uses: Mutex<Option<policy::decide::GrantUses>>,
    /// Set when the index was rebuilt for a session that had answers: the downstream tools
    /// listing it was handed then is not recorded, so it is listed and indexed again before
    /// the session's next decision.
    relist: AtomicBool,
}

impl SessionSlot {
    /// Whether the session was ended by this broker (a session ended before it started is
    /// known from the ledger).
    pub fn ended(&self) -> bool {
        self.ended.load(Ordering::Acquire)
    }

    /// Notes labels an answer of the session left it with, once the answer is on disk.
    pub fn raise(&self, labels: Labels) {
        let mut raised = self.raised.lock().unwrap_or_else(PoisonError::into_inner);
        *raised = Some(match *raised {
            Some(before) => memo::joined(before, labels),
            None => labels,
        });
    }

    /// `labels`, raised by every answer of the session written to disk in this broker.
    pub fn raised_over(&self, labels: Labels) -> Labels {
        match *self.raised.lock().unwrap_or_else(PoisonError::into_inner) {
            Some(raised) => memo::joined(raised, labels),
            None => labels,
        }
    }
}

impl Broker {
    /// A broker over these parts, with its own read-only connection to the ledger at
    /// `dirs.ledger()`.
    pub fn new(
        config: Config,
        dirs: Dirs,
        grants: GrantsState,
        protected: Protected,
        journal: Journal,
        ledger: Arc<Mutex<Ledger>>,
        runner: Arc<dyn Runner>,
    ) -> Result<Broker, ledger::LedgerError> {
        let reader = config.ledger.open(&dirs.ledger(), true)?;
        let memory = MemoryService::new(dirs.memory().join(self::memory::STORE_FILE), None);
        Ok(Broker {
            config,
            dirs,
            grants: RwLock::new(grants),
            protected: Arc::new(protected),
            journal,
            ledger,
            reader: Mutex::new(reader),
            runner,
            approvals: Approvals::new(),
            events: tokio::sync::broadcast::channel(EVENT_BACKLOG).0,
            memory: Arc::new(memory),
            jobs: Arc::default(),
            gateway: gateway::Gateway::default(),
            children: children::Children::default(),
            session_slots: Mutex::new(HashMap::new()),
        })
    }

    /// The same broker with `memory` as its memory store (the one [`Broker::new`] makes has
    /// no consult model for `ask_memory`).
    pub fn with_memory(mut self, memory: MemoryService) -> Broker {
        self.memory = Arc::new(memory);
        self
    }

    /// The same broker with `gateway` as its gateway to downstream MCP servers (the one
    /// [`Broker::new`] makes has none).
    pub fn with_gateway(mut self, gateway: gateway::Gateway) -> Broker {
        self.gateway = gateway;
        self
    }

    /// The grants in force now.
    pub fn grants_now(&self) -> GrantsState {
        self.grants
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the grants in force.
    pub fn set_grants(&self, state: GrantsState) {
        *self.grants.write().unwrap_or_else(PoisonError::into_inner) = state;
    }

    /// The session's slot: the lock its calls take in turn, and whether it has ended.
    pub fn session_slot(&self, session: &SessionId) -> Arc<SessionSlot> {
        let mut slots = self
            .session_slots
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        // Every call looks its slot up twice: no copy of the id once the slot exists.
        if let Some(slot) = slots.get(session) {
            return Arc::clone(slot);
        }
        Arc::clone(slots.entry(session.clone()).or_default())
    }

    /// Marks `session` ended once its end is on disk: its next call is refused without reading
    /// the ledger, which follows a moment later.
    pub fn mark_ended(&self, session: &SessionId) {
        self.session_slot(session)
            .ended
            .store(true, Ordering::Release);
    }

    /// Sends `event` to every owner watching (none is fine).
    pub fn publish(&self, event: OwnerEvent) {
        let _ = self.events.send(event);
    }

    /// Whether other brokers may share the ledger (it is on PostgreSQL): approvals may then be
    /// answered through them.
    pub fn ledger_shared(&self) -> bool {
        self.config.ledger.url.is_some()
    }

    /// Runs `f` on the ledger.
    pub fn with_ledger<T>(&self, f: impl FnOnce(&Ledger) -> T) -> T {
        let ledger = self.ledger.lock().unwrap_or_else(PoisonError::into_inner);
        f(&ledger)
    }

    /// Runs `f` on the read-only connection: the ledger as last committed, which may lag the
    /// answers of a session's memo.
    pub fn with_reader<T>(&self, f: impl FnOnce(&Ledger) -> T) -> T {
        let reader = self.reader.lock().unwrap_or_else(PoisonError::into_inner);
        f(&reader)
    }
}

#[cfg(test)]
mod tests {
    use proto::Class;

    use super::{Labels, SessionSlot};

    #[test]
    fn a_slot_keeps_the_highest_labels_its_answers_left_and_never_lowers_them() {
        let slot = SessionSlot::default();
        let public = Labels {
            taint: Class::Public,
            untrusted: false,
        };
        assert_eq!(slot.raised_over(public), public);
        slot.raise(Labels {
            taint: Class::Secret,
            untrusted: false,
        });
        slot.raise(Labels {
            taint: Class::Private,
            untrusted: true,
        });
        let both = Labels {
            taint: Class::Secret,
            untrusted: true,
        };
        assert_eq!(slot.raised_over(public), both);
        assert!(!slot.ended());
    }
}
