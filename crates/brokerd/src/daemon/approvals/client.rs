//! What the agent side of a waiting call may do about it: withdraw it (its client cancelled
//! it), or answer it in the client's own interface when `brokerd.toml` lets that client.

use std::sync::Arc;

use proto::{PendingKind, SessionId};

use super::{Approvals, Ending, OwnerAnswer};
use crate::daemon::Broker;

impl Approvals {
    /// Abandons the waiting call `call_id` of `session`, which its client withdrew; whether one
    /// was waiting.
    pub async fn withdraw(
        &self,
        broker: &Arc<Broker>,
        session: &SessionId,
        call_id: proto::CallId,
    ) -> bool {
        let id = self
            .entries()
            .values()
            .find(|e| &e.view.session == session && e.view.call_id == call_id)
            .map(|e| e.view.approval);
        let Some(id) = id else {
            return false;
        };
        tracing::info!(approval = %id, "the client withdrew the call waiting for this approval");
        let why = "its client withdrew it".to_string();
        self.settle(broker, id, Ending::Abandoned(why))
            .await
            .is_ok()
    }

    /// Answers the waiting call `call_id` of `session` as its client `client` did in its own
    /// interface (the connection checked that `brokerd.toml` lets it): an approval run once or
    /// refused (`approve`), a question answered with `text` (a question without one stays the
    /// owner's). Whether it was answered.
    pub async fn answer_in_client(
        &self,
        broker: &Arc<Broker>,
        session: &SessionId,
        call_id: proto::CallId,
        approve: bool,
        text: Option<String>,
        client: &str,
    ) -> bool {
        let found = self
            .entries()
            .values()
            .find(|e| &e.view.session == session && e.view.call_id == call_id)
            .map(|e| (e.view.approval, e.view.kind));
        let Some((id, kind)) = found else {
            return false;
        };
        let answer = match (kind, text) {
            (PendingKind::Approval, _) if approve => OwnerAnswer::Once,
            (PendingKind::Approval, _) => OwnerAnswer::Refuse,
            (PendingKind::Question, Some(text)) => OwnerAnswer::Text(text),
            (PendingKind::Question, None) => return false,
        };
        tracing::info!(approval = %id, client, "the client answered a waiting call in its own interface");
        let channel = Some(format!("client {client}"));
        self.settle_through(broker, id, Ending::Owner(answer), channel)
            .await
            .is_ok()
    }
}
