//! [`Gate`]: the MCP handler. `tools/list` offers loopd's core tools or the broker's whole
//! catalog; `tools/call` goes through [`toolport::dispatch`], loopd's too (so `find_tool`,
//! `call_tool` and `clock` answer as they answer loopd's model) and every other call to the
//! broker over the agent socket, where it is decided, run and audited.
//!
//! The broker session is opened at the first request that needs it ([`Connect`]), named after
//! the client and the workspace unless the owner named one; calls wait on the broker in a
//! blocking thread each, and a call that waits for the owner sends the client a progress
//! notification (when the client gave a progress token) at once and then every
//! [`Gate::with_progress_every`] (10 s by default) until it is answered, so a client that
//! resets its timeout on progress keeps waiting. [`Gate::withdraw_waiting`] withdraws what
//! waits when the client is gone.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, MetaObject, PaginatedRequestParams, ServerCapabilities,
    ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{Value, json};
use tokio::sync::OnceCell;

use toolport::{CALL_TOOL, CLOCK, Dispatch, FIND_TOOL, Pending, Registry, ToolPort};

use crate::ask::{APPROVAL_INPUT, AskBy, Question, ask_in_client, asks_by, request_state, send};
use crate::names::Names;
use crate::progress::{PROGRESS_EVERY, tell_progress};
use proto::{ToolRequest, ToolResponse, ToolSchema};

/// Which tools `tools/list` offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Catalog {
    /// `clock`, `find_tool`, `call_tool`: loopd's tools array, byte for byte.
    Core,
    /// The core, then every tool a live grant could cover (the broker's `list_tools`).
    All,
}

/// A broker session opened for a client.
pub struct Connected {
    /// Where its calls go.
    pub port: Arc<dyn ToolPort>,
    /// Its id, as each call names it.
    pub session: String,
}

/// Opens the broker session the gate's calls go to; `client` is the MCP client's name.
pub trait Connect: Send + Sync + 'static {
    /// The session, or a sentence saying why there is none.
    fn connect(&self, client: &str) -> Result<Connected, String>;
}

/// The name used for a client that gives none.
pub const UNNAMED_CLIENT: &str = "mcp-client";

/// The `_meta` key holding a result's confidentiality class.
pub const META_CLASS: &str = "boxmaker/class";
/// The `_meta` key saying whether a result came from outside the owner's control.
pub const META_UNTRUSTED: &str = "boxmaker/untrusted";
/// The `_meta` key naming why the broker refused a call.
pub const META_DENIED: &str = "boxmaker/denied";

/// The MCP server's handler. Its clones (one per HTTP session) share one broker session.
#[derive(Clone)]
pub struct Gate {
    catalog: Catalog,
    registry: Registry,
    connect: Arc<dyn Connect>,
    connected: Arc<OnceCell<Connected>>,
    last_call: Arc<AtomicU64>,
    /// The calls put to the client with `InputRequired` (2026-07-28), by their `requestState`.
    asked: Arc<Mutex<HashMap<String, Asked>>>,
    /// How often a call waiting for the owner tells the client so.
    progress_every: std::time::Duration,
    /// How many calls the broker said wait for the owner and have not been answered yet.
    waiting_now: Arc<AtomicUsize>,
    /// The catalog's names as MCP clients see them, as of the last listing.
    names: Arc<Mutex<Names>>,
}

/// A call waiting for the owner that was put to the client with `InputRequired`: its answer
/// arrives on the blocking thread, and the client's retry takes it.
struct Asked {
    answered: tokio::task::JoinHandle<ToolResponse>,
    port: Arc<dyn ToolPort>,
    question: Question,
    since: std::time::Instant,
}

/// How long after a call was put to the client its finished answer is kept for a retry that
/// has not come (dropped at the next question after that).
const KEEP_UNCLAIMED: std::time::Duration = std::time::Duration::from_secs(600);

impl Gate {
    /// A gate offering `catalog`, its broker session opened through `connect`.
    pub fn new(catalog: Catalog, connect: Arc<dyn Connect>) -> Gate {
        Gate {
            catalog,
            registry: Registry::m3a(),
            connect,
            connected: Arc::new(OnceCell::new()),
            last_call: Arc::new(AtomicU64::new(0)),
            asked: Arc::new(Mutex::new(HashMap::new())),
            progress_every: PROGRESS_EVERY,
            waiting_now: Arc::new(AtomicUsize::new(0)),
            names: Arc::new(Mutex::new(Names::default())),
        }
    }

    /// The gate sending a waiting call's progress every `every` (at least 10 ms).
    #[must_use]
    pub fn with_progress_every(mut self, every: std::time::Duration) -> Gate {
        self.progress_every = every.max(std::time::Duration::from_millis(10));
        self
    }

    /// Withdraws the call waiting for the owner, if one is (its client is gone): the broker
    /// abandons it (recorded; it never runs). Returns once its answer came back, or after
    /// `patience`.
    pub async fn withdraw_waiting(&self, patience: std::time::Duration) {
        let Some(connected) = self.connected.get() else {
            return;
        };
        if self.waiting_now.load(Ordering::SeqCst) == 0 {
            return;
        }
        let port = connected.port.clone();
        let sent = tokio::task::spawn_blocking(move || port.withdraw()).await;
        tracing::info!(
            withdrawn = matches!(sent, Ok(true)),
            "the client is gone: withdrew the call waiting for the owner"
        );
        let deadline = tokio::time::Instant::now() + patience;
        while self.waiting_now.load(Ordering::SeqCst) > 0 && tokio::time::Instant::now() < deadline
        {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    }

    /// The broker session, opened at the first request that needs it.
    async fn connected(&self, client: String) -> Result<&Connected, String> {
        self.connected
            .get_or_try_init(|| async {
                let connect = self.connect.clone();
                tokio::task::spawn_blocking(move || connect.connect(&client))
                    .await
                    .map_err(|e| format!("opening the broker session failed: {e}"))?
            })
            .await
    }

    /// A call number never used before in the session, also by an earlier run of this
    /// server resuming it: nanoseconds since the epoch, or one more than the last.
    fn next_call_id(&self) -> u64 {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let mut last = self.last_call.load(Ordering::Relaxed);
        loop {
            let next = now.max(last.saturating_add(1));
            match self.last_call.compare_exchange_weak(
                last,
                next,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return next,
                Err(seen) => last = seen,
            }
        }
    }

    /// The registry with the broker's catalog as it is now.
    async fn live_registry(&self, port: Arc<dyn ToolPort>) -> Result<Registry, String> {
        let catalog = tokio::task::spawn_blocking(move || port.catalog())
            .await
            .map_err(|e| format!("reading the broker's tools failed: {e}"))?;
        match catalog {
            Some(Ok(tools)) => {
                let registry = self.registry.with_catalog(tools);
                let names = Names::of(registry.entries().iter().map(|e| e.schema.name.as_str()));
                *self.names.lock().unwrap_or_else(PoisonError::into_inner) = names;
                Ok(registry)
            }
            Some(Err(why)) => Err(why),
            None => Ok(self.registry.clone()),
        }
    }

    /// The owner's spelling of the tool a client called `name` (see [`Names`]): `name` itself
    /// unless the catalog spells a tool that way for MCP clients; an unknown name refreshes the
    /// catalog first.
    async fn owners_spelling(&self, name: &str, port: Arc<dyn ToolPort>) -> Result<String, String> {
        if self.registry.get(name).is_some() || name.contains('.') {
            return Ok(name.to_string());
        }
        let known = |gate: &Gate| {
            gate.names
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .owners(name)
                .map(str::to_string)
        };
        if let Some(owners) = known(self) {
            return Ok(owners);
        }
        self.live_registry(port).await?;
        Ok(known(self).unwrap_or_else(|| name.to_string()))
    }

    /// `call_tool`'s `arguments` with the tool's name in the owner's spelling, when it was
    /// given as the listing spells it.
    fn with_owners_name(&self, arguments: String) -> String {
        let Ok(Value::Object(mut object)) = serde_json::from_str::<Value>(&arguments) else {
            return arguments;
        };
        let owners = object
            .get("name")
            .and_then(Value::as_str)
            .and_then(|listed| {
                self.names
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .owners(listed)
                    .map(str::to_string)
            });
        match owners {
            Some(owners) => {
                object.insert("name".to_string(), Value::String(owners));
                Value::Object(object).to_string()
            }
            None => arguments,
        }
    }

    async fn call(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(state) = &request.request_state {
            return self
                .resume_asked(state, request.input_responses.as_ref())
                .await;
        }
        Ok(self.call_once(request, context).await)
    }

    /// The client's retry of a call put to it with `InputRequired`: its answer goes to the
    /// broker, and the call's final answer comes back. A `requestState` this server did not
    /// issue (or whose call has ended) is an error.
    async fn resume_asked(
        &self,
        state: &str,
        responses: Option<&rmcp::model::InputResponses>,
    ) -> Result<CallToolResponse, ErrorData> {
        let asked = self
            .asked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(state);
        let Some(Asked {
            answered,
            port,
            question,
            ..
        }) = asked
        else {
            return Err(ErrorData::invalid_params(
                "requestState is not one this server issued, or its call has ended",
                None,
            ));
        };
        let reply = responses
            .and_then(|r| r.get(APPROVAL_INPUT))
            .and_then(|r| question.reply(r));
        if let Some(reply) = reply {
            let sent = tokio::task::spawn_blocking(move || send(port.as_ref(), &reply)).await;
            tracing::info!(
                sent = matches!(sent, Ok(true)),
                "the client answered a waiting call (InputRequired)"
            );
        }
        Ok(match answered.await {
            Ok(response) => result_of(response),
            Err(e) => failed(&format!("the call to the broker failed: {e}")),
        }
        .into())
    }

    async fn call_once(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> CallToolResponse {
        let name = request.name.to_string();
        let arguments = Value::Object(request.arguments.unwrap_or_default()).to_string();
        if name == CLOCK {
            return match toolport::dispatch(&self.registry, &name, &arguments) {
                Dispatch::Local(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
                Dispatch::Port { .. } => failed("clock is answered locally"),
            }
            .into();
        }
        let client = client_name(&context);
        let connected = match self.connected(client).await {
            Ok(connected) => connected,
            Err(why) => return failed(&why).into(),
        };
        let name = match self.owners_spelling(&name, connected.port.clone()).await {
            Ok(name) => name,
            Err(why) => return failed(&format!("cannot read the broker's tools: {why}")).into(),
        };
        let registry = if name == FIND_TOOL || name == CALL_TOOL {
            match self.live_registry(connected.port.clone()).await {
                Ok(registry) => registry,
                Err(why) => {
                    return failed(&format!("cannot read the broker's tools: {why}")).into();
                }
            }
        } else {
            self.registry.clone()
        };
        // `call_tool` may name a tool as the listing spells it (the catalog was just read).
        let arguments = if name == CALL_TOOL {
            self.with_owners_name(arguments)
        } else {
            arguments
        };
        let (tool, arguments) = match toolport::dispatch(&registry, &name, &arguments) {
            Dispatch::Local(text) => {
                return CallToolResult::success(vec![ContentBlock::text(text)]).into();
            }
            Dispatch::Port { tool, arguments } => (tool, arguments),
        };
        let request = ToolRequest {
            session: connected.session.clone(),
            call_id: self.next_call_id(),
            tool,
            arguments,
        };
        let port = connected.port.clone();
        let progress = context.meta.get_progress_token();
        let peer = context.peer.clone();
        let runtime = tokio::runtime::Handle::current();
        let waiting = Arc::new(AtomicBool::new(false));
        let waits = waiting.clone();
        let asking_by = asks_by(&context);
        let can_elicit = asking_by == Some(AskBy::Elicitation);
        let by_input = asking_by == Some(AskBy::InputRequired);
        let answerable = Arc::new(tokio::sync::Notify::new());
        let tell_answerable = answerable.clone();
        let question = Question::of(&request.tool, &request.arguments);
        let asked_about = question.clone();
        let every = self.progress_every;
        let waiting_now = self.waiting_now.clone();
        let mut answered = tokio::task::spawn_blocking(move || {
            let mut asking: Option<tokio::task::JoinHandle<()>> = None;
            let mut telling: Option<tokio::task::JoinHandle<()>> = None;
            let mut on_pending = |pending: &Pending| {
                if !waits.swap(true, Ordering::SeqCst) {
                    waiting_now.fetch_add(1, Ordering::SeqCst);
                }
                if pending.answerable && by_input {
                    tell_answerable.notify_one();
                }
                if pending.answerable && can_elicit && asking.is_none() {
                    asking = Some(runtime.spawn(ask_in_client(
                        peer.clone(),
                        port.clone(),
                        pending.approval,
                        asked_about.clone(),
                    )));
                }
                if let (Some(token), None) = (&progress, &telling) {
                    let message = format!(
                        "waiting for the owner: approval {} (`bx approve {}` or `bx refuse {}`), until {}",
                        pending.approval,
                        pending.approval,
                        pending.approval,
                        pending.expires.to_rfc3339()
                    );
                    telling = Some(runtime.spawn(tell_progress(
                        peer.clone(),
                        token.clone(),
                        message,
                        every,
                    )));
                }
            };
            let response = port.call(&request, &mut on_pending);
            // Answered (in the client, in `bx`, or not at all): the client's question is moot.
            for task in [asking, telling].into_iter().flatten() {
                task.abort();
            }
            if waits.load(Ordering::SeqCst) {
                waiting_now.fetch_sub(1, Ordering::SeqCst);
            }
            response
        });
        // A client that cancels a call waiting for the owner withdraws it: the broker
        // abandons its approval (recorded) and answers without running it. A call already
        // running is not stopped; its answer is dropped by the SDK.
        let answered = tokio::select! {
            answered = &mut answered => answered,
            // 2026-07-28: the question goes back to the client as `InputRequired`; its retry
            // (with this `requestState`) brings the answer and takes the call's result.
            Some(state) = async { answerable.notified().await; request_state() }, if by_input => {
                let input = rmcp::model::InputRequest::Elicitation(rmcp::model::ElicitRequest::new(
                    question.params(),
                ));
                let mut requests = rmcp::model::InputRequests::new();
                requests.insert(APPROVAL_INPUT.to_string(), input);
                let mut asked = self.asked.lock().unwrap_or_else(PoisonError::into_inner);
                // Answers no retry came for, long enough ago, are dropped.
                asked.retain(|_, a| {
                    !(a.answered.is_finished() && a.since.elapsed() > KEEP_UNCLAIMED)
                });
                asked.insert(
                    state.clone(),
                    Asked {
                        answered,
                        port: connected.port.clone(),
                        question,
                        since: std::time::Instant::now(),
                    },
                );
                drop(asked);
                return rmcp::model::InputRequiredResult::new(Some(requests), Some(state)).into();
            }
            () = context.ct.cancelled() => loop {
                // Cancelled before the broker said the call waits: it may yet.
                if waiting.load(Ordering::SeqCst) {
                    let port = connected.port.clone();
                    let sent = tokio::task::spawn_blocking(move || port.withdraw()).await;
                    tracing::info!(
                        withdrawn = matches!(sent, Ok(true)),
                        "the client cancelled a call waiting for the owner"
                    );
                    break answered.await;
                }
                tokio::select! {
                    done = &mut answered => break done,
                    () = tokio::time::sleep(std::time::Duration::from_millis(20)) => {}
                }
            },
        };
        match answered {
            Ok(response) => result_of(response),
            Err(e) => failed(&format!("the call to the broker failed: {e}")),
        }
        .into()
    }
}

/// The client's name from the request (or its `initialize`), else [`UNNAMED_CLIENT`].
fn client_name(context: &RequestContext<RoleServer>) -> String {
    context
        .client_info()
        .map(|info| info.name)
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| UNNAMED_CLIENT.to_string())
}

/// An error result whose text is `why`.
fn failed(why: &str) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(why.to_string())])
}

/// The MCP result of the broker's answer: its text as the model would see it, the header's
/// fields and the body as structured content, and the labels in `_meta`.
pub fn result_of(response: ToolResponse) -> CallToolResult {
    match response {
        ToolResponse::Result {
            content,
            class,
            untrusted,
            truncated,
        } => {
            let (header, body) = match content.split_once('\n') {
                Some((first, rest)) => match serde_json::from_str::<Value>(first) {
                    Ok(header @ Value::Object(_)) => (header, rest.to_string()),
                    _ => (Value::Null, content.clone()),
                },
                None => (Value::Null, content.clone()),
            };
            let mut result = CallToolResult::success(vec![ContentBlock::text(content)]);
            result.structured_content = Some(json!({
                "header": header,
                "body": body,
                "class": class,
                "untrusted": untrusted,
                "truncated": truncated,
            }));
            result.meta = Some(meta(&[
                (META_CLASS, json!(class)),
                (META_UNTRUSTED, json!(untrusted)),
            ]));
            result
        }
        ToolResponse::Denied { reason } => {
            let mut result = failed(toolport::denial_text(reason));
            result.meta = Some(meta(&[(META_DENIED, json!(reason))]));
            result
        }
        ToolResponse::Failed { message } => failed(&message),
        ToolResponse::PendingApproval { approval, .. } => failed(&format!(
            "the call still waits for the owner (approval {approval})"
        )),
    }
}

fn meta(fields: &[(&str, Value)]) -> MetaObject {
    let mut object = JsonObject::new();
    for (key, value) in fields {
        object.insert((*key).to_string(), value.clone());
    }
    MetaObject(object)
}

/// The MCP tool of one of loopd's or the broker's schemas, with its annotations.
pub fn tool_of(schema: &ToolSchema) -> Tool {
    let input = match &schema.parameters {
        Value::Object(object) => object.clone(),
        _ => {
            let mut object = JsonObject::new();
            object.insert("type".to_string(), json!("object"));
            object
        }
    };
    let mut tool = Tool::new(schema.name.clone(), schema.description.clone(), input);
    tool.annotations = crate::annotations::annotations(&schema.name);
    tool
}

impl ServerHandler for Gate {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("boxmaker", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Every call goes through boxmaker's broker: the owner's grants decide, some calls wait for the owner's approval, and results name their class and whether they are untrusted. Use find_tool to discover tools and call_tool to call them.",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schemas = match self.catalog {
            Catalog::Core => self.registry.core_schemas(),
            Catalog::All => {
                let connected = self
                    .connected(client_name(&context))
                    .await
                    .map_err(|why| ErrorData::internal_error(why, None))?;
                let registry = self
                    .live_registry(connected.port.clone())
                    .await
                    .map_err(|why| ErrorData::internal_error(why, None))?;
                let mut schemas = registry.core_schemas();
                schemas.extend(
                    registry
                        .entries()
                        .iter()
                        .filter(|e| !e.core)
                        .map(|e| e.schema.clone()),
                );
                schemas
            }
        };
        let names = self
            .names
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        Ok(ListToolsResult::with_all_items(
            schemas
                .iter()
                .map(|schema| {
                    let mut tool = tool_of(schema);
                    let listed = names.listed(&schema.name);
                    if listed != schema.name {
                        // The owner's spelling, as grants and `bx approvals` show it.
                        tool.title = Some(schema.name.clone());
                        tool.name = listed.to_string().into();
                    }
                    tool
                })
                .collect(),
        ))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        self.call(request, context).await
    }
}
