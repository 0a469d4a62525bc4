//! The port a chat's tool calls go through, and the session it serves: a new one, or the one
//! `--session` names, continued through the same kind of port.
//!
//! With the broker, the broker's session id is the conversation's id and its resume token is
//! kept in the conversation's `session.json` (mode 0600), so `--session ID` resumes the same
//! broker session after loopd stopped, whatever way it stopped.

use std::path::Path;

use proto::AgentEvent;

use crate::broker::{BrokerPort, PortError, resume_of};
use crate::criteria::Criterion;
use crate::session::{self, Session, SessionIds};
use crate::tools::{FakeTools, Registry, ToolPort};
use crate::turn::TurnEvent;

use super::{ChatError, ChatOptions, PortKind};

/// The port of a chat.
pub(super) enum Port {
    /// [`FakeTools`].
    Fake(FakeTools),
    /// brokerd over its agent socket.
    Broker(BrokerPort),
}

impl Port {
    /// The port as the turn loop uses it.
    pub(super) fn tool_port(&self) -> &dyn ToolPort {
        match self {
            Port::Fake(fake) => fake,
            Port::Broker(broker) => broker,
        }
    }

    /// The registry of the turn: [`Registry::demo`] for the fake port (it answers `echo`);
    /// [`Registry::m3a`] for the broker, whose catalog replaces the tools found through
    /// `find_tool` and `call_tool` on every call ([`ToolPort::catalog`]).
    pub(super) fn registry(&self) -> Registry {
        match self {
            Port::Fake(_) => Registry::demo(),
            Port::Broker(_) => Registry::m3a(),
        }
    }

    /// Gives the broker the owner's words of the turn about to start (the fake port keeps
    /// no provenance). A failure does not stop the turn, whose words then do not count as the
    /// owner's (a call that needs them asks): it returns the sentence to tell the owner.
    pub(super) fn owner_words(&self, text: &str) -> Option<String> {
        match self {
            Port::Broker(broker) => broker.owner_words(text).err().map(|error| {
                format!("loopd: the broker did not keep your message as your words: {error}")
            }),
            Port::Fake(_) => None,
        }
    }

    /// Passes code mode's `role` and `verify_done` events to the owner through the broker
    /// (its `watch` streams); other events, and every event with the fake port, stay with the
    /// terminal. A failure does not stop the turn: it returns the sentence to tell the owner.
    pub(super) fn agent_event(&self, event: &TurnEvent) -> Option<String> {
        let Port::Broker(broker) = self else {
            return None;
        };
        let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
        let event = match event {
            TurnEvent::Role { role, .. } => AgentEvent::Role { role: *role },
            TurnEvent::VerifyDone {
                outcome,
                passes,
                corrections,
                criteria,
            } => {
                let (passed, open): (Vec<&Criterion>, Vec<&Criterion>) =
                    criteria.iter().partition(|c| !c.is_open());
                AgentEvent::VerifyDone {
                    outcome: *outcome,
                    passes: count(*passes),
                    corrections: count(*corrections),
                    passed: passed.iter().map(|c| count(c.id)).collect(),
                    open: open.iter().map(|c| count(c.id)).collect(),
                }
            }
            _ => return None,
        };
        broker.agent_event(&event).err().map(|error| {
            format!("loopd: the broker did not pass a code-mode event on to the owner: {error}")
        })
    }

    /// The error that ended the broker's service to this conversation (a refused resume, an
    /// ended session), if one did: the chat stops there.
    pub(super) fn check(&self) -> Result<(), PortError> {
        match self {
            Port::Fake(_) => Ok(()),
            Port::Broker(broker) => broker.fatal().map_or(Ok(()), Err),
        }
    }
}

/// Opens the session `options` names under `sessions` (or creates one) and its port.
pub(super) fn open(sessions: &Path, options: &ChatOptions) -> Result<(Session, Port), ChatError> {
    match (&options.port, &options.session) {
        (PortKind::Fake, None) => {
            let port = Port::Fake(FakeTools::new());
            let ids = SessionIds {
                id: session::local_id(),
                resume_token: None,
            };
            let session = create(sessions, ids, options, &port)?;
            Ok((session, port))
        }
        (PortKind::Fake, Some(id)) => {
            let session = Session::open(sessions, id)?;
            if session.ids().resume_token.is_some() {
                return Err(ChatError::Resume(format!(
                    "session {id} is a broker session: continue it with --port broker"
                )));
            }
            Ok((session, Port::Fake(FakeTools::new())))
        }
        (PortKind::Broker { socket }, None) => {
            // Connect first: with no broker running, no folder is made.
            let broker = BrokerPort::connect(socket, None)?;
            let ids = SessionIds {
                id: broker.session().session.to_string(),
                resume_token: Some(broker.session().token.clone()),
            };
            let port = Port::Broker(broker);
            let session = create(sessions, ids, options, &port)?;
            Ok((session, port))
        }
        (PortKind::Broker { socket }, Some(id)) => {
            let session = Session::open(sessions, id)?;
            let Some(token) = session.ids().resume_token.clone() else {
                return Err(ChatError::Resume(format!(
                    "session {id} was started with --port fake and has no broker session to resume; start a new conversation with --port broker"
                )));
            };
            let broker = BrokerPort::connect(socket, Some(resume_of(id, &token)))?;
            Ok((session, Port::Broker(broker)))
        }
    }
}

fn create(
    sessions: &Path,
    ids: SessionIds,
    options: &ChatOptions,
    port: &Port,
) -> Result<Session, ChatError> {
    let tools = port.registry().core_schemas();
    Ok(Session::create(
        sessions,
        ids,
        &options.system_prompt,
        &tools,
    )?)
}
