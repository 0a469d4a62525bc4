//! The console's routes over hyper: the checks every request passes first, the login, the
//! inbox, the owner's answers (POSTs with a CSRF token), the live stream (server-sent events
//! fed by the owner socket's watch stream), and the other views' pages.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;
use hyper::header::{self, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use proto::dirs::Dirs;
use proto::{ApprovalId, OwnerEvent, OwnerReply, OwnerRequest, PendingView};
use tokio::sync::mpsc;

use super::guard::{self, Gate, Hosts, LoginRefused, Session};
use super::http::{
    Body, FORM_LIMIT, KEEPALIVE, Query, SCRIPT, STYLE, html, no_broker, refused, respond, see_other,
};
use super::{audit, broker, calls, grants, page, sessions};
use crate::owner::Owner;

/// What every request's handler shares.
pub struct Console {
    /// The hosts a request may name.
    pub hosts: Hosts,
    /// The login token and the sessions.
    pub gate: Gate,
    /// The session cookie's name.
    pub cookie: String,
    /// The broker's owner socket.
    pub socket: PathBuf,
    /// bx's folders (the grants folder, for the Grants view's check).
    pub dirs: Dirs,
}

fn header_str(request: &Request<Incoming>, name: header::HeaderName) -> Option<&str> {
    request.headers().get(name).and_then(|v| v.to_str().ok())
}

/// Answers one request. `Host` and `Origin` come first: a foreign one is refused whatever
/// the cookie. Then the login; then every other route needs the session cookie.
pub async fn handle(
    console: Arc<Console>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Infallible> {
    let host = header_str(&request, header::HOST);
    let origin = header_str(&request, header::ORIGIN);
    if !console.hosts.admits(host, origin) {
        return Ok(refused(
            "This console answers only requests addressed to its own listen address.",
        ));
    }
    let path = request.uri().path().to_string();
    if path == "/login" && request.method() == Method::GET {
        return Ok(login(&console, request.uri().query()));
    }
    let cookies = header_str(&request, header::COOKIE);
    let Some(session) = console.gate.session(cookies, &console.cookie) else {
        return Ok(refused(
            "Open the address `bx console` printed to log in (each address works once).",
        ));
    };
    Ok(match (request.method().clone(), path.as_str()) {
        (Method::GET, "/") => inbox(&console, &session).await,
        (Method::GET, "/static/console.js") => respond(
            StatusCode::OK,
            "text/javascript; charset=utf-8",
            Body::Whole(Some(SCRIPT.into())),
        ),
        (Method::GET, "/static/console.css") => respond(
            StatusCode::OK,
            "text/css; charset=utf-8",
            Body::Whole(Some(STYLE.into())),
        ),
        (Method::GET, "/events") => live(&console, session),
        (Method::GET, "/calls") => calls::view(&Query::parse(request.uri().query())),
        (Method::GET, "/sessions") => sessions::list(console.socket.clone()).await,
        (Method::GET, "/session") => {
            sessions::one(console.socket.clone(), &Query::parse(request.uri().query())).await
        }
        (Method::GET, "/audit") => {
            audit::view(console.socket.clone(), &Query::parse(request.uri().query())).await
        }
        (Method::GET, "/audit/export") => {
            audit::export(console.socket.clone(), &Query::parse(request.uri().query())).await
        }
        (Method::GET, "/grants") => grants::view(console.dirs.clone()).await,
        (Method::POST, "/approve" | "/refuse" | "/answer") => {
            settle(&console, &session, &path, request).await
        }
        _ => html(
            StatusCode::NOT_FOUND,
            page::message("Not found", "There is no such page."),
        ),
    })
}

fn login(console: &Console, query: Option<&str>) -> Response<Body> {
    let token = query
        .into_iter()
        .flat_map(|q| url::form_urlencoded::parse(q.as_bytes()))
        .find(|(key, _)| key == "token")
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default();
    match console.gate.login(&token) {
        Ok(cookie) => {
            let mut response = see_other("/");
            let value = format!(
                "{}={cookie}; HttpOnly; SameSite=Strict; Path=/",
                console.cookie
            );
            if let Ok(value) = HeaderValue::from_str(&value) {
                response.headers_mut().insert(header::SET_COOKIE, value);
            }
            response
        }
        Err(LoginRefused::BadToken) => refused(
            "This login address was already used, or is wrong: restart `bx console` for a new one.",
        ),
        Err(LoginRefused::Expired) => refused(
            "This login address is more than 10 minutes old: restart `bx console` for a new one.",
        ),
        Err(LoginRefused::NoRandomness) => html(
            StatusCode::INTERNAL_SERVER_ERROR,
            page::message("Error", "The system gave no randomness for a session."),
        ),
    }
}

async fn inbox(console: &Console, session: &Session) -> Response<Body> {
    match broker::request(console.socket.clone(), OwnerRequest::ListPending {}).await {
        Ok(OwnerReply::Pending { pending }) => {
            html(StatusCode::OK, page::inbox(&pending, &session.csrf))
        }
        Ok(OwnerReply::Error { message, .. }) | Err(message) => no_broker(&message),
        Ok(other) => html(
            StatusCode::BAD_GATEWAY,
            page::message("Unexpected reply", &format!("{other:?}")),
        ),
    }
}

async fn settle(
    console: &Console,
    session: &Session,
    path: &str,
    request: Request<Incoming>,
) -> Response<Body> {
    let body = match Limited::new(request.into_body(), FORM_LIMIT)
        .collect()
        .await
    {
        Ok(body) => body.to_bytes(),
        Err(_) => {
            return html(
                StatusCode::PAYLOAD_TOO_LARGE,
                page::message("Too large", "The form was too large."),
            );
        }
    };
    let field = |name: &str| {
        url::form_urlencoded::parse(&body)
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.into_owned())
    };
    if !guard::csrf_ok(session, field("csrf").as_deref()) {
        return refused("The form carried no valid CSRF token: reload the inbox and try again.");
    }
    let Some(approval) = field("id").and_then(|id| id.parse().ok()).map(ApprovalId) else {
        return html(
            StatusCode::BAD_REQUEST,
            page::message("Bad request", "The form named no approval."),
        );
    };
    let request = match path {
        "/approve" => OwnerRequest::Approve {
            approval,
            for_session: field("scope").as_deref() == Some("session"),
        },
        "/refuse" => OwnerRequest::Refuse { approval },
        _ => match field("text").filter(|t| !t.trim().is_empty()) {
            Some(text) => OwnerRequest::Answer { approval, text },
            None => {
                return html(
                    StatusCode::BAD_REQUEST,
                    page::message("Bad request", "An answer needs some text."),
                );
            }
        },
    };
    match broker::request(console.socket.clone(), request).await {
        Ok(OwnerReply::Done { .. }) => see_other("/"),
        Ok(OwnerReply::Error { message, .. }) | Err(message) => {
            html(StatusCode::CONFLICT, page::message("Not done", &message))
        }
        Ok(other) => html(
            StatusCode::BAD_GATEWAY,
            page::message("Unexpected reply", &format!("{other:?}")),
        ),
    }
}

/// One server-sent event; `data` may hold line feeds (each line its own `data:` field).
fn sse(event: &str, data: &str) -> Bytes {
    let mut out = format!("event: {event}\n");
    for line in data.replace('\r', "&#13;").split('\n') {
        out.push_str("data: ");
        out.push_str(line);
        out.push('\n');
    }
    out.push('\n');
    out.into()
}

/// The live stream: a thread reads the owner socket's watch stream (which starts with every
/// waiting approval) and sends each pending one as its rendered `<li>`, each resolved one as
/// its id. A keepalive notices a closed page; then the watch connection is shut.
fn live(console: &Console, session: Session) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let socket = console.socket.clone();
    let watching: Arc<Mutex<Option<UnixStream>>> = Arc::default();
    let shared = Arc::clone(&watching);
    let feed = tx.clone();
    std::thread::spawn(move || {
        let _ = feed.blocking_send(Bytes::from_static(b"retry: 2000\n\n"));
        let opened = Owner::connect(&socket).and_then(|mut owner| {
            owner.send(&OwnerRequest::Watch {})?;
            let handle = owner.try_clone_stream()?;
            Ok((owner, handle))
        });
        let mut owner = match opened {
            Ok((owner, handle)) => {
                *shared.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
                owner
            }
            Err(e) => {
                let _ = feed.blocking_send(sse("broker", &e.to_string()));
                return;
            }
        };
        loop {
            let (chunk, ended) = match owner.next() {
                Ok(OwnerReply::Event { event }) => match event_chunk(&event, &session) {
                    Some(chunk) => (chunk, false),
                    None => continue,
                },
                Ok(other) => (sse("broker", &owner.unexpected(&other).to_string()), true),
                Err(e) => (sse("broker", &e.to_string()), true),
            };
            if feed.blocking_send(chunk).is_err() || ended {
                return;
            }
        }
    });
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tx.closed() => break,
                () = tokio::time::sleep(KEEPALIVE) => {
                    if tx.send(Bytes::from_static(b": keepalive\n\n")).await.is_err() {
                        break;
                    }
                }
            }
        }
        if let Some(handle) = watching.lock().unwrap_or_else(|e| e.into_inner()).take() {
            let _ = handle.shutdown(std::net::Shutdown::Both);
        }
    });
    let mut response = respond(StatusCode::OK, "text/event-stream", Body::Live(rx));
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// The events a page needs for `event`, if any: the inbox's `pending` and `resolved`, the
/// live calls' `call` (a rendered row).
fn event_chunk(event: &OwnerEvent, session: &Session) -> Option<Bytes> {
    let row = calls::row(event).map(|row| sse("call", &row));
    let inbox = match event {
        OwnerEvent::Pending { pending } => Some(pending_chunk(pending, session)),
        OwnerEvent::Resolved { approval, .. } => Some(sse("resolved", &approval.0.to_string())),
        OwnerEvent::Lagged { .. } => Some(sse("lagged", "")),
        _ => None,
    };
    match (inbox, row) {
        (Some(inbox), Some(row)) => Some([inbox, row].concat().into()),
        (one, other) => one.or(other),
    }
}

fn pending_chunk(view: &PendingView, session: &Session) -> Bytes {
    sse("pending", &page::item(view, &session.csrf))
}

/// Where the console listens, as printed and as checked in `Host`.
pub fn login_address(addr: SocketAddr, token: &str) -> String {
    format!("http://{addr}/login?token={token}")
}

/// The session cookie's name for a console on `addr`.
pub fn cookie_for(addr: SocketAddr) -> String {
    guard::cookie_name(addr)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_of_several_lines_stays_one_event_and_a_carriage_return_cannot_split_it() {
        let chunk = sse("pending", "<li>\n<pre>a\rdata: forged</pre>\n</li>");
        assert_eq!(
            &chunk[..],
            b"event: pending\ndata: <li>\ndata: <pre>a&#13;data: forged</pre>\ndata: </li>\n\n"
        );
    }
}
