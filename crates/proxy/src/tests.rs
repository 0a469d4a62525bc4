//! The proxy on its own, in process: a tunnel and a plain request to a granted loopback
//! listener named explicitly, a box whose hosts are decided one by one, and each refusal with
//! its status and sentence.

use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixStream};

use super::{Limits, Proxies};
use policy::grants::{HostRule, host_rule};

/// An echo server on the host's loopback: its port.
async fn echo() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buffer = [0u8; 1024];
                while let Ok(n) = stream.read(&mut buffer).await {
                    if n == 0 || stream.write_all(&buffer[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    port
}

fn rules(written: &[String]) -> Vec<HostRule> {
    written.iter().map(|w| host_rule(w).unwrap()).collect()
}

fn proxies(folder: &std::path::Path, limits: Limits) -> Proxies {
    let resolver = Arc::new(|host: &str| -> io::Result<Vec<IpAddr>> {
        match host {
            "granted.test" | "a.wild.test" => Ok(vec!["127.0.0.1".parse().unwrap()]),
            "meta.test" => Ok(vec!["169.254.169.254".parse().unwrap()]),
            _ => Err(io::Error::other("unknown test name")),
        }
    });
    Proxies::new(
        folder.join("proxy"),
        tokio::runtime::Handle::current(),
        resolver,
    )
    .unwrap()
    .with_limits(limits)
}

/// Sends `head` on a new connection and reads the answer's head (and whatever came with it).
async fn ask(socket: &std::path::Path, head: &[u8]) -> (UnixStream, String) {
    let mut stream = UnixStream::connect(socket).await.unwrap();
    stream.write_all(head).await.unwrap();
    let mut answer = Vec::new();
    let mut chunk = [0u8; 1024];
    while !String::from_utf8_lossy(&answer).contains("\r\n\r\n") {
        let n = stream.read(&mut chunk).await.unwrap();
        assert_ne!(n, 0, "closed early: {}", String::from_utf8_lossy(&answer));
        answer.extend_from_slice(&chunk[..n]);
    }
    (stream, String::from_utf8_lossy(&answer).into_owned())
}

/// The whole answer of a refused request.
async fn refused(socket: &std::path::Path, head: &[u8]) -> String {
    let (mut stream, mut answer) = ask(socket, head).await;
    let mut rest = String::new();
    stream.read_to_string(&mut rest).await.unwrap();
    answer.push_str(&rest);
    answer
}

#[tokio::test]
async fn a_granted_host_gets_a_tunnel_and_everything_else_a_sentence() {
    let folder = tempfile::tempdir().unwrap();
    let port = echo().await;
    let proxies = proxies(folder.path(), Limits::default());
    let proxy = proxies
        .open(&rules(&[
            format!("granted.test:{port}"),
            format!("*.wild.test:{port}"),
            format!("meta.test:{port}"),
        ]))
        .unwrap();
    let socket = proxy.socket().to_path_buf();
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // Bytes sent with the head go through too.
    let head = format!("CONNECT granted.test:{port} HTTP/1.1\r\nHost: x\r\n\r\nfirst ");
    let (mut tunnel, answer) = ask(&socket, head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    tunnel.write_all(b"second").await.unwrap();
    tunnel.shutdown().await.unwrap();
    let mut echoed = answer.split_once("\r\n\r\n").unwrap().1.to_string();
    tunnel.read_to_string(&mut echoed).await.unwrap();
    assert_eq!(echoed, "first second");

    for (head, status, sentence) in [
        (
            format!("CONNECT other.test:{port} HTTP/1.1\r\n\r\n"),
            "403 Forbidden",
            format!("other.test:{port} is not a host granted to this box (granted: granted.test:{port}, *.wild.test:{port}, meta.test:{port})"),
        ),
        (
            format!("CONNECT granted.test:{} HTTP/1.1\r\n\r\n", port.wrapping_add(1).max(1)),
            "403 Forbidden",
            "is not a host granted to this box".to_string(),
        ),
        (
            format!("CONNECT a.wild.test:{port} HTTP/1.1\r\n\r\n"),
            "403 Forbidden",
            "a.wild.test resolves to 127.0.0.1, a loopback address; only a host the grant names itself (not through a wildcard) may reach one".to_string(),
        ),
        (
            format!("CONNECT meta.test:{port} HTTP/1.1\r\n\r\n"),
            "403 Forbidden",
            "meta.test resolves to 169.254.169.254, a cloud metadata address, which the proxy never connects to, whatever a grant says".to_string(),
        ),
        (
            format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n"),
            "403 Forbidden",
            "is not a host granted to this box".to_string(),
        ),
        (
            format!("BREW http://granted.test:{port}/ HTTP/1.1\r\n\r\n"),
            "405 Method Not Allowed",
            "the proxy takes CONNECT host:port (an https:// tunnel) or GET".to_string(),
        ),
        (
            "GET http://granted.test/ HTTP/1.1\r\n\r\n".to_string(),
            "403 Forbidden",
            "granted.test:80 is not a host granted to this box".to_string(),
        ),
        (
            "CONNECT bad!host:443 HTTP/1.1\r\n\r\n".to_string(),
            "400 Bad Request",
            "it has a character no host name has (U+0021)".to_string(),
        ),
        (
            format!("CONNECT x.test:1 HTTP/1.1\r\nX-Pad: {}\r\n\r\n", "a".repeat(9000)),
            "431 Request Header Fields Too Large",
            "the request head is longer than the 8192 bytes the proxy reads".to_string(),
        ),
        (
            format!("CONNECT x.test:1 HTTP/1.1\r\nX-Pad: {}", "a".repeat(20000)),
            "431 Request Header Fields Too Large",
            "longer than the 8192 bytes".to_string(),
        ),
    ] {
        let answer = refused(&socket, head.as_bytes()).await;
        assert!(answer.starts_with(&format!("HTTP/1.1 {status}\r\n")), "{head:.60}: {answer}");
        assert!(answer.contains(&sentence), "{head:.60}: {answer}");
    }
    let last = proxy.last_refused().unwrap();
    assert_eq!(last.kind, super::RefusalKind::Other);
    assert!(
        last.reason.contains("longer than the 8192 bytes"),
        "{last:?}"
    );

    // A plain http:// request reaches the granted host in origin form, once (the echo server
    // sends the head back as it got it).
    let head = format!(
        "GET http://granted.test:{port}/page?x=1 HTTP/1.1\r\nHost: other.test\r\nProxy-Connection: keep-alive\r\n\r\n"
    );
    let (mut plain, echoed) = ask(&socket, head.as_bytes()).await;
    plain.shutdown().await.unwrap();
    assert_eq!(
        echoed,
        format!("GET /page?x=1 HTTP/1.1\r\nHost: granted.test:{port}\r\nConnection: close\r\n\r\n")
    );

    // The proxy still serves after all that.
    let head = format!("CONNECT granted.test:{port} HTTP/1.1\r\n\r\n");
    let (_tunnel, answer) = ask(&socket, head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");

    drop(proxy);
    assert!(!socket.exists(), "the socket outlived its box");
    assert!(UnixStream::connect(&socket).await.is_err());
}

#[tokio::test]
async fn every_spelling_of_a_granted_host_is_that_host_and_a_byte_outside_the_grammar_is_refused() {
    let folder = tempfile::tempdir().unwrap();
    let port = echo().await;
    let proxies = proxies(folder.path(), Limits::default());
    let proxy = proxies
        .open(&rules(&[
            format!("granted.test:{port}"),
            format!("127.0.0.1:{port}"),
        ]))
        .unwrap();
    let socket = proxy.socket().to_path_buf();
    for spelling in [
        "granted.test",
        "GRANTED.Test.",
        "\u{ff47}\u{ff52}\u{ff41}\u{ff4e}\u{ff54}\u{ff45}\u{ff44}\u{ff0e}test",
        "127.0.0.1",
        "127.0.0.1.",
        "0x7f.1",
        "0x7f000001",
        "2130706433",
        "0177.0.0.1",
        "127.1",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
    ] {
        for head in [
            format!("CONNECT {spelling}:{port} HTTP/1.1\r\n\r\n"),
            format!("GET http://{spelling}:{port}/ HTTP/1.1\r\n\r\n"),
        ] {
            let (_stream, answer) = ask(&socket, head.as_bytes()).await;
            assert!(
                answer.starts_with("HTTP/1.1 200 ") || answer.starts_with("GET / HTTP/1.1\r\n"),
                "{spelling:?} is a granted host: {answer}"
            );
        }
    }
    for (spelling, status) in [
        ("0x7f.2", "403 Forbidden"),
        ("2130706434", "403 Forbidden"),
        ("[::ffff:127.0.0.2]", "403 Forbidden"),
        ("granted.test.evil", "403 Forbidden"),
        ("granted.test\u{0}.evil", "400 Bad Request"),
        ("granted.test\u{0}", "400 Bad Request"),
        ("granted\u{1}.test", "400 Bad Request"),
        ("granted\u{7f}.test", "400 Bad Request"),
        ("granted\u{85}.test", "400 Bad Request"),
        ("granted\u{202e}.test", "400 Bad Request"),
        ("granted%2etest", "400 Bad Request"),
        ("127.0.0.1%00", "400 Bad Request"),
        ("user@granted.test", "400 Bad Request"),
        ("granted.test\tx", "400 Bad Request"),
        ("granted..test", "400 Bad Request"),
        ("[::1%25lo]", "400 Bad Request"),
        ("[fe80::1%lo]", "400 Bad Request"),
        ("1.2.3.256", "400 Bad Request"),
    ] {
        for head in [
            format!("CONNECT {spelling}:{port} HTTP/1.1\r\n\r\n"),
            format!("GET http://{spelling}:{port}/ HTTP/1.1\r\n\r\n"),
        ] {
            let answer = refused(&socket, head.as_bytes()).await;
            assert!(
                answer.starts_with(&format!("HTTP/1.1 {status}\r\n")),
                "{spelling:?}: {answer}"
            );
            assert!(
                !answer
                    .chars()
                    .any(|c| c.is_control() && !matches!(c, '\r' | '\n')),
                "{spelling:?}: the refusal shows no control: {answer:?}"
            );
        }
    }
}

#[tokio::test]
async fn a_decided_box_asks_for_each_host_and_keeps_what_it_refused() {
    let folder = tempfile::tempdir().unwrap();
    let port = echo().await;
    let proxies = proxies(folder.path(), Limits::default());
    let granted = rules(&[
        format!("granted.test:{port}"),
        format!("*.wild.test:{port}"),
    ]);
    let asked = Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = Arc::clone(&asked);
    let check = super::HostCheck::Decided(Arc::new(move |host: &str, p: u16| {
        seen.lock().unwrap().push(format!("{host}:{p}"));
        if host == "other.test" {
            Err("no grant lets http_fetch reach it without asking".to_string())
        } else {
            Ok(granted.clone())
        }
    }));
    let proxy = proxies.open_checked(check).unwrap();
    let socket = proxy.socket().to_path_buf();
    assert_eq!(proxy.last_refused(), None);
    let head = format!("CONNECT granted.test:{port} HTTP/1.1\r\n\r\n");
    let (_tunnel, answer) = ask(&socket, head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");

    let head = format!("CONNECT other.test:{port} HTTP/1.1\r\n\r\n");
    let answer = refused(&socket, head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 403 "), "{answer}");
    let last = proxy.last_refused().unwrap();
    assert_eq!(last.kind, super::RefusalKind::NotGranted);
    assert_eq!(last.target, Some(format!("other.test:{port}")));
    assert_eq!(
        last.reason,
        format!("other.test:{port}: no grant lets http_fetch reach it without asking")
    );

    // Granted through a wildcard, but loopback: the address refusal.
    let head = format!("CONNECT a.wild.test:{port} HTTP/1.1\r\n\r\n");
    refused(&socket, head.as_bytes()).await;
    let last = proxy.last_refused().unwrap();
    assert_eq!(last.kind, super::RefusalKind::UnsafeAddress);
    assert_eq!(
        *asked.lock().unwrap(),
        [
            format!("granted.test:{port}"),
            format!("other.test:{port}"),
            format!("a.wild.test:{port}")
        ]
    );
}

#[tokio::test]
async fn connections_past_the_limit_and_idle_tunnels_are_closed() {
    let folder = tempfile::tempdir().unwrap();
    let port = echo().await;
    let limits = Limits {
        connections: 1,
        idle_time: Duration::from_millis(300),
        ..Limits::default()
    };
    let proxies = proxies(folder.path(), limits);
    let proxy = proxies
        .open(&rules(&[format!("granted.test:{port}")]))
        .unwrap();
    let head = format!("CONNECT granted.test:{port} HTTP/1.1\r\n\r\n");
    let (mut first, answer) = ask(proxy.socket(), head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    let (held, answer) = ask(proxy.socket(), head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 503 "), "{answer}");
    assert!(
        answer.contains("this box already has 1 connections through the proxy"),
        "{answer}"
    );
    // Twice the limit in flight (the tunnel, the refusal not yet closed by the box): one more
    // is closed without an answer.
    let mut third = UnixStream::connect(proxy.socket()).await.unwrap();
    let _ = third.write_all(head.as_bytes()).await;
    let mut nothing = Vec::new();
    let _ = third.read_to_end(&mut nothing).await;
    assert!(nothing.is_empty(), "{}", String::from_utf8_lossy(&nothing));
    drop(held);
    // The first tunnel, left idle, is closed by the proxy (the read sees its end).
    let mut rest = Vec::new();
    first.read_to_end(&mut rest).await.unwrap();
    assert!(rest.is_empty());
    // Its permit is back: a new tunnel opens.
    let (_again, answer) = ask(proxy.socket(), head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
}

#[tokio::test]
async fn a_new_broker_removes_the_sockets_a_gone_one_left() {
    let folder = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(folder.path().join("proxy")).unwrap();
    let stale = folder.path().join("proxy/0123456789abcdef.sock");
    std::fs::write(&stale, "").unwrap();
    let _proxies = proxies(folder.path(), Limits::default());
    assert!(!stale.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ending_a_calls_connections_closes_its_tunnels_and_the_proxy_serves_on() {
    let folder = tempfile::tempdir().unwrap();
    let port = echo().await;
    let proxies = proxies(folder.path(), Limits::default());
    let proxy = Arc::new(
        proxies
            .open(&rules(&[format!("granted.test:{port}")]))
            .unwrap(),
    );
    let socket = proxy.socket().to_path_buf();
    let head = format!("CONNECT granted.test:{port} HTTP/1.1\r\n\r\n");
    let (mut tunnel, answer) = ask(&socket, head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    tunnel.write_all(b"ping").await.unwrap();
    let mut got = [0u8; 4];
    tunnel.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"ping");
    // The call is over: its tunnel ends, though it was busy a moment ago.
    let ending = Arc::clone(&proxy);
    let ended = tokio::task::spawn_blocking(move || {
        ending.end_connections(std::time::Duration::from_secs(5))
    })
    .await
    .unwrap();
    assert!(ended);
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        tunnel.read_to_end(&mut rest),
    )
    .await;
    assert!(matches!(closed, Ok(Ok(0)) | Ok(Err(_))), "{closed:?}");
    // The next call's connections are served as before.
    let (mut again, answer) = ask(&socket, head.as_bytes()).await;
    assert!(answer.starts_with("HTTP/1.1 200 "), "{answer}");
    again.write_all(b"pong").await.unwrap();
    again.read_exact(&mut got).await.unwrap();
    assert_eq!(&got, b"pong");
}
