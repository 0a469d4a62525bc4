//! `loopd chat`: a conversation at the terminal, from standard input, or from a script, against
//! a model server or a script player, through an explicitly chosen port.
//!
//! Everything printed that came from outside (the model's text, tool names and arguments,
//! results, server errors) goes through [`proto::text::escape_terminal`], and the model's text
//! is indented under `assistant> `, so nothing a model or a server sends can act on the
//! terminal or print a line that looks like loopd's own (`printer`).

use std::collections::BTreeMap;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use crate::broker::PortError;
use crate::criteria::{Criteria, CriteriaError};
use crate::llama::{LlamaClient, LlamaConfig, LlamaError, Model};
use crate::script::{Script, ScriptError, ScriptModel};
use crate::session::{Session, SessionError};
use crate::turn::{Limits, Runtime, TurnError, TurnEvent, run_turn};
use crate::verify::{code_message, run_code_turn};

mod children;
mod ports;
mod printer;
mod state;

use printer::Printer;
pub use state::{SESSIONS_DIR, StateFolder};

/// The system prompt of a new session unless one is given.
pub const DEFAULT_SYSTEM_PROMPT: &str = "You are an assistant working on the owner's machine. \
Your tools array has clock, find_tool and call_tool. Every other tool is found with find_tool \
(search by keywords) and called with call_tool (its name and an arguments object). Each call is \
decided by the owner's grants; when one is denied, say so and do not retry it unchanged.";

/// The demo script, bundled so `loopd demo` needs no file.
pub const DEMO_SCRIPT: &str = include_str!("../../scripts/demo.json");

/// Where the model's answers come from.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    /// An OpenAI-compatible server at this base URL.
    Server(String),
    /// A script file, played in process.
    ScriptFile(PathBuf),
    /// The bundled demo script.
    Demo,
}

impl ModelSource {
    /// Reads `--model`: `script:FILE` or a URL.
    pub fn parse(text: &str) -> Result<ModelSource, String> {
        if let Some(path) = text.strip_prefix("script:") {
            if path.is_empty() {
                return Err("--model script: needs a file, as in script:demo.json".to_string());
            }
            return Ok(ModelSource::ScriptFile(PathBuf::from(path)));
        }
        if text.starts_with("http://") || text.starts_with("https://") {
            return Ok(ModelSource::Server(text.to_string()));
        }
        Err(format!(
            "--model {text:?} is neither an http(s) URL nor script:FILE"
        ))
    }
}

/// Which port tool calls go through. There is no default: a missing port is an error, never a
/// silent fallback.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortKind {
    /// [`crate::tools::FakeTools`]: `echo` answers, everything else is denied.
    Fake,
    /// [`crate::broker::BrokerPort`] over brokerd's agent socket at this path.
    Broker {
        /// The agent socket.
        socket: PathBuf,
    },
}

impl PortKind {
    /// Reads `--port` (`fake` or `broker`) and `--socket` (only with `broker`; else
    /// `default_socket`, the runtime folder's `agent.sock`).
    pub fn parse(
        text: &str,
        socket: Option<PathBuf>,
        default_socket: impl FnOnce() -> Result<PathBuf, String>,
    ) -> Result<PortKind, String> {
        match (text, socket) {
            ("fake", None) => Ok(PortKind::Fake),
            ("fake", Some(_)) => Err(
                "--socket names the broker's agent socket: it goes with --port broker, not --port fake"
                    .to_string(),
            ),
            ("broker", Some(socket)) => Ok(PortKind::Broker { socket }),
            ("broker", None) => Ok(PortKind::Broker {
                socket: default_socket()?,
            }),
            (other, _) => Err(format!(
                "--port {other:?} is not a port; use \"broker\" (brokerd's agent socket) or \"fake\" (echo answers, everything else is denied)"
            )),
        }
    }
}

/// Everything `loopd chat` is told.
#[derive(Debug, Clone)]
pub struct ChatOptions {
    /// The model.
    pub model: ModelSource,
    /// The HTTP client's settings (the base URL is taken from `model`).
    pub llama: LlamaConfig,
    /// The port.
    pub port: PortKind,
    /// Messages given on the command line; when empty, the script's or standard input's.
    pub messages: Vec<String>,
    /// boxmaker's state folder; conversations are kept in its `sessions/`.
    pub state: StateFolder,
    /// A session to continue.
    pub session: Option<String>,
    /// Placeholder values for scripts (`workspace` and `home` have defaults).
    pub vars: BTreeMap<String, String>,
    /// The system prompt of a new session.
    pub system_prompt: String,
    /// Print events as JSON lines instead of text.
    pub json: bool,
    /// The turn limits.
    pub limits: Limits,
    /// Code mode: the owner's criteria (`--criteria FILE`), which replace those the session
    /// kept. `None`: the session's own, if it keeps any (then code mode goes on), else none.
    pub criteria: Option<Criteria>,
}

/// Why `loopd chat` could not start or go on.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    /// The script could not be loaded.
    #[error(transparent)]
    Script(#[from] ScriptError),
    /// The session could not be created or opened.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// The state folder cannot be used.
    #[error("{0}")]
    State(String),
    /// The port cannot serve the conversation (no broker running: exit status 3).
    #[error(transparent)]
    Port(#[from] PortError),
    /// `--session` names a conversation the port cannot continue.
    #[error("{0}")]
    Resume(String),
    /// The session's criteria cannot be read or kept.
    #[error(transparent)]
    Criteria(#[from] CriteriaError),
    /// Writing the output or reading the input failed.
    #[error("terminal: {0}")]
    Io(#[from] io::Error),
}

/// How a chat ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChatSummary {
    /// The session's id.
    pub session: String,
    /// The session's folder.
    pub dir: PathBuf,
    /// Whether that folder has been removed: it was temporary (`loopd demo`), or the session
    /// was new and no turn of it reached the model server (`reached`).
    pub removed: bool,
    /// Whether a turn reached the model server: it answered, or failed in any way but
    /// [`LlamaError::Unreachable`] before anything came.
    pub reached: bool,
    /// Turns that ended with an answer.
    pub done: usize,
    /// Turns that failed.
    pub failed: usize,
}

/// Runs the chat: each message is a turn; `input` is read only when neither `messages` nor the
/// script gives any (with a prompt when `interactive`). The turns are printed to `out`;
/// `notices` gets what the owner should know that is no part of a turn (a message the broker
/// did not keep as the owner's words), one line each.
pub fn run_chat(
    options: &ChatOptions,
    input: &mut dyn BufRead,
    interactive: bool,
    out: &mut dyn Write,
    notices: &mut dyn Write,
) -> Result<ChatSummary, ChatError> {
    let folder = options.state.open()?;
    let chat = chat_in(
        options,
        folder.sessions(),
        input,
        interactive,
        Outputs { out, notices },
        folder.is_temporary(),
    );
    // A temporary folder goes whatever happened in it.
    let removed = folder.remove();
    let summary = chat?;
    removed?;
    Ok(summary)
}

/// Where a chat writes: its turns, and the notices beside them (see [`run_chat`]).
struct Outputs<'a> {
    out: &'a mut dyn Write,
    notices: &'a mut dyn Write,
}

/// The chat itself, with its sessions in `sessions`.
fn chat_in(
    options: &ChatOptions,
    sessions: &Path,
    input: &mut dyn BufRead,
    interactive: bool,
    outputs: Outputs<'_>,
    temporary: bool,
) -> Result<ChatSummary, ChatError> {
    let Outputs { out, notices } = outputs;
    let vars = placeholder_values(&options.vars);
    let (model, script_messages): (Box<dyn Model>, Vec<String>) = match &options.model {
        ModelSource::Server(url) => {
            let config = LlamaConfig {
                base_url: url.clone(),
                ..options.llama.clone()
            };
            (Box::new(LlamaClient::new(config)), Vec::new())
        }
        ModelSource::ScriptFile(path) => {
            let script = Script::load(path, &vars)?;
            let users = script.user_messages();
            let name = path.display().to_string();
            (Box::new(ScriptModel::new(script, &name)), users)
        }
        ModelSource::Demo => {
            let script =
                Script::parse(DEMO_SCRIPT, &vars).map_err(|detail| ScriptError::Invalid {
                    path: "demo".to_string(),
                    detail,
                })?;
            let users = script.user_messages();
            (Box::new(ScriptModel::new(script, "demo")), users)
        }
    };
    let (mut session, port) = ports::open(sessions, options)?;
    let mut criteria = match &options.criteria {
        Some(criteria) => {
            criteria.save(session.dir())?;
            Some(criteria.clone())
        }
        None => Criteria::load(session.dir())?,
    };
    let registry = port.registry();
    // Through the broker, the child sessions the model's `delegate` calls open are run here.
    let children = match &options.port {
        PortKind::Broker { socket } => Some(children::BrokerChildren {
            socket: socket.clone(),
            sessions: sessions.to_path_buf(),
        }),
        PortKind::Fake => None,
    };
    let rt = Runtime {
        model: model.as_ref(),
        port: port.tool_port(),
        registry: &registry,
        limits: options.limits.clone(),
        children: children
            .as_ref()
            .map(|host| host as &dyn crate::turn::Children),
    };
    let mut summary = ChatSummary {
        session: session.ids().id.clone(),
        dir: session.dir().to_path_buf(),
        removed: temporary,
        reached: false,
        done: 0,
        failed: 0,
    };
    let given = if options.messages.is_empty() {
        script_messages
    } else {
        options.messages.clone()
    };
    let mut printer = Printer::new(out, options.json);
    if given.is_empty() {
        loop {
            if interactive {
                printer.prompt()?;
            }
            let mut line = String::new();
            if input.read_line(&mut line)? == 0 {
                break;
            }
            let text = line.trim_end_matches(['\n', '\r']);
            if text.trim().is_empty() {
                continue;
            }
            let turn = Turn {
                text,
                criteria: criteria.as_mut(),
                echo_user: !interactive,
            };
            one_turn(
                &rt,
                &port,
                &mut session,
                turn,
                &mut printer,
                &mut summary,
                notices,
            )?;
            port.check()?;
        }
    } else {
        for text in &given {
            let turn = Turn {
                text,
                criteria: criteria.as_mut(),
                echo_user: true,
            };
            one_turn(
                &rt,
                &port,
                &mut session,
                turn,
                &mut printer,
                &mut summary,
                notices,
            )?;
            port.check()?;
        }
    }
    // A new conversation whose every turn found no model server keeps nothing: there is
    // nothing in it to continue, and a folder per failed attempt would pile up.
    if options.session.is_none() && !temporary && summary.failed > 0 && !summary.reached {
        let dir = session.dir().to_path_buf();
        drop(session);
        std::fs::remove_dir_all(&dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot remove {}: {e}", dir.display()))
        })?;
        summary.removed = true;
    }
    printer.end(&summary)?;
    Ok(summary)
}

/// One message of the owner's and how to run it.
struct Turn<'t> {
    /// The owner's text.
    text: &'t str,
    /// Code mode's criteria, when the conversation has them.
    criteria: Option<&'t mut Criteria>,
    /// Whether to print the text (it was not typed at the terminal).
    echo_user: bool,
}

/// Runs one turn (a code-mode turn when the conversation has criteria), after giving the
/// broker the owner's words: the message as the model reads it, criteria included.
fn one_turn(
    rt: &Runtime<'_>,
    port: &ports::Port,
    session: &mut Session,
    turn: Turn<'_>,
    printer: &mut Printer<'_>,
    summary: &mut ChatSummary,
    notices: &mut dyn Write,
) -> Result<(), ChatError> {
    let message = match &turn.criteria {
        Some(criteria) => code_message(turn.text, criteria),
        None => turn.text.to_string(),
    };
    if let Some(notice) = port.owner_words(&message) {
        writeln!(notices, "{notice}")?;
    }
    if turn.echo_user {
        printer.user(turn.text)?;
    }
    let mut failure: Option<io::Error> = None;
    let mut answered = false;
    let mut unsent: Vec<String> = Vec::new();
    let mut on_event = |event: &TurnEvent| {
        answered |= !matches!(event, TurnEvent::TurnFailed { .. });
        unsent.extend(port.agent_event(event));
        if failure.is_none()
            && let Err(e) = printer.event(event)
        {
            failure = Some(e);
        }
    };
    let result = match turn.criteria {
        Some(criteria) => run_code_turn(rt, session, criteria, &message, &mut on_event),
        None => run_turn(rt, session, &message, &mut on_event),
    };
    if let Some(e) = failure {
        return Err(ChatError::Io(e));
    }
    for notice in unsent {
        writeln!(notices, "{notice}")?;
    }
    let unreachable = matches!(
        result,
        Err(TurnError::Model(LlamaError::Unreachable { .. }))
    );
    summary.reached |= answered || !unreachable;
    match result {
        Ok(_) => summary.done += 1,
        Err(_) => summary.failed += 1,
    }
    Ok(())
}

/// `workspace` (the current folder) and `home`, overridden by `given`.
fn placeholder_values(given: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    let mut values = BTreeMap::new();
    if let Ok(dir) = std::env::current_dir() {
        values.insert("workspace".to_string(), dir.display().to_string());
    }
    if let Some(home) = std::env::var_os("HOME") {
        values.insert(
            "home".to_string(),
            PathBuf::from(home).display().to_string(),
        );
    }
    values.extend(given.iter().map(|(k, v)| (k.clone(), v.clone())));
    values
}
