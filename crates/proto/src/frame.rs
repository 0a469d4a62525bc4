//! The frames on boxmaker's Unix sockets and their codec: a 4-byte big-endian length, then that
//! many bytes of JSON.

use std::io::{self, Read, Write};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::{AgentEvent, CallId, SessionId, ToolRequest, ToolResponse, ToolSchema};

/// The largest frame body, in bytes (16 MiB). A bigger one is refused before it is read.
pub const MAX_FRAME: usize = 16 * 1024 * 1024;

/// The protocol version a `hello` carries; a peer with another version gets an error and a close.
pub const PROTOCOL_VERSION: u32 = 1;

/// The session a client asks to continue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resume {
    /// The session id the broker issued.
    pub session: SessionId,
    /// The resume token the broker issued with it.
    pub token: String,
}

/// A frame from an agent-side client (loopd, `bx mcp`) to the broker's agent socket.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum AgentFrame {
    /// The first frame: the client's protocol version and, to continue a session, its resume.
    Hello {
        /// [`PROTOCOL_VERSION`] of the client.
        version: u32,
        /// The session to continue; `None` opens a new one.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        resume: Option<Resume>,
        /// The name of the program the agent side serves (`bx mcp`: its MCP client's name),
        /// which `brokerd.toml` may let answer this session's approvals itself.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client: Option<String>,
    },
    /// Asks for the schemas of every tool a current grant could cover.
    ListTools {},
    /// A tool call.
    Call {
        /// The call.
        request: ToolRequest,
    },
    /// Ends the session for good: its answers are dropped and a later resume is refused.
    /// (`loopd chat` sends it only for a child session whose turn failed, since a
    /// conversation can always go on.)
    Close {},
    /// Answers the call this connection waits on, in the client's own interface: allowed only
    /// for a client `brokerd.toml` names (`[mcp] approve_in_client`), recorded with that
    /// client as the channel. Sent when no call waits, it does nothing.
    Answer {
        /// For an approval: run the call once (`true`) or refuse it.
        approve: bool,
        /// For the model's `ask` question: the answer (a question without one stays the
        /// owner's).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        text: Option<String>,
    },
    /// The owner's own words: a message the owner typed to the agent (`loopd` sends each
    /// before the turn it starts). The broker records them and counts their values as the
    /// owner's (issue 33): exactly as trustworthy as the owner's uid, since any process of that
    /// uid may connect to the agent socket (a box reaches no socket). `bx mcp` never sends one:
    /// an MCP client never passes on the user's prompt. Answered by `owner_words_kept`.
    OwnerWords {
        /// The words, as typed.
        text: String,
    },
    /// Withdraws the call this connection waits on while the owner is asked (a client that
    /// cancelled it): its approval is abandoned, recorded as such, and the call answers
    /// `Failed` without running. Sent when no call waits, it does nothing.
    Withdraw {},
    /// A child session's final answer for its parent (`delegate`): kept for the parent's
    /// `collect`, after which the session ends as `close` ends it. Answered by `closed`; a
    /// session no `delegate` opened gets an error.
    Report {
        /// The child's report, as its model wrote it.
        text: String,
    },
    /// An event of the agent loop's own for the owner (`loopd`'s code mode: `role`,
    /// `verify_done`): the broker passes it to the owner's `watch` streams with the session
    /// ([`crate::OwnerEvent::Agent`]) and decides nothing on it. Answered by
    /// `loop_event_published`.
    LoopEvent {
        /// The event.
        event: AgentEvent,
    },
}

/// A frame from the broker to an agent-side client.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum BrokerFrame {
    /// The answer to `hello`: the session this connection serves and its resume token.
    Welcome {
        /// [`PROTOCOL_VERSION`] of the broker.
        version: u32,
        /// The session id.
        session: SessionId,
        /// The token that resumes this session later.
        resume_token: String,
    },
    /// The answer to `list_tools`.
    Tools {
        /// The schemas, in the broker's order.
        tools: Vec<ToolSchema>,
    },
    /// An answer to a call; `PendingApproval` is followed by a final answer for the same call.
    Response {
        /// The call this answers.
        call_id: CallId,
        /// The answer.
        response: ToolResponse,
    },
    /// The broker cannot serve the connection (or this request); it closes after this frame.
    Error {
        /// What kind of error, for programs.
        code: ErrorCode,
        /// What is wrong, for a person.
        message: String,
    },
    /// The answer to `close`: the session has ended.
    Closed {},
    /// The answer to `owner_words`: they are on disk and count as the owner's.
    OwnerWordsKept {},
    /// The answer to `loop_event`: it went to the owner's `watch` streams.
    LoopEventPublished {},
}

/// Why the broker sent an [`BrokerFrame::Error`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The resume named an unknown session or the wrong token.
    ResumeRefused,
    /// The session has ended (closed, or idle too long).
    SessionEnded,
    /// The client's protocol version is not the broker's.
    Version,
    /// The frame could not be read (too large, not JSON, not a frame of this socket).
    BadFrame,
    /// The first frame was not `hello`.
    NotHello,
    /// A call named another session than the connection's.
    WrongSession,
    /// A call id was sent again with other arguments.
    CallIdReused,
    /// The broker failed inside (its state could not be read or written).
    Internal,
    /// The socket already holds as many connections as `brokerd.toml` allows; this one is
    /// closed. Close some, or raise the cap.
    TooManyConnections,
    /// The connection stayed idle after `hello`, with no call waiting, past `brokerd.toml`'s
    /// `connection_idle_ms`; it is closed. The session lives on: connect again and resume it.
    Idle,
}

/// Why a frame could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The body is bigger than [`MAX_FRAME`].
    #[error("frame of {size} bytes is larger than the limit of {MAX_FRAME} bytes")]
    TooLarge {
        /// The body size announced or attempted.
        size: u64,
    },
    /// The stream ended inside a frame.
    #[error("the connection closed in the middle of a frame ({got} of {expected} bytes)")]
    Truncated {
        /// Bytes received.
        got: usize,
        /// Bytes the frame needed.
        expected: usize,
    },
    /// The body is not JSON of the expected shape.
    #[error("frame body is not a valid message: {0}")]
    Malformed(String),
    /// The stream failed.
    #[error("socket error: {0}")]
    Io(#[from] io::Error),
}

/// The frame for `value`: length prefix and JSON body.
pub fn encode_frame<T: Serialize>(value: &T) -> Result<Vec<u8>, FrameError> {
    let body = serde_json::to_vec(value).map_err(|e| FrameError::Malformed(e.to_string()))?;
    let len = checked_len(body.len() as u64)?;
    let mut frame = Vec::with_capacity(4 + body.len());
    frame.extend_from_slice(&len.to_be_bytes());
    frame.extend_from_slice(&body);
    Ok(frame)
}

/// Decodes the first frame in `buf`: `Ok(None)` when more bytes are needed, otherwise the value
/// and the number of bytes it used. Any bytes give a value or an error, never a panic.
pub fn decode_frame<T: DeserializeOwned>(buf: &[u8]) -> Result<Option<(T, usize)>, FrameError> {
    let Some(prefix) = buf.first_chunk::<4>() else {
        return Ok(None);
    };
    let len = checked_len(u64::from(u32::from_be_bytes(*prefix)))? as usize;
    let Some(body) = buf.get(4..4 + len) else {
        return Ok(None);
    };
    let value = parse_body(body)?;
    Ok(Some((value, 4 + len)))
}

/// Writes one frame and flushes.
pub fn write_frame<T: Serialize, W: Write>(writer: &mut W, value: &T) -> Result<(), FrameError> {
    let frame = encode_frame(value)?;
    writer.write_all(&frame)?;
    writer.flush()?;
    Ok(())
}

/// Reads one frame: `Ok(None)` when the stream ends cleanly between frames. A length over the
/// limit is refused before any of the body is read.
pub fn read_frame<T: DeserializeOwned, R: Read>(reader: &mut R) -> Result<Option<T>, FrameError> {
    let mut prefix = [0u8; 4];
    let got = read_full(reader, &mut prefix)?;
    if got == 0 {
        return Ok(None);
    }
    if got < prefix.len() {
        return Err(FrameError::Truncated { got, expected: 4 });
    }
    let len = checked_len(u64::from(u32::from_be_bytes(prefix)))? as usize;
    let mut body = vec![0u8; len];
    let got = read_full(reader, &mut body)?;
    if got < len {
        return Err(FrameError::Truncated {
            got: 4 + got,
            expected: 4 + len,
        });
    }
    parse_body(&body).map(Some)
}

fn checked_len(size: u64) -> Result<u32, FrameError> {
    match u32::try_from(size) {
        Ok(len) if size <= MAX_FRAME as u64 => Ok(len),
        _ => Err(FrameError::TooLarge { size }),
    }
}

fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, FrameError> {
    serde_json::from_slice(body).map_err(|e| FrameError::Malformed(e.to_string()))
}

/// Reads until `buf` is full or the stream ends; returns how many bytes arrived.
fn read_full<R: Read>(reader: &mut R, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}
