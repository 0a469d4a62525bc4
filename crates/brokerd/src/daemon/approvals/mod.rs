//! Calls waiting for the owner: a grant that asks (`approval = "ask"`, `on_untrusted = "ask"`
//! after untrusted input, or `on_untrusted = "provenance"` for a value that came only from
//! untrusted results) and the model's `ask` questions.
//!
//! Each gets an id and an expiry (`approval_ms`); its request is in the audit log and the
//! ledger before the client hears `PendingApproval`, so a pending approval survives a restart
//! (loaded at start). The owner approves once, approves for the session, refuses, or answers a
//! question; the first of the owner, the expiry and the grace period to settle an approval
//! wins, and the losers are told it is no longer pending. A refusal, an expiry or an answer is
//! recorded with the call's final answer in the same batch, so a client that comes back later
//! gets it from the ledger. An approved call stays here until the connection waiting for it
//! takes it (once) and decides it again before it runs; a call whose client left is kept
//! `pending_grace_ms` for the client to resume, then abandoned (never run, and recorded).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError, Weak};

use ledger::{CallState, Event, Field, Labels};
use proto::{
    ApprovalId, AskWhy, AskedValue, CallId, DenyReason, GrantId, OwnerErrorCode, OwnerEvent,
    PendingKind, PendingView, Resolution, SessionId, Timestamp, ToolResponse,
};
use tokio::sync::watch;

mod answers;
mod client;
mod handed;

use answers::{final_answer, not_pending, view_of, wrong_kind};
pub use handed::{listen, take_handed};

use super::Broker;
use super::journal::WholeAnswer;

/// What a waiting connection learns.
#[derive(Debug, Clone, PartialEq)]
pub enum Settled {
    /// The owner approved: take the call and run it.
    Approved,
    /// The call's final answer (already recorded).
    Final(ToolResponse),
}

/// An owner request the broker could not carry out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRefusal {
    /// For programs.
    pub code: OwnerErrorCode,
    /// For a person: what is wrong and what to do.
    pub message: String,
}

impl OwnerRefusal {
    pub(super) fn new(code: OwnerErrorCode, message: impl Into<String>) -> OwnerRefusal {
        OwnerRefusal {
            code,
            message: message.into(),
        }
    }
}

/// The owner's answer to a pending approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OwnerAnswer {
    /// Approve this call.
    Once,
    /// Approve the asking grant for the rest of the session (with the ask's values only, when
    /// provenance asked about values: [`AskWhy::scoped_to_values`]).
    ForSession,
    /// Refuse.
    Refuse,
    /// Answer a question.
    Text(String),
}

struct Entry {
    view: PendingView,
    /// The arguments as recorded (for the final answer's record).
    arguments: Field,
    /// Approved, waiting to be taken by its connection.
    approved: bool,
    /// Connections waiting for it now.
    attached: usize,
    /// Bumped whenever the last connection leaves, so an older grace timer stands down.
    left: u64,
    settled: watch::Sender<Option<Settled>>,
}

/// An entry taken to be settled: its view, its recorded arguments, and where its waiters hear.
type Claimed = (PendingView, Field, watch::Sender<Option<Settled>>);

/// The waiting calls.
pub struct Approvals {
    entries: Mutex<HashMap<ApprovalId, Entry>>,
}

/// A connection waiting for one approval; leaving (dropping it) starts the grace period when it
/// was the last.
pub struct Waiter {
    broker: Weak<Broker>,
    id: ApprovalId,
    settled: watch::Receiver<Option<Settled>>,
}

impl Waiter {
    /// The approval's id.
    pub fn id(&self) -> ApprovalId {
        self.id
    }

    /// Waits until the approval is settled.
    pub async fn settled(&mut self) -> Settled {
        loop {
            if let Some(settled) = self.settled.borrow_and_update().clone() {
                return settled;
            }
            if self.settled.changed().await.is_err() {
                return Settled::Final(ToolResponse::Failed {
                    message: "the approval was dropped without an answer".to_string(),
                });
            }
        }
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if let Some(broker) = self.broker.upgrade() {
            broker.approvals.detach(&broker, self.id);
        }
    }
}

/// The request for an approval, before it has an id.
pub struct Request {
    /// The session.
    pub session: SessionId,
    /// The call.
    pub call_id: CallId,
    /// The tool.
    pub tool: String,
    /// The arguments as the model wrote them.
    pub arguments: String,
    /// The grant that asks.
    pub grant: Option<GrantId>,
    /// Why.
    pub why: AskWhy,
    /// The session's labels now.
    pub labels: Labels,
    /// For `ask`: the question and its choices.
    pub question: Option<(String, Vec<String>)>,
    /// When provenance asks: where each value that asks came from, one sentence each.
    pub provenance: Vec<String>,
    /// When provenance asks: the values that ask (what approving for the session covers).
    pub values: Vec<AskedValue>,
}

impl Default for Approvals {
    fn default() -> Self {
        Approvals::new()
    }
}

impl Approvals {
    /// No approval yet (the ledger hands out the ids: [`ledger::Ledger::claim_approval_id`]).
    pub fn new() -> Approvals {
        Approvals {
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, HashMap<ApprovalId, Entry>> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The pending approvals, oldest first.
    pub fn pending(&self) -> Vec<PendingView> {
        let mut views: Vec<PendingView> = self
            .entries()
            .values()
            .filter(|e| !e.approved)
            .map(|e| e.view.clone())
            .collect();
        views.sort_by_key(|v| v.approval);
        views
    }

    /// Records a new approval request, registers it, tells the owner, and starts its expiry.
    /// The caller waits with the returned [`Waiter`].
    pub async fn request(
        &self,
        broker: &Arc<Broker>,
        request: Request,
    ) -> Result<(Waiter, Timestamp), String> {
        // One id space for every broker sharing the ledger's database.
        let id = broker
            .with_ledger(|l| l.claim_approval_id())
            .map_err(|e| e.to_string())?;
        let now = Timestamp::now();
        let wait = broker.config.approval_ms.min(i64::MAX as u64) as i64;
        let expires = now.plus_millis(wait);
        let arguments = Field::of(&request.arguments);
        broker
            .journal
            .record(vec![Event::ApprovalRequested {
                approval: id,
                session: request.session.clone(),
                call_id: request.call_id,
                tool: request.tool.clone(),
                arguments: arguments.clone(),
                grant: request.grant.clone(),
                why: request.why,
                labels: request.labels,
                expires,
                values: request.values.clone(),
                provenance: request.provenance.clone(),
            }])
            .await
            .map_err(|e| e.to_string())?;
        // Read once the request is in the ledger: the ledger's thread applies records in
        // order, so the answer that made the session untrusted (written before this call came)
        // is applied by now, however far behind that thread was.
        let untrusted_by = if request.labels.untrusted {
            broker
                .with_ledger(|l| l.untrusted_by(&request.session))
                .ok()
                .flatten()
        } else {
            None
        };
        let (question, choices) = request.question.unzip();
        let view = PendingView {
            approval: id,
            kind: if question.is_some() {
                PendingKind::Question
            } else {
                PendingKind::Approval
            },
            parent: broker.children.binding(&request.session).map(|b| b.parent),
            session: request.session,
            call_id: request.call_id,
            tool: request.tool,
            arguments: request.arguments,
            grant: request.grant,
            why: request.why,
            taint: request.labels.taint,
            untrusted: request.labels.untrusted,
            untrusted_by,
            question,
            choices: choices.unwrap_or_default(),
            provenance: request.provenance,
            values: request.values,
            requested: now,
            expires,
        };
        tracing::info!(approval = %id, session = %view.session, call = %view.call_id, tool = %view.tool, "waiting for the owner");
        let waiter = self.insert(broker, view.clone(), arguments, false, true);
        broker.publish(OwnerEvent::Pending { pending: view });
        if broker.ledger_shared() {
            // An answer handed through another broker before this one held the entry.
            tokio::spawn(take_handed(Arc::clone(broker)));
        }
        Ok((waiter, expires))
    }

    /// Registers an entry and starts its expiry (and, when nobody waits, its grace period).
    fn insert(
        &self,
        broker: &Arc<Broker>,
        view: PendingView,
        arguments: Field,
        approved: bool,
        attached: bool,
    ) -> Waiter {
        let id = view.approval;
        let expires = view.expires;
        let (settled, receiver) = watch::channel(if approved {
            Some(Settled::Approved)
        } else {
            None
        });
        self.entries().insert(
            id,
            Entry {
                view,
                arguments,
                approved,
                attached: usize::from(attached),
                left: 0,
                settled,
            },
        );
        if !approved {
            let weak = Arc::downgrade(broker);
            tokio::spawn(async move {
                let left = expires.as_millis() - Timestamp::now().as_millis();
                tokio::time::sleep(std::time::Duration::from_millis(left.max(0) as u64)).await;
                if let Some(broker) = weak.upgrade() {
                    let _ = broker.approvals.settle(&broker, id, Ending::Expired).await;
                }
            });
        }
        if !attached {
            self.start_grace(broker, id, 0);
        }
        Waiter {
            broker: Arc::downgrade(broker),
            id,
            settled: receiver,
        }
    }

    /// Loads what the ledger holds as waiting (at start): pending approvals, and approved calls
    /// not yet run. Nobody waits for them yet, so their grace periods start now.
    pub fn load(&self, broker: &Arc<Broker>) -> Result<usize, ledger::LedgerError> {
        let mut rows = broker.with_ledger(|l| l.pending_approvals())?;
        let approved = broker.with_ledger(|l| {
            let mut found = Vec::new();
            let mine = Some(l.broker_name()).filter(|name| !name.is_empty());
            for (session, call_id) in l.calls_in(CallState::Approved)? {
                // Another broker's approved call (a shared ledger) is that broker's to run.
                if let Some(row) = l.approval_of_call(&session, call_id)?
                    && row.broker.as_deref() == mine
                {
                    found.push(row);
                }
            }
            Ok::<_, ledger::LedgerError>(found)
        })?;
        let count = rows.len() + approved.len();
        for row in approved {
            let view = view_of(broker, &row);
            drop(self.insert(broker, view, row.arguments, true, false));
        }
        for row in rows.drain(..) {
            let view = view_of(broker, &row);
            drop(self.insert(broker, view, row.arguments, false, false));
        }
        Ok(count)
    }

    /// Waits again for an approval that a call id sent again names: `None` when it is not
    /// waiting here any more.
    pub fn attach(&self, broker: &Arc<Broker>, id: ApprovalId) -> Option<(Waiter, Timestamp)> {
        let mut entries = self.entries();
        let entry = entries.get_mut(&id)?;
        entry.attached += 1;
        Some((
            Waiter {
                broker: Arc::downgrade(broker),
                id,
                settled: entry.settled.subscribe(),
            },
            entry.view.expires,
        ))
    }

    /// Whether approval `id` waits here, unanswered.
    pub fn holds(&self, id: ApprovalId) -> bool {
        self.entries().get(&id).is_some_and(|e| !e.approved)
    }

    /// The connection that waited for an approved call takes it to run it.
    pub fn take(&self, id: ApprovalId) {
        self.entries().remove(&id);
    }

    fn detach(&self, broker: &Arc<Broker>, id: ApprovalId) {
        let left = {
            let mut entries = self.entries();
            let Some(entry) = entries.get_mut(&id) else {
                return;
            };
            entry.attached = entry.attached.saturating_sub(1);
            if entry.attached > 0 {
                return;
            }
            entry.left += 1;
            entry.left
        };
        tracing::info!(approval = %id, "the client waiting for this approval left");
        self.start_grace(broker, id, left);
    }

    fn start_grace(&self, broker: &Arc<Broker>, id: ApprovalId, left: u64) {
        let weak = Arc::downgrade(broker);
        let grace = broker.config.pending_grace();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        runtime.spawn(async move {
            tokio::time::sleep(grace).await;
            let Some(broker) = weak.upgrade() else {
                return;
            };
            let still_gone = broker
                .approvals
                .entries()
                .get(&id)
                .is_some_and(|e| e.attached == 0 && e.left == left);
            if still_gone {
                let why = format!(
                    "its client left and did not come back within {} ms",
                    grace.as_millis()
                );
                let _ = broker
                    .approvals
                    .settle(&broker, id, Ending::Abandoned(why))
                    .await;
            }
        });
    }

    /// Abandons every waiting call of `session` (it ended).
    pub async fn end_session(&self, broker: &Arc<Broker>, session: &SessionId) {
        let ids: Vec<ApprovalId> = self
            .entries()
            .values()
            .filter(|e| &e.view.session == session)
            .map(|e| e.view.approval)
            .collect();
        for id in ids {
            let why = "its session ended".to_string();
            let _ = self.settle(broker, id, Ending::Abandoned(why)).await;
        }
    }

    /// Carries out the owner's answer; returns what was done, for the owner.
    pub async fn answer(
        &self,
        broker: &Arc<Broker>,
        id: ApprovalId,
        answer: OwnerAnswer,
    ) -> Result<String, OwnerRefusal> {
        self.settle(broker, id, Ending::Owner(answer)).await
    }

    async fn settle(
        &self,
        broker: &Arc<Broker>,
        id: ApprovalId,
        ending: Ending,
    ) -> Result<String, OwnerRefusal> {
        self.settle_through(broker, id, ending, None).await
    }

    /// Takes approval `id` to settle it with `ending`, under the lock: `None` when it does not
    /// wait here; an error when the ending does not fit it or it was approved already.
    fn claim(
        &self,
        broker: &Broker,
        id: ApprovalId,
        ending: &Ending,
    ) -> Result<Option<Claimed>, OwnerRefusal> {
        let mut entries = self.entries();
        let Some(entry) = entries.get_mut(&id) else {
            return Ok(None);
        };
        if let Ending::Owner(answer) = ending {
            wrong_kind(id, entry.view.kind, &entry.view.tool, answer)?;
        }
        if entry.approved && !matches!(ending, Ending::Abandoned(_)) {
            drop(entries);
            return Err(not_pending(broker, id));
        }
        let keep = matches!(
            ending,
            Ending::Owner(OwnerAnswer::Once | OwnerAnswer::ForSession)
        );
        if keep {
            entry.approved = true;
            return Ok(Some((
                entry.view.clone(),
                entry.arguments.clone(),
                entry.settled.clone(),
            )));
        }
        Ok(entries
            .remove(&id)
            .map(|entry| (entry.view, entry.arguments, entry.settled)))
    }

    /// An ending for approval `id`, which does not wait here: the owner's answer is handed to
    /// the broker it waits in when the ledger is shared; otherwise it is no longer pending.
    async fn not_here(
        &self,
        broker: &Arc<Broker>,
        id: ApprovalId,
        ending: Ending,
    ) -> Result<String, OwnerRefusal> {
        match ending {
            Ending::Owner(answer) if broker.ledger_shared() => {
                handed::hand_over(broker, id, answer).await
            }
            _ => Err(not_pending(broker, id)),
        }
    }

    /// [`Approvals::settle`], recording who answered when not the owner (`channel`).
    pub(super) async fn settle_through(
        &self,
        broker: &Arc<Broker>,
        id: ApprovalId,
        ending: Ending,
        channel: Option<String>,
    ) -> Result<String, OwnerRefusal> {
        // Whoever changes the entry under the lock settles it; the others are told.
        let Some((view, arguments, settled)) = self.claim(broker, id, &ending)? else {
            return self.not_here(broker, id, ending).await;
        };
        let resolution = ending.resolution();
        let mut events = vec![Event::ApprovalResolved {
            approval: id,
            session: view.session.clone(),
            call_id: view.call_id,
            grant: view.grant.clone(),
            resolution: resolution.clone(),
            channel,
        }];
        let (outcome, message) = final_answer(broker, &view, &ending);
        let mut whole = None;
        if let Some((answer, response, detail)) = &outcome {
            events.push(Event::Answered {
                session: view.session.clone(),
                call_id: view.call_id,
                tool: view.tool.clone(),
                arguments: arguments.clone(),
                grant: view.grant.clone(),
                labels: None,
                answer: answer.clone(),
                detail: detail.clone(),
            });
            whole = Some(WholeAnswer {
                session: view.session.clone(),
                call_id: view.call_id,
                response: response.clone(),
            });
        }
        let recorded = match broker.journal.record_with(events, whole).await {
            Ok(applied) => applied.wait().await,
            Err(error) => Err(error),
        };
        let settled_as = match (recorded, outcome) {
            (Err(error), _) => {
                tracing::error!(%error, approval = %id, "the owner's answer was not recorded");
                // Nothing runs on an answer that is not on disk.
                self.entries().remove(&id);
                settled.send_replace(Some(Settled::Final(ToolResponse::Denied {
                    reason: DenyReason::AuditUnavailable,
                })));
                return Err(OwnerRefusal::new(
                    OwnerErrorCode::Internal,
                    format!("the answer to approval {id} could not be recorded: {error}"),
                ));
            }
            (Ok(()), Some((_, response, _))) => Settled::Final(response),
            (Ok(()), None) => match &ending {
                Ending::Abandoned(why) => Settled::Final(ToolResponse::Failed {
                    message: format!("this call was abandoned and never ran: {why}"),
                }),
                _ => Settled::Approved,
            },
        };
        tracing::info!(approval = %id, ?resolution, "approval settled");
        settled.send_replace(Some(settled_as));
        broker.publish(OwnerEvent::Resolved {
            approval: id,
            resolution,
        });
        Ok(message)
    }
}

/// How an approval ends.
#[derive(Debug, Clone)]
pub(super) enum Ending {
    Owner(OwnerAnswer),
    Expired,
    Abandoned(String),
}

impl Ending {
    fn resolution(&self) -> Resolution {
        match self {
            Ending::Owner(OwnerAnswer::Once) => Resolution::ApprovedOnce,
            Ending::Owner(OwnerAnswer::ForSession) => Resolution::ApprovedForSession,
            Ending::Owner(OwnerAnswer::Refuse) => Resolution::Refused,
            Ending::Owner(OwnerAnswer::Text(text)) => Resolution::Answered { text: text.clone() },
            Ending::Expired => Resolution::Expired,
            Ending::Abandoned(why) => Resolution::Abandoned { why: why.clone() },
        }
    }
}
