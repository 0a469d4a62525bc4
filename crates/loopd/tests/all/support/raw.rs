//! A hostile model server on a raw socket, for answers no well-behaved HTTP library writes
//! (lines that never end, cut-off streams, compression bombs, redirects), and the `loopd`
//! binary run as a child whose peak memory is measured.
#![allow(dead_code)]
// getrusage(RUSAGE_CHILDREN) through libc: the one foreign call the memory checks need.
#![allow(unsafe_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;

/// What the server knows of a request when it answers: its number (from 0) and its body.
pub struct Request {
    pub number: usize,
    pub body: String,
}

type Respond = dyn Fn(&Request, &mut TcpStream) -> std::io::Result<()> + Send + Sync;

/// A server that hands each request's connection to `respond`, which writes whatever bytes it
/// likes; stopped when dropped.
pub struct RawServer {
    address: String,
    requests: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl RawServer {
    /// A server on 127.0.0.1.
    pub fn start(
        respond: impl Fn(&Request, &mut TcpStream) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> RawServer {
        RawServer::start_on("127.0.0.1", respond)
    }

    /// A server on `ip` (any loopback address, e.g. 127.0.0.2).
    pub fn start_on(
        ip: &str,
        respond: impl Fn(&Request, &mut TcpStream) -> std::io::Result<()> + Send + Sync + 'static,
    ) -> RawServer {
        let listener = TcpListener::bind((ip, 0)).unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let requests = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let respond: Arc<Respond> = Arc::new(respond);
        let thread = {
            let requests = Arc::clone(&requests);
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let requests = Arc::clone(&requests);
                    let respond = Arc::clone(&respond);
                    std::thread::spawn(move || serve(stream, &requests, &*respond));
                }
            })
        };
        RawServer {
            address,
            requests,
            stop,
            thread: Some(thread),
        }
    }

    /// The API base to give loopd.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.address)
    }

    /// `host:port`.
    pub fn address(&self) -> &str {
        &self.address
    }

    /// How many requests arrived.
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect(&self.address);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Reads one request and lets `respond` answer it; the connection is closed after it, so every
/// response must say `Connection: close` (the helpers below do).
fn serve(stream: TcpStream, requests: &AtomicUsize, respond: &Respond) {
    let mut reader = BufReader::new(stream);
    let mut length = 0usize;
    loop {
        let mut line = String::new();
        match reader.read_line(&mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line == "\r\n" {
            break;
        }
        if let Some((name, value)) = line.split_once(':')
            && name.eq_ignore_ascii_case("content-length")
        {
            length = value.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let request = Request {
        number: requests.fetch_add(1, Ordering::SeqCst),
        body: String::from_utf8_lossy(&body).into_owned(),
    };
    let mut stream = reader.into_inner();
    if respond(&request, &mut stream).is_ok() {
        let _ = stream.flush();
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// Head of a 200 response whose body ends when the connection closes.
pub fn close_delimited_head(content_type: &str, extra: &str) -> String {
    format!("HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\n{extra}Connection: close\r\n\r\n")
}

/// A whole 200 response with a length.
pub fn sized_response(content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// One Server-Sent Event carrying `json`.
pub fn event(json: &str) -> String {
    format!("data: {json}\n\n")
}

/// A streamed plain answer: the text, a stop, `[DONE]`, as one sized response.
pub fn streamed_answer(text: &str) -> String {
    let content = serde_json::to_string(text).unwrap();
    let body = format!(
        "{}{}data: [DONE]\n\n",
        event(&format!(
            r#"{{"choices":[{{"index":0,"delta":{{"content":{content}}}}}]}}"#
        )),
        event(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}"#),
    );
    sized_response("text/event-stream", &body)
}

/// What a finished `loopd` child printed, its exit code and its peak resident memory.
pub struct Run {
    pub stdout: String,
    pub stderr: String,
    pub code: Option<i32>,
    /// `ru_maxrss` of loopd alone, in KiB.
    pub peak_kib: i64,
}

impl Run {
    /// The peak in MiB.
    pub fn peak_mib(&self) -> f64 {
        self.peak_kib as f64 / 1024.0
    }
}

/// Where [`run_loopd`] tells the process it starts what to run and where to write.
const MEASURE_ARGS: &str = "BOXMAKER_TEST_MEASURE_ARGS";
const MEASURE_DIR: &str = "BOXMAKER_TEST_MEASURE_DIR";
/// The test each test file that uses [`run_loopd`] names so, which calls [`measure_if_asked`].
const MEASURE_TEST: &str = "a_measured_loopd_runs_as_the_only_child_of_a_small_process";

/// Runs the `loopd` binary with `args` and no input, and measures its peak memory.
///
/// The peak must be loopd's alone. The test process cannot measure it itself: it is large
/// (hostile bodies, other tests running in parallel), and Linux counts the address space a
/// child was started from (`vfork` then `exec`) in the child's `ru_maxrss`. So this test binary
/// is started again, running only the test [`MEASURE_TEST`], which starts loopd as its only
/// child and reads `getrusage(RUSAGE_CHILDREN)` once loopd has ended.
pub fn run_loopd(args: &[&str]) -> Run {
    let dir = testkit::temp_dir();
    let status = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", MEASURE_TEST, "--test-threads=1", "-q"])
        .env(MEASURE_ARGS, args.join("\u{1f}"))
        .env(MEASURE_DIR, dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "the measuring process failed");
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap();
    let measured = read("measured");
    let (code, peak) = measured.split_once(' ').unwrap();
    Run {
        stdout: read("stdout"),
        stderr: read("stderr"),
        code: code.parse::<i32>().ok().filter(|c| *c >= 0),
        peak_kib: peak.trim().parse().unwrap(),
    }
}

/// The body of [`MEASURE_TEST`]: nothing, unless [`run_loopd`] started this process to run
/// loopd and measure it.
pub fn measure_if_asked() {
    let (Some(args), Some(dir)) = (
        std::env::var_os(MEASURE_ARGS),
        std::env::var_os(MEASURE_DIR),
    ) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let args = args.into_string().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_loopd"))
        .args(args.split('\u{1f}'))
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(dir.join("stdout")).unwrap())
        .stderr(std::fs::File::create(dir.join("stderr")).unwrap())
        .status()
        .unwrap();
    // SAFETY: an all-zero rusage is a valid value for getrusage to fill.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: `usage` lives on this stack for the call, which only writes it.
    let got = unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut usage) };
    assert_eq!(got, 0);
    let code = status.code().unwrap_or(-1);
    std::fs::write(dir.join("measured"), format!("{code} {}", usage.ru_maxrss)).unwrap();
}

/// `loopd chat` against `url` with the fake port, one message, in `state`; `extra` flags after.
pub fn chat(url: &str, state: &Path, message: &str, extra: &[&str]) -> Run {
    let state = state.display().to_string();
    let mut args = vec![
        "chat",
        "--port",
        "fake",
        "--model",
        url,
        "--state-dir",
        &state,
        "-m",
        message,
        "--timeout",
        "60",
    ];
    args.extend_from_slice(extra);
    run_loopd(&args)
}

/// The messages of the only session in the state folder `state`, as JSON.
pub fn session_messages(state: &Path) -> Vec<serde_json::Value> {
    let dir = std::fs::read_dir(state.join("sessions"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    std::fs::read_to_string(dir.join("messages.jsonl"))
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The baseline peak of `loopd` in this build: a turn with a plain streamed answer.
pub fn baseline_peak_kib(state: &Path) -> i64 {
    let server = RawServer::start(|_, stream| stream.write_all(streamed_answer("hi").as_bytes()));
    let run = chat(&server.base_url(), state, "hi", &[]);
    assert_eq!(run.code, Some(0), "{}{}", run.stdout, run.stderr);
    run.peak_kib
}
