//! A call's answer written down: the records of its outcome, written from an async task or
//! from the thread that ran the tool, and what the client gets once they are on disk.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use ledger::{Answer, Event, Field};
use proto::{DenyReason, GrantId, OwnerEvent, ToolResponse};

use super::{Answered, Pending};
use crate::daemon::Broker;
use crate::daemon::journal::{JournalError, WholeAnswer};
use crate::daemon::render::{owner_walls, render, walls_detail};
use crate::daemon::runner::Outcome;
use crate::daemon::sessions::Refusal;
use crate::daemon::values::{Handed, feed};
use policy::decide::Labels;

/// Records the answer, then returns `response` (what the client gets: the answer whole, where
/// the record may keep only a digest); when the record cannot be written the answer is
/// `AuditUnavailable`, whatever was decided. Its text goes into the session's values as
/// `handed` says.
pub(super) async fn finish(
    broker: &Broker,
    call: &Pending,
    grant: Option<GrantId>,
    answer: Answer,
    handed: Handed,
    detail: String,
) -> Result<Answered, Refusal> {
    let response = answer.response();
    let outcome = Finished {
        answer,
        response,
        labels: None,
        seen: None,
        handed,
    };
    finish_with(broker, call, grant, outcome, detail).await
}

/// A call's outcome, ready to be recorded.
pub(super) struct Finished {
    /// What the audit record keeps.
    answer: Answer,
    /// What the client gets.
    response: ToolResponse,
    /// The session's labels after it, when it raised them.
    labels: Option<ledger::Labels>,
    /// The content the call saw or left, recorded in the same batch before the answer.
    seen: Option<Event>,
    /// How its text goes into the session's values.
    handed: Handed,
}

pub(super) async fn finish_with(
    broker: &Broker,
    call: &Pending,
    grant: Option<GrantId>,
    finished: Finished,
    detail: String,
) -> Result<Answered, Refusal> {
    let mut record = Record::of(call, grant, finished, detail);
    let events = std::mem::take(&mut record.events);
    let whole = record.whole.take();
    let applied = Arc::new(AtomicBool::new(false));
    let written = broker
        .journal
        .record_answer(events, whole, Arc::clone(&applied))
        .await;
    Ok(record.written(broker, call, written.map(|()| applied)))
}

/// [`finish_with`] on a thread that may block: the records are written from this thread.
pub(super) fn finish_blocking(
    broker: &Broker,
    call: &Pending,
    grant: Option<GrantId>,
    finished: Finished,
    detail: String,
) -> Answered {
    let mut record = Record::of(call, grant, finished, detail);
    let events = std::mem::take(&mut record.events);
    let whole = record.whole.take();
    let applied = Arc::new(AtomicBool::new(false));
    let written = broker
        .journal
        .record_answer_blocking(events, whole, Arc::clone(&applied));
    record.written(broker, call, written.map(|()| applied))
}

/// A call's outcome as the records to write, and what follows once they are written.
struct Record {
    events: Vec<Event>,
    whole: Option<WholeAnswer>,
    owner_event: OwnerEvent,
    response: ToolResponse,
    labels: Option<ledger::Labels>,
    seen_file: Option<(String, String)>,
    handed: Handed,
}

impl Record {
    fn of(call: &Pending, grant: Option<GrantId>, finished: Finished, detail: String) -> Record {
        let Finished {
            answer,
            response,
            labels,
            seen,
            handed,
        } = finished;
        let (outcome, reason) = match &answer {
            Answer::Result { .. } => ("result", None),
            Answer::Failed { .. } => ("failed", None),
            Answer::Denied { reason } => ("denied", Some(*reason)),
        };
        let owner_event = OwnerEvent::Answered {
            session: call.session.clone(),
            call_id: call.call_id,
            tool: call.tool.clone(),
            outcome: outcome.to_string(),
            reason,
            grant: grant.clone(),
            detail: detail.clone(),
        };
        let event = Event::Answered {
            session: call.session.clone(),
            call_id: call.call_id,
            tool: call.tool.clone(),
            arguments: Field::of(&call.arguments),
            grant,
            labels,
            answer,
            detail,
        };
        let whole = WholeAnswer {
            session: call.session.clone(),
            call_id: call.call_id,
            response: response.clone(),
        };
        let seen_file = match &seen {
            Some(Event::FileSeen { path, sha256, .. }) => Some((path.clone(), sha256.clone())),
            _ => None,
        };
        Record {
            events: seen.into_iter().chain([event]).collect(),
            whole: Some(whole),
            owner_event,
            response,
            labels,
            seen_file,
            handed,
        }
    }

    /// The answer once the write is over: the response when it is on disk, else
    /// `AuditUnavailable`.
    fn written(
        self,
        broker: &Broker,
        call: &Pending,
        written: Result<Arc<AtomicBool>, JournalError>,
    ) -> Answered {
        match written {
            Ok(applied) => {
                let slot = broker.session_slot(&call.session);
                if let Some(labels) = self.labels {
                    slot.raise(Labels {
                        taint: labels.taint,
                        untrusted: labels.untrusted,
                    });
                }
                // What the agent is handed, as handed, once it is on disk (the rebuilt index
                // reads the same text back from the ledger).
                let text = match &self.response {
                    ToolResponse::Result { content, .. } => Some(content.as_str()),
                    ToolResponse::Failed { message } => Some(message.as_str()),
                    _ => None,
                };
                if let Some(text) = text
                    && self.handed != Handed::Nothing
                {
                    slot.with_values(broker, &call.session, |values| {
                        if let Some(index) = values {
                            feed(index, call.call_id.0, &call.tool, self.handed, text);
                        }
                    });
                }
                broker.publish(self.owner_event);
                Answered {
                    response: self.response,
                    applied: Some(applied),
                    labels: self.labels,
                    seen: self.seen_file,
                }
            }
            Err(error) => {
                tracing::error!(%error, session = %call.session, call = %call.call_id, "answer not recorded");
                Answered::unrecorded(unavailable())
            }
        }
    }
}

/// The most bytes of a failure's message kept as the owner's detail (the audit record and
/// `bx watch`); the message itself reaches the client within the result cap.
const DETAIL_CAP: usize = 4096;

pub(super) fn unavailable() -> ToolResponse {
    ToolResponse::Denied {
        reason: DenyReason::AuditUnavailable,
    }
}

/// What a run gave, with the labels its result carries.
pub(super) struct Ran {
    pub(super) outcome: Outcome,
    pub(super) class: proto::Class,
    pub(super) untrusted: bool,
    /// The file content the call saw or left.
    pub(super) seen: Option<Event>,
    /// For a tool whose result echoes its arguments (a write's diff): whether the grant marks
    /// the file untrusted (the diff's lines that are not the arguments' are the file's).
    pub(super) file_untrusted: Option<bool>,
}

impl Ran {
    /// The answer to record (rendered within `cap`) and the detail for the owner, for a
    /// session whose labels were `labels` before the call.
    pub(super) fn finished(self, tool: &str, labels: Labels, cap: usize) -> (Finished, String) {
        let Ran {
            outcome,
            class,
            untrusted,
            seen,
            file_untrusted,
        } = self;
        let as_result = Handed::Result { class, untrusted };
        let raised = ledger::Labels {
            taint: labels.taint.max(class),
            untrusted: labels.untrusted || untrusted,
        };
        let (answer, response, labels, detail, handed) = match outcome {
            Outcome::Ran { mut fields, body } => {
                // The walls sentence is the owner's: the model's header keeps a token.
                let detail = owner_walls(&mut fields)
                    .map(|walls| walls_detail(&walls))
                    .unwrap_or_default();
                let rendered = render(tool, class, untrusted, fields, &body, cap);
                let answer = Answer::Result {
                    text: Field::of(&rendered.text),
                    class,
                    untrusted,
                    truncated: rendered.truncated,
                };
                let response = ToolResponse::Result {
                    content: rendered.text,
                    class,
                    untrusted,
                    truncated: rendered.truncated,
                };
                let handed = match file_untrusted {
                    Some(_) => Handed::Write { class },
                    None => as_result,
                };
                (answer, response, Some(raised), detail, handed)
            }
            Outcome::Failed(message) => {
                // A failure may carry bytes from outside (a command's output): labelled like a
                // result, in the same envelope.
                let rendered = render(
                    tool,
                    class,
                    untrusted,
                    serde_json::Map::new(),
                    &message,
                    cap,
                );
                let answer = Answer::Failed {
                    message: Field::of(&rendered.text),
                };
                let response = ToolResponse::Failed {
                    message: rendered.text,
                };
                // The owner's detail is the message's start: the whole is in the answer, capped.
                let detail = proto::text::cut_at_boundary(&message, DETAIL_CAP).to_string();
                (answer, response, Some(raised), detail, as_result)
            }
            Outcome::Denied(reason, detail) => (
                Answer::Denied { reason },
                ToolResponse::Denied { reason },
                None,
                detail,
                Handed::Nothing,
            ),
        };
        let finished = Finished {
            answer,
            response,
            labels,
            seen,
            handed,
        };
        (finished, detail)
    }
}
