//! One running downstream MCP server: its box (started from a thread that lives as long as
//! the box, since the box dies with the thread that made it), the MCP client session over its
//! pipes (`rmcp`), the tools it lists, and its calls, each within a time limit. An instance
//! that fails in any way (it exits, hangs past a limit, or its pipes break) is marked dead,
//! and the gateway starts a fresh one for the next call.

use std::collections::VecDeque;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ContentBlock,
    Implementation, ProtocolVersion,
};
use rmcp::service::{NotificationContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, RoleClient};
use serde_json::{Map, Value};
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;

use super::Definition;

/// How many lines of a server's standard error are kept for the message of its failure.
const STDERR_LINES: usize = 20;

/// How many bytes of each line of a server's standard error are kept.
const LINE_KEPT: usize = 500;

/// The most pages of `tools/list` read from a server.
const MAX_PAGES: usize = 16;

/// The most tools a server may list; past them the rest are left out (and logged).
pub const MAX_TOOLS: usize = 1000;

/// The largest definition (name, description, schema as canonical JSON) a tool may have;
/// a larger one is left out (and logged).
pub const MAX_DEFINITION_BYTES: usize = 256 * 1024;

/// Hears a server's notifications: a changed tool list marks the tools to be read again.
#[derive(Clone)]
struct Listener {
    changed: Arc<AtomicBool>,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("boxmaker-gateway", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.changed.store(true, Ordering::SeqCst);
    }
}

/// What starting a server needs: its box and its program.
pub struct Launch {
    /// The server's name, for messages.
    pub server: String,
    /// The box.
    pub policy: sandbox::Policy,
    /// The program, its arguments, environment and folder.
    pub spec: sandbox::CommandSpec,
    /// The proxy of its granted hosts, kept open as long as the instance.
    pub proxy: Option<crate::daemon::proxy::BoxProxy>,
    /// How long it may take to start and list its tools.
    pub start: Duration,
}

/// A running server.
pub struct Instance {
    server: String,
    client: RunningService<RoleClient, Listener>,
    changed: Arc<AtomicBool>,
    dead: AtomicBool,
    tools: Mutex<Arc<Vec<Definition>>>,
    /// Held while the tools are read again, so no caller decides on the list being replaced.
    refreshing: tokio::sync::Mutex<()>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    /// Dropped with the instance: the box's thread then drops the box, which kills it (none
    /// for a server reached by URL).
    _stop: Option<std::sync::mpsc::Sender<()>>,
    _proxy: Option<crate::daemon::proxy::BoxProxy>,
}

impl Instance {
    /// Starts the server in its box, opens the MCP session and lists its tools, all within
    /// `launch.start`.
    pub async fn start(launch: Launch) -> Result<Instance, String> {
        let Launch {
            server,
            policy,
            spec,
            proxy,
            start,
        } = launch;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let (pipes_tx, pipes_rx) = tokio::sync::oneshot::channel();
        let name = server.clone();
        std::thread::Builder::new()
            .name(format!("mcp-{server}"))
            .spawn(move || match sandbox::spawn_served(&spec, &policy) {
                Ok(mut served) => {
                    let pipes = (
                        served.stdin.take(),
                        served.stdout.take(),
                        served.stderr.take(),
                    );
                    if pipes_tx.send(Ok(pipes)).is_ok() {
                        // Until the instance is dropped (the sender with it).
                        let _ = stopped.recv();
                    }
                    drop(served);
                }
                Err(error) => {
                    let _ = pipes_tx.send(Err(crate::daemon::sandboxed::box_error(error)));
                }
            })
            .map_err(|e| format!("cannot start a thread for server {name}: {e}"))?;
        let (stdin, stdout, stderr) = match tokio::time::timeout(start, pipes_rx).await {
            Ok(Ok(Ok(pipes))) => pipes,
            Ok(Ok(Err(message))) => return Err(format!("server {server}'s box: {message}")),
            Ok(Err(_)) => return Err(format!("server {server}'s box did not start")),
            Err(_) => {
                return Err(format!(
                    "server {server}'s box did not start within {} ms",
                    start.as_millis()
                ));
            }
        };
        let (Some(stdin), Some(stdout)) = (stdin, stdout) else {
            return Err(format!("server {server}'s box has no pipes"));
        };
        let write = pipe::Sender::from_owned_fd(OwnedFd::from(stdin))
            .map_err(|e| format!("server {server}'s input: {e}"))?;
        let read = pipe::Receiver::from_owned_fd(OwnedFd::from(stdout))
            .map_err(|e| format!("server {server}'s output: {e}"))?;
        let kept = Arc::new(Mutex::new(VecDeque::new()));
        if let Some(stderr) = stderr {
            drain_stderr(&server, stderr, Arc::clone(&kept));
        }
        let held = Held {
            stop: Some(stop),
            proxy,
            stderr: kept,
        };
        Instance::open(server, (read, write), start, held).await
    }

    /// Opens an MCP session with the server at `url` (streamable HTTP, `token` as its bearer
    /// token) and lists its tools, within `start`.
    pub async fn connect(
        server: &str,
        url: &str,
        token: Option<String>,
        start: Duration,
    ) -> Result<Instance, String> {
        // reqwest's TLS needs a process-wide provider: ring, as the rest of the broker uses.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut config = StreamableHttpClientTransportConfig::with_uri(url.to_string());
        if let Some(token) = token {
            config = config.auth_header(token);
        }
        let transport = StreamableHttpClientTransport::from_config(config);
        let held = Held {
            stop: None,
            proxy: None,
            stderr: Arc::default(),
        };
        Instance::open(server.to_string(), transport, start, held).await
    }

    async fn open<T, E, A>(
        server: String,
        transport: T,
        start: Duration,
        held: Held,
    ) -> Result<Instance, String>
    where
        T: rmcp::transport::IntoTransport<RoleClient, E, A> + Send + 'static,
        E: std::error::Error + Send + Sync + 'static,
    {
        let Held {
            stop,
            proxy,
            stderr: kept,
        } = held;
        let changed = Arc::new(AtomicBool::new(false));
        let listener = Listener {
            changed: Arc::clone(&changed),
        };
        let opened = tokio::time::timeout(start, rmcp::serve_client(listener, transport)).await;
        let client = match opened {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => {
                return Err(failure(
                    &server,
                    &format!("did not open an MCP session: {error}"),
                    &kept,
                ));
            }
            Err(_) => {
                return Err(failure(
                    &server,
                    &format!(
                        "did not open an MCP session within {} ms",
                        start.as_millis()
                    ),
                    &kept,
                ));
            }
        };
        let instance = Instance {
            server,
            client,
            changed,
            dead: AtomicBool::new(false),
            tools: Mutex::new(Arc::new(Vec::new())),
            refreshing: tokio::sync::Mutex::new(()),
            stderr: kept,
            _stop: stop,
            _proxy: proxy,
        };
        instance.refresh(start).await?;
        Ok(instance)
    }

    /// Whether the instance has failed and must not be used again.
    pub fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst) || self.client.is_transport_closed()
    }

    /// Its tools, read again first when the server said they changed (a caller meanwhile
    /// waits for the new list).
    pub async fn tools(&self, limit: Duration) -> Result<Arc<Vec<Definition>>, String> {
        let _refreshing = self.refreshing.lock().await;
        if self.changed.swap(false, Ordering::SeqCst)
            && let Err(error) = self.refresh(limit).await
        {
            self.changed.store(true, Ordering::SeqCst);
            return Err(error);
        }
        Ok(Arc::clone(
            &self.tools.lock().unwrap_or_else(PoisonError::into_inner),
        ))
    }

    async fn refresh(&self, limit: Duration) -> Result<(), String> {
        let listed = tokio::time::timeout(limit, self.list()).await;
        let tools = match listed {
            Ok(Ok(tools)) => tools,
            Ok(Err(error)) => return Err(self.fail(&format!("did not list its tools: {error}"))),
            Err(_) => {
                return Err(self.fail(&format!(
                    "did not list its tools within {} ms",
                    limit.as_millis()
                )));
            }
        };
        let definitions = self.definitions(tools);
        *self.tools.lock().unwrap_or_else(PoisonError::into_inner) = Arc::new(definitions);
        Ok(())
    }

    /// The server's tools, page by page, at most [`MAX_PAGES`] pages and [`MAX_TOOLS`] tools.
    async fn list(&self) -> Result<Vec<rmcp::model::Tool>, rmcp::ServiceError> {
        let mut tools = Vec::new();
        let mut cursor = None;
        for _ in 0..MAX_PAGES {
            let params = rmcp::model::PaginatedRequestParams::default().with_cursor(cursor);
            let page = self.client.peer().list_tools(Some(params)).await?;
            tools.extend(page.tools);
            cursor = page.next_cursor;
            if cursor.is_none() || tools.len() >= MAX_TOOLS {
                break;
            }
        }
        if cursor.is_some() || tools.len() > MAX_TOOLS {
            tracing::warn!(server = %self.server, "a downstream server lists more tools than the gateway reads; the rest are left out");
            tools.truncate(MAX_TOOLS);
        }
        Ok(tools)
    }

    /// The definitions of `tools`: one too large, and every tool whose name is listed twice,
    /// left out (a name must mean one definition).
    fn definitions(&self, tools: Vec<rmcp::model::Tool>) -> Vec<Definition> {
        let mut names: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        for tool in &tools {
            *names.entry(tool.name.to_string()).or_default() += 1;
        }
        tools
            .into_iter()
            .filter_map(|tool| {
                if names.get(tool.name.as_ref()).is_some_and(|n| *n > 1) {
                    tracing::warn!(server = %self.server, tool = %tool.name, "a downstream tool listed twice is left out");
                    return None;
                }
                let size = tool.name.len()
                    + tool.description.as_deref().map_or(0, str::len)
                    + serde_json::to_string(&*tool.input_schema).map_or(usize::MAX, |s| s.len())
                    + serde_json::to_string(&tool.annotations).map_or(usize::MAX, |s| s.len());
                if size > MAX_DEFINITION_BYTES {
                    tracing::warn!(server = %self.server, tool = %tool.name, "a downstream tool's definition is too large and is left out");
                    return None;
                }
                let schema = Value::Object((*tool.input_schema).clone());
                let annotations = tool
                    .annotations
                    .as_ref()
                    .and_then(|a| serde_json::to_value(a).ok());
                Some(Definition::new(
                    &tool.name,
                    tool.description.as_deref(),
                    schema,
                    annotations.as_ref(),
                ))
            })
            .collect()
    }

    /// Calls `tool` with `arguments` within `limit`: the result's text and structured
    /// content, and whether the server marked it an error. A server that does not answer in
    /// time, or whose session breaks, is dead afterwards.
    pub async fn call(
        &self,
        tool: &str,
        arguments: Map<String, Value>,
        limit: Duration,
    ) -> Result<Called, String> {
        let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
        let answered = tokio::time::timeout(limit, self.client.peer().call_tool_once(params)).await;
        match answered {
            Ok(Ok(CallToolResponse::Complete(result))) => Ok(Called {
                text: text_of(&result.content),
                structured: result.structured_content,
                is_error: result.is_error.unwrap_or(false),
            }),
            Ok(Ok(CallToolResponse::InputRequired(_))) => Err(format!(
                "server {} asked for input from the client, which the gateway does not pass on",
                self.server
            )),
            Ok(Ok(_)) => Err(format!(
                "server {} answered with a task to poll, or another kind of answer the gateway does not follow",
                self.server
            )),
            Ok(Err(rmcp::ServiceError::McpError(error))) => Err(format!(
                "server {} refused the call: {}",
                self.server, error.message
            )),
            Ok(Err(error)) => Err(self.fail(&format!("failed during the call: {error}"))),
            Err(_) => Err(self.fail(&format!(
                "did not answer within {} ms; it is restarted for the next call",
                limit.as_millis()
            ))),
        }
    }

    /// Marks the instance dead and says why; the end of its standard error (the server's own
    /// words) goes to the owner's log, not into the message, which reaches the model.
    fn fail(&self, what: &str) -> String {
        self.dead.store(true, Ordering::SeqCst);
        let logged = failure(&self.server, what, &self.stderr);
        tracing::warn!(message = %logged, "a downstream server failed");
        format!("server {} {what}", self.server)
    }
}

/// What an instance keeps for its life beside its session: the box's stop signal, the proxy
/// of its hosts, and the end of its standard error.
struct Held {
    stop: Option<std::sync::mpsc::Sender<()>>,
    proxy: Option<crate::daemon::proxy::BoxProxy>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

/// What a call gave.
pub struct Called {
    /// The text of its content blocks (other blocks named by kind).
    pub text: String,
    /// Its structured content.
    pub structured: Option<Value>,
    /// Whether the server marked it an error.
    pub is_error: bool,
}

/// The content blocks as text: each text block whole, other kinds as a line naming them.
fn text_of(content: &[ContentBlock]) -> String {
    let parts: Vec<String> = content
        .iter()
        .map(|block| match block {
            ContentBlock::Text(text) => text.text.clone(),
            ContentBlock::Image(image) => format!("[an image, {}]", image.mime_type),
            ContentBlock::Audio(audio) => format!("[audio, {}]", audio.mime_type),
            ContentBlock::Resource(_) => "[an embedded resource]".to_string(),
            ContentBlock::ResourceLink(link) => format!("[a link to {}]", link.uri),
            _ => "[content of a kind the gateway does not know]".to_string(),
        })
        .collect();
    parts.join("\n")
}

fn failure(server: &str, what: &str, stderr: &Mutex<VecDeque<String>>) -> String {
    let lines = stderr.lock().unwrap_or_else(PoisonError::into_inner);
    if lines.is_empty() {
        format!("server {server} {what}")
    } else {
        let tail: Vec<&str> = lines.iter().map(String::as_str).collect();
        format!(
            "server {server} {what}; its last words on standard error: {}",
            tail.join(" | ")
        )
    }
}

/// Reads the server's standard error to its end: each line to the broker's log, the last
/// [`STDERR_LINES`] kept for messages.
fn drain_stderr(
    server: &str,
    stderr: std::process::ChildStderr,
    kept: Arc<Mutex<VecDeque<String>>>,
) {
    let Ok(receiver) = pipe::Receiver::from_owned_fd(OwnedFd::from(stderr)) else {
        return;
    };
    let server = server.to_string();
    tokio::spawn(async move {
        let mut receiver = receiver;
        let mut chunk = vec![0u8; 8192];
        // The line being read, its first LINE_KEPT bytes only: a server that never writes a
        // newline costs no more memory than that.
        let mut line: Vec<u8> = Vec::new();
        while let Ok(n) = receiver.read(&mut chunk).await {
            if n == 0 {
                break;
            }
            for &byte in chunk.get(..n).unwrap_or_default() {
                if byte != b'\n' {
                    if line.len() < LINE_KEPT {
                        line.push(byte);
                    }
                    continue;
                }
                let text = String::from_utf8_lossy(&line).into_owned();
                line.clear();
                tracing::debug!(server = %server, line = %text, "downstream server's standard error");
                let mut kept = kept.lock().unwrap_or_else(PoisonError::into_inner);
                if kept.len() == STDERR_LINES {
                    kept.pop_front();
                }
                kept.push_back(text);
            }
        }
    });
}
