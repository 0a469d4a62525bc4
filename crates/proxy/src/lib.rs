//! The broker-side proxy of granted hosts. A box whose deciding grant names hosts gets a Unix
//! socket of its own (mode 0600, `<runtime>/proxy/<random>.sock`, removed when the box ends),
//! bound into the box, where the box's relay forwards every TCP connection made to
//! `127.0.0.1:P`. The listener knows that box's host rules and speaks HTTP `CONNECT host:port`:
//! the host must be granted (port included), it is resolved, every address is classified
//! (`nettools::web::address`: metadata, unspecified, broadcast and multicast always refused;
//! loopback, private, link-local and the other non-public ranges unless a rule names the host
//! itself), then the proxy connects to a checked address, never resolving again, and carries
//! bytes both ways. Every refusal is a status with one sentence naming the host and why, and
//! every connection is logged. A plain `http://` request in absolute form (`GET http://host/…`,
//! what a client does with `HTTP_PROXY`) is checked the same way (port 80 unless written, so
//! its grant must name `host:80`), its head sent on in origin form with `Connection: close`,
//! the rest of the connection carried to the same checked address (as a `CONNECT` to that
//! host and port would be);
//! any other request gets `400` or `405`. Each refusal is also kept for the broker to read
//! ([`BoxProxy::last_refused`]), which turns a refused `http_fetch` hop into its denial. Bounded: the head's size and time, the connections of one
//! box at once, the time to resolve and connect, and a tunnel's idle time.
//!
//! - `request.rs`: the head and the answers; `check.rs`: hosts, addresses, the resolver;
//!   `serve.rs`: the accept loop, each connection, the splice.
//!
//! The broker owns the runtime and the boxes; this crate knows a box only by its host rules
//! (or its hop decider) and its socket: it never builds a box, decides a tool call or writes
//! the audit log.

mod check;
mod request;
mod serve;

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use nettools::web::Resolve;

use policy::grants::HostRule;

pub use check::{HopDecider, HostCheck, TEST_RESOLVE, resolver_from_env};
pub use request::RefusalKind;

/// The bounds of one box's proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The most bytes of a request head.
    pub head_bytes: usize,
    /// How long the head may take to arrive.
    pub head_time: Duration,
    /// Connections of one box at once; one more gets `503`.
    pub connections: usize,
    /// How long resolving the host may take.
    pub resolve_time: Duration,
    /// How long connecting may take, every address together.
    pub connect_time: Duration,
    /// How long a tunnel may carry nothing before it is closed.
    pub idle_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            head_bytes: 8 * 1024,
            head_time: Duration::from_secs(10),
            connections: 32,
            resolve_time: Duration::from_secs(10),
            connect_time: Duration::from_secs(10),
            idle_time: Duration::from_secs(120),
        }
    }
}

/// What one box's listener knows.
struct BoxHosts {
    /// Names the box in the log (its socket's file name).
    label: String,
    check: HostCheck,
    resolver: Arc<dyn Resolve>,
    limits: Limits,
    /// What the proxy refused this box, the newest last.
    refused: Arc<std::sync::Mutex<Vec<Refused>>>,
}

/// The most refusals a box's proxy keeps for the broker to read.
const KEPT_REFUSALS: usize = 16;

/// One connection the proxy refused a box.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// `host:port`, when the head named one.
    pub target: Option<String>,
    /// The sentence the box got.
    pub reason: String,
    /// What was refused.
    pub kind: RefusalKind,
}

impl BoxHosts {
    /// Keeps `refusal` for the broker (the newest [`KEPT_REFUSALS`]).
    fn note(&self, target: Option<&str>, refusal: &request::Refusal) {
        let Ok(mut refused) = self.refused.lock() else {
            return;
        };
        if refused.len() >= KEPT_REFUSALS {
            refused.remove(0);
        }
        refused.push(Refused {
            target: target.map(str::to_string),
            reason: refusal.reason.clone(),
            kind: refusal.kind,
        });
    }
}

/// Opens a proxy socket per box.
pub struct Proxies {
    folder: PathBuf,
    runtime: tokio::runtime::Handle,
    resolver: Arc<dyn Resolve>,
    limits: Limits,
}

impl Proxies {
    /// Proxies whose sockets live in `folder` (made mode 0700; sockets a broker that is gone
    /// left there are removed), served on `runtime`, resolving with `resolver`.
    pub fn new(
        folder: PathBuf,
        runtime: tokio::runtime::Handle,
        resolver: Arc<dyn Resolve>,
    ) -> Result<Proxies, String> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&folder)
            .map_err(|e| format!("{}: {e}", folder.display()))?;
        std::fs::set_permissions(&folder, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", folder.display()))?;
        if let Ok(entries) = std::fs::read_dir(&folder) {
            for entry in entries.flatten() {
                if entry.path().extension().is_some_and(|e| e == "sock") {
                    let _ = std::fs::remove_file(entry.path());
                }
            }
        }
        Ok(Proxies {
            folder,
            runtime,
            resolver,
            limits: Limits::default(),
        })
    }

    /// The same with other bounds.
    pub fn with_limits(mut self, limits: Limits) -> Proxies {
        self.limits = limits;
        self
    }

    /// A proxy for one box that may reach exactly `rules`: its socket is listening when this
    /// returns, and closes (every tunnel with it) when the [`BoxProxy`] is dropped.
    pub fn open(&self, rules: &[HostRule]) -> Result<BoxProxy, String> {
        self.open_checked(HostCheck::Rules(rules.to_vec()))
    }

    /// [`Proxies::open`] for a box whose hosts `check` decides.
    pub fn open_checked(&self, check: HostCheck) -> Result<BoxProxy, String> {
        let mut random = [0u8; 8];
        getrandom::fill(&mut random)
            .map_err(|e| format!("cannot name the box's proxy socket: {e}"))?;
        let name: String = random.iter().map(|b| format!("{b:02x}")).collect();
        let socket = self.folder.join(format!("{name}.sock"));
        let len = socket.as_os_str().len();
        if len > proto::dirs::MAX_SOCKET_PATH {
            return Err(format!(
                "the proxy socket path {} is {len} bytes; a Unix socket path is at most {} (use a shorter --runtime-dir)",
                socket.display(),
                proto::dirs::MAX_SOCKET_PATH
            ));
        }
        let listener = std::os::unix::net::UnixListener::bind(&socket)
            .map_err(|e| format!("cannot listen on {}: {e}", socket.display()))?;
        let guard = Removed(socket);
        let socket = guard.0.clone();
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| format!("{}: {e}", socket.display()))?;
        listener
            .set_nonblocking(true)
            .map_err(|e| format!("{}: {e}", socket.display()))?;
        let listener = {
            let _entered = self.runtime.enter();
            tokio::net::UnixListener::from_std(listener)
                .map_err(|e| format!("{}: {e}", socket.display()))?
        };
        let refused = Arc::new(std::sync::Mutex::new(Vec::new()));
        let (end_calls, calls_ended) = tokio::sync::mpsc::unbounded_channel();
        let hosts = Arc::new(BoxHosts {
            label: name,
            check,
            resolver: Arc::clone(&self.resolver),
            limits: self.limits,
            refused: Arc::clone(&refused),
        });
        let task = self
            .runtime
            .spawn(serve::serve(listener, hosts, calls_ended))
            .abort_handle();
        Ok(BoxProxy {
            socket: guard.keep(),
            task,
            refused,
            end_calls,
        })
    }
}

/// Removes a socket file when a half-made proxy is given up.
struct Removed(PathBuf);

impl Removed {
    /// The path, kept: the proxy is made.
    fn keep(mut self) -> PathBuf {
        std::mem::take(&mut self.0)
    }
}

impl Drop for Removed {
    fn drop(&mut self) {
        if !self.0.as_os_str().is_empty() {
            let _ = std::fs::remove_file(&self.0);
        }
    }
}

/// One box's proxy, open while this lives.
#[derive(Debug)]
pub struct BoxProxy {
    socket: PathBuf,
    task: tokio::task::AbortHandle,
    refused: Arc<std::sync::Mutex<Vec<Refused>>>,
    /// Asks the proxy to end every connection it carries, and says when it has.
    end_calls: tokio::sync::mpsc::UnboundedSender<std::sync::mpsc::SyncSender<()>>,
}

impl BoxProxy {
    /// The socket the box's relay connects to (bound into the box).
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Ends every connection the proxy carries for the box, and returns once they are gone
    /// (or after `wait`): a warm box's call is over, and nothing it opened may serve the next
    /// one (a tunnel to a host only that call could reach), nor note a refusal in its name.
    /// Whether they are gone.
    pub fn end_connections(&self, wait: Duration) -> bool {
        let (done, ended) = std::sync::mpsc::sync_channel(1);
        self.end_calls.send(done).is_ok() && ended.recv_timeout(wait).is_ok()
    }

    /// Forgets what the proxy refused so far: a warm box's next call starts with none.
    pub fn clear_refused(&self) {
        if let Ok(mut refused) = self.refused.lock() {
            refused.clear();
        }
    }

    /// The newest connection the proxy refused this box, if it refused one.
    pub fn last_refused(&self) -> Option<Refused> {
        self.refused.lock().ok().and_then(|r| r.last().cloned())
    }
}

impl Drop for BoxProxy {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// How a box's header names its network: `network: only a:443, *.b:443, through the broker's
/// proxy`.
pub fn network_words(rules: &[HostRule]) -> String {
    let names: Vec<String> = rules.iter().map(check::rule_text).collect();
    format!(
        "network: only {}, through the broker's proxy",
        names.join(", ")
    )
}

#[cfg(test)]
mod tests;
