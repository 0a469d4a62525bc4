//! Running a decided call: its decision on disk before a side-effecting run, the run under the
//! tool's time limit and the broker's backstop, and its answer on disk, all from one thread
//! for every tool but the memory tools (which the store answers).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use ledger::{Event, Field};
use proto::{GrantId, ToolResponse};

use super::record::{Ran, finish_blocking, finish_with, unavailable};
use super::{Answered, Pending, checker};
use crate::daemon::diagnostics;
use crate::daemon::runner::{Outcome, Raised, RunContext};
use crate::daemon::sessions::Refusal;
use crate::daemon::{Broker, nearest};
use policy::args::ToolName;
use policy::decide::{Allowed, Labels};

pub(super) async fn run(
    broker: &Arc<Broker>,
    call: &Pending,
    tool: ToolName,
    allowed: Allowed,
    grants: Arc<policy::decide::IndexedGrants>,
    labels: Labels,
    expected: Option<tools::fs::Expected>,
) -> Result<Answered, Refusal> {
    let grant = Some(GrantId::from(allowed.grant.as_str()));
    let decided = allowed.args.has_side_effects().then(|| Event::Decided {
        session: call.session.clone(),
        call_id: call.call_id,
        tool: call.tool.clone(),
        arguments: Field::of(&call.arguments),
        grant: grant.clone(),
    });
    // A write's diff echoes its arguments; its other lines are the file's, labelled as the
    // grant labels the file (untrusted unless it says `untrusted = false`).
    let file_untrusted = tool.echoes_arguments().then(|| {
        grants
            .iter()
            .find(|g| g.id == allowed.grant)
            .is_none_or(|g| g.untrusted)
    });
    let mut limit = broker.config.time_limit(tool);
    if allowed.args.has_side_effects() && tool == ToolName::AskMemory {
        limit += broker.config.time_limit(ToolName::Consult);
    }
    let context = RunContext {
        session: call.session.clone(),
        grants,
        labels,
        protected: Arc::clone(&broker.protected),
        limit,
        expected,
        raised: Raised::default(),
    };
    let cap = broker.config.result_cap;
    // The memory tools go to the store, never to a runner; their results carry the labels of
    // the entries they hold, not the grant's.
    // Jobs belong to the session: its job table starts, reads and kills them, and their output
    // carries the labels of the call that started them.
    // `delegate` is the broker's own: its child sessions open and report there.
    if tool.is_memory() || tool.is_job() || tool == ToolName::Delegate {
        if let Some(decided) = decided
            && let Err(error) = broker.journal.record(vec![decided]).await
        {
            tracing::error!(%error, "decision not recorded; the call does not run");
            return Ok(Answered::unrecorded(unavailable()));
        }
        let routed = if tool.is_job() {
            crate::daemon::jobs::route(broker, &call.session, call.call_id, &allowed, context).await
        } else if tool == ToolName::Delegate {
            let (session, id) = (&call.session, call.call_id);
            crate::daemon::delegate::route(broker, session, id, &allowed, labels, limit).await
        } else {
            let memory = &broker.memory;
            crate::daemon::memory::route(memory, &call.session, &allowed, context, limit).await
        };
        let ran = Ran {
            outcome: routed.outcome,
            class: routed.class,
            untrusted: routed.untrusted,
            seen: None,
            file_untrusted,
        };
        let (finished, detail) = ran.finished(&call.tool, labels, cap);
        return finish_with(broker, call, grant, finished, detail).await;
    }
    // Every other tool: one thread writes the decision, runs the tool, renders the answer and
    // writes it, with no other thread to wake on the way. The broker's backstop, a little
    // after the tool's own limit, answers instead if the run is not over by then; whichever
    // claims the call first records its answer.
    let raised = context.raised.clone();
    let allowed_labels = (allowed.class, allowed.untrusted);
    let claimed = Arc::new(AtomicBool::new(false));
    // A write whose file a `[[diagnostics]]` checker covers: the checker runs after it, on
    // the same thread, within its own limit, which the backstop waits for too.
    let checker = tool
        .echoes_arguments()
        .then(|| allowed.args.path().map(std::path::PathBuf::from))
        .flatten()
        .and_then(|file| {
            let checker = diagnostics::checker_for(&broker.config.diagnostics, &file)?;
            Some((checker.clone(), file))
        });
    let checker_limit = checker
        .as_ref()
        .map_or(std::time::Duration::ZERO, |(c, _)| {
            std::time::Duration::from_millis(c.timeout_ms)
        });
    let backstop = limit + checker_limit + std::time::Duration::from_secs(2);
    let mut handle = tokio::task::spawn_blocking({
        let broker = Arc::clone(broker);
        let call = call.clone();
        let claimed = Arc::clone(&claimed);
        let grant = grant.clone();
        move || {
            if let Some(decided) = decided
                && let Err(error) = broker.journal.record_blocking(vec![decided], None)
            {
                tracing::error!(%error, "decision not recorded; the call does not run");
                claimed.store(true, Ordering::SeqCst);
                return Some(Answered::unrecorded(unavailable()));
            }
            let mut outcome = broker.runner.run(&allowed, &context);
            // A path that does not exist: where the call could go instead, if anywhere.
            if let Outcome::Failed(message) = &mut outcome {
                let reach = nearest::Reach {
                    grants: &context.grants,
                    labels: context.labels,
                    protected: &context.protected,
                    walls: broker.runner.path_enforcement(),
                };
                if let Some(hint) = nearest::hint(&allowed, &reach) {
                    message.push_str(&hint);
                }
            }
            // What a file tool saw, as the run reported it (taken out of the header).
            let seen = match &mut outcome {
                Outcome::Ran { fields, .. } => {
                    crate::daemon::reads::seen(&call.session, &allowed, fields)
                }
                _ => None,
            };
            let (mut class, mut untrusted) = context.raised.over(allowed.class, allowed.untrusted);
            if let (Some((checker, file)), Outcome::Ran { body, .. }) = (&checker, &mut outcome) {
                let after = Labels {
                    taint: labels.taint.max(class),
                    untrusted: labels.untrusted || untrusted,
                };
                let file_untrusted = file_untrusted.unwrap_or(true);
                let checked = checker::check(
                    &broker,
                    &call,
                    (checker, file),
                    &allowed,
                    &context,
                    (after, file_untrusted),
                );
                if !body.is_empty() && !body.ends_with('\n') {
                    body.push('\n');
                }
                body.push_str(&checked.block);
                class = class.max(checked.class);
                untrusted |= checked.untrusted;
            }
            if claimed.swap(true, Ordering::SeqCst) {
                return None;
            }
            let ran = Ran {
                outcome,
                class,
                untrusted,
                seen,
                file_untrusted,
            };
            let (finished, detail) = ran.finished(&call.tool, labels, cap);
            Some(finish_blocking(&broker, &call, grant, finished, detail))
        }
    });
    let failed = |message: String| {
        let (class, untrusted) = raised.over(allowed_labels.0, allowed_labels.1);
        Ran {
            outcome: Outcome::Failed(message),
            class,
            untrusted,
            seen: None,
            file_untrusted,
        }
    };
    tokio::select! {
        joined = &mut handle => match joined {
            Ok(Some(answered)) => Ok(answered),
            Ok(None) => Ok(Answered::unrecorded(ToolResponse::Failed {
                message: "the tool's answer was given up at the broker's backstop".to_string(),
            })),
            Err(join) if !claimed.swap(true, Ordering::SeqCst) => {
                let message = format!("the tool stopped unexpectedly: {join}");
                let (finished, detail) = failed(message).finished(&call.tool, labels, cap);
                finish_with(broker, call, grant, finished, detail).await
            }
            Err(join) => Ok(Answered::unrecorded(ToolResponse::Failed {
                message: format!("the tool stopped unexpectedly while its answer was written: {join}"),
            })),
        },
        () = tokio::time::sleep(backstop) => {
            if claimed.swap(true, Ordering::SeqCst) {
                // The run is over and its answer is being written: wait for it.
                return Ok(match handle.await {
                    Ok(Some(answered)) => answered,
                    _ => Answered::unrecorded(unavailable()),
                });
            }
            let message = format!(
                "the tool did not finish within its limit of {} ms",
                limit.as_millis()
            );
            let (finished, detail) = failed(message).finished(&call.tool, labels, cap);
            finish_with(broker, call, grant, finished, detail).await
        }
    }
}
