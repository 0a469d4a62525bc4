//! boxmaker's MCP server: the broker's gated tools to any MCP client (Claude Code, Codex,
//! Goose, …), so that every call a client makes gets the owner's grants, approvals, the
//! sandbox, labels and the audit log.
//!
//! The server ([`Gate`], on the official Rust SDK `rmcp`) talks to `brokerd` over its agent
//! socket only, through `toolport`'s [`toolport::BrokerPort`]: it never links the broker, nor
//! the agent loop. What the client sees is what loopd's model sees: the core tools (`clock`,
//! `find_tool`, `call_tool`, the same schemas byte for byte) or, with [`Catalog::All`], every
//! tool a live grant could cover; `find_tool`, `call_tool` and the ranking are `toolport`'s,
//! as loopd's are. Each result is the
//! broker's text (its one-line header names the class and `untrusted`), the same labels as
//! structured content and in the result's `_meta`.
//!
//! Modules: [`gate`] (the MCP handler), [`annotations`] (read-only, destructive, idempotent,
//! open-world hints per tool), [`session`] (the broker session a client resumes, kept 0600),
//! [`connect`] (opening or resuming it over the agent socket), [`http`] (streamable HTTP),
//! [`names`] (tool names as strict model providers take them), `progress` (a waiting call's
//! progress notifications), and
//! `ask` (putting a waiting call to the client's user, when the owner lets that client).

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod annotations;
mod ask;
pub mod connect;
pub mod gate;
pub mod http;
pub mod names;
mod progress;
pub mod session;

use std::sync::Arc;

pub use connect::BrokerConnect;
pub use gate::{Catalog, Connect, Connected, Gate};
pub use http::{HttpOptions, read_token, serve_http, token_or_new};
pub use progress::PROGRESS_EVERY;

/// Serves `gate` over standard input and output until the client is gone: it closed them, or
/// the process that started this one (the client) died (a client killed by a signal can
/// leave its child's input open). A call then waiting for the owner is withdrawn (the broker
/// abandons it: it never runs) before this returns. A client that goes away before its first
/// request is an end like any other.
///
/// Input that is not JSON is ignored, as every official MCP SDK does (answering it can start
/// an error storm with a peer that echoes); JSON that is not a JSON-RPC message gets
/// `Invalid Request`, an unknown method `Method not found`, a request whose `_meta` lacks what
/// its revision requires `Invalid params`, and a line over 16 MiB is dropped.
pub async fn serve_stdio(gate: Gate) -> Result<(), String> {
    use rmcp::ServiceExt;
    let parent = std::os::unix::process::parent_id();
    let ended_input = Arc::new(tokio::sync::Notify::new());
    let input = EndSignalled {
        inner: tokio::io::stdin(),
        ended: ended_input.clone(),
    };
    let running = match gate.clone().serve((input, tokio::io::stdout())).await {
        Ok(running) => running,
        Err(rmcp::service::ServerInitializeError::ConnectionClosed(_)) => return Ok(()),
        Err(e) => {
            return Err(format!(
                "cannot start the MCP server on standard input and output: {e}"
            ));
        }
    };
    let stop = running.cancellation_token();
    let waiting = running.waiting();
    tokio::pin!(waiting);
    let ended = tokio::select! {
        ended = &mut waiting => ended.map(|_| ()),
        // The server answers what it still can (rmcp drains for a few seconds), but a call
        // waiting for the owner is withdrawn at once: no approval may run it meanwhile.
        () = ended_input.notified() => {
            gate.withdraw_waiting(WITHDRAW_PATIENCE).await;
            waiting.await.map(|_| ())
        }
        () = parent_gone(parent) => {
            tracing::info!(parent, "the client (this process's parent) is gone");
            gate.withdraw_waiting(WITHDRAW_PATIENCE).await;
            stop.cancel();
            Ok(())
        }
    };
    gate.withdraw_waiting(WITHDRAW_PATIENCE).await;
    ended.map_err(|e| format!("the MCP server stopped: {e}"))
}

/// Standard input that tells `ended` when it has ended.
struct EndSignalled {
    inner: tokio::io::Stdin,
    ended: Arc<tokio::sync::Notify>,
}

impl tokio::io::AsyncRead for EndSignalled {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        context: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let asked = buf.remaining() > 0;
        let polled = std::pin::Pin::new(&mut self.inner).poll_read(context, buf);
        let at_end = matches!(polled, std::task::Poll::Ready(Ok(())))
            && asked
            && buf.filled().len() == before;
        if at_end || matches!(polled, std::task::Poll::Ready(Err(_))) {
            self.ended.notify_one();
        }
        polled
    }
}

/// How long the end of a client waits for the broker to answer the call it withdrew.
const WITHDRAW_PATIENCE: std::time::Duration = std::time::Duration::from_secs(10);

/// Returns once this process's parent is no longer `parent` (it died and this process was
/// given to another); never when the parent was already init.
async fn parent_gone(parent: u32) {
    if parent <= 1 {
        return std::future::pending().await;
    }
    loop {
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
        if std::os::unix::process::parent_id() != parent {
            return;
        }
    }
}
