//! `bx mcp --http`: the Python SDK over streamable HTTP on each era, and raw HTTP without the
//! token, with a wrong one, from a foreign `Origin`, to another path, and past the body limit.

use std::fs::Permissions;
use std::io::{BufRead, BufReader};
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};
use testkit::BrokerProcess;

use super::garbage::modern;
use super::{FAST, GRANTS, bx, bx_mcp_command, call_tool, python, script};

/// `bx mcp --http 127.0.0.1:0` on `broker`'s folders: the process, its URL and its token.
fn serve_http(broker: &BrokerProcess, args: &[&str]) -> (Child, String, String) {
    let token = "test-token-0123456789abcdef".to_string();
    let token_file = broker.root.path().join("mcp-token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    std::fs::set_permissions(&token_file, Permissions::from_mode(0o600)).unwrap();
    let mut words: Vec<&std::ffi::OsStr> = ["--http", "127.0.0.1:0", "--token-file"]
        .iter()
        .map(std::ffi::OsStr::new)
        .collect();
    words.push(token_file.as_os_str());
    words.extend(args.iter().map(std::ffi::OsStr::new));
    let mut child = bx_mcp_command(broker, &words)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    let url = line
        .trim()
        .strip_prefix("bx mcp: serving MCP on ")
        .unwrap_or_else(|| panic!("{line}"))
        .to_string();
    // Keep reading its standard error so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in stderr.lines() {});
    (child, url, token)
}

/// One raw HTTP/1.1 request to `url`'s host; the status code and the body.
fn raw_http(
    url: &str,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> (u16, String) {
    use std::io::{Read, Write};
    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    let mut request = format!(
        "{method} {path} HTTP/1.1\r\nHost: {authority}\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let _ = stream.write_all(body);
    let mut answer = Vec::new();
    let _ = stream.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{answer}"));
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, b)| b)
        .to_string();
    (status, body)
}

#[test]
fn over_streamable_http_every_era_is_served_with_the_token_and_garbage_is_refused() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    std::fs::write(broker.work.join("a.txt"), "alpha over http\n").unwrap();
    let (mut server, url, token) = serve_http(&broker, &["--session", "web"]);
    let plan = json!([
        { "op": "list" },
        call_tool("read_file", json!({ "path": broker.work.join("a.txt") })),
        call_tool("write_file", json!({ "path": broker.work.join("no.txt"), "content": "x" })),
    ]);
    for (mode, protocol) in [
        ("http-modern", "2026-07-28"),
        ("http-legacy", "2025-11-25"),
        ("http-v1", "2025-11-25"),
    ] {
        let output = Command::new(python(mode.trim_start_matches("http-")))
            .arg(script())
            .arg(mode)
            .arg(plan.to_string())
            .arg("--")
            .arg(&url)
            .arg(&token)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{mode}: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let lines: Vec<Value> = stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines[0]["tools"].as_array().unwrap().len(), 3, "{mode}");
        assert_eq!(lines[1]["isError"], false, "{mode}: {}", lines[1]);
        assert!(
            lines[1]["text"]
                .as_str()
                .unwrap()
                .contains("alpha over http")
        );
        assert_eq!(lines[2]["isError"], true, "{mode}: {}", lines[2]);
        assert_eq!(lines[3]["protocol"], protocol, "{mode}");
    }
    let list = String::from_utf8(modern(1, "tools/list", json!({}))).unwrap();
    let accept = ("Accept", "application/json, text/event-stream");
    let version = ("MCP-Protocol-Version", "2026-07-28");
    let method = ("Mcp-Method", "tools/list");
    let json_type = ("Content-Type", "application/json");
    let bearer = format!("Bearer {token}");
    let auth = ("Authorization", bearer.as_str());
    // The token: missing, wrong, or right.
    let (status, body) = raw_http(&url, "POST", "/mcp", &[accept, json_type], list.as_bytes());
    assert_eq!(status, 401, "{body}");
    assert!(body.contains("bearer token"), "{body}");
    let wrong = [
        accept,
        json_type,
        ("Authorization", "Bearer test-token-0123456789abcdeX"),
    ];
    assert_eq!(
        raw_http(&url, "POST", "/mcp", &wrong, list.as_bytes()).0,
        401
    );
    let (status, body) = raw_http(
        &url,
        "POST",
        "/mcp",
        &[accept, json_type, auth, version, method],
        list.as_bytes(),
    );
    assert_eq!(status, 200, "{body}");
    assert!(body.contains("find_tool"), "{body}");
    // A foreign Origin (a web page driving the server), and another path.
    let foreign = [
        accept,
        json_type,
        auth,
        version,
        method,
        ("Origin", "https://evil.example"),
    ];
    assert_eq!(
        raw_http(&url, "POST", "/mcp", &foreign, list.as_bytes()).0,
        403
    );
    assert_eq!(
        raw_http(
            &url,
            "POST",
            "/other",
            &[accept, json_type, auth, version, method],
            list.as_bytes()
        )
        .0,
        404
    );
    // Not JSON, and a body past the limit.
    let (status, _) = raw_http(
        &url,
        "POST",
        "/mcp",
        &[accept, json_type, auth, version, method],
        b"{not json",
    );
    assert!((400..500).contains(&status), "{status}");
    let huge = vec![b' '; mcp::http::MAX_BODY + 1024];
    let (status, _) = raw_http(
        &url,
        "POST",
        "/mcp",
        &[accept, json_type, auth, version, method],
        &huge,
    );
    assert_eq!(status, 413);
    // Still serving.
    let (status, _) = raw_http(
        &url,
        "POST",
        "/mcp",
        &[accept, json_type, auth, version, method],
        list.as_bytes(),
    );
    assert_eq!(status, 200);
    server.kill().unwrap();
    server.wait().unwrap();
}

#[test]
fn http_needs_a_token_file_with_a_real_token() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    let ran = bx(&broker, &["mcp", "--http", "127.0.0.1:0"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(ran.stderr.contains("--token-file"), "{}", ran.stderr);
    let short = broker.root.path().join("short");
    std::fs::write(&short, "abc\n").unwrap();
    std::fs::set_permissions(&short, Permissions::from_mode(0o600)).unwrap();
    let ran = bx(
        &broker,
        &[
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--token-file",
            short.to_str().unwrap(),
        ],
    );
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("at least 16 characters"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_token_file_other_users_can_read_or_write_or_that_is_not_yours_is_refused_with_the_fix() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    let file = broker.root.path().join("token");
    let run = || {
        bx(
            &broker,
            &[
                "mcp",
                "--http",
                "127.0.0.1:0",
                "--token-file",
                file.to_str().unwrap(),
            ],
        )
    };
    std::fs::write(&file, "test-token-0123456789abcdef\n").unwrap();
    for mode in [0o640, 0o604, 0o644, 0o660, 0o620, 0o602] {
        std::fs::set_permissions(&file, Permissions::from_mode(mode)).unwrap();
        let ran = run();
        assert_eq!(ran.code, 2, "{mode:o}: {}", ran.stderr);
        assert!(
            ran.stderr
                .contains(&format!("run: chmod 600 {}", file.display())),
            "{mode:o}: {}",
            ran.stderr
        );
    }
    std::fs::set_permissions(&file, Permissions::from_mode(0o600)).unwrap();
    std::os::unix::fs::chown(&file, Some(65534), None).unwrap();
    let ran = run();
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("owned by uid 65534") && ran.stderr.contains("chown"),
        "{}",
        ran.stderr
    );
}

#[test]
fn a_missing_token_file_is_written_0600_under_umask_022_and_its_token_is_served() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    let file = broker.root.path().join("new-folder").join("token");
    let words: Vec<&std::ffi::OsStr> = ["--http", "127.0.0.1:0", "--token-file"]
        .iter()
        .map(std::ffi::OsStr::new)
        .chain([file.as_os_str()])
        .collect();
    let bx_words = bx_mcp_command(&broker, &words);
    // The usual umask, under which a file made without a mode is 0644.
    let mut child = Command::new("sh")
        .arg("-c")
        .arg("umask 022; exec \"$@\"")
        .arg("sh")
        .arg(bx_words.get_program())
        .args(bx_words.get_args())
        .current_dir(&broker.work)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("serving MCP on") {
        assert_ne!(stderr.read_line(&mut said).unwrap(), 0, "{said}");
    }
    assert!(said.contains("wrote a new token to"), "{said}");
    let meta = std::fs::metadata(&file).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o600);
    let folder = std::fs::metadata(file.parent().unwrap()).unwrap();
    assert_eq!(folder.mode() & 0o777, 0o700);
    let token = std::fs::read_to_string(&file).unwrap().trim().to_string();
    assert_eq!(token.len(), 64, "{token}");
    let url = said
        .lines()
        .find_map(|l| l.strip_prefix("bx mcp: serving MCP on "))
        .unwrap()
        .trim()
        .to_string();
    let list = String::from_utf8(modern(1, "tools/list", json!({}))).unwrap();
    let bearer = format!("Bearer {token}");
    let headers = [
        ("Accept", "application/json, text/event-stream"),
        ("Content-Type", "application/json"),
        ("MCP-Protocol-Version", "2026-07-28"),
        ("Mcp-Method", "tools/list"),
        ("Authorization", bearer.as_str()),
    ];
    let (status, body) = raw_http(&url, "POST", "/mcp", &headers, list.as_bytes());
    assert_eq!(status, 200, "{body}");
    child.kill().unwrap();
    child.wait().unwrap();
}
