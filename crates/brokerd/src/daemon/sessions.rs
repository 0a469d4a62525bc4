//! Sessions: issued by the broker with a resume token (kept only as its SHA-256, compared in
//! constant time), resumed by id and token, ended by `close` or after `session_idle_days`.

use ledger::{Event, sha256_hex};
use std::sync::Arc;
use std::time::Duration;

use policy::decide::Labels;
use proto::{Class, ErrorCode, OwnerEvent, Resume, SessionId, Timestamp};

use super::Broker;

/// A refusal sent as an error frame, after which the connection closes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The code.
    pub code: ErrorCode,
    /// The sentence.
    pub message: String,
}

impl Refusal {
    /// A refusal with `code` and `message`.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Refusal {
        Refusal {
            code,
            message: message.into(),
        }
    }
}

fn random_hex(bytes: usize) -> Result<String, Refusal> {
    let mut buffer = vec![0u8; bytes];
    getrandom::fill(&mut buffer).map_err(|e| {
        Refusal::new(
            ErrorCode::Internal,
            format!("no randomness for a session id: {e}"),
        )
    })?;
    Ok(buffer.iter().map(|b| format!("{b:02x}")).collect())
}

/// A new session id and resume token, not yet recorded.
pub fn fresh_ids() -> Result<(SessionId, String), Refusal> {
    Ok((SessionId(format!("s-{}", random_hex(12)?)), random_hex(32)?))
}

/// Opens a new session: its id and resume token.
pub async fn open(broker: &Broker) -> Result<(SessionId, String), Refusal> {
    let (session, token) = fresh_ids()?;
    broker
        .journal
        .record(vec![Event::SessionOpened {
            session: session.clone(),
            token_sha256: sha256_hex(token.as_bytes()),
        }])
        .await
        .map_err(|e| Refusal::new(ErrorCode::Internal, e.to_string()))?;
    tracing::info!(%session, "session opened");
    broker.publish(OwnerEvent::SessionOpened {
        session: session.clone(),
    });
    Ok((session, token))
}

/// Resumes the session `resume` names, when its token is right and it has not ended.
pub async fn resume(broker: &Broker, resume: &Resume) -> Result<SessionId, Refusal> {
    let row = broker.with_ledger(|l| l.session(&resume.session));
    let row = match row {
        Ok(Some(row)) => row,
        Ok(None) => {
            return Err(Refusal::new(
                ErrorCode::ResumeRefused,
                format!("there is no session {}", resume.session),
            ));
        }
        Err(error) => {
            return Err(Refusal::new(
                ErrorCode::ResumeRefused,
                format!("session {} cannot be read: {error}", resume.session),
            ));
        }
    };
    let digest = sha256_hex(resume.token.as_bytes());
    // A child session resumes only in the broker that holds its binding (its ledger row
    // holds the digest of a token nobody was given).
    let token_right = broker
        .children
        .token_matches(&resume.session, &digest)
        .unwrap_or_else(|| proto::ids::digests_equal(&row.token_sha256, &digest));
    if !token_right {
        return Err(Refusal::new(
            ErrorCode::ResumeRefused,
            format!("the resume token for session {} is wrong", resume.session),
        ));
    }
    if broker.session_slot(&resume.session).ended() {
        return Err(Refusal::new(
            ErrorCode::SessionEnded,
            format!(
                "session {} has ended; start a new conversation",
                resume.session
            ),
        ));
    }
    if let Some(ended) = row.ended {
        return Err(Refusal::new(
            ErrorCode::SessionEnded,
            format!(
                "session {} ended at {ended}; start a new conversation",
                resume.session
            ),
        ));
    }
    broker
        .journal
        .record(vec![Event::SessionResumed {
            session: resume.session.clone(),
        }])
        .await
        .map_err(|e| Refusal::new(ErrorCode::Internal, e.to_string()))?;
    tracing::info!(session = %resume.session, "session resumed");
    broker.publish(OwnerEvent::Resumed {
        session: resume.session.clone(),
    });
    Ok(resume.session.clone())
}

/// Ends `session` (its client asked, or it was idle too long); its waiting calls are
/// abandoned and its background jobs killed.
pub async fn close(broker: &Arc<Broker>, session: &SessionId, reason: &str) -> Result<(), Refusal> {
    let ended = vec![Event::SessionEnded {
        session: session.clone(),
        reason: reason.to_string(),
    }];
    let applied = broker
        .journal
        .record_with(ended, None)
        .await
        .map_err(|e| Refusal::new(ErrorCode::Internal, e.to_string()))?;
    // On disk: the session has ended, whatever becomes of the ledger's copy.
    broker.mark_ended(session);
    // A child's end is kept for its parent's collect, with its labels and values now.
    if broker.children.binding(session).is_some() {
        let slot = broker.session_slot(session);
        let labels = slot.raised_over(Labels {
            taint: Class::Public,
            untrusted: false,
        });
        let values = slot.with_values(broker, session, |values| values.map(|i| i.clone()));
        broker.children.ended(session, reason, labels, values);
    }
    // A parent's end ends its children (and theirs).
    for child in broker.children.open_children_of(session) {
        let reason = format!("its parent {session} ended");
        if let Err(refusal) = Box::pin(close(broker, &child, &reason)).await {
            tracing::error!(%child, error = %refusal.message, "a child session was not ended");
        }
    }
    broker.children.forget_children_of(session);
    let followed = applied.wait().await;
    broker.approvals.end_session(broker, session).await;
    broker.jobs.end_session(session).await;
    broker.gateway.end_session(session).await;
    let runner = Arc::clone(&broker.runner);
    let ended = session.clone();
    if let Err(error) = tokio::task::spawn_blocking(move || runner.end_session(&ended)).await {
        tracing::error!(%error, "the session's warm boxes were not let go");
    }
    followed.map_err(|e| Refusal::new(ErrorCode::Internal, e.to_string()))
}

/// Ends every session unused for `session_idle_days` (or `session_idle_ms`).
pub async fn end_idle(broker: &Arc<Broker>) -> Result<usize, Refusal> {
    let idle_for = broker.config.session_idle();
    let idle_ms = i64::try_from(idle_for.as_millis()).unwrap_or(i64::MAX);
    let before = Timestamp::now().plus_millis(-idle_ms);
    let idle = broker
        .with_ledger(|l| l.idle_sessions(before))
        .map_err(|e| Refusal::new(ErrorCode::Internal, e.to_string()))?;
    let reason = format!("unused for {}", shown(idle_for));
    for session in &idle {
        // A session in the middle of a call is not idle: its lock is held until the answer.
        let slot = broker.session_slot(session);
        let _memo = slot.memo.lock().await;
        close(broker, session, &reason).await?;
    }
    Ok(idle.len())
}

/// Ends idle sessions now and then, for as long as the broker runs: at start, then every
/// quarter of the idle time (at least every 100 ms, at most every hour).
pub async fn sweep_idle(broker: Arc<Broker>) {
    let every = (broker.config.session_idle() / 4)
        .clamp(Duration::from_millis(100), Duration::from_secs(3600));
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        match end_idle(&broker).await {
            Ok(0) => {}
            Ok(ended) => tracing::info!(ended, "ended idle sessions"),
            Err(refusal) => tracing::error!(error = %refusal.message, "cannot end idle sessions"),
        }
    }
}

/// A duration as a person reads it: days when whole, else milliseconds.
fn shown(duration: Duration) -> String {
    let secs = duration.as_secs();
    if secs > 0 && secs.is_multiple_of(86_400) && duration.subsec_millis() == 0 {
        format!("{} days", secs / 86_400)
    } else {
        format!("{} ms", duration.as_millis())
    }
}
