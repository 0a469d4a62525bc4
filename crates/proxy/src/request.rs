//! The requests the proxy takes, read from a bounded head: `CONNECT host:port HTTP/1.1` (a
//! tunnel) or a plain `http://` request in absolute form (forwarded once, in origin form); and
//! the answers it writes: `200` when the tunnel is up, otherwise a status with one sentence.

use policy::hosts::split_host_port;

/// An answer that ends the connection: its status, the sentence that says why, and what kind
/// of refusal it is (the broker turns a refused `http_fetch` hop into the matching denial).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    /// The HTTP status.
    pub(super) status: u16,
    /// One line naming what is wrong.
    pub(super) reason: String,
    /// What was refused.
    pub(super) kind: RefusalKind,
}

/// What a refusal refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusalKind {
    /// The host and port are not the box's to reach.
    NotGranted,
    /// The host is (or resolves to) an address the box may not reach.
    UnsafeAddress,
    /// Anything else: a bad request, a limit, a host that cannot be resolved or reached.
    Other,
}

impl Refusal {
    /// A refusal with `status` and `reason`.
    pub(super) fn new(status: u16, reason: impl Into<String>) -> Refusal {
        Refusal {
            status,
            reason: reason.into(),
            kind: RefusalKind::Other,
        }
    }

    /// The same refusal, of `kind`.
    pub(super) fn of(mut self, kind: RefusalKind) -> Refusal {
        self.kind = kind;
        self
    }

    /// The whole answer: status line, a few headers, the sentence as a text body.
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let body = format!("{}\n", self.reason);
        let allow = if self.status == 405 {
            "Allow: CONNECT, GET, HEAD, POST, PUT, PATCH, DELETE, OPTIONS\r\n"
        } else {
            ""
        };
        format!(
            "HTTP/1.1 {} {}\r\n{allow}Content-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.status,
            phrase(self.status),
            body.len()
        )
        .into_bytes()
    }
}

/// The answer that opens the tunnel.
pub(super) const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

fn phrase(status: u16) -> &'static str {
    match status {
        400 => "Bad Request",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Error",
    }
}

/// Where the head ends in `bytes` (the index just past its blank line), if it has ended: a blank
/// line is `\r\n\r\n`, or `\n\n` from a lenient client.
pub(super) fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4);
    let lf = bytes.windows(2).position(|w| w == b"\n\n").map(|i| i + 2);
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// What a complete head asks the proxy for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Target {
    /// The host, lower case (an IPv6 address without brackets).
    pub(super) host: String,
    /// The port.
    pub(super) port: u16,
    /// `None` for a `CONNECT` tunnel; for a plain `http://` request in absolute form, the head
    /// to send the server instead: origin form, `Host` the URL's, no `Proxy-*` header, and
    /// `Connection: close` (one request a connection).
    pub(super) forward: Option<Vec<u8>>,
}

/// The target a complete head asks to reach, or the refusal it gets.
pub(super) fn parse_head(head: &[u8]) -> Result<Target, Refusal> {
    let Ok(text) = std::str::from_utf8(head) else {
        return Err(Refusal::new(
            400,
            "the request is not text: the proxy takes CONNECT host:port or a plain http:// request",
        ));
    };
    let line = text
        .lines()
        .next()
        .unwrap_or_default()
        .trim_end_matches('\r');
    let mut words = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        return Err(Refusal::new(
            400,
            format!(
                "the request line {:?} is not METHOD TARGET HTTP/1.1",
                shorten(line)
            ),
        ));
    };
    if version != "HTTP/1.1" && version != "HTTP/1.0" {
        return Err(Refusal::new(
            400,
            format!("{:?} is not HTTP/1.1 or HTTP/1.0", shorten(version)),
        ));
    }
    if method == "CONNECT" {
        let (host, port) = connect_target(target)?;
        return Ok(Target {
            host,
            port,
            forward: None,
        });
    }
    if !FORWARDED_METHODS.contains(&method) {
        return Err(Refusal::new(
            405,
            format!(
                "the proxy takes CONNECT host:port (an https:// tunnel) or {} of a plain http:// URL, not {}",
                FORWARDED_METHODS.join(", "),
                shorten(method)
            ),
        ));
    }
    let (host, port, authority, path) = absolute_target(target)?;
    let forward = origin_head(text, method, &path, version, &authority);
    Ok(Target {
        host,
        port,
        forward: Some(forward),
    })
}

/// The methods of a plain `http://` request the proxy forwards.
const FORWARDED_METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"];

/// The host, port (80 when the URL names none), authority (`host[:port]` as the `Host` header
/// gives it) and origin-form path (`/…?…`, never empty) of an absolute-form `http://` target.
fn absolute_target(target: &str) -> Result<(String, u16, String, String), Refusal> {
    let bad = |why: &str| Refusal::new(400, format!("{:?}: {why}", shorten(target)));
    let Some(scheme_end) = target.find("://") else {
        return Err(bad(
            "a plain request to the proxy must name an absolute http:// URL",
        ));
    };
    let scheme = &target[..scheme_end];
    if scheme.eq_ignore_ascii_case("https") {
        return Err(bad(
            "an https:// URL goes through the proxy as CONNECT host:443, not as a plain request",
        ));
    }
    if !scheme.eq_ignore_ascii_case("http") {
        return Err(bad("the proxy forwards only http:// URLs"));
    }
    let rest = &target[scheme_end + 3..];
    let split = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(split);
    if authority.contains('@') {
        return Err(bad("a URL with a user name or password is not forwarded"));
    }
    let has_port = match authority.strip_prefix('[') {
        Some(inside) => inside.contains("]:"),
        None => authority.contains(':'),
    };
    let (host, written) =
        split_host_port(authority).map_err(|why| bad(&format!("it has {why}")))?;
    let port = if has_port { written } else { 80 };
    // The server is told the host as it was checked: its canonical form.
    let authority = match (has_port, host.contains(':')) {
        (true, _) => host_port(&host, port),
        (false, true) => format!("[{host}]"),
        (false, false) => host.clone(),
    };
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    Ok((host, port, authority, path))
}

/// The head the server gets for a forwarded request: `METHOD path version`, the client's
/// headers but `Host`, `Connection`, `Keep-Alive`, `Proxy-Connection` and `Proxy-Authorization`,
/// then `Host: authority` and `Connection: close`.
fn origin_head(text: &str, method: &str, path: &str, version: &str, authority: &str) -> Vec<u8> {
    let mut head = format!("{method} {path} {version}\r\n");
    for line in text.lines().skip(1) {
        let line = line.trim_end_matches('\r');
        if line.is_empty() {
            break;
        }
        let name = line.split(':').next().unwrap_or_default().trim();
        let dropped = [
            "host",
            "connection",
            "keep-alive",
            "proxy-connection",
            "proxy-authorization",
        ]
        .iter()
        .any(|d| name.eq_ignore_ascii_case(d));
        if !dropped {
            head.push_str(line);
            head.push_str("\r\n");
        }
    }
    head.push_str(&format!("Host: {authority}\r\nConnection: close\r\n\r\n"));
    head.into_bytes()
}

/// `host:port` of a CONNECT line: the port must be written.
fn connect_target(target: &str) -> Result<(String, u16), Refusal> {
    let bad = |why: String| Refusal::new(400, format!("CONNECT {:?}: {why}", shorten(target)));
    let has_port = match target.strip_prefix('[') {
        Some(rest) => rest.contains("]:"),
        None => target.contains(':'),
    };
    if !has_port {
        return Err(bad("the target must be host:port".to_string()));
    }
    split_host_port(target).map_err(|why| bad(format!("it has {why}")))
}

/// At most 80 characters of `text`, for a sentence about it.
fn shorten(text: &str) -> String {
    let cut = proto::text::cut_at_boundary(text, 80);
    if cut.len() < text.len() {
        format!("{cut}…")
    } else {
        cut.to_string()
    }
}

/// `host:port`, with brackets around an IPv6 address.
pub(super) fn host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_head_gives_its_host_and_port() {
        let head = b"CONNECT Granted.Test.:8443 HTTP/1.1\r\nHost: granted.test:8443\r\n\r\n";
        assert_eq!(head_end(head), Some(head.len()));
        let tunnel = |host: &str, port| Target {
            host: host.to_string(),
            port,
            forward: None,
        };
        assert_eq!(parse_head(head), Ok(tunnel("granted.test", 8443)));
        assert_eq!(
            parse_head(b"CONNECT [::1]:443 HTTP/1.0\n\n"),
            Ok(tunnel("::1", 443))
        );
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\n"), None);
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\n\r\nTLS"), Some(24));
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\n\nTLS"), Some(22));
    }

    #[test]
    fn a_plain_http_request_is_forwarded_in_origin_form_with_the_urls_host_canonical() {
        let head = b"GET http://Plain.Test/a/b?c=1 HTTP/1.1\r\nHost: elsewhere.test\r\nAccept: */*\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: Basic eA==\r\nConnection: keep-alive\r\n\r\n";
        let target = parse_head(head).unwrap();
        assert_eq!((target.host.as_str(), target.port), ("plain.test", 80));
        assert_eq!(
            String::from_utf8(target.forward.unwrap()).unwrap(),
            "GET /a/b?c=1 HTTP/1.1\r\nAccept: */*\r\nHost: plain.test\r\nConnection: close\r\n\r\n"
        );
        let target = parse_head(b"POST http://[::1]:8080?q HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!((target.host.as_str(), target.port), ("::1", 8080));
        assert_eq!(
            String::from_utf8(target.forward.unwrap()).unwrap(),
            "POST /?q HTTP/1.0\r\nHost: [::1]:8080\r\nConnection: close\r\n\r\n"
        );
    }

    #[test]
    fn anything_but_connect_or_a_plain_http_request_is_refused_with_a_sentence() {
        let status = |head: &[u8]| parse_head(head).map_err(|r| (r.status, r.reason));
        let (code, why) = status(b"BREW http://x.test/ HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(code, 405);
        assert!(
            why.contains("CONNECT host:port (an https:// tunnel) or GET"),
            "{why}"
        );
        for (head, words) in [
            (
                &b"GET /local HTTP/1.1\r\n\r\n"[..],
                "must name an absolute http:// URL",
            ),
            (
                b"GET https://x.test/ HTTP/1.1\r\n\r\n",
                "as CONNECT host:443",
            ),
            (b"GET ftp://x.test/ HTTP/1.1\r\n\r\n", "only http:// URLs"),
            (
                b"GET http://u:p@x.test/ HTTP/1.1\r\n\r\n",
                "user name or password",
            ),
            (b"GET http://x.test:0/ HTTP/1.1\r\n\r\n", "invalid port"),
            (
                b"GET http://bad!host/ HTTP/1.1\r\n\r\n",
                "no host name has (U+0021)",
            ),
        ] {
            let (code, why) = status(head).unwrap_err();
            assert_eq!(code, 400, "{why}");
            assert!(why.contains(words), "{words}: {why}");
        }
        for (head, words) in [
            (&b"CONNECT x.test HTTP/1.1\r\n\r\n"[..], "must be host:port"),
            (b"CONNECT x.test:0 HTTP/1.1\r\n\r\n", "invalid port"),
            (b"CONNECT x.test:99999 HTTP/1.1\r\n\r\n", "invalid port"),
            (
                b"CONNECT bad!host:443 HTTP/1.1\r\n\r\n",
                "no host name has (U+0021)",
            ),
            (b"CONNECT [nope]:443 HTTP/1.1\r\n\r\n", "IPv6"),
            (b"CONNECT ::1:443 HTTP/1.1\r\n\r\n", "outside brackets"),
            (b"CONNECT x.test:443 SPDY/3\r\n\r\n", "is not HTTP/1.1"),
            (b"CONNECT x.test:443\r\n\r\n", "is not METHOD TARGET"),
            (b"\xff\xfe\r\n\r\n", "not text"),
        ] {
            let (code, why) = status(head).unwrap_err();
            assert_eq!(code, 400, "{why}");
            assert!(why.contains(words), "{words}: {why}");
        }
    }

    #[test]
    fn a_refusal_is_one_sentence_in_a_closed_answer() {
        let bytes = Refusal::new(403, "x.test:443 is not granted").to_bytes();
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{text}");
        assert!(text.contains("Content-Length: 26\r\n"), "{text}");
        assert!(
            text.ends_with("\r\n\r\nx.test:443 is not granted\n"),
            "{text}"
        );
        let text = String::from_utf8(Refusal::new(405, "no").to_bytes()).unwrap();
        assert!(text.contains("Allow: CONNECT, GET,"), "{text}");
    }
}
