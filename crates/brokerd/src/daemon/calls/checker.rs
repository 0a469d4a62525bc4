//! A write's checker run (`daemon::diagnostics`): after a `write_file` or `edit_file` whose
//! file a `[[diagnostics]]` entry covers, on the thread that ran the write, before its answer
//! is rendered.
//!
//! A checker that runs no project code runs under the write grant's walls: the box of a
//! `shell` call bound to the folders the write's grant covers, with no network. One that can
//! run the project's code (`runs_project_code = true`) runs only as a `shell` call: decided by
//! the same `decide` as a model's `shell` call, with the session's labels and values (taint,
//! untrusted input, provenance, the rules on arguments), counted under `per_session`, its
//! decision and answer recorded as a `shell` call's, under call id
//! [`CHECKER_CALLS`]` + ` the write's id. It never waits for the owner: a grant that would
//! ask leaves it not run, recorded so, and the answer says why.

use std::path::Path;
use std::sync::Arc;

use ledger::{Event, Field, sha256_hex};
use proto::{CallId, GrantId, OwnerEvent, Timestamp};

use super::Pending;
use super::record::{Ran, finish_blocking};
use crate::daemon::diagnostics::{self, DiagnosticsConfig};
use crate::daemon::runner::{Outcome, RunContext};
use crate::daemon::{Broker, GrantsState};
use policy::args::{ToolArgs, ToolName};
use policy::decide::{Allowed, Decision, Labels, Seen, Traced};

/// The first call id of the broker's own checker calls: the checker of the write with call id
/// N is recorded as call `CHECKER_CALLS + N` of the session.
pub const CHECKER_CALLS: u64 = 1 << 62;

/// What a checker appends to a write's answer: the block, and the labels of its text.
pub(super) struct Checked {
    /// The lines appended.
    pub block: String,
    /// The class of the text (the checker's grant's).
    pub class: proto::Class,
    /// Whether the text is untrusted.
    pub untrusted: bool,
}

/// Runs `checker` on `file`, written by `call` as `write` allowed it; `labels` are the
/// session's with the write's own. `file_untrusted`: whether the write grant marks its files
/// untrusted (the labels of a checker run under its walls).
pub(super) fn check(
    broker: &Arc<Broker>,
    call: &Pending,
    (checker, file): (&DiagnosticsConfig, &Path),
    write: &Allowed,
    context: &RunContext,
    (labels, file_untrusted): (Labels, bool),
) -> Checked {
    let script = checker.script(file);
    let cwd = checker.workspace.display().to_string();
    if checker.runs_project_code {
        return as_shell_call(
            broker,
            call,
            (checker, file),
            (script, cwd),
            context,
            labels,
        );
    }
    let allowed = Allowed {
        grant: write.grant.clone(),
        class: write.class,
        untrusted: file_untrusted,
        args: shell_args(script, cwd),
        scope: write.scope.clone(),
        hosts: Vec::new(),
        traced: Traced::default(),
        counted: Vec::new(),
    };
    let ran = ran(broker.runner.run(&allowed, &bounded(context, checker)));
    Checked {
        block: diagnostics::block(checker, file, &ran),
        class: write.class,
        untrusted: file_untrusted,
    }
}

/// The `shell` arguments of a checker's script in `cwd`.
fn shell_args(command: String, cwd: String) -> ToolArgs {
    ToolArgs::Shell(tools::shell::ShellArgs {
        command,
        cwd: Some(cwd),
        timeout_secs: None,
    })
}

/// `context` with the checker's time limit.
fn bounded(context: &RunContext, checker: &DiagnosticsConfig) -> RunContext {
    RunContext {
        limit: std::time::Duration::from_millis(checker.timeout_ms),
        expected: None,
        raised: Default::default(),
        ..context.clone()
    }
}

/// A shell run's outcome as the diagnostics read it.
fn ran(outcome: Outcome) -> diagnostics::Ran {
    match outcome {
        Outcome::Ran { fields, body } => {
            if fields.get("timed_out").and_then(|v| v.as_bool()) == Some(true) {
                return diagnostics::Ran::TimedOut;
            }
            diagnostics::Ran::Finished {
                exit_code: fields.get("exit_code").and_then(|v| v.as_i64()),
                output: body,
            }
        }
        Outcome::Failed(message) => diagnostics::Ran::NotRun(message),
        Outcome::Denied(reason, detail) => {
            diagnostics::Ran::NotRun(format!("{} ({detail})", reason.model_text()))
        }
    }
}

/// The checker as a `shell` call of the session, decided, counted and recorded as one.
fn as_shell_call(
    broker: &Arc<Broker>,
    call: &Pending,
    (checker, file): (&DiagnosticsConfig, &Path),
    (command, cwd): (String, String),
    context: &RunContext,
    labels: Labels,
) -> Checked {
    let unchanged = |why: String| Checked {
        block: diagnostics::block(checker, file, &diagnostics::Ran::NotRun(why)),
        class: labels.taint,
        untrusted: false,
    };
    let Some(call_id) = call
        .call_id
        .0
        .checked_add(CHECKER_CALLS)
        .filter(|_| call.call_id.0 < CHECKER_CALLS)
    else {
        return unchanged(format!(
            "call ids from {CHECKER_CALLS} on are the broker's own checker calls"
        ));
    };
    let arguments = serde_json::json!({ "command": command, "cwd": cwd }).to_string();
    let shell = Pending {
        session: call.session.clone(),
        call_id: CallId(call_id),
        tool: ToolName::Shell.as_str().to_string(),
        identity: sha256_hex(arguments.as_bytes()),
        arguments,
    };
    let args = match policy::args::parse(ToolName::Shell, &shell.arguments) {
        Ok(args) => args,
        Err(error) => return unchanged(format!("its command is not a shell call: {error}")),
    };
    let grants = match broker.grants_now() {
        GrantsState::Loaded(grants, _) => grants,
        GrantsState::Invalid(problems) => {
            return unchanged(format!(
                "the grant files have {} problem(s)",
                problems.len()
            ));
        }
    };
    broker.publish(OwnerEvent::Call {
        session: shell.session.clone(),
        call_id: shell.call_id,
        tool: shell.tool.clone(),
        arguments: shell.arguments.clone(),
    });
    let slot = broker.session_slot(&call.session);
    let decision = slot.with_uses(broker, &call.session, |uses| {
        slot.with_values(broker, &call.session, |values| {
            let seen = Seen {
                labels,
                values: values.map(|index| &*index),
                uses,
            };
            let list = (&grants[..], grants.index());
            let walls = broker.runner.path_enforcement();
            policy::decide::decide_indexed(
                &args,
                list,
                seen,
                Timestamp::now(),
                &broker.protected,
                walls,
            )
        })
    });
    // What the record of a checker call that did not run says, and the answer's line.
    let not_run = |outcome: Outcome, grant: Option<GrantId>, why: String| {
        let ran = Ran {
            outcome,
            class: labels.taint,
            untrusted: labels.untrusted,
            seen: None,
            file_untrusted: None,
        };
        let (finished, detail) = ran.finished(&shell.tool, labels, broker.config.result_cap);
        finish_blocking(broker, &shell, grant, finished, detail);
        unchanged(why)
    };
    let allowed = match decision {
        Decision::Allow(allowed) => allowed,
        Decision::Deny(denied) => {
            let why = format!(
                "it can run the project's code, so it runs only as a shell call a shell grant covers, and this one was refused: {} ({})",
                denied.reason.model_text(),
                denied.detail
            );
            let grant = denied.grant.as_deref().map(GrantId::from);
            return not_run(Outcome::Denied(denied.reason, denied.detail), grant, why);
        }
        Decision::Ask(allowed, reason) => {
            let why = format!(
                "shell grant {} asks the owner first ({reason:?}), and a checker never waits for an approval; run `{}` with shell to be asked",
                allowed.grant,
                shell_command(&shell.arguments)
            );
            let grant = Some(GrantId::from(allowed.grant.as_str()));
            return not_run(Outcome::Failed(why.clone()), grant, why);
        }
    };
    let grant = Some(GrantId::from(allowed.grant.as_str()));
    if let Err(error) = slot.count_run(broker, &call.session, &allowed.counted) {
        let why = format!("the call's count per session cannot be recorded: {error}");
        return not_run(Outcome::Failed(why.clone()), grant, why);
    }
    let decided = Event::Decided {
        session: shell.session.clone(),
        call_id: shell.call_id,
        tool: shell.tool.clone(),
        arguments: Field::of(&shell.arguments),
        grant: grant.clone(),
    };
    if let Err(error) = broker.journal.record_blocking(vec![decided], None) {
        tracing::error!(%error, "a checker's decision not recorded; it does not run");
        return unchanged("its decision could not be recorded".to_string());
    }
    let shell_context = RunContext {
        grants: Arc::clone(&grants),
        ..bounded(context, checker)
    };
    let outcome = broker.runner.run(&allowed, &shell_context);
    let (class, untrusted) = shell_context.raised.over(allowed.class, allowed.untrusted);
    let read = ran(outcome.clone());
    let recorded = Ran {
        outcome,
        class,
        untrusted,
        seen: None,
        file_untrusted: None,
    };
    let (finished, detail) = recorded.finished(&shell.tool, labels, broker.config.result_cap);
    finish_blocking(broker, &shell, grant, finished, detail);
    Checked {
        block: diagnostics::block(checker, file, &read),
        class,
        untrusted,
    }
}

/// The command of a checker call's arguments, for the answer.
fn shell_command(arguments: &str) -> String {
    serde_json::from_str::<serde_json::Value>(arguments)
        .ok()
        .and_then(|v| v["command"].as_str().map(str::to_string))
        .unwrap_or_default()
}
