//! Approvals across the brokers sharing a PostgreSQL ledger (issue 39). The owner may answer
//! an approval through any of them: the broker it was given through, which does not hold the
//! waiting call, hands the answer over in the database ([`hand_over`]) and waits a little for
//! the holder to record it; the holder, woken by `NOTIFY` ([`listen`]), takes it
//! ([`take_handed`]), records it in its own audit log (its `channel`: `broker NAME`) and the
//! call, once approved, is decided again with the holder's own grants before it runs.

use std::sync::Arc;
use std::time::Duration;

use ledger::ApprovalState;
use ledger::handed::HandedAnswer;
use proto::{ApprovalId, AskWhy, OwnerErrorCode, PendingKind, Resolution, Timestamp};

use super::answers::{not_pending, wrong_kind};
use super::{Ending, OwnerAnswer, OwnerRefusal};
use crate::daemon::Broker;

/// How long the broker an answer was given through waits for the holder to record it before
/// it tells the owner the answer was handed over and not yet taken.
const HOLDER_WAIT: Duration = Duration::from_secs(5);

/// How often it looks meanwhile.
const HOLDER_LOOK: Duration = Duration::from_millis(20);

fn handed(answer: &OwnerAnswer) -> HandedAnswer {
    match answer {
        OwnerAnswer::Once => HandedAnswer::Once,
        OwnerAnswer::ForSession => HandedAnswer::ForSession,
        OwnerAnswer::Refuse => HandedAnswer::Refuse,
        OwnerAnswer::Text(text) => HandedAnswer::Text(text.clone()),
    }
}

fn owner_answer(answer: HandedAnswer) -> OwnerAnswer {
    match answer {
        HandedAnswer::Once => OwnerAnswer::Once,
        HandedAnswer::ForSession => OwnerAnswer::ForSession,
        HandedAnswer::Refuse => OwnerAnswer::Refuse,
        HandedAnswer::Text(text) => OwnerAnswer::Text(text),
    }
}

fn internal(id: ApprovalId, error: impl std::fmt::Display) -> OwnerRefusal {
    OwnerRefusal::new(
        OwnerErrorCode::Internal,
        format!("approval {id} cannot be answered through this broker: {error}"),
    )
}

/// Hands the owner's `answer` to approval `id`, which waits in another broker, over to it;
/// what was done, once the holder recorded it (or after [`HOLDER_WAIT`], that it was handed
/// over).
pub(super) async fn hand_over(
    broker: &Arc<Broker>,
    id: ApprovalId,
    answer: OwnerAnswer,
) -> Result<String, OwnerRefusal> {
    let row = broker
        .with_ledger(|l| l.approval(id))
        .map_err(|e| internal(id, e))?;
    let Some(row) = row.filter(|row| row.state == ApprovalState::Pending) else {
        return Err(not_pending(broker, id));
    };
    let kind = if row.why == AskWhy::Question {
        PendingKind::Question
    } else {
        PendingKind::Approval
    };
    wrong_kind(id, kind, &row.tool, &answer)?;
    let holder = row.broker.unwrap_or_else(|| "(unnamed)".to_string());
    broker
        .with_ledger(|l| l.hand_answer(id, &handed(&answer), Timestamp::now()))
        .map_err(|e| internal(id, e))?;
    tracing::info!(approval = %id, %holder, "the owner's answer was handed to the broker whose call waits");
    let deadline = tokio::time::Instant::now() + HOLDER_WAIT;
    loop {
        if let Ok(Some(row)) = broker.with_reader(|l| l.approval(id))
            && row.state == ApprovalState::Resolved
        {
            let how = match row.resolution {
                Some(Resolution::ApprovedOnce) => "approved once; the call runs there now",
                Some(Resolution::ApprovedForSession) => {
                    "approved for the rest of its session; the call runs there now"
                }
                Some(Resolution::Refused) => "refused",
                Some(Resolution::Answered { .. }) => "answered",
                Some(Resolution::Expired) => "expired before the answer reached it",
                Some(Resolution::Abandoned { .. }) => "abandoned before the answer reached it",
                None => "settled",
            };
            return Ok(format!("approval {id} (waiting in broker {holder}): {how}"));
        }
        if tokio::time::Instant::now() >= deadline {
            return Ok(format!(
                "approval {id}: the answer was handed to broker {holder}, where the call waits; it has not recorded it yet (it takes it when it is back)"
            ));
        }
        tokio::time::sleep(HOLDER_LOOK).await;
    }
}

/// Carries out the answers handed through other brokers for approvals waiting here, and marks
/// each taken (an approval no longer waiting here was settled otherwise first).
pub async fn take_handed(broker: Arc<Broker>) {
    let handed = match broker.with_ledger(|l| l.handed_answers()) {
        Ok(handed) => handed,
        Err(error) => {
            tracing::warn!(%error, "answers handed through other brokers cannot be read");
            return;
        }
    };
    for answer in handed {
        let id = answer.approval;
        if broker.approvals.holds(id) {
            let channel = Some(format!("broker {}", answer.through));
            let ending = Ending::Owner(owner_answer(answer.answer));
            let settled = broker
                .approvals
                .settle_through(&broker, id, ending, channel)
                .await;
            if let Err(refusal) = settled {
                tracing::warn!(approval = %id, message = %refusal.message, "an answer handed through another broker was not carried out");
            }
        } else {
            // Not held: settled here already, or not registered yet (the request's own look
            // after it registers takes it then).
            let pending = matches!(
                broker.with_ledger(|l| l.approval(id)),
                Ok(Some(row)) if row.state == ApprovalState::Pending
            );
            if pending {
                continue;
            }
        }
        if let Err(error) = broker.with_ledger(|l| l.took_answer(id)) {
            tracing::warn!(%error, approval = %id, "a handed answer cannot be marked taken");
        }
    }
}

/// Starts listening for answers handed through other brokers (a PostgreSQL ledger only): each
/// `NOTIFY`, and each reconnection, runs [`take_handed`] on the broker's runtime.
pub fn listen(broker: &Arc<Broker>) -> Result<(), String> {
    let Some((settings, _)) = broker.config.ledger.postgres()? else {
        return Ok(());
    };
    let runtime = tokio::runtime::Handle::current();
    let weak = Arc::downgrade(broker);
    ledger::handed::listen(&settings, move || {
        let Some(broker) = weak.upgrade() else {
            return false;
        };
        runtime.spawn(take_handed(broker));
        true
    })
    .map_err(|e| e.to_string())
}
