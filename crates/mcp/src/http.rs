//! `bx mcp --http ADDR`: the same [`Gate`] over MCP's streamable HTTP, at `/mcp`, on the
//! address given (loopback by default). Every request must carry `Authorization: Bearer
//! <token>` with the token of `--token-file`, compared by hash in constant time (a loopback
//! port is open to every local user, unlike the agent socket); a request whose `Origin` is
//! not this server's own gets 403 (a web page cannot drive it), one whose `Host` is not the
//! address served gets 403 (DNS rebinding). Every HTTP session, whatever its `Mcp-Session-Id`,
//! serves the one broker session the process opened: a new HTTP session never opens a fresh
//! broker session.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use proto::ids::sha256_hex;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use tower_service::Service;

use crate::Gate;

/// The path the server answers on.
pub const PATH: &str = "/mcp";

/// The largest request body taken.
pub const MAX_BODY: usize = 16 << 20;

/// How `bx mcp --http` serves.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Where to listen.
    pub addr: SocketAddr,
    /// The bearer token every request must carry.
    pub token: String,
}

/// Reads the bearer token from `path`: its first line, at least 16 characters. The file must
/// be a secret file (`sandbox::secret`: this user's, mode 0600 or narrower, else refused with
/// the `chmod` that fixes it).
pub fn read_token(path: &std::path::Path) -> Result<String, String> {
    let text = sandbox::secret::read_secret(path).map_err(|e| format!("the token file: {e}"))?;
    let token = text.lines().next().unwrap_or("").trim().to_string();
    if token.len() < 16 {
        return Err(format!(
            "the token file {} must hold a token of at least 16 characters on its first line",
            path.display()
        ));
    }
    Ok(token)
}

/// The token of `path` ([`read_token`]), or, when there is no file there, a new random one
/// (32 bytes, hex) written to it as a secret file (mode 0600 from its creation, in a folder
/// made 0700 if missing, never over a file that appeared meanwhile): the token and whether it
/// is new.
pub fn token_or_new(path: &std::path::Path) -> Result<(String, bool), String> {
    if path.symlink_metadata().is_ok() {
        return read_token(path).map(|token| (token, false));
    }
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|e| format!("cannot make a token: {e}"))?;
    let token: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    if let Some(folder) = path.parent().filter(|f| !f.as_os_str().is_empty()) {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(folder)
            .map_err(|e| format!("cannot make the folder {}: {e}", folder.display()))?;
    }
    sandbox::secret::create_secret(path, format!("{token}\n").as_bytes())
        .map_err(|e| format!("the token file: {e}"))?;
    Ok((token, true))
}

/// Whether `request` carries the bearer token whose hash is `want`.
fn authorized<B>(request: &Request<B>, want: &str) -> bool {
    request
        .headers()
        .get(hyper::header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .is_some_and(|given| proto::ids::digests_equal(&sha256_hex(given.trim().as_bytes()), want))
}

fn plain(status: StatusCode, text: &str) -> Response<BoxBody<Bytes, Infallible>> {
    let mut response = Response::new(Full::new(Bytes::from(text.to_string())).boxed());
    *response.status_mut() = status;
    if let Ok(value) = hyper::header::HeaderValue::from_str("text/plain; charset=utf-8") {
        response
            .headers_mut()
            .insert(hyper::header::CONTENT_TYPE, value);
    }
    if status == StatusCode::UNAUTHORIZED
        && let Ok(value) = hyper::header::HeaderValue::from_str("Bearer")
    {
        response
            .headers_mut()
            .insert(hyper::header::WWW_AUTHENTICATE, value);
    }
    response
}

/// Serves `gate` as `options` say until the process ends; `ready` gets the address bound
/// (the port chosen when `options.addr` names port 0).
pub async fn serve_http(
    gate: Gate,
    options: HttpOptions,
    ready: impl FnOnce(SocketAddr),
) -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind(options.addr)
        .await
        .map_err(|e| format!("cannot listen on {}: {e}", options.addr))?;
    let bound = listener
        .local_addr()
        .map_err(|e| format!("cannot read the address listened on: {e}"))?;
    let host = bound.ip().to_string();
    let authority = bound.to_string();
    let mut hosts = vec![
        "localhost".to_string(),
        format!("localhost:{}", bound.port()),
        host.clone(),
        authority.clone(),
    ];
    if bound.ip().is_ipv6() {
        hosts.push(format!("[{host}]"));
    }
    let origins = [
        format!("http://localhost:{}", bound.port()),
        format!("http://{authority}"),
    ];
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .enforce_origin_validation()
        .with_max_request_body_bytes(MAX_BODY);
    let service = StreamableHttpService::new(
        move || Ok(gate.clone()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let want = Arc::new(sha256_hex(options.token.as_bytes()));
    ready(bound);
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(error) => {
                tracing::warn!(%error, "cannot accept an MCP connection");
                continue;
            }
        };
        let service = service.clone();
        let want = want.clone();
        tokio::spawn(async move {
            let handler = hyper::service::service_fn(move |request: Request<Incoming>| {
                let mut service = service.clone();
                let want = want.clone();
                async move {
                    if request.uri().path() != PATH {
                        return Ok::<_, Infallible>(plain(
                            StatusCode::NOT_FOUND,
                            "boxmaker's MCP server answers on /mcp only",
                        ));
                    }
                    if !authorized(&request, &want) {
                        return Ok(plain(
                            StatusCode::UNAUTHORIZED,
                            "a bearer token is required: Authorization: Bearer <the token of bx mcp --token-file>",
                        ));
                    }
                    service.call(request).await
                }
            });
            if let Err(error) = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), handler)
                .await
            {
                tracing::debug!(%peer, %error, "an MCP connection ended with an error");
            }
        });
    }
}
