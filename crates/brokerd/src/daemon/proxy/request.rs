//! The one request the proxy takes, `CONNECT host:port HTTP/1.1`, read from a bounded head, and
//! the answers it writes: `200` when the tunnel is up, otherwise a status with one sentence.

use policy::hosts::{split_host_port, valid_host};

/// An answer that ends the connection: its status and the sentence that says why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refusal {
    /// The HTTP status.
    pub(super) status: u16,
    /// One line naming what is wrong.
    pub(super) reason: String,
}

impl Refusal {
    /// A refusal with `status` and `reason`.
    pub(super) fn new(status: u16, reason: impl Into<String>) -> Refusal {
        Refusal {
            status,
            reason: reason.into(),
        }
    }

    /// The whole answer: status line, a few headers, the sentence as a text body.
    pub(super) fn to_bytes(&self) -> Vec<u8> {
        let body = format!("{}\n", self.reason);
        let allow = if self.status == 405 {
            "Allow: CONNECT\r\n"
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

/// The host (lower case, an IPv6 address without brackets) and port a complete head asks to
/// reach, or the refusal it gets.
pub(super) fn parse_head(head: &[u8]) -> Result<(String, u16), Refusal> {
    let Ok(text) = std::str::from_utf8(head) else {
        return Err(Refusal::new(
            400,
            "the request is not text: the proxy takes only CONNECT host:port HTTP/1.1",
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
    if method != "CONNECT" {
        return Err(Refusal::new(
            405,
            format!(
                "the proxy takes only CONNECT host:port (an https:// tunnel), not {}; plain http:// is not proxied",
                shorten(method)
            ),
        ));
    }
    connect_target(target)
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
    let (host, port) = split_host_port(target).map_err(|why| bad(format!("it has {why}")))?;
    if !valid_host(&host) {
        return Err(bad("that is not a host name or IP address".to_string()));
    }
    Ok((host, port))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connect_head_gives_its_host_and_port() {
        let head = b"CONNECT Granted.Test.:8443 HTTP/1.1\r\nHost: granted.test:8443\r\n\r\n";
        assert_eq!(head_end(head), Some(head.len()));
        assert_eq!(parse_head(head), Ok(("granted.test".to_string(), 8443)));
        assert_eq!(
            parse_head(b"CONNECT [::1]:443 HTTP/1.0\n\n"),
            Ok(("::1".to_string(), 443))
        );
    }

    #[test]
    fn the_head_ends_at_the_first_blank_line() {
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\n"), None);
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\r\n\r\nTLS"), Some(24));
        assert_eq!(head_end(b"CONNECT a:1 HTTP/1.1\n\nTLS"), Some(22));
    }

    #[test]
    fn anything_but_connect_host_port_is_refused_with_a_sentence() {
        let status = |head: &[u8]| parse_head(head).map_err(|r| (r.status, r.reason));
        let (code, why) = status(b"GET http://x.test/ HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(code, 405);
        assert!(why.contains("only CONNECT"), "{why}");
        for (head, words) in [
            (&b"CONNECT x.test HTTP/1.1\r\n\r\n"[..], "must be host:port"),
            (b"CONNECT x.test:0 HTTP/1.1\r\n\r\n", "invalid port"),
            (b"CONNECT x.test:99999 HTTP/1.1\r\n\r\n", "invalid port"),
            (b"CONNECT bad!host:443 HTTP/1.1\r\n\r\n", "not a host name"),
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
        assert!(text.contains("Allow: CONNECT\r\n"), "{text}");
    }
}
