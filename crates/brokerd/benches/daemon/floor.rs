//! The floor of a server of the broker's shape on this machine, measured beside it: one async
//! thread reads each frame from a Unix socket, a blocking thread appends a record of the
//! broker's size to a file and fsyncs it, and the async thread writes an answer of the
//! broker's size. No decision, session, ledger or tool: what the socket, the two threads and
//! the fsync cost, which no broker of this design can go under.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A bare server on a socket of its own, answering one client until it leaves.
pub struct BareServer {
    socket: PathBuf,
}

impl BareServer {
    /// Starts the server in `dir`: each request appends `record` bytes to `dir/audit` (with an
    /// fdatasync) and is answered with `answer` (a whole frame).
    pub fn start(dir: &Path, record: usize, answer: Vec<u8>) -> BareServer {
        let socket = dir.join("bare.sock");
        let listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("bare-audit"))
            .unwrap();
        let log = Arc::new(Mutex::new(log));
        let mut line = vec![b'x'; record.max(1)];
        if let Some(last) = line.last_mut() {
            *last = b'\n';
        }
        let line = Arc::new(line);
        std::thread::spawn(move || {
            // As brokerd: one async thread, blocking work on the blocking pool.
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async move {
                let listener = tokio::net::UnixListener::from_std(listener).unwrap();
                let (mut stream, _) = listener.accept().await.unwrap();
                let mut length = [0u8; 4];
                let mut body = Vec::new();
                while stream.read_exact(&mut length).await.is_ok() {
                    body.resize(u32::from_be_bytes(length) as usize, 0);
                    if stream.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let (log, line) = (Arc::clone(&log), Arc::clone(&line));
                    tokio::task::spawn_blocking(move || {
                        let mut log = log.lock().unwrap();
                        log.write_all(&line).unwrap();
                        log.sync_data().unwrap();
                    })
                    .await
                    .unwrap();
                    if stream.write_all(&answer).await.is_err() {
                        return;
                    }
                }
            });
        });
        BareServer { socket }
    }

    /// A client of the server.
    pub fn client(&self) -> BareClient {
        BareClient {
            stream: UnixStream::connect(&self.socket).unwrap(),
            answer: Vec::new(),
        }
    }
}

/// One connection to a [`BareServer`].
pub struct BareClient {
    stream: UnixStream,
    answer: Vec<u8>,
}

impl BareClient {
    /// Sends `request` (a whole frame) and reads the answer frame; the time it took.
    pub fn call(&mut self, request: &[u8]) -> Duration {
        let start = Instant::now();
        self.stream.write_all(request).unwrap();
        let mut length = [0u8; 4];
        self.stream.read_exact(&mut length).unwrap();
        self.answer.resize(u32::from_be_bytes(length) as usize, 0);
        self.stream.read_exact(&mut self.answer).unwrap();
        start.elapsed()
    }
}
