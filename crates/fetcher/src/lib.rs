//! boxmaker's in-box fetcher, apart from the daemon: `http_fetch` run inside a box that holds
//! no file of the host's but the minimal system and this program, whose only way out is the
//! broker's proxy for that box (`HTTPS_PROXY`), which decides each hop's host again as a call
//! of its own. The page is read and converted here, in the box.
//!
//! The broker hands the [`FetchRequest`] as a file in the box's `/tmp` ([`REQUEST`], [`serve`])
//! or as one line on standard input to a session's warm fetcher ([`serve_warm`]), and reads the
//! rendered [`worker::Outcome`] back from standard output. `brokerd-fetch box-fetch [--warm]`
//! runs it; brokerd runs the same as `brokerd box-fetch` where no `brokerd-fetch` of its own
//! build is installed beside it.
//!
//! This crate links `proto`, `sandbox`, `worker` (the answer and the warm loop) and the tools
//! with their network half: never the daemon or SQLite.

use std::io::Write;
use std::path::Path;
use std::time::Duration;

use proto::DenyReason;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use worker::{Outcome, answer, serve_lines};

/// Where the request lies in the fetch worker's box.
pub const REQUEST: &str = "/tmp/boxmaker-fetch.json";

/// What the fetch worker is asked to do.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FetchRequest {
    /// The call's arguments.
    pub args: nettools::web::HttpFetchArgs,
    /// The whole fetch's time limit, in milliseconds.
    pub timeout_ms: u64,
    /// Trusted roots beside (instead of) the built-in ones, as the broker has them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub root_certificates: Vec<Vec<u8>>,
}

/// The outcome of a fetch: the page with its header fields, a denial for a host no grant
/// allows or an address refused, or the failure's sentence.
pub fn fetch_outcome(
    result: Result<nettools::web::FetchResult, nettools::web::FetchError>,
) -> Outcome {
    match result {
        Ok(fetched) => Outcome::Ran {
            fields: match json!({
                "url": fetched.url,
                "status": fetched.status,
                "content_type": fetched.content_type,
                "format": fetched.format,
                "bytes": fetched.bytes,
                "truncated": fetched.truncated,
                "total_chars": fetched.total_chars,
                "start_index": fetched.start_index,
                "next_start_index": fetched.next_start_index,
                "redirects": fetched.redirects,
            }) {
                Value::Object(map) => map,
                _ => Map::new(),
            },
            body: fetched.body,
        },
        Err(error @ nettools::web::FetchError::UnsafeAddress { .. }) => {
            Outcome::Denied(DenyReason::UnsafeAddress, error.to_string())
        }
        Err(error @ nettools::web::FetchError::HostNotAllowed { .. }) => {
            Outcome::Denied(DenyReason::NoGrant, error.to_string())
        }
        Err(error) => Outcome::Failed(error.to_string()),
    }
}

/// Runs the request at [`REQUEST`] in the fetch worker's box through the proxy its
/// environment names (`HTTPS_PROXY`), and prints the outcome as one JSON object.
pub fn serve() -> Result<(), String> {
    let path = Path::new(REQUEST);
    let shown = path.display();
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let request: FetchRequest =
        serde_json::from_str(&text).map_err(|e| format!("{shown} is not a request: {e}"))?;
    let proxy = box_proxy()?;
    let mut output = std::io::stdout().lock();
    writeln!(output, "{}", answer(fetch_through(request, &proxy)))
        .and_then(|()| output.flush())
        .map_err(|e| format!("cannot write the answer: {e}"))
}

/// The session's warm fetcher (`box-fetch --warm`): one request per line on standard input, one
/// answer line for each, each fetch through the box's proxy.
pub fn serve_warm() -> Result<(), String> {
    let proxy = box_proxy()?;
    serve_lines(|line| {
        answer(match serde_json::from_slice::<FetchRequest>(line) {
            Ok(request) => fetch_through(request, &proxy),
            Err(e) => Outcome::Failed(format!("the fetcher got a request it cannot read: {e}")),
        })
    })
}

/// The proxy the fetcher's box names (its relay).
fn box_proxy() -> Result<String, String> {
    std::env::var("HTTPS_PROXY")
        .map_err(|_| "the fetch worker's box names no proxy (HTTPS_PROXY)".to_string())
}

/// One fetch in the fetcher's box: the proxy decides every hop; the worker only keeps to https
/// and the redirect limit.
fn fetch_through(request: FetchRequest, proxy: &str) -> Outcome {
    let mut options = nettools::web::FetchOptions::new(|_: &str, _: u16| true)
        .with_timeout(Duration::from_millis(request.timeout_ms))
        .with_proxy(proxy);
    for root in request.root_certificates {
        options = options.with_root_certificate(root);
    }
    fetch_outcome(nettools::web::http_fetch(&request.args, &options))
}
