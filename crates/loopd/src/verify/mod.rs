//! Code mode's verify loop (seed 003, step 2: the seed's `codeVerifyLoop`): a turn of a
//! conversation with criteria (`loopd chat --criteria FILE`).
//!
//! 1. The builder (the model with the conversation and its tools) gets the owner's message
//!    with the criteria, and works until it answers without tool calls: it says it is done.
//! 2. Unless every criterion has passed, loopd relaunches it once on the criteria still open.
//! 3. A verification pass: the same model in an isolated context, the `verifier` role (its own
//!    system prompt, [`VERIFIER_PROMPT`], and one message with the open criteria and the
//!    machine's facts: the builder's tool calls and what they returned, never its words; no
//!    tools, no conversation). Its verdicts are the only way a criterion becomes `passed`.
//! 4. Criteria it fails go back to the builder as a correction; the builder works, and the
//!    verifier checks again. After two corrections ([`MAX_CORRECTIONS`]) with criteria still
//!    failing, loopd stops and says so in the conversation; so it does when the verifier's
//!    reply holds no verdict at all.
//!
//! The events: `role` when the speaking role changes (with the verifier's `ctx_isolated`
//! measure) and `verify_done`, always the last event of a code-mode turn. The core tools array
//! does not change: loopd adds no tool, and the verifier's request has none.

mod verifier;

pub use verifier::{PASS_PREFIX, VERIFIER_PROMPT, Verdict, facts_message, parse_verdicts};

use crate::criteria::{AgentRole, Criteria, CriterionState, VerifyOutcome};
use crate::llama::{LlamaError, Message};
use crate::session::Session;
use crate::turn::{Runtime, TurnError, TurnEvent, run_turn};

/// Corrections fed back to the builder before loopd stops.
pub const MAX_CORRECTIONS: usize = 2;

/// The finding of a criterion the verifier's reply gave no verdict on.
pub const NO_VERDICT: &str = "the verifier gave no verdict on it";

/// The owner's message of a code-mode turn as the builder reads it: `user`, then the criteria
/// with their states. It is the owner's words as a whole (the criteria are the owner's too).
pub fn code_message(user: &str, criteria: &Criteria) -> String {
    let mut out = format!(
        "{user}\n\nCode mode: the owner's acceptance criteria (a separate verifier checks each \
         one against the machine; only it can mark one passed):\n"
    );
    for criterion in &criteria.criteria {
        let state = match criterion.state {
            CriterionState::Open => "open",
            CriterionState::Passed => "passed",
            CriterionState::Failed => "failed",
        };
        out.push_str(&format!("{}. [{state}] {}\n", criterion.id, criterion.text));
    }
    out
}

/// The message that relaunches a builder that said it is done on the criteria still open.
pub fn relaunch_message(criteria: &Criteria) -> String {
    let mut out = String::from(
        "[loopd, code mode] You said you are done. These criteria of the owner are still open; \
         a separate verifier will check each one against the machine:\n",
    );
    for criterion in criteria.open() {
        out.push_str(&format!("{}. {}\n", criterion.id, criterion.text));
    }
    out.push_str("Check each one with your tools, finish what is missing, then say you are done.");
    out
}

/// The correction number `n`: the criteria the verifier failed or gave no verdict on, with its
/// findings.
pub fn correction_message(n: usize, criteria: &Criteria) -> String {
    let mut out = format!(
        "[loopd, code mode] Correction {n} of {MAX_CORRECTIONS} from the verifier. These \
         criteria are not met yet:\n"
    );
    push_findings(&mut out, criteria);
    out.push_str("Fix them with your tools, then say you are done.");
    out
}

fn push_findings(out: &mut String, criteria: &Criteria) {
    for criterion in criteria.open() {
        out.push_str(&format!("{}. {}", criterion.id, criterion.text));
        if let Some(finding) = &criterion.finding {
            out.push_str(&format!(" (verifier: {finding})"));
        }
        out.push('\n');
    }
}

/// The sentence loopd leaves in the conversation when it stops after two corrections.
pub fn stopped_message(criteria: &Criteria) -> String {
    let mut out = format!(
        "[loopd, code mode] Verification stopped after {MAX_CORRECTIONS} corrections. The \
         verifier still finds these criteria not met:\n"
    );
    push_findings(&mut out, criteria);
    out.push_str("No more corrections follow; the owner decides what comes next.");
    out
}

/// The sentence loopd leaves in the conversation when the verifier's reply holds no verdict.
pub const UNREADABLE_MESSAGE: &str = "[loopd, code mode] Verification stopped: the verifier's \
reply held no verdict (PASS or FAIL with a criterion's number), so no criterion was marked \
passed. The owner decides what comes next.";

/// Applies the verifier's `verdicts` to the criteria it was `asked` about: a verdict marks a
/// criterion passed or failed with its finding; one it did not judge stays open with
/// [`NO_VERDICT`].
pub fn apply_verdicts(criteria: &mut Criteria, asked: &[usize], verdicts: &[Verdict]) {
    for criterion in &mut criteria.criteria {
        if !asked.contains(&criterion.id) {
            continue;
        }
        match verdicts.iter().find(|v| v.id == criterion.id) {
            Some(verdict) if verdict.passed => {
                criterion.state = CriterionState::Passed;
                criterion.finding = verdict.finding.clone();
            }
            Some(verdict) => {
                criterion.state = CriterionState::Failed;
                criterion.finding = Some(
                    verdict
                        .finding
                        .clone()
                        .unwrap_or_else(|| "failed, without a reason given".to_string()),
                );
            }
            None => {
                criterion.state = CriterionState::Open;
                criterion.finding = Some(NO_VERDICT.to_string());
            }
        }
    }
}

/// The counts of one code-mode turn.
struct Counts {
    passes: usize,
    corrections: usize,
}

/// Runs a code-mode turn: `message` (the owner's, as [`code_message`] wrote it) to the builder,
/// then the relaunch, verification passes and corrections described in the module. The
/// criteria's verdicts are kept in the session's folder after each pass. Returns the
/// builder's last answer; a failed builder turn or verifier request is the error. Events go
/// to `on_event`; `verify_done` is always the last.
pub fn run_code_turn(
    rt: &Runtime<'_>,
    session: &mut Session,
    criteria: &mut Criteria,
    message: &str,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<String, TurnError> {
    let mut counts = Counts {
        passes: 0,
        corrections: 0,
    };
    let result = verify_loop(rt, session, criteria, message, &mut counts, on_event);
    let outcome = match &result {
        Ok((_, outcome)) => *outcome,
        Err(_) => VerifyOutcome::Failed,
    };
    on_event(&TurnEvent::VerifyDone {
        outcome,
        passes: counts.passes,
        corrections: counts.corrections,
        criteria: criteria.criteria.clone(),
    });
    result.map(|(answer, _)| answer)
}

fn verify_loop(
    rt: &Runtime<'_>,
    session: &mut Session,
    criteria: &mut Criteria,
    message: &str,
    counts: &mut Counts,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<(String, VerifyOutcome), TurnError> {
    let start = session.len();
    on_event(&TurnEvent::Role {
        role: AgentRole::Builder,
        ctx_isolated: None,
    });
    let mut answer = run_turn(rt, session, message, on_event)?;
    if criteria.all_passed() {
        return Ok((answer, VerifyOutcome::Passed));
    }
    answer = run_turn(rt, session, &relaunch_message(criteria), on_event)?;
    loop {
        counts.passes += 1;
        criteria.passes = criteria.passes.saturating_add(1);
        let asked: Vec<usize> = criteria.open().iter().map(|c| c.id).collect();
        let reply = verification_pass(rt, session, criteria, start, on_event)?;
        let verdicts = parse_verdicts(&reply, &asked);
        if verdicts.is_empty() {
            apply_verdicts(criteria, &asked, &verdicts);
            criteria.save(session.dir())?;
            session.append(&Message::user(UNREADABLE_MESSAGE))?;
            return Ok((answer, VerifyOutcome::Unreadable));
        }
        apply_verdicts(criteria, &asked, &verdicts);
        criteria.save(session.dir())?;
        if criteria.all_passed() {
            return Ok((answer, VerifyOutcome::Passed));
        }
        if counts.corrections == MAX_CORRECTIONS {
            session.append(&Message::user(&stopped_message(criteria)))?;
            return Ok((answer, VerifyOutcome::Stopped));
        }
        counts.corrections += 1;
        on_event(&TurnEvent::Role {
            role: AgentRole::Builder,
            ctx_isolated: None,
        });
        let correction = correction_message(counts.corrections, criteria);
        answer = run_turn(rt, session, &correction, on_event)?;
    }
}

/// One verification pass (numbered [`Criteria::passes`]): the verifier's request on the open
/// criteria and the facts of the builder's conversation since `start`; returns the verifier's text. A failed request is
/// reported as a failed turn.
fn verification_pass(
    rt: &Runtime<'_>,
    session: &Session,
    criteria: &Criteria,
    start: usize,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Result<String, TurnError> {
    let messages = session.messages_since(start);
    let facts = facts_message(criteria.passes, &criteria.open(), &messages);
    let result = (|| {
        let messages = verifier::messages(&facts).map_err(|e| LlamaError::Encode(e.to_string()))?;
        let no_tools = serde_json::value::RawValue::from_string("[]".to_string())
            .map_err(|e| LlamaError::Encode(e.to_string()))?;
        on_event(&TurnEvent::Role {
            role: AgentRole::Verifier,
            ctx_isolated: Some(verifier::isolation(&facts, session.len() + 1)),
        });
        let request = verifier::request(&messages, &no_tools);
        let mut on_text = |text: &str| {
            on_event(&TurnEvent::TextDelta {
                text: text.to_string(),
            })
        };
        rt.model.complete(&request, &mut on_text)
    })();
    match result {
        Ok(reply) => {
            if !reply.content.is_empty() {
                on_event(&TurnEvent::AssistantText {
                    text: reply.content.clone(),
                });
            }
            Ok(reply.content)
        }
        Err(error) => {
            let error = TurnError::Verifier(error);
            on_event(&TurnEvent::TurnFailed {
                error: error.to_string(),
            });
            Err(error)
        }
    }
}
