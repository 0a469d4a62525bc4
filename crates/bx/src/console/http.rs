//! The console's responses: the headers every one carries (a strict Content-Security-Policy
//! among them), whole bodies and the live stream's body.

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::Frame;
use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use tokio::sync::mpsc;

use super::page;
use std::time::Duration;

/// The script and the stylesheet, embedded in the binary.
pub const SCRIPT: &str = include_str!("console.js");
pub const STYLE: &str = include_str!("console.css");
/// The most bytes a form may send.
pub const FORM_LIMIT: usize = 64 * 1024;
/// How often the live stream sends a comment, so a closed page is noticed and its watch ends.
pub const KEEPALIVE: Duration = Duration::from_secs(15);

/// The policy every response carries: this origin's script and style only, nothing embedded
/// elsewhere, no framing, forms posted here only.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

/// A response body: whole, or the live stream's chunks as they come.
pub enum Body {
    /// A whole body (taken when sent).
    Whole(Option<Bytes>),
    /// Chunks from a channel, until it closes.
    Live(mpsc::Receiver<Bytes>),
}

impl http_body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Whole(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Live(rx) => rx
                .poll_recv(cx)
                .map(|chunk| chunk.map(|b| Ok(Frame::data(b)))),
        }
    }
}

/// A response with every header the console sends.
pub fn respond(status: StatusCode, content_type: &'static str, body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    // Not `no-referrer`: under it a browser sends `Origin: null` with the page's own form
    // POSTs, which the Origin check must refuse.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// An HTML page.
pub fn html(status: StatusCode, body: String) -> Response<Body> {
    respond(
        status,
        "text/html; charset=utf-8",
        Body::Whole(Some(body.into())),
    )
}

/// 403 with a sentence saying why.
pub fn refused(words: &str) -> Response<Body> {
    html(StatusCode::FORBIDDEN, page::message("Forbidden", words))
}

/// 303 to `location`.
pub fn see_other(location: &'static str) -> Response<Body> {
    let mut response = respond(
        StatusCode::SEE_OTHER,
        "text/plain; charset=utf-8",
        Body::Whole(None),
    );
    response
        .headers_mut()
        .insert(header::LOCATION, HeaderValue::from_static(location));
    response
}

/// A request's query, decoded.
#[derive(Debug, Default, Clone)]
pub struct Query(Vec<(String, String)>);

impl Query {
    /// The query string's pairs (none for no query).
    pub fn parse(query: Option<&str>) -> Query {
        Query(
            query
                .into_iter()
                .flat_map(|q| url::form_urlencoded::parse(q.as_bytes()))
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// The first non-blank value of `name`, trimmed.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(key, value)| key == name && !value.trim().is_empty())
            .map(|(_, value)| value.trim())
    }
}

/// A value for a URL's query, percent-encoded.
pub fn encode(value: &str) -> String {
    url::form_urlencoded::byte_serialize(value.as_bytes()).collect()
}

/// The page for a broker that could not be asked.
pub fn no_broker(message: &str) -> Response<Body> {
    html(
        StatusCode::SERVICE_UNAVAILABLE,
        page::message("The broker did not answer", message),
    )
}
