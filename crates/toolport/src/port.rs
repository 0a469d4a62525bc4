//! [`ToolPort`]: where tool calls go to be decided and run, and [`Pending`], a call waiting
//! for the owner (seeds M2b/03 and M3a/16).

use proto::{Timestamp, ToolRequest, ToolResponse, ToolSchema};

/// Where tool calls go to be decided and run: the broker, or a stand-in in tests.
pub trait ToolPort: Send + Sync {
    /// Returns the final answer, never `PendingApproval`. If the broker says the call is waiting
    /// for the owner, the port calls `on_pending` once and goes on waiting.
    fn call(&self, request: &ToolRequest, on_pending: &mut dyn FnMut(&Pending)) -> ToolResponse;

    /// The schemas of the tools the far side can run now (the broker's `list_tools`, asked
    /// again on every `find_tool` and `call_tool`, so a grant fixed mid-session is seen;
    /// [`crate::Registry::with_catalog`]), `Some(Err(why))` when it cannot be read now, or
    /// `None` when the port has no catalog and the turn's registry is used as it is.
    fn catalog(&self) -> Option<Result<Vec<ToolSchema>, String>> {
        None
    }

    /// Withdraws the call now waiting for the owner (the one `on_pending` announced, its
    /// client having cancelled it): the far side abandons it and `call` returns its answer
    /// without the call having run. Whether the port could send the withdrawal.
    fn withdraw(&self) -> bool {
        false
    }

    /// Answers the call now waiting for the owner from the client's own interface (only
    /// where `on_pending` said it is answerable): run it once, or refuse it. Whether the port
    /// could send the answer.
    fn answer(&self, _approve: bool) -> bool {
        false
    }

    /// Answers the model's `ask` question now waiting for the owner with `text`, from the
    /// client's own interface (only where `on_pending` said it is answerable). Whether the
    /// port could send it.
    fn reply(&self, _text: &str) -> bool {
        false
    }
}

/// A call waiting for the owner: the approval's number and when it lapses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pending {
    /// The approval's number, as the owner sees it.
    pub approval: u64,
    /// When the approval request expires unanswered.
    pub expires: Timestamp,
    /// Whether the client may answer it itself ([`ToolPort::answer`]): the owner let it.
    pub answerable: bool,
}
