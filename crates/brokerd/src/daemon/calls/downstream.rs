//! A call of a downstream MCP server's tool (`server.tool`), in the order of the broker's own:
//! the server and tool exist, the arguments fit the tool's input schema, a grant covers the
//! tool with a pin of its current definition (`policy::downstream::decide`: deny, expiry,
//! taint, untrusted input, approval), the decision on disk, the run on the session's instance
//! of the server, and the labelled answer on disk before it leaves.

use std::sync::Arc;

use ledger::{Event, Field};
use policy::downstream::{Downstream, Verdict};
use proto::{ApprovalId, AskWhy, DenyReason, GrantId};
use serde_json::Value;

use super::record::{Ran, finish_with, unavailable};
use super::{Answered, Pending, PendingTx, ask_owner, deny};
use crate::daemon::Broker;
use crate::daemon::gateway::DownstreamCall;
use crate::daemon::sessions::Refusal;
use crate::policy::{AskReason, Labels};

/// The tool a call names: a server and one of its tools.
pub(super) struct Target<'a> {
    /// The server.
    pub server: &'a str,
    /// The tool on it.
    pub tool: &'a str,
}

/// Answers `call` of `target` for a session with `labels` under `grants`; `approved` is the
/// owner's approval when the call waited for one and got it.
pub(super) async fn answer(
    broker: &Arc<Broker>,
    call: &Pending,
    target: Target<'_>,
    labels: Labels,
    grants: &Downstream,
    approved: Option<ApprovalId>,
    pending: &PendingTx,
) -> Result<Answered, Refusal> {
    let Target { server, tool } = target;
    let full = format!("{server}.{tool}");
    if !broker.gateway.has(server) {
        let servers = broker.gateway.names();
        let detail = if servers.is_empty() {
            format!("there is no tool {full:?}: brokerd.toml names no downstream server")
        } else {
            format!(
                "there is no tool {full:?}: the downstream servers are {}",
                servers.join(", ")
            )
        };
        return deny(broker, call, DenyReason::InvalidArguments, None, detail).await;
    }
    let arguments = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(arguments)) => arguments,
        _ => {
            let detail = format!("the arguments of {full} must be a JSON object");
            return deny(broker, call, DenyReason::InvalidArguments, None, detail).await;
        }
    };
    if let Err(twice) = policy::downstream::duplicate_key(&call.arguments) {
        let detail = format!("the arguments of {full}: {twice}");
        return deny(broker, call, DenyReason::InvalidArguments, None, detail).await;
    }
    // No grant names the tool, or a deny grant does (it needs no pin): refused without
    // starting the server.
    if !grants.tools.iter().any(|g| g.names(server, tool)) {
        let detail = format!("no grant covers {full}");
        return deny(broker, call, DenyReason::NoGrant, None, detail).await;
    }
    let now = proto::Timestamp::now();
    if let Verdict::Deny(denied) = policy::downstream::decide(grants, server, tool, "", labels, now)
        && denied.reason == DenyReason::DeniedByGrant
    {
        let grant = denied.grant.as_deref().map(GrantId::from);
        return deny(broker, call, denied.reason, grant, denied.detail).await;
    }
    let runner = broker.runner.as_ref();
    let protected = broker.protected.as_ref();
    let listed = broker
        .gateway
        .tools(runner, protected, server, &call.session, grants)
        .await;
    let tools = match listed {
        Ok(tools) => tools,
        Err(message) => {
            // The server's own words (its standard error) are for the owner, not the model.
            tracing::warn!(server, %message, "a downstream server could not serve a call");
            let answer = ledger::Answer::Failed {
                message: Field::of(&format!(
                    "downstream server {server} is not available; the owner's broker log says why"
                )),
            };
            return super::record::finish(broker, call, None, answer, None, message).await;
        }
    };
    let Some(definition) = tools.iter().find(|d| d.tool == tool) else {
        let detail = format!("server {server} lists no tool {tool:?}");
        return deny(broker, call, DenyReason::InvalidArguments, None, detail).await;
    };
    if let Err(detail) = definition.check(&Value::Object(arguments.clone())) {
        return deny(broker, call, DenyReason::InvalidArguments, None, detail).await;
    }
    let hash = definition.hash.clone();
    drop(tools);
    let verdict = policy::downstream::decide(grants, server, tool, &hash, labels, now);
    if let Some(id) = approved {
        broker.approvals.take(id);
        let _ = pending.send(None);
    }
    // The grants of now, when the call waited for the owner: they decide the run and its box.
    let mut refreshed: Option<Arc<Downstream>> = None;
    let cleared = match verdict {
        Verdict::Deny(denied) => {
            let grant = denied.grant.as_deref().map(GrantId::from);
            return deny(broker, call, denied.reason, grant, denied.detail).await;
        }
        Verdict::Allow(cleared) => cleared,
        Verdict::Ask(cleared, _) if approved.is_some() => cleared,
        Verdict::Ask(cleared, why) => {
            let grant = GrantId::from(cleared.grant.as_str());
            let for_session = broker.with_ledger(|l| l.approved_for_session(&call.session, &grant));
            if !matches!(for_session, Ok(true)) {
                let why = match why {
                    AskReason::GrantAsks => AskWhy::GrantAsks,
                    AskReason::AfterUntrusted => AskWhy::AfterUntrusted,
                };
                let asked = ask_owner(broker, call, Some(grant), why, labels, None, pending);
                match asked.await? {
                    Ok(response) => return Ok(Answered::unrecorded(response)),
                    Err(id) => {
                        broker.approvals.take(id);
                        let _ = pending.send(None);
                    }
                }
                // The owner answered after a while: the grants of now decide, the approval
                // standing for the asking step.
                let fresh = match broker.grants_now() {
                    crate::daemon::GrantsState::Loaded(_, downstream) => downstream,
                    crate::daemon::GrantsState::Invalid(_) => {
                        let detail = "the grant files have problems".to_string();
                        return deny(broker, call, DenyReason::GrantsInvalid, None, detail).await;
                    }
                };
                let now = proto::Timestamp::now();
                let decided = policy::downstream::decide(&fresh, server, tool, &hash, labels, now);
                refreshed = Some(fresh);
                match decided {
                    Verdict::Deny(denied) => {
                        let grant = denied.grant.as_deref().map(GrantId::from);
                        return deny(broker, call, denied.reason, grant, denied.detail).await;
                    }
                    Verdict::Allow(cleared) | Verdict::Ask(cleared, _) => cleared,
                }
            } else {
                cleared
            }
        }
    };
    let grants = refreshed.as_deref().unwrap_or(grants);
    let grant = Some(GrantId::from(cleared.grant.as_str()));
    // Every downstream call may have side effects: its decision is on disk before it runs.
    let decided = Event::Decided {
        session: call.session.clone(),
        call_id: call.call_id,
        tool: call.tool.clone(),
        arguments: Field::of(&call.arguments),
        grant: grant.clone(),
    };
    if let Err(error) = broker.journal.record(vec![decided]).await {
        tracing::error!(%error, "decision not recorded; the call does not run");
        return Ok(Answered::unrecorded(unavailable()));
    }
    let run = DownstreamCall {
        session: &call.session,
        taint: labels.taint,
        untrusted: labels.untrusted || cleared.untrusted,
        class: cleared.class,
        tool,
        hash: &hash,
        arguments,
    };
    let (outcome, received) = broker
        .gateway
        .call(runner, protected, server, grants, run)
        .await;
    let ran = Ran {
        outcome,
        class: cleared.class.max(received.class),
        untrusted: cleared.untrusted || received.untrusted,
        seen: None,
    };
    let (finished, detail) = ran.finished(&call.tool, labels, broker.config.result_cap);
    finish_with(broker, call, grant, finished, detail).await
}
