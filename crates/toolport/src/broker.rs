//! [`BrokerPort`]: the [`ToolPort`] that sends every call to `brokerd` over its agent socket.
//!
//! One broker session per conversation, for its whole life: the port opens a session (or
//! resumes the one the conversation holds) with `hello`. A connection the broker closed as idle
//! (`brokerd.toml`'s `connection_idle_ms`) is made again and the session resumed at once, on
//! the next call, without the user noticing. On a lost connection it reconnects,
//! resumes, and sends the same call id again for a bounded time (the broker answers a call id it
//! has seen with the answer it gave, so nothing runs twice); past that the call is `Failed`
//! with a clear message, never a denial. A resume the broker refuses (`resume_refused`,
//! `session_ended`) ends the conversation with a clear error ([`BrokerPort::fatal`]): it never
//! silently starts a fresh, untainted session.

use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use proto::{
    AgentFrame, BrokerFrame, ErrorCode, FrameError, PROTOCOL_VERSION, Resume, SessionId,
    ToolRequest, ToolResponse, ToolSchema, read_frame, write_frame,
};

use crate::port::{Pending, ToolPort};

/// How long a call keeps trying to reach the broker again after a lost connection.
pub const RECONNECT_FOR: Duration = Duration::from_secs(30);

/// Why the port cannot serve the conversation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// Nothing listens on the socket.
    #[error("{}", proto::rendezvous::no_broker(std::path::Path::new(.socket), "--socket PATH"))]
    NoBroker {
        /// The socket tried.
        socket: String,
    },
    /// The broker refused to resume the conversation's session.
    #[error("the broker refused to resume session {session}: {message}")]
    ResumeRefused {
        /// The session.
        session: String,
        /// The broker's sentence.
        message: String,
    },
    /// The conversation's session has ended.
    #[error("session {session} has ended: {message}; start a new conversation")]
    SessionEnded {
        /// The session.
        session: String,
        /// The broker's sentence.
        message: String,
    },
    /// The broker answered something this client does not understand, or refused the
    /// connection.
    #[error("the broker at {socket}: {message}")]
    Protocol {
        /// The socket.
        socket: String,
        /// What happened.
        message: String,
    },
}

impl PortError {
    /// Whether the error means no broker is running (exit status 3).
    pub fn is_no_broker(&self) -> bool {
        matches!(self, PortError::NoBroker { .. })
    }
}

/// A connection and the session it serves.
struct Link {
    stream: UnixStream,
}

/// The port over the broker's agent socket.
pub struct BrokerPort {
    socket: PathBuf,
    resume: Resume,
    link: Mutex<Option<Link>>,
    /// A second handle on the current connection, for the frames sent while a call holds
    /// `link` waiting for its answer: `withdraw` and `answer`.
    side: Mutex<Option<UnixStream>>,
    /// The client's name, said in every `hello`.
    client: Option<String>,
    fatal: Mutex<Option<PortError>>,
    reconnect_for: Duration,
}

impl BrokerPort {
    /// Connects to `socket` and opens a new session (`resume` = `None`) or resumes one.
    pub fn connect(socket: &Path, resume: Option<Resume>) -> Result<BrokerPort, PortError> {
        BrokerPort::connect_for(socket, resume, None)
    }

    /// [`BrokerPort::connect`] for a client the broker knows by name (`bx mcp`: its MCP
    /// client's), which `brokerd.toml` may let answer the session's approvals itself.
    pub fn connect_for(
        socket: &Path,
        resume: Option<Resume>,
        client: Option<String>,
    ) -> Result<BrokerPort, PortError> {
        let (stream, resume) = hello(socket, resume, client.as_deref())?;
        Ok(BrokerPort {
            socket: socket.to_path_buf(),
            resume,
            client,
            side: Mutex::new(stream.try_clone().ok()),
            link: Mutex::new(Some(Link { stream })),
            fatal: Mutex::new(None),
            reconnect_for: RECONNECT_FOR,
        })
    }

    /// Sets how long a call keeps trying after a lost connection.
    pub fn with_reconnect_for(mut self, reconnect_for: Duration) -> BrokerPort {
        self.reconnect_for = reconnect_for;
        self
    }

    /// The broker session and its resume token: what the conversation keeps (mode 0600).
    pub fn session(&self) -> &Resume {
        &self.resume
    }

    /// The error that ended this conversation's use of the broker, if one did.
    pub fn fatal(&self) -> Option<PortError> {
        self.fatal
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Sends the owner's own words (a message the owner typed, before the turn it starts)
    /// and waits until the broker has them on disk: they count as the owner's in the session's
    /// provenance. Compiled only with the `owner-words` feature, which `loopd` turns on for
    /// `loopd chat` (it reads them from the owner); `mcp`, whose `bx mcp` never has the user's
    /// prompt, does not (its tests read its manifest and its sources).
    #[cfg(feature = "owner-words")]
    pub fn owner_words(&self, text: &str) -> Result<(), PortError> {
        let frame = AgentFrame::OwnerWords {
            text: text.to_string(),
        };
        self.exchange(&frame, |answer| match answer {
            BrokerFrame::OwnerWordsKept {} => Step::Done(()),
            other => Step::Unexpected(format!("answered owner_words with {other:?}")),
        })
    }

    /// Sends an event of the agent loop's own (`loopd`'s code mode) for the owner's `watch`
    /// streams, and waits until the broker has published it.
    pub fn agent_event(&self, event: &proto::AgentEvent) -> Result<(), PortError> {
        let frame = AgentFrame::LoopEvent {
            event: event.clone(),
        };
        self.exchange(&frame, |answer| match answer {
            BrokerFrame::LoopEventPublished {} => Step::Done(()),
            other => Step::Unexpected(format!("answered loop_event with {other:?}")),
        })
    }

    /// Ends a child session (one `delegate` opened) with its report for its parent's
    /// `collect`, and waits until the broker has kept it and ended the session.
    pub fn report(&self, text: &str) -> Result<(), PortError> {
        let frame = AgentFrame::Report {
            text: text.to_string(),
        };
        self.exchange(&frame, |answer| match answer {
            BrokerFrame::Closed {} => Step::Done(()),
            other => Step::Unexpected(format!("answered report with {other:?}")),
        })
    }

    /// Ends the session for good (`close`): a child session whose work ended without a report.
    pub fn close(&self) -> Result<(), PortError> {
        self.exchange(&AgentFrame::Close {}, |answer| match answer {
            BrokerFrame::Closed {} => Step::Done(()),
            other => Step::Unexpected(format!("answered close with {other:?}")),
        })
    }

    fn set_fatal(&self, error: PortError) {
        *self.fatal.lock().unwrap_or_else(PoisonError::into_inner) = Some(error);
    }

    /// Sends `frame` and reads frames until `done` returns a value, reconnecting (and
    /// resuming) after a lost connection for at most the reconnect time.
    fn exchange<T>(
        &self,
        frame: &AgentFrame,
        mut done: impl FnMut(BrokerFrame) -> Step<T>,
    ) -> Result<T, PortError> {
        if let Some(error) = self.fatal() {
            return Err(error);
        }
        let deadline = Instant::now() + self.reconnect_for;
        let mut pause = Duration::from_millis(50);
        let mut last_problem = String::new();
        loop {
            // A connection made before this attempt that is found lost (closed as idle, or the
            // broker restarted) is made again at once; other failures wait before the next try.
            let mut again_at_once = false;
            let mut link = self.link.lock().unwrap_or_else(PoisonError::into_inner);
            let made_before = link.is_some();
            if link.is_none() {
                match hello(
                    &self.socket,
                    Some(self.resume.clone()),
                    self.client.as_deref(),
                ) {
                    Ok((stream, _)) => {
                        *self.side.lock().unwrap_or_else(PoisonError::into_inner) =
                            stream.try_clone().ok();
                        *link = Some(Link { stream });
                    }
                    Err(
                        error @ (PortError::ResumeRefused { .. } | PortError::SessionEnded { .. }),
                    ) => {
                        self.set_fatal(error.clone());
                        return Err(error);
                    }
                    Err(error) => last_problem = error.to_string(),
                }
            }
            if let Some(current) = link.as_mut() {
                match talk(&mut current.stream, frame, &mut done) {
                    Ok(value) => return Ok(value),
                    Err(Talk::Lost(problem)) => {
                        last_problem = problem;
                        again_at_once = made_before;
                        *link = None;
                    }
                    Err(Talk::Refused(error)) => {
                        *link = None;
                        if matches!(
                            error,
                            PortError::ResumeRefused { .. } | PortError::SessionEnded { .. }
                        ) {
                            self.set_fatal(error.clone());
                        }
                        return Err(error);
                    }
                }
            }
            drop(link);
            if again_at_once {
                continue;
            }
            if Instant::now() >= deadline {
                return Err(PortError::Protocol {
                    socket: self.socket.display().to_string(),
                    message: format!(
                        "the connection was lost and could not be made again within {} s ({last_problem})",
                        self.reconnect_for.as_secs()
                    ),
                });
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_secs(1));
        }
    }
}

/// What a frame means for the exchange in progress.
enum Step<T> {
    /// The exchange is over.
    Done(T),
    /// Keep reading.
    More,
    /// The frame does not belong here.
    Unexpected(String),
}

enum Talk {
    /// The connection broke: try again.
    Lost(String),
    /// The broker refused: do not.
    Refused(PortError),
}

fn talk<T>(
    stream: &mut UnixStream,
    frame: &AgentFrame,
    done: &mut impl FnMut(BrokerFrame) -> Step<T>,
) -> Result<T, Talk> {
    write_frame(stream, frame).map_err(|e| Talk::Lost(e.to_string()))?;
    loop {
        let answer = match read_frame::<BrokerFrame, _>(stream) {
            Ok(Some(answer)) => answer,
            Ok(None) => return Err(Talk::Lost("the broker closed the connection".into())),
            Err(FrameError::Io(e)) => return Err(Talk::Lost(e.to_string())),
            Err(e) => return Err(Talk::Lost(e.to_string())),
        };
        match answer {
            // The broker closed the connection as idle before it read this frame: the frame
            // was not taken, and is sent again on a new connection.
            BrokerFrame::Error {
                code: ErrorCode::Idle,
                message,
            } => return Err(Talk::Lost(message)),
            BrokerFrame::Error { code, message } => {
                return Err(Talk::Refused(refusal(code, message, "")));
            }
            _ => {}
        }
        match done(answer) {
            Step::Done(value) => return Ok(value),
            Step::More => {}
            Step::Unexpected(what) => {
                return Err(Talk::Refused(PortError::Protocol {
                    socket: String::new(),
                    message: what,
                }));
            }
        }
    }
}

fn refusal(code: ErrorCode, message: String, session: &str) -> PortError {
    match code {
        ErrorCode::ResumeRefused => PortError::ResumeRefused {
            session: session.to_string(),
            message,
        },
        ErrorCode::SessionEnded => PortError::SessionEnded {
            session: session.to_string(),
            message,
        },
        other => PortError::Protocol {
            socket: String::new(),
            message: format!("{message} ({other:?})"),
        },
    }
}

/// Connects and says hello: the stream and the session it serves.
fn hello(
    socket: &Path,
    resume: Option<Resume>,
    client: Option<&str>,
) -> Result<(UnixStream, Resume), PortError> {
    let shown = socket.display().to_string();
    let mut stream = UnixStream::connect(socket).map_err(|e| match e.kind() {
        ErrorKind::NotFound | ErrorKind::ConnectionRefused => PortError::NoBroker {
            socket: shown.clone(),
        },
        _ => PortError::Protocol {
            socket: shown.clone(),
            message: format!("cannot connect: {e}"),
        },
    })?;
    let session = resume
        .as_ref()
        .map(|r| r.session.to_string())
        .unwrap_or_default();
    let frame = AgentFrame::Hello {
        version: PROTOCOL_VERSION,
        client: client.map(str::to_string),
        resume,
    };
    let protocol = |message: String| PortError::Protocol {
        socket: shown.clone(),
        message,
    };
    // A broker that refuses the connection (its cap of open connections) writes its error
    // and closes without reading: the hello then fails to be written, and the error is read.
    let written = write_frame(&mut stream, &frame);
    let answer = read_frame::<BrokerFrame, _>(&mut stream);
    if let (Err(e), Err(_) | Ok(None)) = (&written, &answer) {
        return Err(protocol(e.to_string()));
    }
    match answer {
        Ok(Some(BrokerFrame::Welcome {
            session,
            resume_token,
            ..
        })) => Ok((
            stream,
            Resume {
                session,
                token: resume_token,
            },
        )),
        Ok(Some(BrokerFrame::Error { code, message })) => {
            Err(match refusal(code, message, &session) {
                PortError::Protocol { message, .. } => protocol(message),
                other => other,
            })
        }
        Ok(Some(other)) => Err(protocol(format!("answered hello with {other:?}"))),
        Ok(None) => Err(protocol("closed the connection after hello".into())),
        Err(e) => Err(protocol(e.to_string())),
    }
}

impl BrokerPort {
    /// Sends `frame` on the second handle of the connection (the call waiting for its answer
    /// keeps reading on the first); whether it was written.
    fn side_frame(&self, frame: &AgentFrame) -> bool {
        let mut side = self.side.lock().unwrap_or_else(PoisonError::into_inner);
        match side.as_mut() {
            Some(stream) => write_frame(stream, frame).is_ok(),
            None => false,
        }
    }
}

impl ToolPort for BrokerPort {
    fn call(&self, request: &ToolRequest, on_pending: &mut dyn FnMut(&Pending)) -> ToolResponse {
        // The broker knows this conversation by its broker session id.
        let request = ToolRequest {
            session: self.resume.session.to_string(),
            ..request.clone()
        };
        let frame = AgentFrame::Call {
            request: request.clone(),
        };
        let answered = self.exchange(&frame, |answer| match answer {
            BrokerFrame::Response { call_id, response } if call_id.0 == request.call_id => {
                match response {
                    ToolResponse::PendingApproval {
                        approval,
                        expires,
                        answerable,
                    } => {
                        on_pending(&Pending {
                            approval,
                            expires,
                            answerable,
                        });
                        Step::More
                    }
                    other => Step::Done(other),
                }
            }
            other => Step::Unexpected(format!("answered a call with {other:?}")),
        });
        answered.unwrap_or_else(|error| ToolResponse::Failed {
            message: format!("the call could not reach the broker: {error}"),
        })
    }

    fn withdraw(&self) -> bool {
        self.side_frame(&AgentFrame::Withdraw {})
    }

    fn answer(&self, approve: bool) -> bool {
        self.side_frame(&AgentFrame::Answer {
            approve,
            text: None,
        })
    }

    fn reply(&self, text: &str) -> bool {
        self.side_frame(&AgentFrame::Answer {
            approve: false,
            text: Some(text.to_string()),
        })
    }

    fn catalog(&self) -> Option<Result<Vec<ToolSchema>, String>> {
        let tools = self.exchange(&AgentFrame::ListTools {}, |answer| match answer {
            BrokerFrame::Tools { tools } => Step::Done(tools),
            other => Step::Unexpected(format!("answered list_tools with {other:?}")),
        });
        Some(tools.map_err(|error| error.to_string()))
    }
}

/// The broker session a conversation names: its id and token.
pub fn resume_of(session: &str, token: &str) -> Resume {
    Resume {
        session: SessionId(session.to_string()),
        token: token.to_string(),
    }
}
