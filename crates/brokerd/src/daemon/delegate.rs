//! The `delegate` tool, answered by the broker: opening a child session bound by its caller
//! ([`super::children`]), and collecting a child's report with its labels and values.
//!
//! Who runs the child's model turns is the caller's client: the open's answer names the child
//! and carries its resume token and task in the header (`child`, `resume_token`, `depth`,
//! `grants`, `task`); the client (loopd: `loopd::delegate`)
//! resumes the child on a connection of its own (`hello` with that resume), runs the task as a
//! second conversation, and ends it with a `report` frame. The parent's `collect` waits for
//! that end. The broker never runs a model.

use std::sync::Arc;
use std::time::Duration;

use ledger::{Event, sha256_hex};
use nettools::args::delegate::DelegateArgs;
use policy::args::ToolArgs;
use policy::decide::{Allowed, Labels};
use proto::{CallId, OwnerEvent, SessionId, Timestamp};
use serde_json::{Map, Value};

use super::children::Binding;
use super::memory::Routed;
use super::runner::Outcome;
use super::{Broker, GrantsState};

/// The most bytes of a child's report the broker keeps.
pub const REPORT_CAP: usize = 64 * 1024;

/// Answers a decided `delegate` call of `session` (whose labels are `labels`): opens a child,
/// or waits up to `limit` for a child's end.
pub async fn route(
    broker: &Arc<Broker>,
    session: &SessionId,
    call_id: CallId,
    allowed: &Allowed,
    labels: Labels,
    limit: Duration,
) -> Routed {
    let failed = |message: String| Routed {
        outcome: Outcome::Failed(message),
        class: labels.taint,
        untrusted: labels.untrusted,
    };
    let ToolArgs::Delegate(args) = &allowed.args else {
        return failed("delegate arguments did not parse as a delegation".to_string());
    };
    match args {
        DelegateArgs::Open { task, grants } => open(broker, session, task, grants, labels)
            .await
            .unwrap_or_else(failed),
        DelegateArgs::Collect { collect } => {
            let child = SessionId(collect.clone());
            collect_child(broker, session, &child, call_id, limit)
                .await
                .unwrap_or_else(failed)
        }
    }
}

async fn open(
    broker: &Arc<Broker>,
    parent: &SessionId,
    task: &str,
    ids: &[String],
    labels: Labels,
) -> Result<Routed, String> {
    let GrantsState::Loaded(grants, _) = broker.grants_now() else {
        return Err("the grant files have problems; no child can be bound now".to_string());
    };
    let binding = broker
        .children
        .bind(parent, ids, &grants, Timestamp::now())
        .map_err(|problem| problem.to_string())?;
    // The child starts with what the parent has seen; without it, no child.
    let seen = broker
        .session_slot(parent)
        .with_values(broker, parent, |values| values.map(|index| index.clone()))
        .ok_or("this session's values seen are unavailable, so no child can start with them")?;
    let (child, token) = open_session(broker, &binding).await?;
    let slot = broker.session_slot(&child);
    slot.raise(labels);
    slot.start_values(seen);
    broker.publish(OwnerEvent::SessionOpened {
        session: child.clone(),
    });
    tracing::info!(%child, %parent, depth = binding.depth, "child session opened");
    let mut fields = Map::new();
    fields.insert("child".into(), Value::from(child.as_str()));
    fields.insert("resume_token".into(), Value::from(token));
    fields.insert("depth".into(), Value::from(binding.depth));
    fields.insert("grants".into(), Value::from(binding.grants.clone()));
    // The task as the broker read it, for the client that runs the child (loopd reads the
    // answer, never the model's arguments).
    fields.insert("task".into(), Value::from(task));
    let body = format!(
        "Child session {child} is open for the task in this header, with grants {}. \
         Collect its report with delegate {{\"collect\": \"{child}\"}}.",
        binding.grants.join(", ")
    );
    Ok(Routed {
        outcome: Outcome::Ran { fields, body },
        class: labels.taint,
        untrusted: labels.untrusted,
    })
}

/// Records the child's opening, with the digest of a token nobody is given (so that only this
/// broker, which keeps the given token's digest with the binding, resumes it), and keeps its
/// binding.
async fn open_session(broker: &Broker, binding: &Binding) -> Result<(SessionId, String), String> {
    let (child, token) = super::sessions::fresh_ids().map_err(|refusal| refusal.message)?;
    let (_, withheld) = super::sessions::fresh_ids().map_err(|refusal| refusal.message)?;
    let opened = Event::SessionOpened {
        session: child.clone(),
        token_sha256: sha256_hex(withheld.as_bytes()),
    };
    broker
        .journal
        .record(vec![opened])
        .await
        .map_err(|error| format!("the child session cannot be recorded: {error}"))?;
    let digest = sha256_hex(token.as_bytes());
    broker
        .children
        .insert(child.clone(), binding.clone(), digest);
    Ok((child, token))
}

async fn collect_child(
    broker: &Arc<Broker>,
    parent: &SessionId,
    child: &SessionId,
    call_id: CallId,
    limit: Duration,
) -> Result<Routed, String> {
    let Some(mut ended) = broker.children.watch(parent, child) else {
        return Err(format!(
            "{child} is not a child of this session, or it was collected already"
        ));
    };
    let waited = tokio::time::timeout(limit, ended.wait_for(Option::is_some)).await;
    let ended = match waited {
        Ok(Ok(ended)) => ended.clone(),
        Ok(Err(_)) => None,
        Err(_) => {
            return Err(format!(
                "child {child} has not ended within {} ms; it goes on: collect it again later",
                limit.as_millis()
            ));
        }
    };
    let Some(ended) = ended else {
        return Err(format!("child {child} is gone without an end"));
    };
    // The child's values come back into the parent's, named as within this call; when they
    // cannot, the parent's index is marked unproven from this call on, never cleaner.
    let (class, untrusted) = (ended.labels.taint, ended.labels.untrusted);
    broker
        .session_slot(parent)
        .with_values(broker, parent, |values| {
            if let Some(index) = values {
                let merged = ended
                    .values
                    .as_ref()
                    .is_some_and(|theirs| index.merge_child(theirs, call_id.0).is_ok());
                if !merged {
                    index.lost(call_id.0, class, untrusted);
                }
            }
        });
    broker.children.forget(child);
    let mut fields = Map::new();
    fields.insert("child".into(), Value::from(child.as_str()));
    fields.insert("ended".into(), Value::from(ended.reason.as_str()));
    let body = match &ended.report {
        Some(report) => report.clone(),
        None => format!("The child ended without a report ({}).", ended.reason),
    };
    Ok(Routed {
        outcome: Outcome::Ran { fields, body },
        class,
        untrusted,
    })
}
