//! Bringing the broker up: folders checked and locked, the process made non-dumpable, the
//! settings and grants read, the ledger caught up from the audit log, calls the last broker
//! left running marked as such, calls waiting for the owner loaded, the folder of the boxes'
//! proxy sockets made (`<runtime>/proxy/`), the open-file limit raised and each socket's cap
//! on open connections set under it, the agent and owner sockets bound (mode 0600), and the
//! runtime folder recorded in the config folder for clients without `XDG_RUNTIME_DIR`.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use ledger::{AuditLog, CallState, Event};
use proto::Timestamp;
use proto::dirs::Dirs;
use tokio::net::UnixListener;

use crate::consult::ConsultClient;
use policy::decide::Protected;

use super::config::Config;
use super::dirs::{FolderError, Locks, check_runtime, check_state, lock, make_private_dir};
use super::journal::Journal;
use super::memory::{MemoryService, STORE_FILE};
use super::runner::DirectRunner;
use super::sandboxed::SandboxedRunner;
use super::{Broker, grants_watch};

/// How the broker was asked to start.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// `--config-dir`.
    pub config_dir: Option<PathBuf>,
    /// `--state-dir`.
    pub state_dir: Option<PathBuf>,
    /// `--runtime-dir`.
    pub runtime_dir: Option<PathBuf>,
    /// `--new-audit-segment`: start a new audit segment if the log is broken.
    pub new_audit_segment: bool,
}

/// Why the broker did not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A folder cannot be named.
    #[error(transparent)]
    Dirs(#[from] proto::dirs::DirsError),
    /// A folder cannot be used, or another broker holds it.
    #[error(transparent)]
    Folder(#[from] FolderError),
    /// `brokerd.toml` is wrong.
    #[error("{0}")]
    Config(String),
    /// The audit log is broken or cannot be opened.
    #[error(
        "{0} (start with --new-audit-segment to keep the broken log aside and begin a new segment)"
    )]
    Audit(ledger::AuditError),
    /// The ledger cannot be opened or caught up.
    #[error(transparent)]
    Ledger(#[from] ledger::LedgerError),
    /// Something else (the socket, the consult client, the watcher).
    #[error("{0}")]
    Other(String),
}

/// A broker ready to serve.
pub struct Running {
    /// The shared state.
    pub broker: Arc<Broker>,
    /// The bound agent socket.
    pub listener: UnixListener,
    /// The bound owner socket.
    pub owner_listener: UnixListener,
    /// The most connections the agent socket holds open (see [`super::accept::caps`]).
    pub agent_cap: usize,
    /// The most connections the owner socket holds open.
    pub owner_cap: usize,
    /// Held for the broker's life.
    pub locks: Locks,
    /// Held for the broker's life.
    pub watcher: notify::RecommendedWatcher,
}

/// Starts the broker (inside a tokio runtime).
pub async fn start(options: StartOptions) -> Result<Running, StartError> {
    let uid = rustix::process::getuid().as_raw();
    let dirs = Dirs::resolve(
        options.config_dir.as_deref(),
        options.state_dir.as_deref(),
        options.runtime_dir.as_deref(),
        &|name| std::env::var_os(name),
        uid,
    )?;
    check_state(&dirs)?;
    make_private_dir(&dirs.config)?;
    check_runtime(&dirs)?;
    let locks = lock(&dirs)?;
    let config = Config::load(&dirs.config_file()).map_err(StartError::Config)?;
    let open_files = super::accept::raise_open_files();
    let (agent_cap, owner_cap) = super::accept::caps(
        open_files.now,
        config.agent_connections,
        config.owner_connections,
    );
    tracing::info!(
        open_files = open_files.now,
        was = open_files.before,
        agent_cap,
        owner_cap,
        "open-file limit and connection caps"
    );
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/"));
    let mut folders = vec![
        dirs.config.clone(),
        dirs.state.clone(),
        dirs.runtime.clone(),
    ];
    // The memory folder is inside the state folder; named too, so it stays protected wherever
    // the state folder's protection is described.
    folders.push(dirs.memory());
    folders.extend(config.protected.iter().cloned());
    let xdg_config = std::env::var_os("XDG_CONFIG_HOME").map(PathBuf::from);
    let protected = Protected::new(&folders).with_home(&home, xdg_config.as_deref());

    let mut ledger = config.ledger.open(&dirs.ledger(), false)?;
    let anchor = ledger.anchor()?;
    let now = Timestamp::now();
    let opened = if options.new_audit_segment {
        AuditLog::open_new_segment(&dirs.audit_log(), anchor.as_ref(), now)
    } else {
        AuditLog::open(&dirs.audit_log(), anchor.as_ref(), now)
    };
    let (log, opened) = opened.map_err(StartError::Audit)?;
    if let Some((offset, bytes)) = opened.cut {
        tracing::warn!(offset, bytes, "cut a torn last line of the audit log");
    }
    if let Some(previous) = &opened.previous_segment {
        tracing::warn!(previous = %previous.display(), "started a new audit segment after a break");
    }
    let caught_up = ledger.catch_up(&dirs.audit_log())?;
    if caught_up > 0 {
        tracing::info!(
            records = caught_up,
            "the ledger caught up from the audit log"
        );
    }
    let interrupted = ledger.calls_in(CallState::Running)?;
    let ledger = Arc::new(Mutex::new(ledger));
    let journal =
        Journal::start(log, Arc::clone(&ledger)).map_err(|e| StartError::Other(e.to_string()))?;
    let mut events: Vec<Event> = interrupted
        .into_iter()
        .map(|(session, call_id)| {
            tracing::warn!(%session, %call_id, "a call was running when the broker stopped");
            Event::Interrupted { session, call_id }
        })
        .collect();
    events.push(Event::Started {
        pid: std::process::id(),
        version: crate::BUILD_VERSION.to_string(),
        checkpoint_every_secs: config
            .audit
            .checkpoints(&dirs.state)
            .then_some(config.audit.seal_interval_secs),
    });
    journal
        .record(events)
        .await
        .map_err(|e| StartError::Other(e.to_string()))?;

    let consult = match &config.consult {
        Some(settings) => Some(
            ConsultClient::start(settings.clone(), config.consult_ms)
                .map_err(|e| StartError::Config(e.to_string()))?,
        ),
        None => None,
    };
    let memory = MemoryService::new(dirs.memory().join(STORE_FILE), consult.clone());
    let web_search = match &config.web_search {
        Some(settings) => Some(
            settings
                .settings(|name| std::env::var(name).ok())
                .map_err(StartError::Config)?,
        ),
        None => None,
    };
    let resolver = super::proxy::resolver_from_env().map_err(StartError::Config)?;
    let direct = DirectRunner {
        consult,
        web_search,
        read_cap: super::runner::read_cap(config.result_cap),
        root_certificates: test_roots()?,
        git_clone_bytes: config.git_clone_mb.saturating_mul(1 << 20),
        resolver: std::sync::Arc::clone(&resolver),
    };
    let proxies = super::proxy::Proxies::new(
        dirs.runtime.join("proxy"),
        tokio::runtime::Handle::current(),
        resolver,
    )
    .map_err(StartError::Other)?;
    let runner = SandboxedRunner::new(direct, config.sandbox.clone(), &home)
        .with_proxies(proxies)
        .with_aside(dirs.state.join("moved-aside"));
    let runner: Arc<dyn super::runner::Runner> = match &config.sandbox.podman_image {
        None => Arc::new(runner),
        Some(image) => {
            let podman =
                super::podman::find_podman(config.sandbox.podman.as_deref()).ok_or_else(|| {
                    StartError::Config(format!(
                        "[sandbox] podman_image is {image:?}, but there is no podman program{}",
                        config
                            .sandbox
                            .podman
                            .as_ref()
                            .map_or(String::new(), |p| format!(" at {}", p.display()))
                    ))
                })?;
            Arc::new(super::podman::PodmanRunner::new(
                runner,
                podman,
                image.clone(),
                config.sandbox.clone(),
            ))
        }
    };
    let grants = grants_watch::load(&dirs.grants(), &home);
    let gateway = super::gateway::Gateway::new(&config.mcp.servers, &home)
        .keeping_definitions_in(dirs.state.join("downstream"));
    let broker = Arc::new(
        Broker::new(
            config,
            dirs.clone(),
            grants,
            protected,
            journal,
            ledger,
            runner,
        )?
        .with_memory(memory)
        .with_gateway(gateway),
    );
    let waiting = broker.approvals.load(&broker)?;
    if waiting > 0 {
        tracing::info!(
            waiting,
            "calls waiting for the owner were loaded; their clients may resume them"
        );
    }
    super::approvals::listen(&broker).map_err(StartError::Other)?;
    tokio::spawn(super::sessions::sweep_idle(Arc::clone(&broker)));
    tokio::spawn(super::gateway::sweep_idle(Arc::clone(&broker)));
    let watcher = grants_watch::watch(Arc::clone(&broker), home)
        .map_err(|e| StartError::Other(format!("cannot watch {}: {e}", dirs.config.display())))?;

    let socket = dirs.agent_socket();
    // The lock is held: a socket file left here belongs to a broker that is gone.
    let _ = std::fs::remove_file(&socket);
    let listener = UnixListener::bind(&socket)
        .map_err(|e| StartError::Other(format!("cannot listen on {}: {e}", socket.display())))?;
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| StartError::Other(format!("{}: {e}", socket.display())))?;
    let owner_socket = dirs.owner_socket();
    let _ = std::fs::remove_file(&owner_socket);
    let owner_listener = UnixListener::bind(&owner_socket).map_err(|e| {
        StartError::Other(format!("cannot listen on {}: {e}", owner_socket.display()))
    })?;
    std::fs::set_permissions(&owner_socket, std::fs::Permissions::from_mode(0o600))
        .map_err(|e| StartError::Other(format!("{}: {e}", owner_socket.display())))?;
    // Clients whose environment lost XDG_RUNTIME_DIR (an MCP SDK's stdio launcher) find the
    // folder served here through the config folder (`proto::rendezvous`).
    if let Err(e) = proto::rendezvous::record(&dirs.config, &dirs.runtime) {
        tracing::warn!(
            config = %dirs.config.display(),
            "cannot record the runtime folder for clients started without XDG_RUNTIME_DIR: {e}"
        );
    }
    Ok(Running {
        broker,
        listener,
        owner_listener,
        agent_cap,
        owner_cap,
        locks,
        watcher,
    })
}

/// Extra trusted roots for `http_fetch` (and `git_clone`, as `http.sslCAInfo`), from `BOXMAKER_EXTRA_ROOTS` (PEM files, for tests
/// with a local certificate authority).
fn test_roots() -> Result<Vec<Vec<u8>>, StartError> {
    let Some(paths) = std::env::var_os("BOXMAKER_EXTRA_ROOTS") else {
        return Ok(Vec::new());
    };
    std::env::split_paths(&paths)
        .map(|path| {
            std::fs::read(&path).map_err(|e| StartError::Config(format!("{}: {e}", path.display())))
        })
        .collect()
}
