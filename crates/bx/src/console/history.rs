//! What the audit log says about each session: its calls with their outcomes, its approvals,
//! and the moments its labels rose (the first untrusted or secret data, and the call that
//! brought it). Built from the records the broker sends over the owner socket; nothing is kept.

use std::collections::BTreeMap;

use ledger::{Answer, Event, Labels};
use proto::{ApprovalId, AskWhy, CallId, Class, GrantId, Resolution, SessionId, Timestamp};

use super::broker::Line;

/// How a call ended, as far as the log says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The tool ran.
    Result,
    /// The tool failed.
    Failed,
    /// The call was refused.
    Denied,
    /// It waits for the owner.
    Waiting,
    /// Decided, not answered yet (running, or the broker stopped).
    Running,
}

impl Outcome {
    /// Its name, as the live stream and the filters spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Result => "result",
            Outcome::Failed => "failed",
            Outcome::Denied => "denied",
            Outcome::Waiting => "waiting",
            Outcome::Running => "running",
        }
    }
}

/// One call of a session.
#[derive(Debug, Clone)]
pub struct Call {
    /// The call's id within its session.
    pub id: CallId,
    /// The tool.
    pub tool: String,
    /// The arguments as recorded (or a note that only their digest was kept).
    pub arguments: String,
    /// When it was first recorded.
    pub at: Timestamp,
    /// How it ended.
    pub outcome: Outcome,
    /// The grant that decided it.
    pub grant: Option<GrantId>,
    /// Why, for the owner (a denial's reason and detail, a result's walls).
    pub detail: String,
    /// The audit record that answered it.
    pub record: Option<u64>,
}

/// A rise of a session's labels.
#[derive(Debug, Clone)]
pub struct Change {
    /// When.
    pub at: Timestamp,
    /// The call whose answer raised them.
    pub call: CallId,
    /// That call's tool.
    pub tool: String,
    /// What the session first saw: `untrusted`, `private` or `secret`.
    pub what: &'static str,
}

/// An approval or question of a session.
#[derive(Debug, Clone)]
pub struct Approval {
    /// Its id.
    pub id: ApprovalId,
    /// The call it held.
    pub call: CallId,
    /// The tool.
    pub tool: String,
    /// Why it asked.
    pub why: AskWhy,
    /// The grant that asked.
    pub grant: Option<GrantId>,
    /// When it asked.
    pub at: Timestamp,
    /// How it ended, when it did.
    pub resolution: Option<Resolution>,
}

/// One session as the log tells it.
#[derive(Debug, Clone)]
pub struct Session {
    /// Its id.
    pub id: SessionId,
    /// When it opened (absent: opened before this log began).
    pub opened: Option<Timestamp>,
    /// When and why it ended.
    pub ended: Option<(Timestamp, String)>,
    /// Its latest record.
    pub last: Timestamp,
    /// Its calls, in the order they came.
    pub calls: Vec<Call>,
    /// The rises of its labels, in order.
    pub changes: Vec<Change>,
    /// Its labels now.
    pub labels: Labels,
    /// Its approvals and questions, in order.
    pub approvals: Vec<Approval>,
}

impl Session {
    fn new(id: SessionId, at: Timestamp) -> Session {
        Session {
            id,
            opened: None,
            ended: None,
            last: at,
            calls: Vec::new(),
            changes: Vec::new(),
            labels: Labels {
                taint: Class::Public,
                untrusted: false,
            },
            approvals: Vec::new(),
        }
    }

    fn call(
        &mut self,
        id: CallId,
        tool: &str,
        arguments: &ledger::Field,
        at: Timestamp,
    ) -> &mut Call {
        let at_index = match self.calls.iter().position(|c| c.id == id) {
            Some(index) => index,
            None => {
                self.calls.push(Call {
                    id,
                    tool: tool.to_string(),
                    arguments: field_text(arguments),
                    at,
                    outcome: Outcome::Running,
                    grant: None,
                    detail: String::new(),
                    record: None,
                });
                self.calls.len() - 1
            }
        };
        &mut self.calls[at_index]
    }

    fn labels_after(&mut self, labels: Labels, call: CallId, tool: &str, at: Timestamp) {
        let mut rose = |what| {
            self.changes.push(Change {
                at,
                call,
                tool: tool.to_string(),
                what,
            })
        };
        if labels.untrusted && !self.labels.untrusted {
            rose("untrusted");
        }
        if labels.taint > self.labels.taint {
            rose(labels.taint.as_str());
        }
        self.labels = Labels {
            taint: self.labels.taint.max(labels.taint),
            untrusted: self.labels.untrusted || labels.untrusted,
        };
    }
}

/// A denial in words: the model's sentence, then the owner's detail in brackets.
pub fn denial(reason: proto::DenyReason, detail: &str) -> String {
    let said = reason.model_text();
    if detail.is_empty() {
        said.to_string()
    } else {
        format!("{} ({detail}).", said.trim_end_matches('.'))
    }
}

/// A recorded field as text: whole, or a sentence saying only its digest was kept.
pub fn field_text(field: &ledger::Field) -> String {
    match field {
        ledger::Field::Text { text } => text.clone(),
        ledger::Field::Digest { sha256, size } => {
            format!("({size} bytes, recorded as SHA-256 {sha256})")
        }
    }
}

/// Every session the log names, keyed by id.
pub fn sessions(lines: &[Line]) -> BTreeMap<SessionId, Session> {
    let mut sessions: BTreeMap<SessionId, Session> = BTreeMap::new();
    for line in lines {
        let Some(record) = &line.record else { continue };
        let at = record.at;
        let Some(id) = session_of(&record.event) else {
            continue;
        };
        let session = sessions
            .entry(id.clone())
            .or_insert_with(|| Session::new(id.clone(), at));
        session.last = at;
        match &record.event {
            Event::SessionOpened { .. } => session.opened = Some(at),
            Event::SessionEnded { reason, .. } => session.ended = Some((at, reason.clone())),
            Event::Decided {
                call_id,
                tool,
                arguments,
                grant,
                ..
            } => {
                let call = session.call(*call_id, tool, arguments, at);
                call.grant = grant.clone();
            }
            Event::ApprovalRequested {
                approval,
                call_id,
                tool,
                arguments,
                grant,
                why,
                ..
            } => {
                session.call(*call_id, tool, arguments, at).outcome = Outcome::Waiting;
                session.approvals.push(Approval {
                    id: *approval,
                    call: *call_id,
                    tool: tool.clone(),
                    why: *why,
                    grant: grant.clone(),
                    at,
                    resolution: None,
                });
            }
            Event::ApprovalResolved {
                approval,
                resolution,
                ..
            } => {
                if let Some(asked) = session.approvals.iter_mut().find(|a| a.id == *approval) {
                    asked.resolution = Some(resolution.clone());
                }
            }
            Event::Answered {
                call_id,
                tool,
                arguments,
                grant,
                labels,
                answer,
                detail,
                ..
            } => {
                let call = session.call(*call_id, tool, arguments, at);
                call.grant = grant.clone();
                call.record = Some(record.seq);
                call.detail = detail.clone();
                call.outcome = match answer {
                    Answer::Result { .. } => Outcome::Result,
                    Answer::Failed { .. } => Outcome::Failed,
                    Answer::Denied { reason } => {
                        call.detail = denial(*reason, detail);
                        Outcome::Denied
                    }
                };
                if let Some(labels) = labels {
                    session.labels_after(*labels, *call_id, tool, at);
                }
            }
            _ => {}
        }
    }
    sessions
}

/// The session a record is about, if it is about one.
pub fn session_of(event: &Event) -> Option<&SessionId> {
    match event {
        Event::SessionOpened { session, .. }
        | Event::SessionResumed { session }
        | Event::SessionEnded { session, .. }
        | Event::Decided { session, .. }
        | Event::Answered { session, .. }
        | Event::ApprovalRequested { session, .. }
        | Event::ApprovalResolved { session, .. }
        | Event::FileSeen { session, .. }
        | Event::OwnerWords { session, .. }
        | Event::Interrupted { session, .. } => Some(session),
        Event::Started { .. }
        | Event::Stopped { .. }
        | Event::Cut { .. }
        | Event::Segment { .. }
        | Event::MemoryOwner { .. } => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ledger::{Field, Record};

    fn line(seq: u64, event: Event) -> Line {
        Line {
            number: seq,
            raw: String::new(),
            record: Some(Record {
                seq,
                at: Timestamp::from_millis(seq as i64 * 1000).unwrap(),
                prev: String::new(),
                event,
            }),
        }
    }

    fn answered(call_id: u64, tool: &str, labels: Option<Labels>, answer: Answer) -> Event {
        Event::Answered {
            session: "s".into(),
            call_id: CallId(call_id),
            tool: tool.into(),
            arguments: Field::of("{}"),
            grant: None,
            labels,
            answer,
            detail: String::new(),
        }
    }

    #[test]
    fn a_session_s_labels_rise_at_the_call_that_brought_untrusted_then_secret_data() {
        let result = |class, untrusted| Answer::Result {
            text: Field::of("x"),
            class,
            untrusted,
            truncated: false,
        };
        let labels = |taint, untrusted| Some(Labels { taint, untrusted });
        let lines = [
            line(1, answered(1, "clock", None, result(Class::Public, false))),
            line(
                2,
                answered(
                    2,
                    "http_fetch",
                    labels(Class::Public, true),
                    result(Class::Public, true),
                ),
            ),
            line(
                3,
                answered(
                    3,
                    "read_file",
                    labels(Class::Secret, true),
                    result(Class::Secret, false),
                ),
            ),
            line(
                4,
                answered(
                    4,
                    "write_file",
                    None,
                    Answer::Denied {
                        reason: proto::DenyReason::NoGrant,
                    },
                ),
            ),
        ];
        let sessions = sessions(&lines);
        let session = &sessions[&SessionId::from("s")];
        let changes: Vec<_> = session.changes.iter().map(|c| (c.call, c.what)).collect();
        assert_eq!(changes, [(CallId(2), "untrusted"), (CallId(3), "secret")]);
        let outcomes: Vec<_> = session.calls.iter().map(|c| c.outcome).collect();
        assert_eq!(
            outcomes,
            [
                Outcome::Result,
                Outcome::Result,
                Outcome::Result,
                Outcome::Denied
            ]
        );
        assert!(
            session.calls[3].detail.contains("grant"),
            "{}",
            session.calls[3].detail
        );
    }
}
