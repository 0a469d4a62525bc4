//! Progress notifications for a call waiting for the owner: at once, then every interval
//! until the call is answered, so a client that resets its timeout on progress keeps waiting.

use rmcp::RoleServer;
use rmcp::model::ProgressNotificationParam;

/// How often a waiting call sends progress unless told otherwise: well under the 60 s after
/// which the TypeScript SDK and MCP Inspector give up on a call that sends none.
pub const PROGRESS_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

/// Tells the client the call still waits, at once and then every `every`, until aborted (a
/// progress value that grows by one each time, as MCP requires).
pub(crate) async fn tell_progress(
    peer: rmcp::Peer<RoleServer>,
    token: rmcp::model::ProgressToken,
    message: String,
    every: std::time::Duration,
) {
    let mut told = 0u32;
    loop {
        told = told.saturating_add(1);
        let note =
            ProgressNotificationParam::new(token.clone(), f64::from(told)).with_message(&message);
        if let Err(error) = peer.notify_progress(note).await {
            tracing::debug!(%error, "cannot send a progress notification");
            return;
        }
        tokio::time::sleep(every).await;
    }
}
