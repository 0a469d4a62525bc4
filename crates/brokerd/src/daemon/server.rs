//! The agent socket: `hello` (open or resume a session), `list_tools`, `call`, `close`. Each
//! connection is a task; a bad frame closes only its own connection; a client silent in the
//! middle of a frame, or that never reads its answers, is closed after `idle_timeout`; one idle
//! after `hello` with no call waiting is closed after `connection_idle_ms` with an `idle` error
//! frame (its session lives on, for the client to resume). The peer's uid must be the broker's.

use std::sync::Arc;
use std::time::Duration;

use proto::{
    AgentFrame, BrokerFrame, ErrorCode, MAX_FRAME, PROTOCOL_VERSION, ToolSchema, encode_frame,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};

use policy::args::ToolName;

use super::accept::{Admission, accept_loop};
use super::sessions::{self, Refusal};
use super::{Broker, GrantsState, calls};

/// Takes connections until the listener fails in a way that is not transient, at most `cap`
/// open at once (see [`super::accept`]).
pub async fn serve(broker: Arc<Broker>, listener: UnixListener, cap: usize) -> std::io::Result<()> {
    let message = format!(
        "agent.sock holds {cap} open connections, its cap (brokerd.toml's agent_connections), and closed this one; close some connections or raise the cap"
    );
    let refusal = encode_frame(&BrokerFrame::Error {
        code: ErrorCode::TooManyConnections,
        message,
    })
    .unwrap_or_default();
    let admission = Admission {
        socket: "agent.sock",
        cap,
        refusal,
    };
    accept_loop(listener, admission, |stream, slot| {
        let broker = Arc::clone(&broker);
        tokio::spawn(async move {
            if let Err(reason) = connection(broker, stream).await {
                tracing::debug!(%reason, "connection closed");
            }
            drop(slot);
        });
    })
    .await
}

pub(super) use super::outgoing::{Closed, write};

/// Refuses a peer of another uid (both sockets).
pub(super) fn check_peer(stream: &UnixStream) -> Result<(), Closed> {
    let our_uid = rustix::process::getuid().as_raw();
    match stream.peer_cred() {
        Ok(cred) if cred.uid() == our_uid => Ok(()),
        Ok(cred) => {
            tracing::warn!(uid = cred.uid(), "refused a client of another user");
            Err(format!("peer uid {} is not the broker's", cred.uid()))
        }
        Err(e) => Err(format!("cannot read the peer's credentials: {e}")),
    }
}

async fn connection(broker: Arc<Broker>, stream: UnixStream) -> Result<(), Closed> {
    check_peer(&stream)?;
    let idle = broker.config.idle_timeout();
    let between = Wait::Next(broker.config.connection_idle());
    let (mut reader, mut writer) = stream.into_split();
    let (session, client) = match read::<AgentFrame>(&mut reader, idle, Wait::Hello).await {
        Ok(Some(AgentFrame::Hello {
            version,
            resume,
            client,
        })) => {
            if version != PROTOCOL_VERSION {
                let message = format!(
                    "protocol version {version} is not this broker's version {PROTOCOL_VERSION}"
                );
                return refuse(&mut writer, idle, Refusal::new(ErrorCode::Version, message)).await;
            }
            let opened = match resume {
                Some(resume) => sessions::resume(&broker, &resume)
                    .await
                    .map(|session| (session, resume.token)),
                None => sessions::open(&broker).await,
            };
            match opened {
                Ok((session, token)) => {
                    let welcome = BrokerFrame::Welcome {
                        version: PROTOCOL_VERSION,
                        session: session.clone(),
                        resume_token: token,
                    };
                    write(&mut writer, &welcome, idle).await?;
                    (session, client)
                }
                Err(refusal) => return refuse(&mut writer, idle, refusal).await,
            }
        }
        Ok(Some(_)) => {
            let refusal = Refusal::new(ErrorCode::NotHello, "the first frame must be hello");
            return refuse(&mut writer, idle, refusal).await;
        }
        Ok(None) => return Ok(()),
        Err(bad) => return refuse(&mut writer, idle, bad).await,
    };
    // The client the owner lets answer this session's approvals in its own interface.
    let answers_in_client =
        client.filter(|name| broker.config.mcp.approve_in_client.contains(name));
    loop {
        let frame = match read::<AgentFrame>(&mut reader, idle, between).await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok(()),
            Err(bad) => return refuse(&mut writer, idle, bad).await,
        };
        match frame {
            AgentFrame::Hello { .. } => {
                let refusal = Refusal::new(
                    ErrorCode::BadFrame,
                    "hello was already sent on this connection",
                );
                return refuse(&mut writer, idle, refusal).await;
            }
            AgentFrame::ListTools {} => {
                let mut tools = catalog(&broker, &session);
                // A child session is listed no downstream server's tools.
                if let GrantsState::Loaded(_, downstream) = broker.grants_now()
                    && broker.children.binding(&session).is_none()
                {
                    let runner = broker.runner.as_ref();
                    let protected = broker.protected.as_ref();
                    let gateway = &broker.gateway;
                    let listed = gateway
                        .catalog(runner, protected, &session, &downstream)
                        .await;
                    // A server's words the model reads: untrusted values of the session.
                    let slot = broker.session_slot(&session);
                    slot.with_values(&broker, &session, |values| {
                        if let Some(index) = values {
                            super::values::feed_listing(index, &listed);
                        }
                    });
                    tools.extend(listed);
                }
                let tools = BrokerFrame::Tools { tools };
                write(&mut writer, &tools, idle).await?;
            }
            AgentFrame::Call { request } => {
                let call_id = proto::CallId(request.call_id);
                let (pending, mut told) = tokio::sync::mpsc::unbounded_channel();
                let answering = calls::answer(&broker, &session, &request, &pending);
                tokio::pin!(answering);
                // While the call waits for the owner, the connection is read: a client that
                // leaves is noticed (the call is then kept for the grace period), and one that
                // withdraws the call has it abandoned; otherwise nothing is read until the
                // answer is written. Only readiness is awaited beside the answer, so no frame
                // is ever cut; the frame itself is read whole once it has begun.
                let mut waiting = false;
                let answered = loop {
                    tokio::select! {
                        answered = &mut answering => break answered,
                        Some(note) = told.recv() => match note {
                            Some(mut response) => {
                                waiting = true;
                                if let proto::ToolResponse::PendingApproval { answerable, .. } = &mut response {
                                    *answerable = answers_in_client.is_some();
                                }
                                let frame = BrokerFrame::Response { call_id, response };
                                write(&mut writer, &frame, idle).await?;
                            }
                            None => waiting = false,
                        },
                        ready = reader.readable(), if waiting => {
                            let mut first = [0u8; 1];
                            let started = match ready.and_then(|()| reader.try_read(&mut first)) {
                                Ok(0) => Ok(None),
                                Ok(_) => rest_of_frame::<AgentFrame>(&mut reader, idle, first[0]).await,
                                // Readiness that was not: keep waiting.
                                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                                Err(_) => Ok(None),
                            };
                            match started {
                                Ok(Some(AgentFrame::Withdraw {})) => {
                                    broker.approvals.withdraw(&broker, &session, call_id).await;
                                }
                                Ok(Some(AgentFrame::Answer { approve, text })) => {
                                    let Some(name) = &answers_in_client else {
                                        let refusal = Refusal::new(
                                            ErrorCode::BadFrame,
                                            "this client may not answer approvals: brokerd.toml's [mcp] approve_in_client does not name it",
                                        );
                                        return refuse(&mut writer, idle, refusal).await;
                                    };
                                    broker
                                        .approvals
                                        .answer_in_client(&broker, &session, call_id, approve, text, name)
                                        .await;
                                }
                                Ok(Some(_)) => {
                                    let refusal = Refusal::new(
                                        ErrorCode::BadFrame,
                                        "a frame arrived while this connection's call waits for the owner; send one call at a time (or withdraw it)",
                                    );
                                    return refuse(&mut writer, idle, refusal).await;
                                }
                                Ok(None) => {
                                    return Err("the client left while its call waited for the owner".into());
                                }
                                Err(refusal) => return refuse(&mut writer, idle, refusal).await,
                            }
                        }
                    }
                };
                match answered {
                    Ok(response) => {
                        let frame = BrokerFrame::Response { call_id, response };
                        write(&mut writer, &frame, idle).await?;
                    }
                    Err(refusal) => return refuse(&mut writer, idle, refusal).await,
                }
            }
            AgentFrame::OwnerWords { text } => {
                match super::values::owner_words(&broker, &session, &text).await {
                    Ok(()) => write(&mut writer, &BrokerFrame::OwnerWordsKept {}, idle).await?,
                    Err(refusal) => return refuse(&mut writer, idle, refusal).await,
                }
            }
            // The agent loop's own event: to the owner's watch streams, nothing decided on it.
            AgentFrame::LoopEvent { event } => {
                broker.publish(proto::OwnerEvent::Agent {
                    session: session.clone(),
                    event,
                });
                write(&mut writer, &BrokerFrame::LoopEventPublished {}, idle).await?;
            }
            // Nothing waits (the call it meant was answered before it arrived).
            AgentFrame::Withdraw {} | AgentFrame::Answer { .. } => {}
            // A child's report: kept for its parent's collect, then the child ends.
            AgentFrame::Report { text } => {
                let text = proto::text::cut_at_boundary(&text, super::delegate::REPORT_CAP);
                if !broker.children.report(&session, text.to_string()) {
                    let refusal = Refusal::new(
                        ErrorCode::BadFrame,
                        "only a child session (one that delegate opened) sends a report",
                    );
                    return refuse(&mut writer, idle, refusal).await;
                }
                match sessions::close(&broker, &session, "reported to its parent").await {
                    Ok(()) => write(&mut writer, &BrokerFrame::Closed {}, idle).await?,
                    Err(refusal) => return refuse(&mut writer, idle, refusal).await,
                }
                return Ok(());
            }
            AgentFrame::Close {} => {
                match sessions::close(&broker, &session, "closed by its client").await {
                    Ok(()) => write(&mut writer, &BrokerFrame::Closed {}, idle).await?,
                    Err(refusal) => return refuse(&mut writer, idle, refusal).await,
                }
                return Ok(());
            }
        }
    }
}

/// The schemas of every tool at least one live allow grant of `session` could cover
/// (`bash_tail` and `bash_kill` with `bash_bg`; a child session's own grants only).
pub fn catalog(broker: &Broker, session: &proto::SessionId) -> Vec<ToolSchema> {
    let GrantsState::Loaded(grants, _) = broker.grants_now() else {
        return Vec::new();
    };
    let grants = broker.children.narrowed(session, grants);
    let now = proto::Timestamp::now();
    ToolName::EVERY
        .into_iter()
        .filter(|tool| {
            grants
                .iter()
                .any(|g| g.tool == tool.granted_by() && !g.deny && !g.expired(now))
        })
        .map(ToolName::schema)
        .collect()
}

async fn refuse(
    writer: &mut OwnedWriteHalf,
    idle: Duration,
    refusal: Refusal,
) -> Result<(), Closed> {
    let reason = refusal.message.clone();
    let frame = BrokerFrame::Error {
        code: refusal.code,
        message: refusal.message,
    };
    let _ = write(writer, &frame, idle).await;
    let _ = writer.shutdown().await;
    Err(reason)
}

/// How long [`read`] waits for a frame to begin; once it has begun, the rest must come within
/// `idle_timeout`.
#[derive(Debug, Clone, Copy)]
pub(super) enum Wait {
    /// The first frame (`hello`): within `idle_timeout`.
    Hello,
    /// A frame after hello: within this time (`connection_idle_ms`), else the connection is
    /// closed as idle.
    Next(Duration),
    /// As long as it takes (while a call waits, and on a watch stream).
    Forever,
}

/// Reads one frame: `None` at a clean end.
pub(super) async fn read<T: serde::de::DeserializeOwned>(
    reader: &mut OwnedReadHalf,
    idle: Duration,
    wait: Wait,
) -> Result<Option<T>, Refusal> {
    let bad = |message: String| Refusal::new(ErrorCode::BadFrame, message);
    let mut length = [0u8; 4];
    let start = reader.read(&mut length[..1]);
    let got = match wait {
        Wait::Hello => tokio::time::timeout(idle, start)
            .await
            .map_err(|_| bad("no hello within the idle timeout".into()))?,
        Wait::Next(limit) => tokio::time::timeout(limit, start).await.map_err(|_| {
            Refusal::new(
                ErrorCode::Idle,
                format!(
                    "the connection was idle for {} ms with no call waiting and is closed; connect again and resume the session",
                    limit.as_millis()
                ),
            )
        })?,
        Wait::Forever => start.await,
    };
    match got {
        Ok(0) => return Ok(None),
        Ok(_) => {}
        Err(e) => return Err(bad(format!("cannot read: {e}"))),
    }
    rest_of_frame(reader, idle, length[0]).await
}

/// Reads the rest of a frame whose first byte, `first`, has been read.
async fn rest_of_frame<T: serde::de::DeserializeOwned>(
    reader: &mut OwnedReadHalf,
    idle: Duration,
    first: u8,
) -> Result<Option<T>, Refusal> {
    let bad = |message: String| Refusal::new(ErrorCode::BadFrame, message);
    let mut length = [first, 0, 0, 0];
    tokio::time::timeout(idle, reader.read_exact(&mut length[1..]))
        .await
        .map_err(|_| bad("silent in the middle of a frame".into()))?
        .map_err(|e| bad(format!("the connection ended inside a frame: {e}")))?;
    let size = u32::from_be_bytes(length) as usize;
    if size > MAX_FRAME {
        return Err(bad(format!(
            "a frame of {size} bytes is larger than the limit of {MAX_FRAME} bytes"
        )));
    }
    let mut body = vec![0u8; size];
    tokio::time::timeout(idle, reader.read_exact(&mut body))
        .await
        .map_err(|_| bad("silent in the middle of a frame".into()))?
        .map_err(|e| bad(format!("the connection ended inside a frame: {e}")))?;
    serde_json::from_slice(&body).map(Some).map_err(|e| {
        bad(format!(
            "the frame is not a frame of this socket ({}): {e}",
            std::any::type_name::<T>()
                .rsplit("::")
                .next()
                .unwrap_or("frame")
        ))
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;
    use tokio::net::UnixStream;

    use super::{Wait, read};

    fn frame(value: &serde_json::Value) -> Vec<u8> {
        proto::encode_frame(value).unwrap_or_default()
    }

    #[tokio::test]
    async fn frames_sent_together_split_anywhere_or_large_come_out_whole() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let (mut reader, _write) = ours.into_split();
        let idle = Duration::from_secs(5);
        let big = serde_json::json!({ "text": "x".repeat(200_000) });
        let mut bytes = frame(&serde_json::json!({ "n": 1 }));
        bytes.extend(frame(&serde_json::json!({ "n": 2 })));
        bytes.extend(frame(&big));
        bytes.extend(frame(&serde_json::json!({ "n": 3 })));
        let writer = tokio::spawn(async move {
            // In pieces that cut lengths and bodies anywhere.
            for piece in bytes.chunks(7_777) {
                theirs.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
            theirs
        });
        for expected in [
            serde_json::json!({ "n": 1 }),
            serde_json::json!({ "n": 2 }),
            big,
            serde_json::json!({ "n": 3 }),
        ] {
            let got: Option<serde_json::Value> =
                read(&mut reader, idle, Wait::Forever).await.unwrap();
            assert_eq!(got, Some(expected));
        }
        drop(writer.await.unwrap());
        let end: Option<serde_json::Value> = read(&mut reader, idle, Wait::Forever).await.unwrap();
        assert_eq!(end, None, "a clean end between frames");
    }

    #[tokio::test]
    async fn a_frame_cut_short_too_large_or_left_silent_is_refused_with_its_reason() {
        let idle = Duration::from_secs(5);
        let whole = frame(&serde_json::json!({ "n": 1 }));

        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let (mut reader, _write) = ours.into_split();
        theirs.write_all(&whole[..whole.len() - 2]).await.unwrap();
        drop(theirs);
        let cut = read::<serde_json::Value>(&mut reader, idle, Wait::Forever).await;
        let message = cut.err().map(|r| r.message).unwrap_or_default();
        assert!(
            message.starts_with("the connection ended inside a frame"),
            "{message}"
        );

        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let (mut reader, _write) = ours.into_split();
        let size = (proto::MAX_FRAME as u32 + 1).to_be_bytes();
        theirs.write_all(&size).await.unwrap();
        let large = read::<serde_json::Value>(&mut reader, idle, Wait::Forever).await;
        let message = large.err().map(|r| r.message).unwrap_or_default();
        assert!(message.contains("larger than the limit"), "{message}");

        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let (mut reader, _write) = ours.into_split();
        theirs.write_all(&whole[..3]).await.unwrap();
        let short = Duration::from_millis(50);
        let silent = read::<serde_json::Value>(&mut reader, short, Wait::Forever).await;
        let message = silent.err().map(|r| r.message).unwrap_or_default();
        assert_eq!(message, "silent in the middle of a frame");
    }
}
