//! The owner socket (`owner.sock`, mode 0600, the same peer-uid check as the agent socket):
//! pending approvals, the owner's answers, status, and the live event stream. Its frames
//! ([`proto::OwnerRequest`], [`proto::OwnerReply`]) share no `type` with the agent socket's,
//! so neither socket can even decode the other's requests. A connection idle between requests
//! past `connection_idle_ms` (a watch stream aside) is closed with an `idle` error.
//!
//! Owner power rests on the uid: any program of the same user that can reach this socket can
//! answer approvals. That is why `shell` waits for the sandbox, which will keep the socket out
//! of every box.

use std::sync::Arc;
use std::time::Duration;

use proto::{
    ErrorCode, OwnerErrorCode, OwnerEvent, OwnerReply, OwnerRequest, PROTOCOL_VERSION, StatusView,
    encode_frame,
};
use tokio::io::AsyncWriteExt;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::broadcast::error::RecvError;

use super::accept::{Admission, accept_loop};
use super::approvals::{OwnerAnswer, OwnerRefusal};
use super::memory;
use super::server::{Closed, Wait, check_peer, read, write};
use super::{Broker, GrantsState};

/// The longest answer an owner may give to a question, in bytes.
pub const ANSWER_CAP: usize = 16_384;

/// Takes owner connections until the listener fails in a way that is not transient, at most
/// `cap` open at once (see [`super::accept`]).
pub async fn serve(broker: Arc<Broker>, listener: UnixListener, cap: usize) -> std::io::Result<()> {
    let message = format!(
        "owner.sock holds {cap} open connections, its cap (brokerd.toml's owner_connections), and closed this one; close some connections or raise the cap"
    );
    let refusal = encode_frame(&OwnerReply::Error {
        code: OwnerErrorCode::TooManyConnections,
        message,
    })
    .unwrap_or_default();
    let admission = Admission {
        socket: "owner.sock",
        cap,
        refusal,
    };
    accept_loop(listener, admission, |stream, slot| {
        let broker = Arc::clone(&broker);
        tokio::spawn(async move {
            if let Err(reason) = connection(broker, stream).await {
                tracing::debug!(%reason, "owner connection closed");
            }
            drop(slot);
        });
    })
    .await
}

/// The owner code of a frame that could not be read: `idle` for a connection left idle, else
/// `bad_frame`.
fn unread(code: ErrorCode) -> OwnerErrorCode {
    match code {
        ErrorCode::Idle => OwnerErrorCode::Idle,
        _ => OwnerErrorCode::BadFrame,
    }
}

async fn connection(broker: Arc<Broker>, stream: UnixStream) -> Result<(), Closed> {
    check_peer(&stream)?;
    let idle = broker.config.idle_timeout();
    let between = Wait::Next(broker.config.connection_idle());
    let (mut reader, mut writer) = stream.into_split();
    match read::<OwnerRequest>(&mut reader, idle, Wait::Hello).await {
        Ok(Some(OwnerRequest::OwnerHello { version })) if version == PROTOCOL_VERSION => {
            let welcome = OwnerReply::OwnerWelcome {
                version: PROTOCOL_VERSION,
            };
            write(&mut writer, &welcome, idle).await?;
        }
        Ok(Some(OwnerRequest::OwnerHello { version })) => {
            let message = format!(
                "protocol version {version} is not this broker's version {PROTOCOL_VERSION}"
            );
            return refuse(&mut writer, idle, OwnerErrorCode::Version, message).await;
        }
        Ok(Some(_)) => {
            let message = "the first frame must be owner_hello".to_string();
            return refuse(&mut writer, idle, OwnerErrorCode::Version, message).await;
        }
        Ok(None) => return Ok(()),
        Err(bad) => return refuse(&mut writer, idle, OwnerErrorCode::BadFrame, bad.message).await,
    }
    loop {
        let request = match read::<OwnerRequest>(&mut reader, idle, between).await {
            Ok(Some(request)) => request,
            Ok(None) => return Ok(()),
            Err(bad) => {
                return refuse(&mut writer, idle, unread(bad.code), bad.message).await;
            }
        };
        let reply = match request {
            OwnerRequest::OwnerHello { .. } => {
                let message = "owner_hello was already sent on this connection".to_string();
                return refuse(&mut writer, idle, OwnerErrorCode::BadFrame, message).await;
            }
            OwnerRequest::ListPending {} => OwnerReply::Pending {
                pending: broker.approvals.pending(),
            },
            OwnerRequest::Approve {
                approval,
                for_session,
            } => {
                let answer = if for_session {
                    OwnerAnswer::ForSession
                } else {
                    OwnerAnswer::Once
                };
                done(broker.approvals.answer(&broker, approval, answer).await)
            }
            OwnerRequest::Refuse { approval } => done(
                broker
                    .approvals
                    .answer(&broker, approval, OwnerAnswer::Refuse)
                    .await,
            ),
            OwnerRequest::Answer { approval, text } => {
                let text = proto::text::cut_at_boundary(&text, ANSWER_CAP).to_string();
                done(
                    broker
                        .approvals
                        .answer(&broker, approval, OwnerAnswer::Text(text))
                        .await,
                )
            }
            OwnerRequest::Status {} => OwnerReply::Status {
                status: status(&broker),
            },
            OwnerRequest::Watch {} => return watch(&broker, reader, writer, idle).await,
            OwnerRequest::MemoryList { limit } => memory::owner_list(&broker, limit).await,
            OwnerRequest::MemoryShow { id } => memory::owner_show(&broker, id).await,
            OwnerRequest::MemoryForget { id } => memory::owner_forget(&broker, id).await,
            OwnerRequest::MemoryPurge {} => memory::owner_purge(&broker).await,
            OwnerRequest::Downstream { hashes } => {
                let downstream = match broker.grants_now() {
                    GrantsState::Loaded(_, downstream) => downstream,
                    GrantsState::Invalid(_) => Default::default(),
                };
                let runner = broker.runner.as_ref();
                let protected = broker.protected.as_ref();
                let (servers, known) = broker
                    .gateway
                    .owner_view(runner, protected, &downstream, &hashes)
                    .await;
                OwnerReply::Downstream { servers, known }
            }
            OwnerRequest::AuditLines { from, limit } => {
                let dirs = broker.dirs.clone();
                blocking(move || super::audit::owner_lines(&dirs, from, limit)).await
            }
            OwnerRequest::AuditVerify {} => {
                let dirs = broker.dirs.clone();
                blocking(move || super::audit::owner_verify(&dirs)).await
            }
            OwnerRequest::MemoryExport {} => {
                memory::owner_export(&broker, &mut writer, idle).await?;
                continue;
            }
        };
        write(&mut writer, &reply, idle).await?;
    }
}

/// Runs a read of the state folder off the runtime's threads.
async fn blocking(read: impl FnOnce() -> OwnerReply + Send + 'static) -> OwnerReply {
    tokio::task::spawn_blocking(read)
        .await
        .unwrap_or_else(|e| OwnerReply::Error {
            code: OwnerErrorCode::Internal,
            message: format!("the audit log's read failed: {e}"),
        })
}

fn done(result: Result<String, OwnerRefusal>) -> OwnerReply {
    match result {
        Ok(message) => OwnerReply::Done { message },
        Err(refusal) => OwnerReply::Error {
            code: refusal.code,
            message: refusal.message,
        },
    }
}

/// The broker's state for `bx status`.
pub fn status(broker: &Broker) -> StatusView {
    let (grants, grant_problems) = match broker.grants_now() {
        GrantsState::Loaded(grants, downstream) => (
            grants.len() + downstream.tools.len() + downstream.servers.len(),
            Vec::new(),
        ),
        GrantsState::Invalid(problems) => (0, problems.iter().map(|p| p.to_string()).collect()),
    };
    StatusView {
        pid: std::process::id(),
        version: crate::BUILD_VERSION.to_string(),
        agent_socket: broker.dirs.agent_socket().display().to_string(),
        owner_socket: broker.dirs.owner_socket().display().to_string(),
        sessions: broker.with_ledger(|l| l.open_sessions()).unwrap_or(0),
        pending: broker.approvals.pending().len() as u64,
        grants,
        grant_problems,
        walls: {
            let mut walls = broker.runner.walls();
            walls.push(format!(
                "recall, memory, ask_memory: in the broker's memory store {}, never in a box; no other tool reaches its folder",
                broker.memory.path().display()
            ));
            walls
        },
    }
}

/// The event stream: the pending approvals as they stand, then every event, until the owner
/// closes the connection. The owner may answer on another connection (`bx watch` does).
async fn watch(
    broker: &Broker,
    mut reader: OwnedReadHalf,
    mut writer: OwnedWriteHalf,
    idle: Duration,
) -> Result<(), Closed> {
    let mut events = broker.events.subscribe();
    for pending in broker.approvals.pending() {
        let event = OwnerEvent::Pending { pending };
        write(&mut writer, &OwnerReply::Event { event }, idle).await?;
    }
    loop {
        tokio::select! {
            received = events.recv() => {
                let event = match received {
                    Ok(event) => event,
                    Err(RecvError::Lagged(missed)) => OwnerEvent::Lagged { missed },
                    Err(RecvError::Closed) => return Ok(()),
                };
                write(&mut writer, &OwnerReply::Event { event }, idle).await?;
            }
            closed = read::<OwnerRequest>(&mut reader, idle, Wait::Forever) => {
                // A watch connection only streams: its end, or any frame, ends it.
                let _ = closed;
                return Ok(());
            }
        }
    }
}

async fn refuse(
    writer: &mut OwnedWriteHalf,
    idle: Duration,
    code: OwnerErrorCode,
    message: String,
) -> Result<(), Closed> {
    let reason = message.clone();
    let _ = write(writer, &OwnerReply::Error { code, message }, idle).await;
    let _ = writer.shutdown().await;
    Err(reason)
}
