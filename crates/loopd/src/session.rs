//! A conversation on disk: `<state-dir>/sessions/<id>/` holds `session.json`
//! (the broker session id and resume token), `baseline.json` (the system message and the tools
//! array, written once and replayed as raw bytes) and `messages.jsonl` (append-only).
//!
//! Every file is mode 0600 and the folder 0700. Because the baseline and every message line are
//! replayed byte for byte, nothing that changes later (the registry, this crate's serializers)
//! can alter a byte of an existing session's request prefix, and a server's prompt cache stays
//! valid.

use std::borrow::Borrow;
use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufRead, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;

use crate::llama::{ChatRequest, Message, Role, ToolCall, ToolChoice, ToolSchema, tools_json};

/// The file with the session's ids.
pub const SESSION_FILE: &str = "session.json";
/// The file with the system message and tools array.
pub const BASELINE_FILE: &str = "baseline.json";
/// The file with every later message, one JSON object per line.
pub const MESSAGES_FILE: &str = "messages.jsonl";

/// The ids of a conversation's broker session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionIds {
    /// The session id (issued by the broker; by loopd for the fake port).
    pub id: String,
    /// The token that resumes the broker session, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resume_token: Option<String>,
}

/// Why a session could not be created, opened or written.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// A session id that cannot be a folder name.
    #[error("invalid session id {0:?}: use letters, digits, '-' and '_' (at most 64)")]
    BadId(String),
    /// `create` found the session already there.
    #[error("session {0} already exists")]
    Exists(String),
    /// `open` found no such session.
    #[error("no session {id} in {root}")]
    Missing {
        /// The id asked for.
        id: String,
        /// The sessions folder searched.
        root: String,
    },
    /// A file of the session is damaged.
    #[error("{path}: {detail}")]
    Damaged {
        /// The file.
        path: String,
        /// What is wrong, with the line when there is one.
        detail: String,
    },
    /// Something to be written has no JSON form (nothing is written).
    #[error("{path}: cannot write as JSON: {detail}")]
    Unwritable {
        /// The file.
        path: String,
        /// What serde_json said.
        detail: String,
    },
    /// `session.json`, which holds the broker's resume token, is not a secret file (other
    /// users may read or write it, or another user owns it): the sentence says how to fix it.
    #[error("{0}")]
    NotSecret(String),
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// The cause.
        source: io::Error,
    },
}

/// An open conversation: its ids, its baseline, and its messages as raw JSON.
#[derive(Debug)]
pub struct Session {
    dir: PathBuf,
    ids: SessionIds,
    system: Box<RawValue>,
    tools: Box<RawValue>,
    messages: Vec<Box<RawValue>>,
    shape: Shape,
    log: File,
}

/// What a turn needs to know about the conversation, kept up to date on every append so that
/// the messages are parsed once, when the session is opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Shape {
    /// Tool calls in every assistant message.
    tool_calls: u64,
    /// Tool calls before the last user message.
    calls_before_turn: u64,
    /// Where the last assistant message is.
    last_assistant: Option<usize>,
}

impl Shape {
    fn add(&mut self, message: &Message, at: usize) {
        match message.role {
            Role::User => self.calls_before_turn = self.tool_calls,
            Role::Assistant => {
                self.tool_calls += message.tool_calls.len() as u64;
                self.last_assistant = Some(at);
            }
            Role::System | Role::Tool => {}
        }
    }
}

/// `baseline.json` as it is read back: the raw bytes of each part.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct BaselineRaw {
    system: Box<RawValue>,
    tools: Box<RawValue>,
}

impl Session {
    /// Creates the session `ids.id` under `root` with this system prompt and tools array.
    pub fn create(
        root: &Path,
        ids: SessionIds,
        system_prompt: &str,
        tools: &[ToolSchema],
    ) -> Result<Session, SessionError> {
        check_id(&ids.id)?;
        make_private_dir(root)?;
        let dir = root.join(&ids.id);
        match fs::DirBuilder::new().mode(0o700).create(&dir) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                return Err(SessionError::Exists(ids.id));
            }
            Err(e) => return Err(io_error(&dir, e)),
        }
        let baseline_path = dir.join(BASELINE_FILE);
        let system = serde_json::to_string(&Message::system(system_prompt))
            .map_err(|e| unwritable(&baseline_path, &e))?;
        let tools = tools_json(tools).map_err(|e| unwritable(&baseline_path, &e))?;
        let baseline = format!("{{\"system\":{system},\"tools\":{tools}}}\n");
        write_once(&baseline_path, baseline.as_bytes())?;
        let ids_path = dir.join(SESSION_FILE);
        let ids_json = serde_json::to_string(&ids).map_err(|e| unwritable(&ids_path, &e))?;
        write_once(&ids_path, ids_json.as_bytes())?;
        Session::open(root, &ids.id)
    }

    /// Opens the session `id` under `root`. A torn last line in `messages.jsonl` (a crash in the
    /// middle of a write) is cut off; any other damage is an error naming the line.
    pub fn open(root: &Path, id: &str) -> Result<Session, SessionError> {
        check_id(id)?;
        let dir = root.join(id);
        if !dir.is_dir() {
            return Err(SessionError::Missing {
                id: id.to_string(),
                root: root.display().to_string(),
            });
        }
        let ids: SessionIds = read_secret_json(&dir.join(SESSION_FILE))?;
        if ids.id != id {
            return Err(damaged(
                &dir.join(SESSION_FILE),
                format!("names session {:?}, not {id:?}", ids.id),
            ));
        }
        let baseline: BaselineRaw = read_json(&dir.join(BASELINE_FILE))?;
        let path = dir.join(MESSAGES_FILE);
        let (messages, shape) = read_messages(&path)?;
        let log = OpenOptions::new()
            .append(true)
            .create(true)
            .mode(0o600)
            .open(&path)
            .map_err(|e| io_error(&path, e))?;
        Ok(Session {
            dir,
            ids,
            system: baseline.system,
            tools: baseline.tools,
            messages,
            shape,
            log,
        })
    }

    /// The session's ids.
    pub fn ids(&self) -> &SessionIds {
        &self.ids
    }

    /// The session's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Appends `message` to `messages.jsonl` (written and synced before it counts) and to the
    /// conversation. When the write fails, the file is cut back to where it was and the
    /// conversation is unchanged.
    pub fn append(&mut self, message: &Message) -> Result<(), SessionError> {
        self.append_all([message])
    }

    /// Appends `messages` as [`Session::append`] does one, with one sync for all of them (and
    /// one write per MiB): all count, or none.
    pub fn append_all<M: Borrow<Message>>(
        &mut self,
        messages: impl IntoIterator<Item = M>,
    ) -> Result<(), SessionError> {
        const CHUNK: usize = 1 << 20;
        let path = self.dir.join(MESSAGES_FILE);
        // Where to cut back to if the write fails; without it, nothing is written.
        let before = self.log.metadata().map_err(|e| io_error(&path, e))?.len();
        let mut shape = self.shape;
        let mut raws = Vec::new();
        let mut bytes = Vec::new();
        let mut written = Ok(());
        for message in messages {
            let message = message.borrow();
            let json = match serde_json::to_string(message) {
                Ok(json) => json,
                Err(e) => {
                    written = Err(unwritable(&path, &e));
                    break;
                }
            };
            bytes.extend_from_slice(json.as_bytes());
            bytes.push(b'\n');
            shape.add(message, self.messages.len() + raws.len());
            match RawValue::from_string(json) {
                Ok(raw) => raws.push(raw),
                Err(e) => {
                    written = Err(damaged(&path, format!("cannot encode: {e}")));
                    break;
                }
            }
            if bytes.len() >= CHUNK {
                written = self.log.write_all(&bytes).map_err(|e| io_error(&path, e));
                bytes.clear();
                if written.is_err() {
                    break;
                }
            }
        }
        if written.is_ok() {
            written = self
                .log
                .write_all(&bytes)
                .and_then(|()| self.log.sync_data())
                .map_err(|e| io_error(&path, e));
        }
        if let Err(error) = written {
            // A half-written line must not stay behind to break the next open. Should cutting
            // fail too, the next open cuts a torn last line, and the error says what failed.
            let _ = self.log.set_len(before);
            return Err(error);
        }
        self.shape = shape;
        self.messages.extend(raws);
        Ok(())
    }

    /// How many tool calls the model has made in this session; the next call's id is one more.
    pub fn tool_calls_so_far(&self) -> u64 {
        self.shape.tool_calls
    }

    /// How many tool calls the session held when its last user message was appended: the
    /// calls of the current (or last) turn are numbered after it.
    pub fn tool_calls_before_turn(&self) -> u64 {
        self.shape.calls_before_turn
    }

    /// How many messages follow the baseline.
    pub fn len(&self) -> usize {
        self.messages.len()
    }

    /// Whether no message follows the baseline yet.
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
    }

    /// The request for the conversation so far: the system message, every message, the tools.
    /// It keeps every tool call of the reply ([`ChatRequest::keep_calls`]); a turn sets less.
    pub fn request(&self, tool_choice: Option<ToolChoice>) -> ChatRequest<'_> {
        let mut messages: Vec<&RawValue> = Vec::with_capacity(self.messages.len() + 1);
        messages.push(&self.system);
        messages.extend(self.messages.iter().map(|m| &**m));
        ChatRequest {
            messages,
            tools: &self.tools,
            tool_choice,
            keep_calls: usize::MAX,
        }
    }

    /// The messages from the `at`th on (0 is the first after the baseline), parsed; a line that
    /// does not parse as a message is skipped.
    pub fn messages_since(&self, at: usize) -> Vec<Message> {
        self.messages
            .iter()
            .skip(at)
            .filter_map(|raw| serde_json::from_str::<Message>(raw.get()).ok())
            .collect()
    }

    /// The tool calls of the last assistant message that have no tool result yet, in order
    /// (left by a crash between a call and its result), with their session-wide numbers. Only
    /// the messages from that assistant message on are read.
    pub fn unanswered_calls(&self) -> Vec<(u64, ToolCall)> {
        let Some(last) = self.shape.last_assistant else {
            return Vec::new();
        };
        let parse = |raw: &RawValue| serde_json::from_str::<Message>(raw.get()).ok();
        let mut tail = self.messages.iter().skip(last).map(|raw| &**raw);
        let Some(assistant) = tail.next().and_then(parse) else {
            return Vec::new();
        };
        let answered: HashSet<String> = tail
            .filter_map(parse)
            .filter_map(|m| m.tool_call_id)
            .collect();
        let first_number = self.shape.tool_calls - assistant.tool_calls.len() as u64 + 1;
        assistant
            .tool_calls
            .into_iter()
            .enumerate()
            .filter(|(_, call)| !answered.contains(&call.id))
            .map(|(i, call)| (first_number + i as u64, call))
            .collect()
    }
}

fn check_id(id: &str) -> Result<(), SessionError> {
    let valid = !id.is_empty()
        && id.len() <= 64
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_');
    if valid {
        Ok(())
    } else {
        Err(SessionError::BadId(id.to_string()))
    }
}

fn make_private_dir(dir: &Path) -> Result<(), SessionError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| io_error(dir, e))
}

/// Writes `bytes` to `path` once, mode 0600 (`session.json` holds the broker's resume token):
/// through a new file beside it and a hard link (`sandbox::secret::create_secret`), so that
/// the file is either absent or whole, and an existing one is never replaced.
fn write_once(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    sandbox::secret::create_secret(path, bytes).map_err(|e| match e {
        sandbox::secret::SecretError::Io { source, .. } => io_error(path, source),
        other => io_error(path, io::Error::other(other.to_string())),
    })
}

/// [`read_json`] of a file holding a secret (`session.json`: the broker's resume token), read
/// only as a secret file (`sandbox::secret`).
fn read_secret_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, SessionError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() => {}
        Ok(_) => return Err(damaged(path, "not a regular file".to_string())),
        Err(e) => return Err(io_error(path, e)),
    }
    let text = sandbox::secret::read_secret(path).map_err(|e| match e {
        sandbox::secret::SecretError::Io { source, .. } => io_error(path, source),
        other => SessionError::NotSecret(other.to_string()),
    })?;
    serde_json::from_str(&text).map_err(|e| damaged(path, e.to_string()))
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, SessionError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() => {}
        Ok(_) => return Err(damaged(path, "not a regular file".to_string())),
        Err(e) => return Err(io_error(path, e)),
    }
    let text = fs::read_to_string(path).map_err(|e| io_error(path, e))?;
    serde_json::from_str(&text).map_err(|e| damaged(path, e.to_string()))
}

/// Every message of `path` as raw JSON and the conversation's [`Shape`], each line parsed once.
fn read_messages(path: &Path) -> Result<(Vec<Box<RawValue>>, Shape), SessionError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_file() => {}
        Ok(_) => return Err(damaged(path, "not a regular file".to_string())),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok((Vec::new(), Shape::default())),
        Err(e) => return Err(io_error(path, e)),
    }
    let file = File::open(path).map_err(|e| io_error(path, e))?;
    let mut reader = io::BufReader::new(file);
    let mut messages = Vec::new();
    let mut shape = Shape::default();
    let mut complete_len = 0u64;
    loop {
        let mut line = String::new();
        let read = reader.read_line(&mut line).map_err(|e| match e.kind() {
            io::ErrorKind::InvalidData => damaged(path, "not UTF-8 text".to_string()),
            _ => io_error(path, e),
        })?;
        if read == 0 {
            break;
        }
        if !line.ends_with('\n') {
            // The last line was being written when the process stopped: it never counted.
            cut_to(path, complete_len)?;
            break;
        }
        complete_len += read as u64;
        line.truncate(line.trim_end_matches(['\n', '\r']).len());
        let number = messages.len();
        let raw = serde_json::from_str::<Message>(&line)
            .map_err(|e| e.to_string())
            .and_then(|message| {
                shape.add(&message, number);
                RawValue::from_string(line).map_err(|e| e.to_string())
            })
            .map_err(|e| damaged(path, format!("line {}: {e}", number + 1)))?;
        messages.push(raw);
    }
    Ok((messages, shape))
}

fn cut_to(path: &Path, len: u64) -> Result<(), SessionError> {
    OpenOptions::new()
        .write(true)
        .open(path)
        .and_then(|file| file.set_len(len).and_then(|()| file.sync_all()))
        .map_err(|e| io_error(path, e))
}

fn unwritable(path: &Path, error: &serde_json::Error) -> SessionError {
    SessionError::Unwritable {
        path: path.display().to_string(),
        detail: error.to_string(),
    }
}

fn io_error(path: &Path, source: io::Error) -> SessionError {
    SessionError::Io {
        path: path.display().to_string(),
        source,
    }
}

fn damaged(path: &Path, detail: String) -> SessionError {
    SessionError::Damaged {
        path: path.display().to_string(),
        detail,
    }
}

/// A fresh local session id (`local-` and 16 hex digits), for ports that issue none.
pub fn local_id() -> String {
    let mut bytes = [0u8; 8];
    if getrandom::fill(&mut bytes).is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        bytes = (nanos as u64 ^ u64::from(std::process::id())).to_be_bytes();
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("local-{hex}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_that_cannot_be_written_leaves_file_and_conversation_as_they_were() {
        let dir = tempfile::tempdir().map_err(|e| e.to_string()).unwrap();
        let mut session = Session::create(
            dir.path(),
            SessionIds {
                id: "s1".into(),
                resume_token: None,
            },
            "x",
            &[],
        )
        .unwrap();
        session.append(&Message::user("kept")).unwrap();
        let path = dir.path().join("s1").join(MESSAGES_FILE);
        let before = fs::read(&path).unwrap();
        // Every write of the log now fails as on a full disk.
        session.log = OpenOptions::new().write(true).open("/dev/full").unwrap();
        let error = session
            .append(&Message::user("lost"))
            .unwrap_err()
            .to_string();
        assert!(error.contains("messages.jsonl"), "{error}");
        assert!(error.contains("No space left"), "{error}");
        assert_eq!(session.len(), 1);
        assert_eq!(fs::read(&path).unwrap(), before);
    }
}
