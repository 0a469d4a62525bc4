//! A real HTTPS server on loopback for tests: a test CA made by `rcgen`, leaf certificates it
//! signs, and a minimal HTTP/1.1 responder over rustls with routes the test sets (a body, a
//! redirect, a server that never answers, an endless body).
//!
//! ```no_run
//! use testkit::tls_server::{TestCa, TlsResponse, TlsServer};
//! let ca = TestCa::new("boxmaker test CA");
//! let server = TlsServer::start(&ca.issue(&["fetch.test", "127.0.0.1"])).unwrap();
//! server.route("/", TlsResponse::ok("text/plain", "hello"));
//! // trust ca.cert_pem() and fetch https://fetch.test:{server.port()}/ with fetch.test -> 127.0.0.1
//! ```

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

/// How long a connection may take to send its request, and how long a hanging or endless
/// answer lasts at most: every thread of the server ends by itself.
const CONNECTION_LIMIT: Duration = Duration::from_secs(30);
/// An endless body stops after this many bytes, whatever the client does.
const ENDLESS_LIMIT: usize = 64 * 1024 * 1024;

/// A certificate authority for tests.
pub struct TestCa {
    certificate: rcgen::Certificate,
    key: KeyPair,
}

impl TestCa {
    /// A fresh CA whose certificate has `common_name` as its subject. Panics if rcgen fails.
    pub fn new(common_name: &str) -> TestCa {
        let key = must(KeyPair::generate(), "generate the CA key");
        let mut params = must(CertificateParams::new(Vec::<String>::new()), "CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, common_name);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let certificate = must(params.self_signed(&key), "self-sign the CA");
        TestCa { certificate, key }
    }

    /// The CA certificate, PEM.
    pub fn cert_pem(&self) -> String {
        self.certificate.pem()
    }

    /// The CA certificate, DER.
    pub fn cert_der(&self) -> Vec<u8> {
        self.certificate.der().to_vec()
    }

    /// A server certificate for `names` (DNS names, or IP addresses written as such), signed by
    /// this CA. Panics if rcgen fails.
    pub fn issue(&self, names: &[&str]) -> TestCert {
        let key = must(KeyPair::generate(), "generate the leaf key");
        let names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        let mut params = must(CertificateParams::new(names.clone()), "leaf params");
        if let Some(first) = names.first() {
            params.distinguished_name.push(DnType::CommonName, first);
        }
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let certificate = must(
            params.signed_by(&key, &self.certificate, &self.key),
            "sign the leaf",
        );
        TestCert {
            cert_der: certificate.der().to_vec(),
            cert_pem: certificate.pem(),
            key_pkcs8_der: key.serialize_der(),
        }
    }
}

fn must<T, E: std::fmt::Display>(result: Result<T, E>, what: &str) -> T {
    match result {
        Ok(value) => value,
        Err(error) => panic!("cannot {what}: {error}"),
    }
}

/// A server certificate and its key.
#[derive(Clone)]
pub struct TestCert {
    /// The certificate, DER.
    pub cert_der: Vec<u8>,
    /// The certificate, PEM.
    pub cert_pem: String,
    /// The private key, PKCS#8 DER.
    pub key_pkcs8_der: Vec<u8>,
}

/// What the server answers on a route.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsResponse {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    behaviour: Behaviour,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Behaviour {
    /// Status, headers, `Content-Length` and the body, then close.
    Whole,
    /// Read the request, then say nothing until the server stops.
    Hang,
    /// Status and headers without a length, then the body repeated until the client leaves.
    Endless,
}

impl TlsResponse {
    /// 200 with `content_type` and `body`.
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> TlsResponse {
        TlsResponse::status(200, body).with_header("Content-Type", content_type)
    }

    /// Any status with `body` (no content type).
    pub fn status(status: u16, body: impl Into<Vec<u8>>) -> TlsResponse {
        TlsResponse {
            status,
            headers: Vec::new(),
            body: body.into(),
            behaviour: Behaviour::Whole,
        }
    }

    /// A redirect (301, 302, 303, 307 or 308) to `location`, absolute or relative.
    pub fn redirect(status: u16, location: &str) -> TlsResponse {
        TlsResponse::status(status, Vec::new()).with_header("Location", location)
    }

    /// Reads the request and never answers (until the server is dropped, 30 s at most).
    pub fn hang() -> TlsResponse {
        TlsResponse {
            behaviour: Behaviour::Hang,
            ..TlsResponse::status(200, Vec::new())
        }
    }

    /// 200 with `chunk` sent again and again, without a length, until the client closes
    /// (64 MiB at most).
    pub fn endless(content_type: &str, chunk: impl Into<Vec<u8>>) -> TlsResponse {
        TlsResponse {
            behaviour: Behaviour::Endless,
            ..TlsResponse::ok(content_type, chunk)
        }
    }

    /// Adds a header.
    pub fn with_header(mut self, name: &str, value: &str) -> TlsResponse {
        self.headers.push((name.to_string(), value.to_string()));
        self
    }
}

/// A request as the server saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsRequest {
    /// `GET`, …
    pub method: String,
    /// The request target, e.g. `/a?b=c`.
    pub target: String,
    /// The `Host` header, if any.
    pub host: Option<String>,
    /// Every header, names lowercased, in order.
    pub headers: Vec<(String, String)>,
    /// The body (as long as its `Content-Length` says; empty without one).
    pub body: Vec<u8>,
}

struct Shared {
    config: Arc<ServerConfig>,
    routes: Mutex<HashMap<String, Vec<TlsResponse>>>,
    requests: Mutex<Vec<TlsRequest>>,
    connections: AtomicUsize,
    stop: AtomicBool,
}

/// A running HTTPS server on 127.0.0.1 with a free port; stopped when dropped.
pub struct TlsServer {
    shared: Arc<Shared>,
    address: SocketAddr,
    thread: Option<JoinHandle<()>>,
}

impl TlsServer {
    /// Starts a server presenting `cert`. Unknown paths get a 404.
    pub fn start(cert: &TestCert) -> io::Result<TlsServer> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key_pkcs8_der.clone()));
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(cert.cert_der.clone())], key)
            .map_err(io::Error::other)?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let address = listener.local_addr()?;
        let shared = Arc::new(Shared {
            config: Arc::new(config),
            routes: Mutex::new(HashMap::new()),
            requests: Mutex::new(Vec::new()),
            connections: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
        });
        let thread = {
            let shared = Arc::clone(&shared);
            std::thread::Builder::new()
                .name("tls-server".to_string())
                .spawn(move || accept(&listener, &shared))?
        };
        Ok(TlsServer {
            shared,
            address,
            thread: Some(thread),
        })
    }

    /// Sets what `target` (a path with its query, e.g. `/` or `/a?b=c`) answers.
    pub fn route(&self, target: &str, response: TlsResponse) {
        self.route_sequence(target, vec![response]);
    }

    /// Sets what `target` answers request after request: each of `responses` once, in order,
    /// and the last one from then on (a provider that fails twice, then answers).
    pub fn route_sequence(&self, target: &str, responses: Vec<TlsResponse>) {
        lock(&self.shared.routes).insert(target.to_string(), responses);
    }

    /// Serves every file below `dir` at `prefix` followed by its path relative to `dir`
    /// (`/repo.git` + `/info/refs`), as `application/octet-stream`: a folder as a static site,
    /// such as a bare git repository for git's "dumb" HTTP protocol. Panics if `dir` cannot
    /// be read.
    pub fn route_folder(&self, prefix: &str, dir: &std::path::Path) {
        let mut stack = vec![dir.to_path_buf()];
        while let Some(folder) = stack.pop() {
            let entries = must(std::fs::read_dir(&folder), "read a served folder");
            for entry in entries {
                let path = must(entry, "read a served folder's entry").path();
                if path.is_dir() {
                    stack.push(path);
                    continue;
                }
                let Ok(relative) = path.strip_prefix(dir) else {
                    continue;
                };
                let bytes = must(std::fs::read(&path), "read a served file");
                self.route(
                    &format!("{prefix}/{}", relative.display()),
                    TlsResponse::ok("application/octet-stream", bytes),
                );
            }
        }
    }

    /// The server's address (127.0.0.1 and its port).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The server's port.
    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// `https://{host}:{port}{path}` for this server.
    pub fn url(&self, host: &str, path: &str) -> String {
        format!("https://{host}:{}{path}", self.port())
    }

    /// Every request read so far, in order.
    pub fn requests(&self) -> Vec<TlsRequest> {
        lock(&self.shared.requests).clone()
    }

    /// How many TCP connections were accepted so far (a failed handshake counts too).
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }
}

impl Drop for TlsServer {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop up.
        let _ = TcpStream::connect_timeout(&self.address, Duration::from_secs(1));
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

fn accept(listener: &TcpListener, shared: &Arc<Shared>) {
    for stream in listener.incoming() {
        if shared.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(stream) = stream else { continue };
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let shared = Arc::clone(shared);
        // Each connection ends by itself (time limits above); no need to join it.
        let _ = std::thread::Builder::new()
            .name("tls-server-connection".to_string())
            .spawn(move || {
                let _ = serve(stream, &shared);
            });
    }
}

fn serve(stream: TcpStream, shared: &Shared) -> io::Result<()> {
    stream.set_read_timeout(Some(CONNECTION_LIMIT))?;
    stream.set_write_timeout(Some(CONNECTION_LIMIT))?;
    let connection = ServerConnection::new(Arc::clone(&shared.config)).map_err(io::Error::other)?;
    let mut tls = StreamOwned::new(connection, stream);
    let Some(request) = read_request(&mut tls)? else {
        return Ok(());
    };
    let target = request.target.clone();
    lock(&shared.requests).push(request);
    let response = {
        let mut routes = lock(&shared.routes);
        match routes.get_mut(&target) {
            Some(responses) if responses.len() > 1 => responses.remove(0),
            Some(responses) => responses
                .first()
                .cloned()
                .unwrap_or_else(|| TlsResponse::status(404, "not found")),
            None => TlsResponse::status(404, "not found"),
        }
    };
    match response.behaviour {
        Behaviour::Whole => {
            let mut bytes = head(&response, Some(response.body.len()));
            bytes.extend_from_slice(&response.body);
            tls.write_all(&bytes)?;
        }
        Behaviour::Hang => {
            let started = Instant::now();
            while !shared.stop.load(Ordering::SeqCst) && started.elapsed() < CONNECTION_LIMIT {
                std::thread::sleep(Duration::from_millis(10));
            }
            return Ok(());
        }
        Behaviour::Endless => {
            tls.write_all(&head(&response, None))?;
            let chunk = if response.body.is_empty() {
                vec![b'x'; 16 * 1024]
            } else {
                response.body.clone()
            };
            let mut sent = 0;
            while sent < ENDLESS_LIMIT && !shared.stop.load(Ordering::SeqCst) {
                tls.write_all(&chunk)?;
                sent += chunk.len();
            }
        }
    }
    tls.flush()?;
    tls.conn.send_close_notify();
    tls.flush()
}

fn head(response: &TlsResponse, length: Option<usize>) -> Vec<u8> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\nConnection: close\r\n",
        response.status,
        reason(response.status)
    );
    if let Some(length) = length {
        head.push_str(&format!("Content-Length: {length}\r\n"));
    }
    for (name, value) in &response.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("\r\n");
    head.into_bytes()
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        404 => "Not Found",
        500 => "Internal Server Error",
        _ => "Status",
    }
}

/// Reads the request head (a GET has no body). `None` when the client leaves first.
fn read_request(tls: &mut impl Read) -> io::Result<Option<TlsRequest>> {
    let mut bytes = Vec::new();
    let mut buffer = [0u8; 4096];
    let end = loop {
        if let Some(end) = bytes.windows(4).position(|window| window == b"\r\n\r\n") {
            break end;
        }
        if bytes.len() > 64 * 1024 {
            return Err(io::Error::other("request head too long"));
        }
        match tls.read(&mut buffer) {
            Ok(0) => return Ok(None),
            Ok(read) => bytes.extend_from_slice(&buffer[..read]),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    };
    let text = String::from_utf8_lossy(&bytes[..end]);
    let mut lines = text.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_string();
    let target = first.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_string()))
        .collect();
    let host = headers
        .iter()
        .find(|(name, _)| name == "host")
        .map(|(_, value)| value.clone());
    let length: usize = headers
        .iter()
        .find(|(name, _)| name == "content-length")
        .and_then(|(_, value)| value.parse().ok())
        .unwrap_or(0)
        .min(1024 * 1024);
    let mut body = bytes[end + 4..].to_vec();
    while body.len() < length {
        match tls.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => body.extend_from_slice(&buffer[..read]),
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    body.truncate(length);
    Ok(Some(TlsRequest {
        method,
        target,
        host,
        headers,
        body,
    }))
}
