//! Granted hosts through the broker's proxy, end to end: a real broker, a `shell` (and
//! `bash_bg`) grant naming hosts, testkit's TLS server on the host's loopback, test names
//! resolved by `BOXMAKER_TEST_RESOLVE`. In the box, curl reaches the granted host over a real
//! TLS handshake through `HTTPS_PROXY`, and a plain http:// server through `HTTP_PROXY`;
//! another host or port, a loopback address behind a wildcard, a metadata address, a huge head
//! and a bad host get the proxy's sentence;
//! a connection that ignores the proxy reaches nothing; a box without hosts has no network.

use std::fs;
use std::time::Duration;

use proto::ToolResponse;
use testkit::tls_server::{TestCa, TlsResponse, TlsServer};
use testkit::{AgentClient, BrokerProcess, PlainServer};

use super::{FAST, content};

/// Each mode is one thing a command in the box tries; `HTTPS_PROXY` names the relay.
const PROBE: &str = r#"
import os, socket, sys

def ask(data):
    port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(data)
    out = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        out += chunk
    sys.stdout.write(out.decode())

def direct(host, port):
    try:
        socket.create_connection((host, int(port)), timeout=10)
        print("connected")
    except OSError as error:
        print("refused:", error)
        sys.exit(1)

mode = sys.argv[1]
target = sys.argv[2].encode() if len(sys.argv) > 2 else b""
if mode == "env":
    names = ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy", "NO_PROXY"]
    print(" ".join("[%s]" % os.environ.get(n, "unset") for n in names))
elif mode == "connect":
    ask(b"CONNECT " + target + b" HTTP/1.1\r\nHost: " + target + b"\r\n\r\n")
elif mode == "get":
    ask(b"GET http://" + target + b"/ HTTP/1.1\r\nHost: " + target + b"\r\n\r\n")
elif mode == "hex":
    port = int(os.environ["HTTPS_PROXY"].rsplit(":", 1)[1])
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"CONNECT " + bytes.fromhex(sys.argv[2]) + b" HTTP/1.1\r\n\r\n")
    sys.stdout.write(s.recv(65536).decode().splitlines()[0])
elif mode == "huge":
    ask(b"CONNECT " + target + b" HTTP/1.1\r\nX-Pad: " + b"a" * 20000 + b"\r\n\r\n")
elif mode == "direct":
    direct(sys.argv[2], sys.argv[3])
elif mode == "offline":
    print("[%s]" % os.environ.get("HTTPS_PROXY", "unset"))
    direct("127.0.0.1", 3128)
"#;

struct Net {
    broker: BrokerProcess,
    server: TlsServer,
    plain: PlainServer,
    _ca: TestCa,
}

/// A broker whose grants give `probe.py` and curl the hosts `granted.test`, `*.wild.test`,
/// `meta.test` and `127.0.0.1` on the TLS server's port (and `probe.py offline` none),
/// with `config` as its `brokerd.toml`.
fn net(config: &str) -> Net {
    let ca = TestCa::new("boxmaker proxy test CA");
    let server = TlsServer::start(&ca.issue(&["granted.test", "127.0.0.1"])).unwrap();
    server.route(
        "/",
        TlsResponse::ok("text/plain", "hello through the proxy\n"),
    );
    let port = server.port();
    let plain = PlainServer::start("text/plain", "hello over plain http\n").unwrap();
    let plain_port = plain.port();
    let grants = format!(
        r#"
[[grant]]
id = "offline"
tool = "shell"
commands = ["/usr/bin/python3 probe.py offline"]
paths = ["{{work}}"]
untrusted = false
on_untrusted = "allow"

[[grant]]
id = "net"
tool = ["shell", "bash_bg"]
commands = ["/usr/bin/python3 probe.py", "curl"]
paths = ["{{work}}"]
hosts = ["granted.test:{port}", "*.wild.test:{port}", "meta.test:{port}", "127.0.0.1:{port}", "plain.test:{plain_port}"]
untrusted = false
on_untrusted = "allow"
"#
    );
    let broker = BrokerProcess::start_with_env(
        &grants,
        config,
        &[(
            "BOXMAKER_TEST_RESOLVE",
            "granted.test=127.0.0.1,a.wild.test=127.0.0.1,meta.test=169.254.169.254,plain.test=127.0.0.1",
        )],
    );
    fs::write(broker.work.join("probe.py"), PROBE).unwrap();
    fs::write(broker.work.join("ca.pem"), ca.cert_pem()).unwrap();
    Net {
        broker,
        server,
        plain,
        _ca: ca,
    }
}

impl Net {
    /// Runs `command` in the work folder: the header, the body.
    fn shell(&self, id: u64, command: &str) -> (serde_json::Value, String) {
        let response = self.call(id, command);
        let text = content(&response).to_string();
        let (header, body) = text.split_once('\n').unwrap();
        (serde_json::from_str(header).unwrap(), body.to_string())
    }

    fn call(&self, id: u64, command: &str) -> ToolResponse {
        let mut client = AgentClient::open(&self.broker.socket(), None);
        let args = serde_json::json!({ "command": command, "cwd": self.broker.work });
        client.call(id, "shell", &args.to_string()).unwrap()
    }

    fn target(&self, host: &str) -> String {
        format!("{host}:{}", self.server.port())
    }

    /// The proxy sockets left in the runtime folder.
    fn sockets(&self) -> Vec<String> {
        fs::read_dir(self.broker.runtime.join("proxy"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

#[test]
fn curl_reaches_a_granted_host_through_the_proxy_over_tls() {
    let net = net(FAST);
    let url = format!("https://{}/", net.target("granted.test"));
    let (header, body) = net.shell(1, &format!("curl -sS --cacert ca.pem {url}"));
    assert_eq!(header["exit_code"], 0, "{body}");
    assert_eq!(body, "hello through the proxy\n");
    let port = net.server.port();
    assert_eq!(
        super::walls(&net.broker).as_str(),
        format!(
            "bubblewrap: only the grant's folders (read-write) and a read-only system; protected folders masked; Landlock fully enforced over the same paths; network: only granted.test:{port}, *.wild.test:{port}, meta.test:{port}, 127.0.0.1:{port}, plain.test:{}, through the broker's proxy; every capability dropped; own /proc and size-limited /tmp; processes, memory, CPU and file size limited",
            net.plain.port()
        )
    );
    // A loopback address the grant names itself: the TLS server's certificate names it too.
    let url = format!("https://{}/", net.target("127.0.0.1"));
    let (header, body) = net.shell(2, &format!("curl -sS --cacert ca.pem {url}"));
    assert_eq!(header["exit_code"], 0, "{body}");
    assert_eq!(body, "hello through the proxy\n");
    assert_eq!(net.server.requests().len(), 2);
    // Each box's socket went with its box.
    assert!(net.sockets().is_empty(), "{:?}", net.sockets());
    let log = net.broker.log();
    assert!(log.contains("proxy: connected"), "{log}");
}

#[test]
fn a_plain_http_request_reaches_a_granted_host_and_port_through_http_proxy() {
    let net = net(FAST);
    let port = net.plain.port();
    let (header, body) = net.shell(1, &format!("curl -sS 'http://plain.test:{port}/hello?x=1'"));
    assert_eq!(header["exit_code"], 0, "{body}");
    assert_eq!(body, "hello over plain http\n");
    // The server got the request in origin form, with the URL's host, once.
    let heads = net.plain.heads();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        heads[0].starts_with("GET /hello?x=1 HTTP/1.1\r\n"),
        "{heads:?}"
    );
    assert!(
        heads[0].contains(&format!("Host: plain.test:{port}\r\n")),
        "{heads:?}"
    );
    assert!(heads[0].contains("Connection: close\r\n"), "{heads:?}");
    assert!(
        !heads[0].to_ascii_lowercase().contains("proxy-"),
        "{heads:?}"
    );
    // Port 80, which the grant does not name, is refused with the proxy's sentence.
    let (header, body) = net.shell(2, "curl -sS http://plain.test/");
    assert_eq!(header["exit_code"], 0, "{body}");
    assert!(
        body.contains("plain.test:80 is not a host granted to this box"),
        "{body}"
    );
    assert_eq!(net.plain.heads().len(), 1);
}

#[test]
fn the_proxy_refuses_what_the_grant_does_not_name_with_a_sentence() {
    let net = net(FAST);
    let port = net.server.port();
    let cases = [
        (
            format!("connect {}", net.target("other.test")),
            "HTTP/1.1 403 Forbidden",
            format!(
                "other.test:{port} is not a host granted to this box (granted: granted.test:{port}, *.wild.test:{port}, meta.test:{port}, 127.0.0.1:{port}, plain.test:{})",
                net.plain.port()
            ),
        ),
        (
            "connect granted.test:443".to_string(),
            "HTTP/1.1 403 Forbidden",
            format!(
                "granted.test:443 is not a host granted to this box (granted: granted.test:{port}, *.wild.test:{port}, meta.test:{port}, 127.0.0.1:{port}, plain.test:{})",
                net.plain.port()
            ),
        ),
        (
            format!("connect {}", net.target("a.wild.test")),
            "HTTP/1.1 403 Forbidden",
            "a.wild.test resolves to 127.0.0.1, a loopback address; only a host the grant names itself (not through a wildcard) may reach one".to_string(),
        ),
        (
            format!("connect {}", net.target("meta.test")),
            "HTTP/1.1 403 Forbidden",
            "meta.test resolves to 169.254.169.254, a cloud metadata address, which the proxy never connects to, whatever a grant says".to_string(),
        ),
        (
            "get granted.test".to_string(),
            "HTTP/1.1 403 Forbidden",
            format!(
                "granted.test:80 is not a host granted to this box (granted: granted.test:{port}, *.wild.test:{port}, meta.test:{port}, 127.0.0.1:{port}, plain.test:{})",
                net.plain.port()
            ),
        ),
        (
            format!("huge {}", net.target("granted.test")),
            "HTTP/1.1 431 Request Header Fields Too Large",
            "the request head is longer than the 8192 bytes the proxy reads".to_string(),
        ),
        (
            "connect bad!host:443".to_string(),
            "HTTP/1.1 400 Bad Request",
            "CONNECT \"bad!host:443\": it has a character no host name has (U+0021) in its host".to_string(),
        ),
    ];
    for (id, (mode, status, sentence)) in (1..).zip(cases) {
        let (header, body) = net.shell(id, &format!("/usr/bin/python3 probe.py {mode}"));
        assert_eq!(header["exit_code"], 0, "{mode}: {body}");
        // The command's output is cleaned of carriage returns on its way to the model.
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines.first(), Some(&status), "{mode}: {body}");
        assert!(lines.contains(&"Connection: close"), "{mode}: {body}");
        assert_eq!(lines.last(), Some(&sentence.as_str()), "{mode}: {body}");
    }
    // curl sees the refusal as a failed tunnel.
    let url = format!("https://{}/", net.target("other.test"));
    let (header, body) = net.shell(20, &format!("curl -sS --cacert ca.pem {url}"));
    assert_ne!(header["exit_code"], 0, "{body}");
    assert!(body.contains("403"), "{body}");
    assert!(net.server.requests().is_empty());
    let log = net.broker.log();
    assert!(log.contains("proxy: refused a connection"), "{log}");
    assert!(log.contains("other.test"), "{log}");
}

#[test]
fn the_boxs_proxy_reads_every_spelling_of_a_granted_host_as_that_host_and_refuses_odd_bytes() {
    let net = net(FAST);
    let port = net.server.port();
    let hex = |target: &str| -> String { target.bytes().map(|b| format!("{b:02x}")).collect() };
    let cases = [
        ("127.0.0.1", "HTTP/1.1 200"),
        ("0x7f.1", "HTTP/1.1 200"),
        ("2130706433", "HTTP/1.1 200"),
        ("0177.0.0.1", "HTTP/1.1 200"),
        ("[::ffff:127.0.0.1]", "HTTP/1.1 200"),
        ("GRANTED.test.", "HTTP/1.1 200"),
        ("0x7f.2", "HTTP/1.1 403"),
        ("granted.test\0.evil", "HTTP/1.1 400"),
        ("granted.test\0", "HTTP/1.1 400"),
        ("granted\x1b.test", "HTTP/1.1 400"),
        ("granted%2etest", "HTTP/1.1 400"),
        ("user@granted.test", "HTTP/1.1 400"),
        ("granted\u{202e}.test", "HTTP/1.1 400"),
        ("[fe80::1%25lo]", "HTTP/1.1 400"),
    ];
    for (id, (host, status)) in (1..).zip(cases) {
        let target = format!("{host}:{port}");
        let (header, body) = net.shell(
            id,
            &format!("/usr/bin/python3 probe.py hex {}", hex(&target)),
        );
        assert_eq!(header["exit_code"], 0, "{host:?}: {body}");
        assert!(body.starts_with(status), "{host:?}: {body}");
    }
}

#[test]
fn a_command_that_ignores_the_proxy_reaches_nothing() {
    let net = net(FAST);
    let port = net.server.port().to_string();
    for (mode, refusal) in [
        (format!("direct 127.0.0.1 {port}"), "Permission denied"),
        ("direct 1.1.1.1 443".to_string(), "Permission denied"),
        ("direct 1.1.1.1 3128".to_string(), "Network is unreachable"),
    ] {
        let (header, body) = net.shell(1, &format!("/usr/bin/python3 probe.py {mode}"));
        assert_ne!(header["exit_code"], 0, "{mode}: {body}");
        assert!(!body.contains("connected"), "{mode}: {body}");
        assert!(body.contains(refusal), "{mode}: {body}");
    }
    let url = format!("https://127.0.0.1:{port}/");
    let (header, body) = net.shell(4, &format!("curl -sS --noproxy '*' --cacert ca.pem {url}"));
    assert_eq!(header["exit_code"], 7, "{body}");
    assert!(net.server.requests().is_empty());
}

#[test]
fn a_box_without_hosts_has_no_network_and_no_proxy() {
    let net = net(FAST);
    let (header, body) = net.shell(1, "/usr/bin/python3 probe.py env");
    let url = "http://127.0.0.1:3128";
    assert_eq!(body, format!("[{url}] [{url}] [{url}] [{url}] [unset]\n"));
    assert_eq!(header["exit_code"], 0);
    let (header, body) = net.shell(2, "/usr/bin/python3 probe.py offline");
    assert_ne!(header["exit_code"], 0, "{body}");
    assert!(body.starts_with("[unset]\n"), "{body}");
    assert!(body.contains("Operation not permitted"), "{body}");
    assert!(
        super::walls(&net.broker).as_str().contains("; no network;"),
        "{header}"
    );
    assert!(net.sockets().is_empty(), "{:?}", net.sockets());
}

#[test]
fn a_background_job_keeps_its_proxy_until_it_ends() {
    let net = net(FAST);
    let mut client = AgentClient::open(&net.broker.socket(), None);
    let url = format!("https://{}/", net.target("granted.test"));
    let command = format!("curl -sS --cacert ca.pem {url}");
    let args = serde_json::json!({ "command": command, "cwd": net.broker.work });
    let started = client.call(1, "bash_bg", &args.to_string()).unwrap();
    let text = content(&started).to_string();
    assert!(text.contains("\"sandbox\":\"box\""), "{text}");
    assert!(
        super::walls(&net.broker).contains("network: only granted.test"),
        "{text}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let mut output = String::new();
    for call in 2.. {
        let tail = client.call(call, "bash_tail", r#"{"job":1}"#).unwrap();
        let text = content(&tail).to_string();
        let (header, body) = text.split_once('\n').unwrap();
        let header: serde_json::Value = serde_json::from_str(header).unwrap();
        output.push_str(body);
        if header["state"] != "running" || std::time::Instant::now() > deadline {
            assert_eq!(header["state"], "exited", "{header}");
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(output.contains("hello through the proxy"), "{output}");
    // The job has ended: its proxy socket is gone with its box.
    let gone = std::time::Instant::now() + Duration::from_secs(10);
    while !net.sockets().is_empty() && std::time::Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(net.sockets().is_empty(), "{:?}", net.sockets());
}

#[test]
fn without_bubblewrap_a_grant_with_hosts_fails_the_call_with_the_reason() {
    let net = net(&format!("{FAST}[sandbox]\nbubblewrap = false\n"));
    let response = net.call(1, "/usr/bin/python3 probe.py env");
    let ToolResponse::Failed { message } = &response else {
        panic!("not a failure: {response:?}");
    };
    assert!(
        message.contains("grant net gives this shell call hosts (granted.test:"),
        "{message}"
    );
    assert!(
        message.contains("granted hosts need bubblewrap's network namespace"),
        "{message}"
    );
    // A call whose grant names no hosts still runs in the box of Landlock alone.
    let (header, body) = net.shell(2, "/usr/bin/python3 probe.py offline");
    assert!(body.starts_with("[unset]\n"), "{body}");
    assert!(
        super::walls(&net.broker)
            .as_str()
            .starts_with("landlock only"),
        "{header}"
    );
}

#[test]
fn a_failed_clone_in_a_box_leaves_no_folder_the_grant_names_itself() {
    let ca = TestCa::new("boxmaker proxy test CA");
    let server = TlsServer::start(&ca.issue(&["granted.test"])).unwrap();
    let grants = format!(
        "[[grant]]\nid = \"clone\"\ntool = \"git_clone\"\nhosts = [\"granted.test:{}\"]\npaths = [\"{{work}}/named\"]\nuntrusted = false\n",
        server.port()
    );
    let roots = tempfile::tempdir().unwrap();
    let ca_file = roots.path().join("ca.pem");
    fs::write(&ca_file, ca.cert_pem()).unwrap();
    let broker = BrokerProcess::start_with_env(
        &grants,
        FAST,
        &[
            ("BOXMAKER_TEST_RESOLVE", "granted.test=127.0.0.1"),
            ("BOXMAKER_EXTRA_ROOTS", ca_file.to_str().unwrap()),
        ],
    );
    let destination = broker.work.join("named");
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = serde_json::json!({
        "url": server.url("granted.test", "/missing.git"),
        "path": destination,
    });
    let response = client.call(1, "git_clone", &args.to_string()).unwrap();
    let ToolResponse::Failed { message } = &response else {
        panic!("not a failure: {response:?}");
    };
    assert!(message.contains("git clone failed"), "{message}");
    // git reached the server (through the proxy) and got nothing: nothing is left behind.
    assert!(!server.requests().is_empty());
    assert!(!destination.exists());
    assert!(
        broker.log().contains("proxy: connected"),
        "{}",
        broker.log()
    );
}
