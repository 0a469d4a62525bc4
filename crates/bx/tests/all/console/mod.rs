//! `bx console` in a real browser (Debian's chromium through chromedriver) against a real
//! broker and agent: a waiting call arrives live, a click approves, refuses or answers, an
//! answer given with `bx` elsewhere takes it off the page; and the attacks: markup, script and
//! bidirectional characters in a model's arguments, a POST without the CSRF token, a foreign
//! `Host` or `Origin`, a login token used twice.

mod attacks;
mod views;
mod webdriver;

use proto::{DenyReason, ToolResponse};
use serde_json::json;
use testkit::{AgentClient, BrokerProcess};
use webdriver::{Browser, Console};

use super::bx;

/// Writes in the work folder ask the owner; `ask` questions reach the owner.
pub const GRANTS: &str = r#"
[[grant]]
id = "ask-write"
tool = "write_file"
paths = ["{work}"]
untrusted = false
approval = "ask"

[[grant]]
id = "questions"
tool = "ask"
"#;

/// The script that says whether the inbox shows approval `arguments[0]`.
const SHOWN: &str = "return !!document.getElementById('pending-' + arguments[0]);";

#[test]
fn a_waiting_call_arrives_live_and_clicks_approve_refuse_and_answer_it() {
    let broker = BrokerProcess::start(GRANTS, "");
    let console = Console::start(&broker);
    let browser = Browser::start();
    browser.log_in(&console);
    assert!(browser.text("#empty").contains("Nothing waits for you."));
    // A mark in the page: it survives only if the call arrives without a reload.
    browser.run("window.boxmakerMark = 1;", json!([]));

    let mut client = AgentClient::open(&broker.socket(), None);
    let target = broker.work.join("approved.txt");
    let args = json!({ "path": target, "content": "written after a click" }).to_string();
    let first = client.call_pending(1, "write_file", &args);
    browser.wait_for("the first call", SHOWN, json!([first]));
    assert_eq!(
        browser.run("return window.boxmakerMark;", json!([])),
        json!(1),
        "the page reloaded instead of receiving the call live"
    );
    let item = browser.text(&format!("#pending-{first}"));
    for needed in [
        "write_file",
        "written after a click",
        "grant ask-write says approval = \"ask\"",
        "the session has seen",
        "expires at",
    ] {
        assert!(item.contains(needed), "{needed:?} missing from:\n{item}");
    }
    browser.click(&format!("#pending-{first} button.approve-once"));
    let answer = client.finish_call().1;
    assert!(
        matches!(answer, Ok(ToolResponse::Result { .. })),
        "{answer:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "written after a click"
    );
    browser.wait_for(
        "the approved call gone",
        "return !document.getElementById('pending-' + arguments[0]);",
        json!([first]),
    );

    let refused = broker.work.join("refused.txt");
    let args = json!({ "path": refused, "content": "never" }).to_string();
    let second = client.call_pending(2, "write_file", &args);
    browser.wait_for("the second call", SHOWN, json!([second]));
    browser.click(&format!("#pending-{second} button.refuse"));
    assert!(
        matches!(
            client.finish_call().1,
            Ok(ToolResponse::Denied {
                reason: DenyReason::ApprovalRefused
            })
        ),
        "the refused call ran"
    );
    assert!(!refused.exists());

    let question = json!({ "question": "Which branch?", "choices": ["main", "dev"] }).to_string();
    let third = client.call_pending(3, "ask", &question);
    browser.wait_for("the question", SHOWN, json!([third]));
    let item = browser.text(&format!("#pending-{third}"));
    assert!(
        item.contains("Which branch?") && item.contains("dev"),
        "{item}"
    );
    browser.type_into(
        &format!("#pending-{third} form.answer input[name=text]"),
        "dev, please",
    );
    browser.click(&format!("#pending-{third} button.answer"));
    let ToolResponse::Result { content, .. } = client.finish_call().1.unwrap() else {
        panic!("the answered question got no result")
    };
    assert!(content.ends_with("dev, please"), "{content}");
}

#[test]
fn a_call_answered_with_bx_elsewhere_leaves_the_page_at_once() {
    let broker = BrokerProcess::start(GRANTS, "");
    let console = Console::start(&broker);
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = json!({ "path": broker.work.join("x"), "content": "x" }).to_string();
    // Waiting before the page opens: the page shows it from the start.
    let id = client.call_pending(1, "write_file", &args);
    let browser = Browser::start();
    browser.log_in(&console);
    browser.wait_for("the waiting call", SHOWN, json!([id]));
    browser.run("window.boxmakerMark = 1;", json!([]));
    let ran = bx(&broker, &["refuse", &id.to_string()]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    browser.wait_for(
        "the call gone",
        "return !document.getElementById('pending-' + arguments[0]) && window.boxmakerMark === 1;",
        json!([id]),
    );
    assert!(matches!(
        client.finish_call().1,
        Ok(ToolResponse::Denied {
            reason: DenyReason::ApprovalRefused
        })
    ));
}
