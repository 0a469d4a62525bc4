//! One call through the broker, in the design brief's order: session state, grants, arguments,
//! the decision (grants, taint, integrity, approval), the decision on disk before a
//! side-effecting run, the run under the tool's time limit, the rendered and labelled answer,
//! and the answer on disk before it leaves. A call id sent again gets the answer it got, and
//! never runs twice.
//!
//! Every call takes one path: after an approval (given while it waited here, or to a call id
//! sent again) it is decided again from the top with the grants and labels of that moment. An
//! approval answers the ask it was given (the same grant, the same reason); anything stricter
//! that appeared meanwhile wins, and a new reason to ask asks again under a new approval.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use ledger::{Answer, CallState, sha256_hex};
use proto::{
    ApprovalId, AskWhy, AskedValue, CallId, DenyReason, ErrorCode, GrantId, OwnerEvent, SessionId,
    Timestamp, ToolRequest, ToolResponse,
};

use policy::decide::{AskReason, Labels, Traced};

use super::approvals::{Request, Settled, Waiter};
use super::memo::{SessionMemo, Unapplied};
use super::sessions::Refusal;
use super::values::{self, Handed};
use super::{Broker, GrantsState, SessionSlot};

mod checker;
mod decide;
mod downstream;
mod record;
mod run;

use record::{finish, unavailable};
use run::run;

/// Where a call tells its connection that it waits for the owner (`Some(PendingApproval)`, to
/// be sent to the client) and that it no longer does (`None`: it runs).
pub type PendingTx = tokio::sync::mpsc::UnboundedSender<Option<ToolResponse>>;

/// Answers `request` for `session`: a response, or a refusal that closes the connection
/// (another session's id, a reused call id). A call that waits for the owner says so on
/// `pending` first.
pub async fn answer(
    broker: &Arc<Broker>,
    session: &SessionId,
    request: &ToolRequest,
    pending: &PendingTx,
) -> Result<ToolResponse, Refusal> {
    if request.session != session.as_str() {
        return Err(Refusal::new(
            ErrorCode::WrongSession,
            format!(
                "this connection serves session {session}; the call names {}",
                request.session
            ),
        ));
    }
    // One call of a session at a time. The lock is let go once the answer is on disk; what the
    // ledger has not applied yet stays in the session's memo for the next call.
    let slot = broker.session_slot(session);
    let mut memo = slot.memo.lock().await;
    let identity = sha256_hex(request.arguments.as_bytes());
    let answered = answer_locked(
        broker, session, request, &identity, &slot, &mut memo, pending,
    )
    .await?;
    if let Some(applied) = answered.applied {
        let labels = answered.labels.map(|l| Labels {
            taint: l.taint,
            untrusted: l.untrusted,
        });
        let answer = Unapplied {
            call_id: CallId(request.call_id),
            tool: request.tool.clone(),
            identity,
            response: answered.response.clone(),
            seen: answered.seen,
            applied,
        };
        memo.answered(answer, labels);
    }
    Ok(answered.response)
}

/// An answer, with what the session's memo needs until the ledger follows it.
pub(super) struct Answered {
    response: ToolResponse,
    /// Set once the ledger holds the answer; `None` when nothing new was recorded.
    applied: Option<Arc<AtomicBool>>,
    /// The session's labels after the answer, when it raised them.
    labels: Option<ledger::Labels>,
    /// The file content the call saw or left (path, SHA-256), recorded with the answer.
    seen: Option<(String, String)>,
}

impl Answered {
    /// An answer that records nothing new (given before, or refused for want of a record).
    fn unrecorded(response: ToolResponse) -> Answered {
        Answered {
            response,
            applied: None,
            labels: None,
            seen: None,
        }
    }
}

async fn answer_locked(
    broker: &Arc<Broker>,
    session: &SessionId,
    request: &ToolRequest,
    identity: &str,
    slot: &SessionSlot,
    memo: &mut SessionMemo,
    pending: &PendingTx,
) -> Result<Answered, Refusal> {
    // Read once per session and broker: what the ledger says of the session, so that a new call
    // id is known new without asking it (the outcome is taken below, in the design's order).
    let _ = session_state(broker, session, slot, memo);
    // A session whose values were rebuilt: its downstream listing indexed again first.
    slot.with_values(broker, session, |_| ());
    values::relist(broker, session, slot).await;
    let call = Pending {
        session: session.clone(),
        call_id: CallId(request.call_id),
        tool: request.tool.clone(),
        arguments: request.arguments.clone(),
        identity: identity.to_string(),
    };
    // The asks the owner approved for this call, each standing for itself alone (its grant and
    // its reason), and the last approval, named in the record of a refusal that follows it.
    let mut approved: Vec<Asked> = Vec::new();
    let mut last_approval: Option<ApprovalId> = None;
    // A call id sent again: its answer, or (after a lost connection or a restart) the approval
    // it still waits for.
    match earlier_answer(broker, memo, &call)? {
        Earlier::Answered(response) => return Ok(Answered::unrecorded(response)),
        Earlier::Waiting(id, asked) => match broker.approvals.attach(broker, id) {
            Some((waiter, expires)) => match wait(waiter, expires, pending).await {
                Settled::Final(response) => return Ok(Answered::unrecorded(response)),
                Settled::Approved => {
                    broker.approvals.take(id);
                    let _ = pending.send(None);
                    approved.extend(asked);
                    last_approval = Some(id);
                }
            },
            None => {
                return Ok(Answered::unrecorded(ToolResponse::Failed {
                    message: "this call's approval is no longer waiting; send the call again with a new id".to_string(),
                }));
            }
        },
        Earlier::New => {
            memo.used(call.call_id);
            broker.publish(OwnerEvent::Call {
                session: call.session.clone(),
                call_id: call.call_id,
                tool: call.tool.clone(),
                arguments: call.arguments.clone(),
            });
        }
    }
    // One path for every call: decided from the top with the grants and labels of the moment,
    // and decided again the same way after each approval. Whatever is stricter now wins (a
    // deny, the grant gone or expired, `max_taint` passed, read before write, a path that
    // resolves elsewhere); a reason to ask that no approval of this call answered asks again,
    // under a new approval.
    loop {
        let labels = match session_state(broker, session, slot, memo) {
            Ok(labels) => labels,
            Err(StateProblem::Ended) => {
                return Err(Refusal::new(
                    ErrorCode::SessionEnded,
                    format!("session {session} has ended"),
                ));
            }
            Err(StateProblem::Unreadable(detail)) => {
                return deny(broker, &call, DenyReason::StateUnreadable, None, detail).await;
            }
        };
        let (grants, downstream) = match broker.grants_now() {
            GrantsState::Loaded(grants, downstream) => (grants, downstream),
            GrantsState::Invalid(problems) => {
                let detail = format!("the grant files have {} problem(s)", problems.len());
                return deny(broker, &call, DenyReason::GrantsInvalid, None, detail).await;
            }
        };
        // A child session: its own grants and every deny grant, and no downstream tool.
        let grants = broker.children.narrowed(session, grants);
        let child = broker.children.binding(session).is_some();
        let step = match policy::downstream::split(&request.tool) {
            Some(_) if child => Step::Denied(Refused::new(
                DenyReason::NoGrant,
                None,
                "a child session uses no downstream server's tools".to_string(),
            )),
            Some((server, tool)) => {
                let target = downstream::Target { server, tool };
                downstream::decide(broker, &call, target, (slot, labels), &downstream).await?
            }
            None => decide::decide(broker, &call, (slot, memo), labels, grants),
        };
        let (runnable, ask) = match step {
            Step::Answered(answered) => return Ok(answered),
            Step::Denied(refused) => {
                let Refused {
                    reason,
                    grant,
                    mut detail,
                } = refused;
                if let Some(id) = last_approval {
                    detail.push_str(&format!(" (decided again after approval {id})"));
                }
                return deny(broker, &call, reason, grant, detail).await;
            }
            Step::Failed(message) => {
                tracing::info!(session = %call.session, call = %call.call_id, tool = %call.tool, %message, "arguments do not fit");
                let answer = Answer::Failed {
                    message: ledger::Field::of(&message),
                };
                // The broker's words, echoing the arguments: indexed with the session's
                // labels, as a rebuilt index reads every failure.
                let handed = Handed::Result {
                    class: labels.taint,
                    untrusted: labels.untrusted,
                };
                return finish(broker, &call, None, answer, handed, message).await;
            }
            Step::Question {
                grant,
                question,
                choices,
            } => {
                let question = Some((question, choices));
                let why = AskWhy::Question;
                let request = Request {
                    question,
                    ..request_for(&call, Some(grant), why, labels)
                };
                let asked = ask_owner(broker, &call, request, pending).await?;
                let response = asked.unwrap_or_else(|_| unavailable());
                // The owner's answer to the model's question is the owner's words.
                if let ToolResponse::Result { content, .. } = &response {
                    slot.with_values(broker, session, |values| {
                        if let Some(index) = values {
                            let (id, tool) = (call.call_id.0, call.tool.as_str());
                            values::feed(index, id, tool, Handed::OwnerWords, content);
                        }
                    });
                }
                return Ok(Answered::unrecorded(response));
            }
            Step::Run(runnable) => (runnable, None),
            Step::Ask(runnable, asked) => (runnable, Some(asked)),
        };
        if let Some(asked) = ask
            && !approved.contains(&asked)
        {
            let (grant, why, values) = (&asked.grant, asked.why, &asked.values[..]);
            let for_session =
                broker.with_ledger(|l| l.approved_for_session(session, grant, why, values));
            if !matches!(for_session, Ok(true)) {
                let grant = Some(asked.grant.clone());
                let request = Request {
                    provenance: asked.lines.clone(),
                    values: asked.values.clone(),
                    ..request_for(&call, grant, asked.why, labels)
                };
                let asking = ask_owner(broker, &call, request, pending);
                match asking.await? {
                    Ok(response) => return Ok(Answered::unrecorded(response)),
                    Err(id) => {
                        broker.approvals.take(id);
                        let _ = pending.send(None);
                        approved.push(asked);
                        last_approval = Some(id);
                        continue;
                    }
                }
            }
        }
        if let Err(error) = slot.count_run(broker, session, runnable.counted()) {
            let detail = format!("the call's count per session cannot be recorded: {error}");
            return deny(broker, &call, DenyReason::AuditUnavailable, None, detail).await;
        }
        return runnable.run(broker, &call, labels).await;
    }
}

/// What deciding a call came to.
enum Step {
    /// Answered without running, the answer already recorded.
    Answered(Answered),
    /// Refused (recorded by the caller).
    Denied(Refused),
    /// Failed before the decision, its arguments not fitting the tool: the message names the
    /// argument and what it must be (recorded by the caller).
    Failed(String),
    /// The model's `ask`: a question for the owner.
    Question {
        /// The grant that lets the model ask.
        grant: GrantId,
        /// The question.
        question: String,
        /// The answers offered, if any.
        choices: Vec<String>,
    },
    /// Runs as decided.
    Run(Runnable),
    /// Runs once the owner approves this ask (unless an approval given to this call, or the
    /// owner's approval of the grant for the session, already answers it).
    Ask(Runnable, Asked),
}

/// A refusal, before it is recorded.
struct Refused {
    reason: DenyReason,
    grant: Option<GrantId>,
    detail: String,
}

impl Step {
    /// A failure whose message is `message`.
    fn failed(message: String) -> Step {
        Step::Failed(message)
    }
}

impl Refused {
    fn new(reason: DenyReason, grant: Option<GrantId>, detail: String) -> Refused {
        Refused {
            reason,
            grant,
            detail,
        }
    }
}

/// An ask the owner is shown, and what their approval answers: the grant that asks, why, and
/// (when provenance asks) the values that made it ask. An approval answers that ask alone;
/// another grant, another reason or another value asks again.
#[derive(Debug, Clone)]
struct Asked {
    grant: GrantId,
    why: AskWhy,
    /// Sorted, without repeats: the values that asked, and the value the index could not vouch
    /// for (it overflowed), each once.
    values: Vec<AskedValue>,
    /// Where each value came from, for the owner (not part of what the approval answers).
    lines: Vec<String>,
}

impl PartialEq for Asked {
    fn eq(&self, other: &Asked) -> bool {
        (&self.grant, self.why, &self.values) == (&other.grant, other.why, &other.values)
    }
}

impl Asked {
    fn new(grant: GrantId, reason: AskReason, traced: &Traced) -> Asked {
        let why = match reason {
            AskReason::GrantAsks => AskWhy::GrantAsks,
            AskReason::AfterUntrusted => AskWhy::AfterUntrusted,
            AskReason::Provenance => AskWhy::Provenance,
            AskReason::ArgumentRule => AskWhy::ArgumentRule,
        };
        let unproven = traced.unproven.iter().map(|u| (&u.argument, &u.value));
        let misses = traced.misses.iter().map(|m| (&m.argument, &m.value));
        let mut values: Vec<AskedValue> = traced
            .findings
            .iter()
            .map(|f| (&f.argument, &f.value))
            .chain(unproven)
            .chain(misses)
            .map(|(argument, value)| AskedValue {
                argument: argument.clone(),
                value: value.clone(),
            })
            .collect();
        // A count stands for the one call past it: approving it for the session lets that
        // call run, and the next one past the count asks again.
        values.extend(traced.count.iter().map(|count| AskedValue {
            argument: "per_session".to_string(),
            value: format!(
                "call {} of grant {}",
                count.used.saturating_add(1),
                count.grant
            ),
        }));
        values.sort();
        values.dedup();
        Asked {
            grant,
            why,
            values,
            lines: traced.lines(),
        }
    }
}

/// A decided call, ready to run.
enum Runnable {
    /// One of boxmaker's tools.
    Builtin(decide::Builtin),
    /// A downstream server's tool.
    Downstream(downstream::Cleared),
}

impl Runnable {
    /// The covering grants that count this call (`per_session`).
    fn counted(&self) -> &[String] {
        match self {
            Runnable::Builtin(b) => &b.allowed.counted,
            Runnable::Downstream(cleared) => cleared.counted(),
        }
    }

    /// Runs it for a session with `labels`, and records its answer.
    async fn run(
        self,
        broker: &Arc<Broker>,
        call: &Pending,
        labels: Labels,
    ) -> Result<Answered, Refusal> {
        match self {
            Runnable::Builtin(b) => {
                run(
                    broker, call, b.tool, b.allowed, b.grants, labels, b.expected,
                )
                .await
            }
            Runnable::Downstream(cleared) => downstream::run(broker, call, cleared, labels).await,
        }
    }
}

/// Asks the owner about `call` and waits: `Ok(final answer)` (refused, expired, answered,
/// abandoned, or not recordable; already in the ledger), or `Err(id)` when the owner approved
/// approval `id`.
async fn ask_owner(
    broker: &Arc<Broker>,
    call: &Pending,
    request: Request,
    pending: &PendingTx,
) -> Result<Result<ToolResponse, ApprovalId>, Refusal> {
    let (waiter, expires) = match broker.approvals.request(broker, request).await {
        Ok(registered) => registered,
        Err(error) => {
            tracing::error!(%error, session = %call.session, call = %call.call_id, "approval request not recorded");
            return Ok(Ok(unavailable()));
        }
    };
    let id = waiter.id();
    Ok(match wait(waiter, expires, pending).await {
        Settled::Final(response) => Ok(response),
        Settled::Approved => Err(id),
    })
}

/// The approval request for `call`: the grant that asks, why, and the session's labels now
/// (no question, no provenance, no values).
fn request_for(call: &Pending, grant: Option<GrantId>, why: AskWhy, labels: Labels) -> Request {
    Request {
        session: call.session.clone(),
        call_id: call.call_id,
        tool: call.tool.clone(),
        arguments: call.arguments.clone(),
        grant,
        why,
        labels: ledger::Labels {
            taint: labels.taint,
            untrusted: labels.untrusted,
        },
        question: None,
        provenance: Vec::new(),
        values: Vec::new(),
    }
}

/// Tells the client the call waits (`PendingApproval`), then waits for the owner.
async fn wait(mut waiter: Waiter, expires: Timestamp, pending: &PendingTx) -> Settled {
    let _ = pending.send(Some(ToolResponse::PendingApproval {
        approval: waiter.id().0,
        expires,
        // The connection says whether its client may answer (`server.rs`).
        answerable: false,
    }));
    waiter.settled().await
}

/// The call being answered.
#[derive(Clone)]
pub(super) struct Pending {
    session: SessionId,
    call_id: CallId,
    tool: String,
    arguments: String,
    /// SHA-256 of the arguments: a reused id with another tool or other arguments is refused.
    identity: String,
}

/// Why a session's labels cannot be had.
enum StateProblem {
    /// It has ended (here, or before this broker started).
    Ended,
    /// The ledger does not have it, or cannot be read (what went wrong).
    Unreadable(String),
}

/// The session's labels: from its memo, or (the first time this broker needs them) from the
/// ledger, kept in the memo with the highest call id the ledger holds for it; raised by every
/// answer of the session written in this broker, even one whose caller went away.
fn session_state(
    broker: &Broker,
    session: &SessionId,
    slot: &SessionSlot,
    memo: &mut SessionMemo,
) -> Result<Labels, StateProblem> {
    if slot.ended() {
        return Err(StateProblem::Ended);
    }
    if let Some(labels) = memo.known_labels() {
        return Ok(slot.raised_over(labels));
    }
    let read = broker.with_reader(|l| {
        let row = l.session(session)?;
        Ok::<_, ledger::LedgerError>((row, l.highest_call(session)?))
    });
    match read {
        Ok((Some(row), _)) if row.ended.is_some() => Err(StateProblem::Ended),
        Ok((Some(row), highest)) => {
            let row = Labels {
                taint: row.taint,
                untrusted: row.untrusted,
            };
            memo.know(row, highest);
            Ok(slot.raised_over(memo.labels(row)))
        }
        Ok((None, _)) => Err(StateProblem::Unreadable(format!(
            "session {session} is not in the ledger"
        ))),
        Err(error) => Err(StateProblem::Unreadable(error.to_string())),
    }
}

/// What the ledger (or the session's memo) knows of a call id.
enum Earlier {
    /// Never seen.
    New,
    /// Answered: the same answer again.
    Answered(ToolResponse),
    /// Waiting for the owner (or approved and not yet run): wait for this approval again; the
    /// ask it answers (its grant, reason and values, as the ledger keeps them), when a grant
    /// asked.
    Waiting(ApprovalId, Option<Asked>),
}

/// The answer already given to this call id, or the approval it waits for.
fn earlier_answer(broker: &Broker, memo: &SessionMemo, call: &Pending) -> Result<Earlier, Refusal> {
    if let Some(answer) = memo.earlier(call.call_id) {
        if answer.identity != call.identity || answer.tool != call.tool {
            return Err(reused(call));
        }
        return Ok(Earlier::Answered(answer.response.clone()));
    }
    if memo.surely_new(call.call_id) {
        return Ok(Earlier::New);
    }
    let row = match broker.with_reader(|l| l.call(&call.session, call.call_id)) {
        Ok(Some(row)) => row,
        Ok(None) => return Ok(Earlier::New),
        // A damaged call row: answered as the session's state being unreadable, below.
        Err(_) => {
            return Ok(Earlier::Answered(ToolResponse::Denied {
                reason: DenyReason::StateUnreadable,
            }));
        }
    };
    if row.arguments_sha256 != call.identity || row.tool != call.tool {
        return Err(reused(call));
    }
    if matches!(row.state, CallState::Pending | CallState::Approved)
        && let Ok(Some(approval)) =
            broker.with_reader(|l| l.approval_of_call(&call.session, call.call_id))
    {
        let asked = approval.grant.map(|grant| Asked {
            grant,
            why: approval.why,
            values: approval.values,
            lines: approval.provenance,
        });
        return Ok(Earlier::Waiting(approval.id, asked));
    }
    Ok(Earlier::Answered(match (row.state, row.response) {
        (CallState::Done, Some(response)) => response,
        (CallState::Done, None) => ToolResponse::Failed {
            message: ledger::ANSWER_LOST.to_string(),
        },
        (CallState::Running | CallState::Pending | CallState::Approved, _) => {
            ToolResponse::Failed {
                message: "this call is still being answered on another connection".to_string(),
            }
        }
        (CallState::Abandoned, _) => ToolResponse::Failed {
            message: abandoned(broker, call),
        },
    }))
}

/// What an abandoned call answers when its id is sent again: the sentence it answered first,
/// with the reason its approval recorded.
fn abandoned(broker: &Broker, call: &Pending) -> String {
    let approval = broker.with_reader(|l| l.approval_of_call(&call.session, call.call_id));
    match approval {
        Ok(Some(ledger::ApprovalRow {
            resolution: Some(proto::Resolution::Abandoned { why }),
            ..
        })) => format!("this call was abandoned and never ran: {why}"),
        _ => "this call was abandoned and never ran".to_string(),
    }
}

/// The refusal of a call id already used for another call.
fn reused(call: &Pending) -> Refusal {
    Refusal::new(
        ErrorCode::CallIdReused,
        format!(
            "call {} of session {} was already made with other arguments",
            call.call_id, call.session
        ),
    )
}

async fn deny(
    broker: &Broker,
    call: &Pending,
    reason: DenyReason,
    grant: Option<GrantId>,
    detail: String,
) -> Result<Answered, Refusal> {
    tracing::info!(session = %call.session, call = %call.call_id, tool = %call.tool, ?reason, %detail, "denied");
    let answer = Answer::Denied { reason };
    finish(broker, call, grant, answer, Handed::Nothing, detail).await
}
