//! The decision on a call of one of boxmaker's own tools, from the top, with the grants and the
//! session's labels of the moment: the tool and its arguments, `decide_in` (every path
//! resolved now), then read before write. Made for every call, and made again after each
//! approval: what the owner approved is the ask they were shown, not what the call may do now.

use std::sync::Arc;

use proto::{DenyReason, GrantId, Timestamp};

use super::{Asked, Pending, Refused, Runnable, Step};
use crate::daemon::memo::SessionMemo;
use crate::daemon::misfit;
use crate::daemon::{Broker, SessionSlot};
use policy::args::{ArgsError, ToolArgs, ToolName, parse};
use policy::decide::{Decision, Labels};
use policy::decide::{IndexedGrants, Seen};
use policy::grants::Grant;

/// A decided call of one of boxmaker's tools, ready to run.
pub(super) struct Builtin {
    /// The tool.
    pub tool: ToolName,
    /// What the decision allows, its arguments resolved.
    pub allowed: policy::decide::Allowed,
    /// The grants it was decided against (a walker leaves out what their deny grants cover).
    pub grants: Arc<IndexedGrants>,
    /// What a write must find (read before write).
    pub expected: Option<tools::fs::Expected>,
}

/// Decides `call` for a session (its slot, with the values it was handed, and its memo) with
/// `labels` under `grants`, now.
pub(super) fn decide(
    broker: &Broker,
    call: &Pending,
    (slot, memo): (&SessionSlot, &SessionMemo),
    labels: Labels,
    grants: Arc<IndexedGrants>,
) -> Step {
    let invalid =
        |detail: String| Step::Denied(Refused::new(DenyReason::InvalidArguments, None, detail));
    let Some(tool) = ToolName::parse(&call.tool) else {
        let known: Vec<&str> = ToolName::KNOWN
            .iter()
            .chain(&ToolName::JOB_COMPANIONS)
            .map(|t| t.as_str())
            .collect();
        return invalid(format!(
            "there is no tool {:?}; the tools are {}",
            call.tool,
            known.join(", ")
        ));
    };
    let args = match parse(tool, &call.arguments) {
        // With a consult model, ask_memory sends entries out: it has side effects.
        Ok(ToolArgs::AskMemory(mut ask)) => {
            ask.consults = broker.memory.consults();
            ToolArgs::AskMemory(ask)
        }
        Ok(args) => args,
        // Arguments that do not fit are the model's to fix: a failure naming the argument.
        Err(error) => return Step::Failed(unfit(tool, &call.arguments, &error)),
    };
    let now = Timestamp::now();
    if let Some((argument, path)) = args.relative_path() {
        let folder = granted_folder(&grants, tool, now);
        return Step::Failed(misfit::relative_path(argument, path, folder.as_deref()));
    }
    let walls = broker.runner.path_enforcement();
    let decision = slot.with_uses(broker, &call.session, |uses| {
        slot.with_values(broker, &call.session, |values| {
            let seen = Seen {
                labels,
                values: values.map(|index| &*index),
                uses,
            };
            let list = (&grants[..], grants.index());
            policy::decide::decide_indexed(&args, list, seen, now, &broker.protected, walls)
        })
    });
    let (allowed, ask) = match decision {
        Decision::Deny(denied) => {
            let grant = denied.grant.as_deref().map(GrantId::from);
            return Step::Denied(Refused::new(denied.reason, grant, denied.detail));
        }
        Decision::Allow(allowed) => (allowed, None),
        Decision::Ask(allowed, why) => {
            let traced = allowed.traced.clone();
            (allowed, Some((why, traced)))
        }
    };
    let grant = GrantId::from(allowed.grant.as_str());
    // Read before write: after coverage (decide), before any approval.
    let expected = match crate::daemon::reads::check(broker, &call.session, memo, &allowed) {
        Ok(expecting) => expecting,
        Err((reason, detail)) => return Step::Denied(Refused::new(reason, Some(grant), detail)),
    };
    if tool == ToolName::Ask {
        let ToolArgs::Ask(question) = &allowed.args else {
            return invalid("ask arguments did not parse as a question".to_string());
        };
        return Step::Question {
            grant,
            question: question.question.clone(),
            choices: question.choices.clone(),
        };
    }
    let runnable = Runnable::Builtin(Builtin {
        tool,
        allowed,
        grants,
        expected,
    });
    match ask {
        None => Step::Run(runnable),
        Some((why, traced)) => Step::Ask(runnable, Asked::new(grant, why, &traced)),
    }
}

/// What the model is told of arguments `parse` refused: each misfit against the schema the
/// broker lists for the tool, naming the argument; `parse`'s own words when the schema has
/// nothing to say (a value only the broker's checks refuse, like an empty `edits`).
fn unfit(tool: ToolName, arguments: &str, error: &ArgsError) -> String {
    let name = tool.as_str();
    let value = match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(value) => value,
        Err(error) => return misfit::not_json(name, &error),
    };
    let schema = tool.schema();
    let found = jsonschema::validator_for(&schema.parameters)
        .map(|validator| misfit::misfits(name, &validator, &schema.parameters, &value, true))
        .unwrap_or_default();
    if found.is_empty() {
        format!("the arguments do not fit {name}: {}", error.detail())
    } else {
        misfit::message(&found)
    }
}

/// The folder a relative path would be taken in: the first folder of the first live allow
/// grant of `tool` (where a `shell` call without `cwd` runs), when it is a folder.
fn granted_folder(grants: &[Grant], tool: ToolName, now: Timestamp) -> Option<std::path::PathBuf> {
    grants
        .iter()
        .filter(|g| g.tool == tool.granted_by() && !g.deny && !g.expired(now))
        .find_map(|g| g.paths.first())
        .map(|rule| rule.base())
        .filter(|base| base.is_dir())
}
