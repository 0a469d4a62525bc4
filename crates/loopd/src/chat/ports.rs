//! The port a chat's tool calls go through, and the session it serves: a new one, or the one
//! `--session` names, continued through the same kind of port.
//!
//! With the broker, the broker's session id is the conversation's id and its resume token is
//! kept in the conversation's `session.json` (mode 0600), so `--session ID` resumes the same
//! broker session after loopd stopped, whatever way it stopped.

use std::path::Path;

use crate::broker::{BrokerPort, PortError, resume_of};
use crate::session::{self, Session, SessionIds};
use crate::tools::{FakeTools, Registry, ToolPort};

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
