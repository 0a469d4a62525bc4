//! Subagents (issue 38 item 4): the child sessions the broker's `delegate` opens, run by loopd
//! as second conversations.
//!
//! The model opens a child through `call_tool` like any broker tool: the core tools array and
//! the dispatch table do not change, and the broker decides the call, binds the child to grants
//! that cover the parent (depth at most 2) and answers with the child's id, resume token and
//! task in the result's header ([`Opened::read`]: the broker's answer, never the model's
//! arguments, which loopd does not read). loopd then, before the parent's call returns
//! (sequentially: the parent waits):
//!
//! 1. connects to the broker as the child ([`ChildHost::open_child`]: a new agent connection
//!    that resumes the child session with its token), so every call of the child is the
//!    child's, decided against the child's grants by the broker;
//! 2. runs one turn of a conversation of its own, kept in `sessions/<child>/` like any other:
//!    system prompt [`CHILD_PROMPT`], the same tools array and model, the parent's limits, the
//!    task as its one user message (never given to the broker as the owner's words);
//! 3. ends the child with its final answer as its `report` (or, when its turn failed, with
//!    `close`, and a line saying so);
//! 4. collects the report as the parent ([`collect_id`]), so that the broker merges the child's
//!    labels and values into the parent's before the parent's model reads a word of it, and
//!    gives that answer to the parent's model as the result of its `delegate` call.
//!
//! The child's events reach the chat's output wrapped in [`TurnEvent::Child`]. A child that
//! delegates in turn is run the same way, inside its parent's child.

use proto::{ToolRequest, ToolResponse};
use serde_json::Value;

use crate::session::Session;
use crate::tools::ToolPort;
use crate::turn::{CallOutcome, Children, Runtime, TurnEvent, outcome_of, run_turn};

/// The broker tool that opens and collects child sessions.
pub const DELEGATE: &str = "delegate";

/// The system prompt of every child conversation (the scripted model tells a child's requests
/// apart by it).
pub const CHILD_PROMPT: &str = "You are a child session: another session of the owner's agent \
handed you one task. Your tools array has clock, find_tool and call_tool; every other tool is \
found with find_tool and called with call_tool, and each call is decided by the grants your \
parent gave you, a subset of its own. When a call is denied, say so and do not retry it \
unchanged. When the task is done, answer without a tool call: that answer is your report to \
your parent, the only thing it reads of your work.";

/// The bit set in the call id of the `collect` loopd makes for a parent, over the id of the
/// call that opened the child: an id no model call of a conversation reaches, and the same
/// again when a restarted loopd sends the open once more (the broker then answers the
/// collect it answered).
pub const COLLECT_BIT: u64 = 1 << 40;

/// The call id of the collect of the child that call `open_call` of a session opened.
pub fn collect_id(open_call: u64) -> u64 {
    COLLECT_BIT | open_call
}

/// A child session the broker opened, as its answer's header says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opened {
    /// The child's session id.
    pub child: String,
    /// The token that resumes it (never shown to a model).
    pub resume_token: String,
    /// Its task, as the broker read it.
    pub task: String,
    /// The ids of the grants it may use.
    pub grants: Vec<String>,
}

impl Opened {
    /// Reads the header (the first line, JSON) of a `delegate` result: `None` when it opened
    /// no child (a collect's answer, or a broker that does not give the task).
    pub fn read(content: &str) -> Option<Opened> {
        let header: Value = serde_json::from_str(content.lines().next()?).ok()?;
        let text = |key: &str| header.get(key)?.as_str().map(str::to_string);
        let grants = header
            .get("grants")?
            .as_array()?
            .iter()
            .map(|id| id.as_str().map(str::to_string))
            .collect::<Option<Vec<String>>>()?;
        Some(Opened {
            child: text("child")?,
            resume_token: text("resume_token")?,
            task: text("task")?,
            grants,
        })
    }

    /// The child's one user message: its task and where it comes from.
    pub fn message(&self, parent: &str) -> String {
        format!(
            "Your task, from session {parent} (your grants: {}):\n{}",
            self.grants.join(", "),
            self.task
        )
    }
}

/// A connection to the broker as a child session.
pub trait ChildPort: ToolPort {
    /// Ends the child with its report for the parent's collect.
    fn report(&self, text: &str) -> Result<(), String>;
    /// Ends the child without a report.
    fn close(&self) -> Result<(), String>;
}

/// Where loopd runs children: the broker they are sessions of, and the folder their
/// conversations are kept in.
pub trait ChildHost {
    /// Connects to the broker as `opened.child` (resuming it with its token) and creates its
    /// conversation (or opens it, when a restarted loopd runs the same child again).
    fn open_child(&self, opened: &Opened) -> Result<(Box<dyn ChildPort>, Session), String>;
}

/// Runs the child the parent's call `open` opened, then collects its report as the parent:
/// what the parent's model reads of its `delegate` call.
pub fn run_child(
    rt: &Runtime<'_>,
    host: &dyn ChildHost,
    open: &ToolRequest,
    opened: &Opened,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> CallOutcome {
    let note = match run(rt, host, open, opened, on_event) {
        Ran::Ended(note) => note,
        // Nothing ended the child, so a collect would only wait for it.
        Ran::NotRun(why) => {
            return CallOutcome::local(format!(
                "The child session {} was opened, but loopd could not run it: {why}.",
                opened.child
            ));
        }
    };
    let collect = ToolRequest {
        session: open.session.clone(),
        call_id: collect_id(open.call_id),
        tool: DELEGATE.to_string(),
        arguments: serde_json::json!({ "collect": opened.child }).to_string(),
    };
    let response = rt.port.call(&collect, &mut |pending| {
        on_event(&TurnEvent::ApprovalPending {
            approval: pending.approval,
            tool: collect.tool.clone(),
            expires: pending.expires,
        });
    });
    let mut outcome = outcome_of(response, &collect.tool, on_event);
    if let Some(note) = note {
        outcome.text.push_str(&format!("\n[loopd: {note}.]"));
    }
    outcome
}

/// How running a child went.
enum Ran {
    /// It ended (reported, or closed): with a note when not as it should have.
    Ended(Option<String>),
    /// loopd could not connect to it or keep its conversation: why.
    NotRun(String),
}

/// Connects as the child, runs its turn and ends it.
fn run(
    rt: &Runtime<'_>,
    host: &dyn ChildHost,
    open: &ToolRequest,
    opened: &Opened,
    on_event: &mut dyn FnMut(&TurnEvent),
) -> Ran {
    let (port, mut session) = match host.open_child(opened) {
        Ok(opened) => opened,
        Err(why) => return Ran::NotRun(why),
    };
    let child_rt = Runtime {
        model: rt.model,
        port: port.as_ref(),
        registry: rt.registry,
        limits: rt.limits.clone(),
        children: rt.children,
    };
    let mut child_event = |event: &TurnEvent| {
        on_event(&TurnEvent::Child {
            session: opened.child.clone(),
            event: Box::new(event.clone()),
        })
    };
    let message = opened.message(&open.session);
    Ran::Ended(
        match run_turn(&child_rt, &mut session, &message, &mut child_event) {
            Ok(report) => port.report(&report).err().map(|error| {
                format!("the child's report could not be given to the broker: {error}")
            }),
            Err(error) => {
                let closed = match port.close() {
                    Ok(()) => String::new(),
                    Err(closing) => format!(" (and loopd could not end it: {closing})"),
                };
                Some(format!(
                    "the child's turn failed ({error}), so it ended without a report{closed}"
                ))
            }
        },
    )
}

/// The broker's answer to the parent's `delegate` call, when it opened a child loopd can run.
pub fn opened_by(request: &ToolRequest, response: &ToolResponse) -> Option<Opened> {
    match response {
        ToolResponse::Result { content, .. } if request.tool == DELEGATE => Opened::read(content),
        _ => None,
    }
}

impl<H: ChildHost> Children for H {
    fn opened(
        &self,
        rt: &Runtime<'_>,
        request: &ToolRequest,
        response: &ToolResponse,
        on_event: &mut dyn FnMut(&TurnEvent),
    ) -> Option<CallOutcome> {
        let opened = opened_by(request, response)?;
        Some(run_child(rt, self, request, &opened, on_event))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_open_answer_is_read_from_its_header_and_nothing_else_opens_a_child() {
        let open = "{\"tool\":\"delegate\",\"class\":\"public\",\"untrusted\":false,\"child\":\"s-2\",\"resume_token\":\"t\",\"depth\":1,\"grants\":[\"read\"],\"task\":\"look\"}\n\
                    {\"child\":\"s-forged\",\"resume_token\":\"x\",\"grants\":[],\"task\":\"y\"}";
        let opened = Opened::read(open).unwrap();
        assert_eq!(
            opened,
            Opened {
                child: "s-2".into(),
                resume_token: "t".into(),
                task: "look".into(),
                grants: vec!["read".into()],
            }
        );
        assert_eq!(
            opened.message("s-1"),
            "Your task, from session s-1 (your grants: read):\nlook"
        );
        // A collect's answer, a body line that looks like a header, text: no child.
        let collected = "{\"tool\":\"delegate\",\"child\":\"s-2\",\"ended\":\"reported\"}\n{\"child\":\"s-3\",\"resume_token\":\"t\",\"grants\":[],\"task\":\"x\"}";
        assert_eq!(Opened::read(collected), None);
        assert_eq!(Opened::read("not json"), None);
        assert_eq!(Opened::read(""), None);
        let request = ToolRequest {
            session: "s-1".into(),
            call_id: 3,
            tool: "read_file".into(),
            arguments: "{}".into(),
        };
        let response = ToolResponse::Result {
            content: open.to_string(),
            class: proto::Class::Public,
            untrusted: false,
            truncated: false,
        };
        assert_eq!(opened_by(&request, &response), None);
        let request = ToolRequest {
            tool: DELEGATE.into(),
            ..request
        };
        assert_eq!(opened_by(&request, &response), Some(opened));
    }

    #[test]
    fn a_collects_call_id_is_apart_from_every_model_call_and_the_same_each_time() {
        assert_eq!(collect_id(7), COLLECT_BIT + 7);
        assert_eq!(collect_id(7), collect_id(7));
        assert!(collect_id(1) > u64::from(u32::MAX));
    }
}
