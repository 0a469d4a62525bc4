//! The attacks: what a model writes reaches the page as text and runs nothing; requests that
//! do not come from the console's own page are refused.

use std::io::{Read, Write};
use std::net::TcpStream;

use serde_json::json;
use testkit::{AgentClient, BrokerProcess};

use super::webdriver::{Browser, Console};
use super::{GRANTS, SHOWN};
use crate::bx;

/// Markup, script, an image that runs script on error, a `javascript:` link, and the
/// right-to-left override, each trying to set the page's title.
const PAYLOAD: &str = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\"><a href=\"javascript:document.title='pwned'\">click</a> \u{202e}txt.exe";

/// The script that says whether the inbox holds no element but the console's own, no title
/// was set, and the payload shows as text with its override as a visible escape.
const INERT: &str = r#"
const inbox = document.getElementById('inbox');
const foreign = inbox.querySelectorAll('script, img, a, iframe, [onerror]').length;
const text = inbox.textContent;
return foreign === 0 && document.title === 'boxmaker console: inbox'
  && text.includes("<script>document.title='pwned'</script>")
  && text.includes('<img src=x onerror=')
  && text.includes('href=\\"javascript:')
  && text.includes('\\u202E') && !text.includes('\u202e');
"#;

#[test]
fn markup_script_and_bidirectional_characters_in_a_call_show_as_text_and_run_nothing() {
    let broker = BrokerProcess::start(GRANTS, "");
    let console = Console::start(&broker);
    let browser = Browser::start();
    browser.log_in(&console);
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = json!({ "path": broker.work.join("p"), "content": PAYLOAD }).to_string();
    let call = client.call_pending(1, "write_file", &args);
    browser.wait_for("the call with markup in it", SHOWN, json!([call]));
    let mut asker = AgentClient::open(&broker.socket(), None);
    let question = json!({ "question": PAYLOAD, "choices": [PAYLOAD] }).to_string();
    let asked = asker.call_pending(1, "ask", &question);
    browser.wait_for("the question with markup in it", SHOWN, json!([asked]));
    // Arrived live (inserted by the page's script) and rendered whole (after a reload).
    browser.wait_for("the payload inert, as it arrived", INERT, json!([]));
    browser.go(&format!("{}/", console.origin));
    browser.wait_for("the payload inert, after a reload", INERT, json!([]));

    // A POST from the page itself, with its cookie but without the CSRF token: refused, and
    // the call still waits.
    let status = browser.run_async(
        "const done = arguments[arguments.length - 1];
         fetch('/approve', { method: 'POST',
           headers: { 'content-type': 'application/x-www-form-urlencoded' },
           body: 'id=' + arguments[0] + '&scope=once' }).then(r => done(r.status));",
        json!([call]),
    );
    assert_eq!(status, json!(403));
    let listed = bx(&broker, &["approvals"]);
    assert!(
        listed.stdout.contains(&format!("approval {call}:")),
        "{}",
        listed.stdout
    );
}

/// One raw HTTP/1.1 exchange: the status and the whole response.
fn exchange(addr: &str, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status in {response:?}"));
    (status, response)
}

fn get(addr: &str, path: &str, host: &str, extra: &str) -> (u16, String) {
    exchange(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n"),
    )
}

fn post(addr: &str, path: &str, extra: &str, body: &str) -> (u16, String) {
    exchange(
        addr,
        &format!(
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Content-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        ),
    )
}

#[test]
fn a_foreign_host_or_origin_a_used_login_token_and_a_post_without_its_csrf_token_get_403() {
    let broker = BrokerProcess::start(GRANTS, "");
    let console = Console::start(&broker);
    let addr = console.addr.as_str();
    let login = console.login.strip_prefix(&console.origin).unwrap();
    // DNS rebinding: the right token under a foreign Host is refused and not spent.
    assert_eq!(get(addr, login, "evil.example", "").0, 403);
    let (status, response) = get(addr, login, addr, "");
    assert_eq!(status, 303, "{response}");
    let set_cookie = response
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("set-cookie:"))
        .unwrap();
    for attribute in ["HttpOnly", "SameSite=Strict", "Path=/"] {
        assert!(set_cookie.contains(attribute), "{set_cookie}");
    }
    let cookie = set_cookie
        .split_once(':')
        .unwrap()
        .1
        .split(';')
        .next()
        .unwrap()
        .trim()
        .to_string();
    let (twice, _) = get(addr, login, addr, "");
    assert_eq!(twice, 403, "a login token worked twice");

    let with_cookie = format!("Cookie: {cookie}\r\n");
    let (ok, page) = get(addr, "/", addr, &with_cookie);
    assert_eq!(ok, 200, "{page}");
    let lower = page.to_ascii_lowercase();
    assert!(lower.contains("content-security-policy: default-src 'none'; script-src 'self';"));
    assert!(lower.contains("frame-ancestors 'none'"));
    assert!(lower.contains("x-content-type-options: nosniff"));
    assert!(!lower.contains("<script>"), "inline script in the page");
    assert_eq!(get(addr, "/", addr, "").0, 403, "no cookie");
    assert_eq!(get(addr, "/", "evil.example", &with_cookie).0, 403);
    let foreign = format!("{with_cookie}Origin: http://evil.example\r\n");
    assert_eq!(get(addr, "/", addr, &foreign).0, 403);
    assert_eq!(get(addr, "/events", addr, &foreign).0, 403);

    let mut client = AgentClient::open(&broker.socket(), None);
    let args = json!({ "path": broker.work.join("c"), "content": "c" }).to_string();
    let call = client.call_pending(1, "write_file", &args);
    let form = format!("id={call}&scope=once");
    assert_eq!(post(addr, "/approve", &with_cookie, &form).0, 403);
    let wrong = format!("{form}&csrf=00");
    assert_eq!(post(addr, "/approve", &with_cookie, &wrong).0, 403);
    let (_, page) = get(addr, "/", addr, &with_cookie);
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap();
    let good = format!("{form}&csrf={csrf}");
    assert_eq!(post(addr, "/approve", &foreign, &good).0, 403);
    assert_eq!(post(addr, "/approve", "", &good).0, 403, "no cookie");
    let listed = bx(&broker, &["approvals"]);
    assert!(
        listed.stdout.contains(&format!("approval {call}:")),
        "a refused POST settled the call: {}",
        listed.stdout
    );
    // The same form from the console's own origin, with its token, does it.
    let own = format!("{with_cookie}Origin: {}\r\n", console.origin);
    assert_eq!(post(addr, "/approve", &own, &good).0, 303);
    assert!(matches!(
        client.finish_call().1,
        Ok(proto::ToolResponse::Result { .. })
    ));
}

#[test]
fn the_console_refuses_to_listen_beyond_loopback_unless_told() {
    let broker = BrokerProcess::start("", "");
    let ran = bx(&broker, &["console", "--listen", "0.0.0.0:0"]);
    assert_eq!(ran.code, 2, "{}", ran.stderr);
    assert!(
        ran.stderr.contains("--allow-non-loopback"),
        "{}",
        ran.stderr
    );
}

/// The same as [`INERT`] for the other views: no foreign element in `main`, the title as the
/// server wrote it (`arguments[0]`), the payload shown as text.
const INERT_VIEW: &str = r#"
const main = document.querySelector('main');
const foreign = main.querySelectorAll('script, img, iframe, [onerror], a[href^="javascript"]').length;
const text = main.textContent;
return foreign === 0 && document.title === arguments[0]
  && text.includes("<script>document.title='pwned'</script>")
  && text.includes('<img src=x onerror=')
  && text.includes('href=\\"javascript:')
  && text.includes('\\u202E') && !text.includes('\u202e');
"#;

#[test]
fn markup_script_and_bidirectional_characters_stay_text_in_live_calls_sessions_and_audit() {
    let broker = BrokerProcess::start(GRANTS, "");
    let console = Console::start(&broker);
    let browser = Browser::start();
    browser.log_in(&console);
    browser.go(&format!("{}/calls", console.origin));
    browser.wait_for(
        "the live calls connected",
        "const l = document.getElementById('live'); return !!l && l.textContent === 'connected';",
        json!([]),
    );
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = json!({ "path": "/nonexistent/p", "content": PAYLOAD }).to_string();
    assert!(matches!(
        client.call(1, "write_file", &args),
        Ok(proto::ToolResponse::Denied { .. })
    ));
    let session = client.session_id().to_string();
    browser.wait_for(
        "the denied call with markup in it, live",
        "return !!document.querySelector('#call-rows tr.denied');",
        json!([]),
    );
    browser.wait_for(
        "the payload inert in live calls",
        INERT_VIEW,
        json!(["boxmaker console: live calls"]),
    );
    let views = [
        (
            format!("/session?id={session}"),
            format!("boxmaker console: session {session}"),
        ),
        ("/audit".to_string(), "boxmaker console: audit".to_string()),
        (
            "/audit?tool=write_file".to_string(),
            "boxmaker console: audit".to_string(),
        ),
    ];
    for (path, title) in views {
        browser.go(&format!("{}{path}", console.origin));
        browser.wait_for(
            &format!("the payload inert in {path}"),
            INERT_VIEW,
            json!([title]),
        );
    }
}
