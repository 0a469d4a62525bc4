//! A box's network of granted hosts. A box always has its own network namespace (bubblewrap's
//! `--unshare-all`), where only loopback is up. A [`Network`] puts into it one socket by path,
//! the broker's proxy for that box, bound at [`PROXY_IN_BOX`], and a relay: the launcher,
//! before it restricts itself, listens on `127.0.0.1:P` and starts the relay (the launcher's
//! binary again, run with [`RELAY`]), which stays in the box, restricts itself with Landlock
//! (no file, no TCP) and forwards each TCP connection it accepts to the proxy socket. The
//! command's Landlock rules then allow TCP connect to port `P` only and bind to none, and its
//! environment names the relay as `HTTPS_PROXY` and `HTTP_PROXY`: a program that ignores them
//! reaches nothing, since the namespace has no route out.
//!
//! A box without bubblewrap ([`crate::FileWalls::LandlockOnly`]) has no network namespace of
//! its own, so it cannot have a network: [`crate::spawn_boxed`] refuses one.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, Shutdown, TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use landlock::{ABI, Access, AccessFs, AccessNet, Ruleset, RulesetAttr, Scope};
use rustix::event::{PollFd, PollFlags, poll};

use crate::rules::LAUNCH_FAILED;

/// Where the proxy socket is bound inside a box.
pub const PROXY_IN_BOX: &str = "/.boxmaker/proxy.sock";

/// The first argument that makes [`crate::launch_if_asked`] run the relay.
pub(crate) const RELAY: &str = "--boxmaker-box-relay";

/// The port the relay listens on in a box when the caller has no reason to choose another.
pub const DEFAULT_PORT: u16 = 3128;

/// The variables that name a proxy: taken out of every box's environment, and set to the relay
/// in a box with a network ([`Network::env`]).
pub(crate) const PROXY_VARIABLES: [&str; 8] = [
    "HTTPS_PROXY",
    "HTTP_PROXY",
    "https_proxy",
    "http_proxy",
    "NO_PROXY",
    "no_proxy",
    "ALL_PROXY",
    "all_proxy",
];

/// The most connections the relay carries at once; one more is closed at once.
const MAX_RELAYED: usize = 64;

/// The Landlock rights the relay handles (and grants none of).
const RELAY_ABI: ABI = ABI::V6;

/// A box's way out: the broker's proxy socket for it, and the in-box port of the relay.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Network {
    /// The proxy's Unix socket on the host, bound into the box at [`PROXY_IN_BOX`].
    pub proxy_socket: PathBuf,
    /// The port the relay listens on at `127.0.0.1` in the box (and the one port Landlock lets
    /// the command connect to).
    pub port: u16,
}

impl Network {
    /// The network through `proxy_socket` with the relay on [`DEFAULT_PORT`].
    pub fn new(proxy_socket: impl Into<PathBuf>) -> Network {
        Network {
            proxy_socket: proxy_socket.into(),
            port: DEFAULT_PORT,
        }
    }

    /// `http://127.0.0.1:P`, the proxy as the box's programs see it.
    pub fn proxy_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// What the command's environment gets: `HTTPS_PROXY`, `HTTP_PROXY`, `https_proxy` and
    /// `http_proxy`, each the relay's URL.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let url = self.proxy_url();
        ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"]
            .into_iter()
            .map(|name| (name, url.clone()))
            .collect()
    }
}

/// The argument of the relay's own process, started by the first one, which exits at once.
const DETACHED: &str = "--detached";

/// In the launcher, before it restricts itself: listens on `127.0.0.1:port` in the box's
/// network namespace and starts the relay with that listener as its standard input. The relay
/// starts itself again and its first process exits, so the relay is no child of the command
/// (which could wait for it) but of the box's init, and dies with the box.
pub(crate) fn start_relay(port: u16) -> Result<(), String> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
        .map_err(|e| format!("the relay cannot listen on 127.0.0.1:{port} in the box: {e}"))?;
    let status = Command::new("/proc/self/exe")
        .arg(RELAY)
        .env_clear()
        .stdin(Stdio::from(OwnedFd::from(listener)))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map_err(|e| format!("cannot start the box's relay: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the box's relay did not start ({status})"))
    }
}

/// The relay's process, `args` after [`RELAY`]: the first one starts the detached one and
/// exits; the detached one restricts itself, then forwards each connection on its standard
/// input (the listener) to the proxy socket, and returns only if it cannot start.
pub(crate) fn run_relay(args: &[std::ffi::OsString]) -> i32 {
    if args.first().is_none_or(|a| a != DETACHED) {
        let started = Command::new("/proc/self/exe")
            .args([RELAY, DETACHED])
            .env_clear()
            .spawn();
        return if started.is_ok() { 0 } else { LAUNCH_FAILED };
    }
    let listener = match io::stdin().as_fd().try_clone_to_owned() {
        Ok(fd) => TcpListener::from(fd),
        Err(_) => return LAUNCH_FAILED,
    };
    if restrict_relay().is_err() {
        return LAUNCH_FAILED;
    }
    let active = Arc::new(AtomicUsize::new(0));
    loop {
        let tcp = match listener.accept() {
            Ok((tcp, _)) => tcp,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => {
                // Out of descriptors or threads, most likely: let connections end first.
                std::thread::sleep(std::time::Duration::from_millis(20));
                continue;
            }
        };
        if active.load(Ordering::Relaxed) >= MAX_RELAYED {
            continue; // dropped: closed at once
        }
        active.fetch_add(1, Ordering::Relaxed);
        let done = Arc::clone(&active);
        let spawned = std::thread::Builder::new()
            .name("relay".to_string())
            .spawn(move || {
                let _ = relay(tcp);
                done.fetch_sub(1, Ordering::Relaxed);
            });
        if spawned.is_err() {
            active.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The relay may open no file and make no TCP connection or binding (its listener is bound
/// already; the proxy socket is reached by path, which Landlock's rights up to ABI 6 leave to
/// the box's mounts).
fn restrict_relay() -> Result<(), landlock::RulesetError> {
    Ruleset::default()
        .handle_access(AccessFs::from_all(RELAY_ABI))?
        .handle_access(AccessNet::from_all(RELAY_ABI))?
        .scope(Scope::from_all(RELAY_ABI))?
        .create()?
        .restrict_self()?;
    Ok(())
}

/// How long a connection whose proxy side has ended may still send before it is closed.
const LINGER: std::time::Duration = std::time::Duration::from_secs(5);

/// The proxy's side has ended: the command's side hears the end, and what it still sends is
/// read and dropped for a while, so that closing does not reset what it has yet to read.
fn linger(mut tcp: TcpStream, buffer: &mut [u8]) -> io::Result<()> {
    tcp.shutdown(Shutdown::Write)?;
    tcp.set_read_timeout(Some(LINGER))?;
    while tcp.read(buffer)? > 0 {}
    Ok(())
}

/// One connection: to the proxy socket, then bytes both ways.
fn relay(tcp: TcpStream) -> io::Result<()> {
    let unix = UnixStream::connect(PROXY_IN_BOX)?;
    pump(tcp, unix)
}

/// Carries bytes both ways on one thread. When the command's side ends its writing, the
/// proxy's side is told so and still read; when the proxy's side ends, the connection ends.
fn pump(mut tcp: TcpStream, mut unix: UnixStream) -> io::Result<()> {
    let mut buffer = vec![0u8; 16 * 1024];
    let mut tcp_open = true;
    loop {
        let (tcp_ready, unix_ready) = {
            let mut fds = vec![PollFd::new(&unix, PollFlags::IN)];
            if tcp_open {
                fds.push(PollFd::new(&tcp, PollFlags::IN));
            }
            match poll(&mut fds, None) {
                Ok(_) => {}
                Err(rustix::io::Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let ready = |fd: &PollFd<'_>| !fd.revents().is_empty();
            (
                fds.get(1).is_some_and(ready),
                fds.first().is_some_and(ready),
            )
        };
        if unix_ready {
            match unix.read(&mut buffer)? {
                0 => return linger(tcp, &mut buffer),
                // Invariant: `Read::read` returns at most the buffer's length.
                n => tcp.write_all(&buffer[..n])?,
            }
        }
        if tcp_ready {
            match tcp.read(&mut buffer)? {
                0 => {
                    tcp_open = false;
                    unix.shutdown(Shutdown::Write)?;
                }
                // Invariant: `Read::read` returns at most the buffer's length.
                n => unix.write_all(&buffer[..n])?,
            }
        }
    }
}
