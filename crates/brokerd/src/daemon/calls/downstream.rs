//! A call of a downstream MCP server's tool (`server.tool`), in the order of the broker's own:
//! the server and tool exist, the arguments fit the tool's input schema, a grant covers the
//! tool with a pin of its current definition (`policy::downstream::decide`: deny, expiry,
//! taint, untrusted input, approval; made again after each approval, as every call's is),
//! the decision on disk, the run on the session's instance of the server, and the labelled
//! answer on disk before it leaves.

use std::sync::Arc;

use ledger::{Event, Field};
use policy::decide::Seen;
use policy::downstream::{CallOf, Downstream, Listed, Verdict};
use proto::{DenyReason, GrantId};
use serde_json::{Map, Value};

use super::record::{Ran, finish_with, unavailable};
use super::{Answered, Asked, Pending, Refused, Runnable, Step};
use crate::daemon::gateway::{DownstreamCall, Unfit};
use crate::daemon::misfit;
use crate::daemon::sessions::Refusal;
use crate::daemon::values::Handed;
use crate::daemon::{Broker, SessionSlot};
use policy::decide::Labels;

/// The tool a call names: a server and one of its tools.
pub(super) struct Target<'a> {
    /// The server.
    pub server: &'a str,
    /// The tool on it.
    pub tool: &'a str,
}

/// A downstream call cleared to run: its tool, the definition it was decided on, the grants of
/// that decision (they decide its box) and its checked arguments.
pub(super) struct Cleared {
    server: String,
    tool: String,
    cleared: policy::downstream::Cleared,
    hash: String,
    grants: Arc<Downstream>,
    arguments: Map<String, Value>,
}

impl Cleared {
    /// The covering grants that count this call (`per_session`).
    pub(super) fn counted(&self) -> &[String] {
        &self.cleared.counted
    }
}

/// Decides `call` of `target` for a session with `labels` under `grants`, now (made again
/// after each approval, like every call's).
pub(super) async fn decide(
    broker: &Arc<Broker>,
    call: &Pending,
    target: Target<'_>,
    (slot, labels): (&SessionSlot, Labels),
    grants: &Arc<Downstream>,
) -> Result<Step, Refusal> {
    let Target { server, tool } = target;
    let full = format!("{server}.{tool}");
    let refused = |reason: DenyReason, grant: Option<GrantId>, detail: String| {
        Ok(Step::Denied(Refused::new(reason, grant, detail)))
    };
    let invalid = |detail: String| refused(DenyReason::InvalidArguments, None, detail);
    if !broker.gateway.has(server) {
        let servers = broker.gateway.names();
        return invalid(if servers.is_empty() {
            format!("there is no tool {full:?}: brokerd.toml names no downstream server")
        } else {
            format!(
                "there is no tool {full:?}: the downstream servers are {}",
                servers.join(", ")
            )
        });
    }
    // Arguments of the wrong shape are the model's to fix: a failure that names what is wrong.
    let arguments = match serde_json::from_str::<Value>(&call.arguments) {
        Ok(Value::Object(arguments)) => arguments,
        Ok(other) => return Ok(Step::failed(misfit::not_an_object(&full, &other))),
        Err(error) => return Ok(Step::failed(misfit::not_json(&full, &error))),
    };
    if let Err(twice) = policy::downstream::duplicate_key(&call.arguments) {
        return Ok(Step::failed(format!("the arguments of {full}: {twice}")));
    }
    // No grant names the tool, or a deny grant does (it needs no pin): refused without
    // starting the server.
    if !grants.tools.iter().any(|g| g.names(server, tool)) {
        return refused(DenyReason::NoGrant, None, format!("no grant covers {full}"));
    }
    let now = proto::Timestamp::now();
    let unlisted = Listed::new(server, tool, "");
    if let Verdict::Deny(denied) = policy::downstream::decide(grants, unlisted, labels, now)
        && denied.reason == DenyReason::DeniedByGrant
    {
        let grant = denied.grant.as_deref().map(GrantId::from);
        return refused(denied.reason, grant, denied.detail);
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
            let handed = Handed::Result {
                class: labels.taint,
                untrusted: labels.untrusted,
            };
            let answered = super::record::finish(broker, call, None, answer, handed, message);
            return Ok(Step::Answered(answered.await?));
        }
    };
    let Some(definition) = tools.iter().find(|d| d.tool == tool) else {
        return invalid(format!("server {server} lists no tool {tool:?}"));
    };
    match definition.check(&Value::Object(arguments.clone())) {
        Ok(()) => {}
        Err(Unfit::Arguments(misfits)) => return Ok(Step::failed(misfits)),
        Err(Unfit::Schema(detail)) => return invalid(detail),
    }
    let hash = definition.hash.clone();
    let listed = Listed {
        hash: &hash,
        read_only_hint: definition.read_only_hint(),
        ..unlisted
    };
    let no_schema = Value::Null;
    let checked = Value::Object(arguments.clone());
    let of = CallOf {
        input_schema: definition.value.get("inputSchema").unwrap_or(&no_schema),
        arguments: &checked,
    };
    let verdict = slot.with_uses(broker, &call.session, |uses| {
        slot.with_values(broker, &call.session, |values| {
            let seen = Seen {
                labels,
                values: values.map(|index| &*index),
                uses,
            };
            policy::downstream::decide_seen(grants, listed, of, seen, now)
        })
    });
    drop(tools);
    let (cleared, ask) = match verdict {
        Verdict::Deny(denied) => {
            let grant = denied.grant.as_deref().map(GrantId::from);
            return refused(denied.reason, grant, denied.detail);
        }
        Verdict::Allow(cleared) => (cleared, None),
        Verdict::Ask(cleared, why) => {
            let traced = cleared.traced.clone();
            (cleared, Some((why, traced)))
        }
    };
    let grant = GrantId::from(cleared.grant.as_str());
    let runnable = Runnable::Downstream(Cleared {
        server: server.to_string(),
        tool: tool.to_string(),
        cleared,
        hash,
        grants: Arc::clone(grants),
        arguments,
    });
    Ok(match ask {
        None => Step::Run(runnable),
        Some((why, traced)) => Step::Ask(runnable, Asked::new(grant, why, &traced)),
    })
}

/// Runs a cleared call for a session with `labels` on the session's instance of its server,
/// and records its labelled answer.
pub(super) async fn run(
    broker: &Arc<Broker>,
    call: &Pending,
    cleared: Cleared,
    labels: Labels,
) -> Result<Answered, Refusal> {
    let Cleared {
        server,
        tool,
        cleared,
        hash,
        grants,
        arguments,
    } = cleared;
    let grant = Some(GrantId::from(cleared.grant.as_str()));
    // A downstream call may have side effects (a tool a grant calls read-only is taken at the
    // owner's word for the decision, not for the record): its decision is on disk before it
    // runs.
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
        tool: &tool,
        hash: &hash,
        arguments,
    };
    let runner = broker.runner.as_ref();
    let protected = broker.protected.as_ref();
    let (outcome, received) = broker
        .gateway
        .call(runner, protected, &server, &grants, run)
        .await;
    let ran = Ran {
        outcome,
        class: cleared.class.max(received.class),
        untrusted: cleared.untrusted || received.untrusted,
        seen: None,
        file_untrusted: None,
    };
    let (finished, detail) = ran.finished(&call.tool, labels, broker.config.result_cap);
    finish_with(broker, call, grant, finished, detail).await
}
