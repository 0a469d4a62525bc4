//! Where `loopd chat --port broker` runs the child sessions its model's `delegate` calls open
//! ([`crate::delegate`]): each on a connection of its own to the same broker, resuming the
//! child with its token, and in a conversation folder of its own beside the parent's.

use std::path::PathBuf;

use crate::broker::{BrokerPort, resume_of};
use crate::delegate::{CHILD_PROMPT, ChildHost, ChildPort, Opened};
use crate::session::{Session, SessionError, SessionIds};
use crate::tools::Registry;

/// The children of a chat through the broker at `socket`, kept in `sessions`.
pub(super) struct BrokerChildren {
    /// The broker's agent socket.
    pub(super) socket: PathBuf,
    /// The folder of conversations.
    pub(super) sessions: PathBuf,
}

impl ChildHost for BrokerChildren {
    fn open_child(&self, opened: &Opened) -> Result<(Box<dyn ChildPort>, Session), String> {
        let resume = resume_of(&opened.child, &opened.resume_token);
        let port = BrokerPort::connect(&self.socket, Some(resume))
            .map_err(|error| format!("connecting as the child failed: {error}"))?;
        let ids = SessionIds {
            id: opened.child.clone(),
            resume_token: Some(opened.resume_token.clone()),
        };
        // The same tools array as every conversation through the broker.
        let tools = Registry::m3a().core_schemas();
        let session = match Session::create(&self.sessions, ids, CHILD_PROMPT, &tools) {
            // A restarted loopd runs the same child again: its conversation goes on.
            Err(SessionError::Exists(id)) => Session::open(&self.sessions, &id),
            other => other,
        }
        .map_err(|error| format!("its conversation cannot be kept: {error}"))?;
        Ok((Box::new(port), session))
    }
}

impl ChildPort for BrokerPort {
    fn report(&self, text: &str) -> Result<(), String> {
        BrokerPort::report(self, text).map_err(|error| error.to_string())
    }

    fn close(&self) -> Result<(), String> {
        BrokerPort::close(self).map_err(|error| error.to_string())
    }
}
