//! [`FakeTools`]: the in-process stand-in for the broker, for tests and the demo.

use std::sync::Mutex;

use proto::{Class, DenyReason, ToolRequest, ToolResponse};

use crate::port::{Pending, ToolPort};

/// The in-process stand-in for the broker: `echo` answers its `text`, every other tool is
/// denied with `NoGrant`, and every request is recorded.
#[derive(Debug, Default)]
pub struct FakeTools {
    calls: Mutex<Vec<ToolRequest>>,
}

impl FakeTools {
    /// A stand-in that has seen no call yet.
    pub fn new() -> Self {
        FakeTools::default()
    }

    /// Every request received so far, in order.
    pub fn calls(&self) -> Vec<ToolRequest> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl ToolPort for FakeTools {
    fn call(&self, request: &ToolRequest, _on_pending: &mut dyn FnMut(&Pending)) -> ToolResponse {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(request.clone());
        if request.tool != "echo" {
            return ToolResponse::Denied {
                reason: DenyReason::NoGrant,
            };
        }
        let text = serde_json::from_str::<serde_json::Value>(&request.arguments)
            .ok()
            .and_then(|v| v.get("text").and_then(|t| t.as_str()).map(str::to_string));
        match text {
            Some(content) => ToolResponse::Result {
                content,
                class: Class::Public,
                untrusted: false,
                truncated: false,
            },
            None => ToolResponse::Failed {
                message: "echo needs a string argument \"text\"".to_string(),
            },
        }
    }
}
