//! The gateway to third-party MCP servers ("downstream" servers, `brokerd.toml`'s
//! `[[mcp.servers]]`). Each server is started on demand, in a box whose folders and hosts come
//! from its server grant (`[[grant]] server = "…"`), one instance per broker session (or one
//! for all with `shared = true`); its tools join the session's catalog as `server.tool` while
//! a grant pins their current definition, and each call is decided, audited and labelled as
//! the broker's own tools are (`calls::downstream`).
//!
//! A server that runs elsewhere (`url`) is reached over streamable HTTP instead, with no box:
//! its grants still decide, label and audit every call, but what it touches is its own.
//!
//! - `definition.rs`: a tool as a server lists it, its pin and its compiled schema;
//!   `seen.rs`: the definitions kept for the owner and what `bx grants check` is shown.
//! - `instance.rs`: one running server: its box (or its URL), its MCP session, its tools, its
//!   calls.

mod definition;
mod instance;
mod seen;

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use policy::downstream::{Downstream, visible};
use proto::{Class, SessionId, Timestamp, ToolSchema};
use serde_json::{Map, Value};

use super::config::DownstreamConfig;
use super::runner::{Outcome, Runner};
use policy::decide::Protected;

pub use definition::{Definition, Unfit};
pub use instance::Called;
use instance::{Instance, Launch};

/// Which instance of a server a call uses.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Owner {
    /// The session's own.
    Session(SessionId),
    /// The one every session shares.
    Shared,
    /// The one the owner's `bx grants check` lists the tools of.
    Probe,
}

/// A running instance, the box world it was started with, and when it was last used.
struct Running {
    instance: Arc<Instance>,
    world: World,
    used: Instant,
}

/// What a server's box sees: its read-write folders and the hosts it may reach.
#[derive(Clone, PartialEq, Eq)]
struct World {
    paths: Vec<PathBuf>,
    hosts: Vec<String>,
}

struct Server {
    config: DownstreamConfig,
    /// `config.read_only` with `~/` expanded.
    read_only: Vec<PathBuf>,
    /// `config.token_file` with `~/` expanded.
    token_file: Option<PathBuf>,
    instances: tokio::sync::Mutex<HashMap<Owner, Running>>,
    /// For a server every session reaches (shared, or reached by URL): what it has received.
    received: Mutex<Received>,
}

/// What a server several sessions reach has received: the highest class and whether any of it
/// was untrusted; its results carry both.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Received {
    /// The highest class.
    pub class: Class,
    /// Whether any of it was untrusted.
    pub untrusted: bool,
}

/// Every downstream server of `brokerd.toml`.
#[derive(Default)]
pub struct Gateway {
    servers: BTreeMap<String, Server>,
    /// Where every definition seen is kept by its hash (`<hash>.json`), so the owner can see
    /// what a pinned tool was before it changed.
    seen: Option<PathBuf>,
    /// The hashes this broker knows to be kept there.
    kept: Mutex<std::collections::HashSet<String>>,
}

/// What a downstream call is run with.
pub struct DownstreamCall<'a> {
    /// The session.
    pub session: &'a SessionId,
    /// The session's taint when the call was decided.
    pub taint: Class,
    /// Whether the session had received untrusted content, or the grants mark the result so.
    pub untrusted: bool,
    /// The class the grants give the call's result.
    pub class: Class,
    /// The tool on its server.
    pub tool: &'a str,
    /// The hash of the tool's definition the decision was made on: the call runs only on an
    /// instance that lists this definition now.
    pub hash: &'a str,
    /// Its arguments, checked against its schema.
    pub arguments: Map<String, Value>,
}

impl Gateway {
    /// The gateway of `servers`, `~/` in their folders meaning `home`.
    pub fn new(servers: &[DownstreamConfig], home: &Path) -> Gateway {
        let servers = servers
            .iter()
            .map(|config| {
                let read_only = config
                    .read_only
                    .iter()
                    .map(|p| super::config::expand_home(p, home))
                    .collect();
                let token_file = config
                    .token_file
                    .as_ref()
                    .map(|f| super::config::expand_home(f, home));
                let server = Server {
                    config: config.clone(),
                    read_only,
                    token_file,
                    instances: tokio::sync::Mutex::new(HashMap::new()),
                    received: Mutex::new(Received::default()),
                };
                (config.name.clone(), server)
            })
            .collect();
        Gateway {
            servers,
            seen: None,
            kept: Mutex::default(),
        }
    }

    /// The same gateway, keeping the definitions it sees in `folder` (in the state folder).
    pub fn keeping_definitions_in(mut self, folder: PathBuf) -> Gateway {
        self.seen = Some(folder);
        self
    }

    /// The names of the servers, in order.
    pub fn names(&self) -> Vec<&str> {
        self.servers.keys().map(String::as_str).collect()
    }

    /// Whether `server` is one of them.
    pub fn has(&self, server: &str) -> bool {
        self.servers.contains_key(server)
    }

    /// The time limit of one call of `server`.
    pub fn call_limit(&self, server: &str) -> Duration {
        self.servers
            .get(server)
            .map_or(Duration::from_secs(30), |s| {
                Duration::from_millis(s.config.call_ms)
            })
    }

    /// The tools `server` lists now, for `session` (started if it is not running).
    pub async fn tools(
        &self,
        runner: &dyn Runner,
        protected: &Protected,
        server: &str,
        session: &SessionId,
        grants: &Downstream,
    ) -> Result<Arc<Vec<Definition>>, String> {
        let owner = match self.servers.get(server) {
            Some(config) => owner(config, session),
            None => return Err(format!("there is no downstream server {server}")),
        };
        self.tools_of(runner, protected, server, owner, grants)
            .await
    }

    async fn tools_of(
        &self,
        runner: &dyn Runner,
        protected: &Protected,
        server: &str,
        owner: Owner,
        grants: &Downstream,
    ) -> Result<Arc<Vec<Definition>>, String> {
        let (instance, limit) = self
            .instance(runner, protected, server, owner.clone(), grants)
            .await?;
        let listed = instance.tools(limit).await;
        match &listed {
            Ok(tools) => self.remember(server, tools, grants),
            Err(_) => self.forget(server, owner, &instance).await,
        }
        listed
    }

    /// The downstream tools `session` may see: those of every server an allow grant names
    /// whose current definition a live grant pins. A server that cannot start is left out
    /// (and logged).
    pub async fn catalog(
        &self,
        runner: &dyn Runner,
        protected: &Protected,
        session: &SessionId,
        grants: &Downstream,
    ) -> Vec<ToolSchema> {
        let now = Timestamp::now();
        let mut out = Vec::new();
        for name in self.servers.keys() {
            if !grants.tools.iter().any(|g| &g.server == name && !g.deny) {
                continue;
            }
            match self.tools(runner, protected, name, session, grants).await {
                Ok(tools) => out.extend(
                    tools
                        .iter()
                        .filter(|d| visible(grants, name, &d.tool, &d.hash, now))
                        .map(|d| d.schema(name)),
                ),
                Err(error) => {
                    tracing::warn!(server = %name, %error, "a downstream server's tools are left out of the catalog");
                }
            }
        }
        out
    }

    /// Runs a decided call on its server's instance for the session, within the server's
    /// call limit; a shared server's result carries the highest class it has received (a
    /// calling session's taint, or the class of a result it gave).
    pub async fn call(
        &self,
        runner: &dyn Runner,
        protected: &Protected,
        server: &str,
        grants: &Downstream,
        call: DownstreamCall<'_>,
    ) -> (Outcome, Received) {
        let Some(config) = self.servers.get(server) else {
            return (
                Outcome::Failed(format!("there is no downstream server {server}")),
                Received::default(),
            );
        };
        // A server several sessions reach holds whatever each session had seen (its arguments
        // may carry it) and what each call gave it to read; read again after the call, so a
        // call running beside another's carries that one's labels too.
        let many = config.config.shared || config.config.url.is_some();
        let note = |call: &DownstreamCall<'_>| -> Received {
            if !many {
                return Received::default();
            }
            let mut received = config
                .received
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            received.class = received.class.max(call.taint).max(call.class);
            received.untrusted |= call.untrusted;
            *received
        };
        note(&call);
        let owner = owner(config, call.session);
        let instance = match self
            .instance(runner, protected, server, owner.clone(), grants)
            .await
        {
            Ok((instance, _)) => instance,
            Err(message) => return (Outcome::Failed(message), note(&call)),
        };
        let limit = Duration::from_millis(config.config.call_ms);
        // The instance may have been started again, or its tools changed, since the decision.
        match instance.tools(limit).await {
            Ok(tools)
                if tools
                    .iter()
                    .any(|d| d.tool == call.tool && d.hash == call.hash) => {}
            Ok(_) => {
                let detail = format!(
                    "{server}.{} changed between the decision and the run; `bx grants check` shows it",
                    call.tool
                );
                return (
                    Outcome::Denied(proto::DenyReason::NoGrant, detail),
                    note(&call),
                );
            }
            Err(message) => {
                self.forget(server, owner, &instance).await;
                return (Outcome::Failed(message), note(&call));
            }
        }
        let tool = call.tool.to_string();
        let arguments = call.arguments.clone();
        let outcome = match instance.call(&tool, arguments, limit).await {
            Ok(called) => outcome_of(server, &tool, called),
            Err(message) => {
                if instance.is_dead() {
                    self.forget(server, owner, &instance).await;
                }
                Outcome::Failed(message)
            }
        };
        (outcome, note(&call))
    }

    /// Ends every instance unused for its server's `idle_ms` (or dead); returns how many.
    pub async fn end_idle(&self) -> usize {
        let mut ended = 0;
        for (name, server) in &self.servers {
            let idle = Duration::from_millis(server.config.idle_ms);
            let mut instances = server.instances.lock().await;
            let before = instances.len();
            instances.retain(|_, r| !r.instance.is_dead() && r.used.elapsed() < idle);
            let gone = before - instances.len();
            if gone > 0 {
                tracing::info!(server = %name, instances = gone, "idle downstream server instances ended");
            }
            ended += gone;
        }
        ended
    }

    /// Ends the instances of `session`; returns how many there were.
    pub async fn end_session(&self, session: &SessionId) -> usize {
        let mut ended = 0;
        for server in self.servers.values() {
            let owner = Owner::Session(session.clone());
            if server.instances.lock().await.remove(&owner).is_some() {
                ended += 1;
            }
        }
        ended
    }

    /// The instance of `server` for `owner`: the running one, or one started now (a dead
    /// one, or one whose box world the grants have since changed, is replaced).
    async fn instance(
        &self,
        runner: &dyn Runner,
        protected: &Protected,
        server: &str,
        owner: Owner,
        grants: &Downstream,
    ) -> Result<(Arc<Instance>, Duration), String> {
        let config = self
            .servers
            .get(server)
            .ok_or_else(|| format!("there is no downstream server {server}"))?;
        let start = Duration::from_millis(config.config.start_ms);
        let (paths, hosts) = grants.box_of(server);
        if let Some((path, folder)) = paths
            .iter()
            .find_map(|p| protected.holding(p).map(|f| (p, f)))
        {
            return Err(format!(
                "server {server}'s grant names {}, inside boxmaker's folder {}: its box would see it",
                path.display(),
                folder.display()
            ));
        }
        let world = World {
            paths: paths.clone(),
            hosts: hosts.iter().map(|h| h.written.clone()).collect(),
        };
        let mut instances = config.instances.lock().await;
        if let Some(running) = instances.get_mut(&owner) {
            if !running.instance.is_dead() && running.world == world {
                running.used = Instant::now();
                return Ok((Arc::clone(&running.instance), start));
            }
            tracing::info!(server, "a downstream server is restarted");
            instances.remove(&owner);
        }
        if let Some(url) = &config.config.url {
            let token = match &config.token_file {
                Some(file) => Some(read_token(server, file)?),
                None => None,
            };
            let instance = Arc::new(Instance::connect(server, url, token, start).await?);
            tracing::info!(server, "a downstream server connected");
            let running = Running {
                instance: Arc::clone(&instance),
                world,
                used: Instant::now(),
            };
            instances.insert(owner, running);
            return Ok((instance, start));
        }
        let (policy, proxy) =
            runner.served_box(config.read_only.clone(), paths.clone(), &hosts, protected)?;
        let spec = sandbox::CommandSpec {
            program: PathBuf::from(config.config.command.first().map_or("", String::as_str)),
            args: config
                .config
                .command
                .iter()
                .skip(1)
                .map(Into::into)
                .collect(),
            env: environment(&config.config),
            cwd: paths
                .first()
                .cloned()
                .unwrap_or_else(|| PathBuf::from("/tmp")),
        };
        // Read before the start, named only if it fails: a link out of the box's folders.
        let unseen = sandbox::unseen_link(&policy, &spec.program);
        let launch = Launch {
            server: server.to_string(),
            policy,
            spec,
            proxy,
            start,
        };
        let instance = match Instance::start(launch).await {
            Ok(instance) => Arc::new(instance),
            Err(message) => return Err(with_link(message, server, unseen.as_ref())),
        };
        tracing::info!(server, "a downstream server started");
        instances.insert(
            owner,
            Running {
                instance: Arc::clone(&instance),
                world,
                used: Instant::now(),
            },
        );
        Ok((instance, start))
    }

    /// Drops `instance` of `server` for `owner` if it is still the one in use.
    async fn forget(&self, server: &str, owner: Owner, instance: &Arc<Instance>) {
        let Some(config) = self.servers.get(server) else {
            return;
        };
        let mut instances = config.instances.lock().await;
        if instances
            .get(&owner)
            .is_some_and(|r| Arc::ptr_eq(&r.instance, instance))
        {
            instances.remove(&owner);
        }
    }
}

/// `message` (why `server` did not start) with the link its program could not follow in its
/// box, if there is one: the link, its target and the folder to add to its `read_only`.
fn with_link(message: String, server: &str, unseen: Option<&sandbox::UnseenLink>) -> String {
    match unseen {
        None => message,
        Some(unseen) => format!(
            "{message}; its program goes through {}, a symbolic link to {}, which its box does not see: add {:?} to read_only of [[mcp.servers]] {server} in brokerd.toml",
            unseen.link.display(),
            unseen.target.display(),
            unseen.folder().display().to_string()
        ),
    }
}

/// The first line of a server's token file, a secret file (`sandbox::secret`: the owner's,
/// mode 0600 or narrower, else refused with the `chmod` that fixes it).
fn read_token(server: &str, file: &Path) -> Result<String, String> {
    let text = sandbox::secret::read_secret(file)
        .map_err(|e| format!("server {server}'s token file: {e}"))?;
    match text.lines().next().map(str::trim) {
        Some(token) if !token.is_empty() => Ok(token.to_string()),
        _ => Err(format!(
            "server {server}'s token file {} is empty",
            file.display()
        )),
    }
}

/// Ends idle downstream instances now and then for as long as the broker runs: every quarter
/// of the shortest `idle_ms` (at least every 100 ms, at most every minute).
pub async fn sweep_idle(broker: Arc<super::Broker>) {
    let Some(shortest) = broker
        .gateway
        .servers
        .values()
        .map(|s| Duration::from_millis(s.config.idle_ms))
        .min()
    else {
        return;
    };
    let every = (shortest / 4).clamp(Duration::from_millis(100), Duration::from_secs(60));
    let mut ticks = tokio::time::interval(every);
    loop {
        ticks.tick().await;
        broker.gateway.end_idle().await;
    }
}

fn owner(server: &Server, session: &SessionId) -> Owner {
    if server.config.shared {
        Owner::Shared
    } else {
        Owner::Session(session.clone())
    }
}

/// The box's environment: a fixed `PATH`, `HOME` and `LANG`, then the server's own.
fn environment(config: &DownstreamConfig) -> Vec<(std::ffi::OsString, std::ffi::OsString)> {
    let mut env: BTreeMap<String, String> = [
        ("PATH", "/usr/local/bin:/usr/bin:/bin"),
        ("HOME", "/tmp"),
        ("LANG", "C.UTF-8"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    env.extend(config.env.clone());
    env.into_iter().map(|(k, v)| (k.into(), v.into())).collect()
}

/// A call's result as the broker renders it: its text (or its structured content when it has
/// no text), a failure when the server marked it an error. Everything the server sent is in
/// the body, which the broker caps; the header holds only the broker's own fields.
fn outcome_of(server: &str, tool: &str, called: Called) -> Outcome {
    let body = match called.structured {
        Some(structured) if called.text.is_empty() => structured.to_string(),
        _ => called.text,
    };
    if called.is_error {
        return Outcome::Failed(body);
    }
    let mut fields = Map::new();
    fields.insert("server".into(), server.into());
    fields.insert("tool".into(), tool.into());
    Outcome::Ran { fields, body }
}
