//! Taking connections on both sockets: the accept loop they share, the cap on open
//! connections, and the open-file limit it is held under.
//!
//! A flood of connections must never stop the broker. Transient `accept` failures (EMFILE,
//! ENFILE, ENOBUFS, ENOMEM, ECONNABORTED) are logged once per burst and waited out with a short
//! backoff, never ending the loop. Each socket holds at most its cap of open connections
//! (`brokerd.toml`'s `agent_connections`, `owner_connections`); the next is sent its socket's
//! `too_many_connections` error frame and closed at once, so it holds no descriptor. At start
//! the broker raises its soft `RLIMIT_NOFILE` to the hard limit, and the two caps together are
//! held under that limit less [`RESERVED_FILES`] kept for the broker's own work (the ledger,
//! the boxes' pipes), scaled down in proportion when they do not fit.

use std::future::Future;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rustix::io::Errno;
use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
use tokio::net::{UnixListener, UnixStream};

/// Open files kept for the broker's own work, outside both sockets' caps.
pub const RESERVED_FILES: u64 = 256;

/// The first pause after a transient `accept` failure; it doubles up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(10);

/// The longest pause between attempts while `accept` keeps failing.
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// The soft open-file limit before and after [`raise_open_files`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    /// The soft limit the broker was started with.
    pub before: u64,
    /// The soft limit it serves with (the hard limit when it could be raised).
    pub now: u64,
}

/// Raises the soft `RLIMIT_NOFILE` to the hard limit (or to the kernel's `nr_open` when the
/// hard limit is unlimited): systemd gives user sessions a soft limit of 1024, which a few
/// hundred clients would reach. A failure to raise keeps the limit as it was.
pub fn raise_open_files() -> OpenFiles {
    let limit = getrlimit(Resource::Nofile);
    let before = limit.current.unwrap_or(u64::MAX);
    let ceiling = match limit.maximum {
        Some(hard) => hard,
        None => std::fs::read_to_string("/proc/sys/fs/nr_open")
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(before),
    };
    if ceiling <= before {
        return OpenFiles {
            before,
            now: before,
        };
    }
    let raised = Rlimit {
        current: Some(ceiling),
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => OpenFiles {
            before,
            now: ceiling,
        },
        Err(error) => {
            tracing::warn!(%error, before, ceiling, "cannot raise the open-file limit");
            OpenFiles {
                before,
                now: before,
            }
        }
    }
}

/// The caps the two sockets serve with: the configured ones, scaled down in proportion when
/// together they pass `open_files` less [`RESERVED_FILES`] (each at least 1).
pub fn caps(open_files: u64, agent: usize, owner: usize) -> (usize, usize) {
    let budget = open_files.saturating_sub(RESERVED_FILES).max(2);
    let wanted = (agent as u64).saturating_add(owner as u64);
    if wanted <= budget {
        return (agent, owner);
    }
    let share = |cap: usize| {
        let scaled = (cap as u128 * budget as u128 / wanted as u128) as u64;
        usize::try_from(scaled.max(1)).unwrap_or(cap)
    };
    (share(agent), share(owner))
}

/// Whether a failed `accept` is one to wait out (the listener itself is fine).
fn transient(error: &std::io::Error) -> bool {
    matches!(
        Errno::from_io_error(error),
        Some(Errno::MFILE | Errno::NFILE | Errno::NOBUFS | Errno::NOMEM | Errno::CONNABORTED)
    )
}

/// A listener the loop takes connections from (a trait so that tests can make it fail).
pub trait Acceptor {
    /// The next connection.
    fn next(&self) -> impl Future<Output = std::io::Result<UnixStream>> + Send;
}

impl Acceptor for UnixListener {
    async fn next(&self) -> std::io::Result<UnixStream> {
        self.accept().await.map(|(stream, _)| stream)
    }
}

/// One open connection of a socket, counted against its cap until dropped.
#[derive(Debug)]
pub struct Slot {
    open: Arc<AtomicUsize>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A socket's name, cap and the frame a connection over the cap is sent.
pub struct Admission {
    /// The socket's name, for the log (`agent.sock`).
    pub socket: &'static str,
    /// The most connections it holds open.
    pub cap: usize,
    /// The whole frame (length and body) sent to a connection over the cap.
    pub refusal: Vec<u8>,
}

/// What the loop is living through, so that each burst is logged once.
enum Trouble {
    None,
    /// `accept` has failed this many times in a row.
    Failing(u64),
    /// This many connections were refused at the cap since the last one taken.
    Full(u64),
}

/// Takes connections from `listener` and hands each to `serve` with its [`Slot`], until the
/// listener fails in a way that is not transient (then its error).
pub async fn accept_loop<L: Acceptor>(
    listener: L,
    admission: Admission,
    mut serve: impl FnMut(UnixStream, Slot),
) -> std::io::Result<()> {
    let Admission {
        socket,
        cap,
        refusal,
    } = admission;
    let open = Arc::new(AtomicUsize::new(0));
    let mut trouble = Trouble::None;
    let mut pause = FIRST_PAUSE;
    loop {
        let stream = match listener.next().await {
            Ok(stream) => stream,
            Err(error) if transient(&error) => {
                match &mut trouble {
                    Trouble::Failing(count) => *count += 1,
                    _ => {
                        tracing::warn!(
                            socket,
                            %error,
                            open = open.load(Ordering::Acquire),
                            "cannot take a connection; waiting until it can (logged once until it does)"
                        );
                        trouble = Trouble::Failing(1);
                    }
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(MAX_PAUSE);
                continue;
            }
            Err(error) => return Err(error),
        };
        pause = FIRST_PAUSE;
        if open.load(Ordering::Acquire) >= cap {
            match &mut trouble {
                Trouble::Full(count) => *count += 1,
                _ => {
                    if let Trouble::Failing(failed) = trouble {
                        tracing::info!(socket, failed, "taking connections again");
                    }
                    tracing::warn!(
                        socket,
                        cap,
                        "the socket holds its cap of open connections; refusing more until some close (logged once until then)"
                    );
                    trouble = Trouble::Full(1);
                }
            }
            refuse(stream, &refusal);
            continue;
        }
        match trouble {
            Trouble::None => {}
            Trouble::Failing(failed) => tracing::info!(socket, failed, "taking connections again"),
            Trouble::Full(refused) => {
                tracing::info!(socket, refused, "below the cap again; refused meanwhile")
            }
        }
        trouble = Trouble::None;
        open.fetch_add(1, Ordering::AcqRel);
        serve(
            stream,
            Slot {
                open: Arc::clone(&open),
            },
        );
    }
}

/// Sends `refusal` to a connection over the cap without waiting (a fresh socket's buffer
/// takes a small frame whole) and closes it.
fn refuse(stream: UnixStream, refusal: &[u8]) {
    if let Ok(mut stream) = stream.into_std() {
        let _ = stream.write(refusal);
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::io::Read;
    use std::sync::Mutex;

    use super::*;

    #[test]
    fn caps_that_fit_the_open_file_limit_are_kept_and_others_scaled_in_proportion() {
        assert_eq!(caps(4096, 2048, 512), (2048, 512));
        assert_eq!(caps(4096, 2048, 2048), (1920, 1920));
        assert_eq!(caps(1024, 3000, 1000), (576, 192));
        assert_eq!(caps(100, 2048, 2048), (1, 1));
        assert_eq!(caps(u64::MAX, 7, 9), (7, 9));
    }

    #[test]
    fn the_transient_accept_errors_are_those_of_a_full_table_or_an_aborted_peer() {
        for errno in [
            Errno::MFILE,
            Errno::NFILE,
            Errno::NOBUFS,
            Errno::NOMEM,
            Errno::CONNABORTED,
        ] {
            let error = std::io::Error::from_raw_os_error(errno.raw_os_error());
            assert!(transient(&error), "{error}");
        }
        for errno in [Errno::BADF, Errno::INVAL, Errno::NOTSOCK] {
            let error = std::io::Error::from_raw_os_error(errno.raw_os_error());
            assert!(!transient(&error), "{error}");
        }
    }

    /// A listener that fails as told before each real connection.
    struct Scripted {
        failures: Mutex<VecDeque<Errno>>,
        listener: UnixListener,
    }

    impl Acceptor for Scripted {
        async fn next(&self) -> std::io::Result<UnixStream> {
            let failure = self.failures.lock().ok().and_then(|mut f| f.pop_front());
            if let Some(errno) = failure {
                return Err(std::io::Error::from_raw_os_error(errno.raw_os_error()));
            }
            self.listener.accept().await.map(|(stream, _)| stream)
        }
    }

    #[tokio::test]
    async fn transient_failures_are_waited_out_and_a_hard_one_ends_the_loop() {
        let dir = testkit::temp_dir();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let failures = [Errno::MFILE, Errno::NFILE, Errno::NOBUFS, Errno::NOMEM]
            .into_iter()
            .chain([Errno::CONNABORTED; 3])
            .chain([Errno::MFILE])
            .collect();
        let scripted = Scripted {
            failures: Mutex::new(failures),
            listener,
        };
        let (served, mut told) = tokio::sync::mpsc::unbounded_channel();
        let admission = Admission {
            socket: "test.sock",
            cap: 10,
            refusal: Vec::new(),
        };
        let looping = tokio::spawn(accept_loop(scripted, admission, move |stream, slot| {
            let _ = served.send((stream, slot));
        }));
        let _client = tokio::net::UnixStream::connect(&path).await.unwrap();
        let got = told.recv().await;
        assert!(got.is_some(), "the connection after 8 failures was taken");
        assert!(!looping.is_finished());
        looping.abort();

        let listener = UnixListener::bind(dir.path().join("t.sock")).unwrap();
        let scripted = Scripted {
            failures: Mutex::new([Errno::MFILE, Errno::BADF].into_iter().collect()),
            listener,
        };
        let admission = Admission {
            socket: "test.sock",
            cap: 10,
            refusal: Vec::new(),
        };
        let ended = accept_loop(scripted, admission, |_, _| {}).await;
        let error = ended.err().map(|e| e.raw_os_error());
        assert_eq!(error, Some(Some(Errno::BADF.raw_os_error())));
    }

    #[tokio::test]
    async fn a_connection_over_the_cap_gets_the_refusal_and_a_closed_slot_makes_room() {
        let dir = testkit::temp_dir();
        let path = dir.path().join("s.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let (served, mut told) = tokio::sync::mpsc::unbounded_channel();
        let admission = Admission {
            socket: "test.sock",
            cap: 2,
            refusal: b"FULL".to_vec(),
        };
        let looping = tokio::spawn(accept_loop(listener, admission, move |stream, slot| {
            let _ = served.send((stream, slot));
        }));
        let mut clients = Vec::new();
        for _ in 0..2 {
            clients.push(std::os::unix::net::UnixStream::connect(&path).unwrap());
        }
        let first = told.recv().await.unwrap();
        let _second = told.recv().await.unwrap();
        let over = std::os::unix::net::UnixStream::connect(&path).unwrap();
        let got = tokio::task::spawn_blocking(move || {
            let mut over = over;
            let mut text = String::new();
            over.read_to_string(&mut text).map(|_| text)
        })
        .await
        .unwrap()
        .unwrap();
        assert_eq!(got, "FULL", "refused and closed");
        drop(first);
        let _fresh = std::os::unix::net::UnixStream::connect(&path).unwrap();
        assert!(told.recv().await.is_some(), "a closed slot makes room");
        looping.abort();
    }
}
