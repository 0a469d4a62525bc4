//! The console's screenshots for README and docs/CONSOLE.md, made by
//! `scripts/console-screenshots` (not by `cargo test`): a real broker with a few calls, a
//! waiting approval and a question, `bx console`, and headless chromium through chromedriver;
//! the inbox and one session's timeline saved as PNGs in the folder given (default
//! `docs/images`).

// A developer's script, like the tests it borrows its WebDriver client from: a failure stops it
// with the reason.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    reason = "a developer's script, not shipped: a failure stops it with the reason"
)]

#[allow(dead_code, reason = "the tests use the rest of this client")]
#[path = "../tests/all/console/webdriver.rs"]
mod webdriver;

use std::path::PathBuf;

use serde_json::json;
use testkit::{AgentClient, BrokerProcess};
use webdriver::{Browser, Console};

/// Writes in the work folder ask; reads in `src` are allowed, and of `notes.md` (untrusted); the
/// model's questions reach the owner.
const GRANTS: &str = r#"
[[grant]]
id = "ask-write"
tool = "write_file"
paths = ["{work}"]
untrusted = false
approval = "ask"

[[grant]]
id = "read-src"
tool = "read_file"
paths = ["{work}/src"]
untrusted = false

[[grant]]
id = "read-notes"
tool = "read_file"
paths = ["{work}/notes.md"]

[[grant]]
id = "questions"
tool = "ask"
"#;

fn main() {
    let folder = PathBuf::from(std::env::args().nth(1).unwrap_or("docs/images".into()));
    std::fs::create_dir_all(&folder).expect("the screenshots' folder");
    let broker = BrokerProcess::start(GRANTS, "");
    let work = &broker.work;
    std::fs::write(
        work.join("notes.md"),
        "Release on Friday; ask Dana first.\n",
    )
    .expect("notes");
    std::fs::create_dir_all(work.join("src")).expect("src");
    std::fs::write(
        work.join("src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 { a + b }\n",
    )
    .expect("lib.rs");

    // A session with a history: reads (the first brings untrusted data), a refused read, a
    // failed one, then a write that waits for the owner.
    let mut agent = AgentClient::open(&broker.socket(), None);
    let read = |path: PathBuf| json!({ "path": path }).to_string();
    let _ = agent.call(1, "read_file", &read(work.join("src/lib.rs")));
    let _ = agent.call(2, "read_file", &read(work.join("notes.md")));
    let _ = agent.call(3, "read_file", &read("/etc/shadow".into()));
    let _ = agent.call(4, "read_file", &read(work.join("src/main.rs")));
    let _ = agent.call(5, "read_file", &read(work.join("src/lib.rs")));
    let write = json!({
        "path": work.join("CHANGELOG.md"),
        "content": "## 0.4.0\n\n- add() takes u32\n- release notes for Friday\n",
    })
    .to_string();
    agent.call_pending(6, "write_file", &write);
    let session = agent.session_id().to_string();
    let mut asker = AgentClient::open(&broker.socket(), None);
    let question = json!({
        "question": "Tag the release as v0.4.0 or v0.4.0-rc1?",
        "choices": ["v0.4.0", "v0.4.0-rc1"],
    })
    .to_string();
    asker.call_pending(1, "ask", &question);

    let console = Console::start(&broker);
    let browser = Browser::start();
    browser.resize(1100, 1000);
    browser.log_in(&console);
    browser.wait_for(
        "both waiting items",
        "return document.querySelectorAll('#inbox li').length === 2;",
        json!([]),
    );
    save(&browser, &folder.join("console-inbox.png"));
    browser.go(&format!("{}/session?id={session}", console.origin));
    browser.wait_for(
        "the timeline",
        "return !!document.querySelector('svg.timeline');",
        json!([]),
    );
    save(&browser, &folder.join("console-session.png"));
}

fn save(browser: &Browser, path: &std::path::Path) {
    std::fs::write(path, browser.screenshot()).expect("the screenshot written");
    println!("{}", path.display());
}
