//! The views beyond the inbox, in the real browser: live calls arrive and the filter hides
//! the others; a session's timeline shows its calls by outcome with the call that brought its
//! first untrusted data marked; the audit view finds a call by searching, exports what it
//! found as JSON Lines, and reports a broken chain with the changed record shown.

use serde_json::{Value, json};
use testkit::{AgentClient, BrokerProcess};

use super::GRANTS;
use super::webdriver::{Browser, Console};

/// The inbox's grants, and reads in the work folder, whose results are untrusted.
fn grants() -> String {
    format!(
        "{GRANTS}
[[grant]]
id = \"read-work\"
tool = \"read_file\"
paths = [\"{{work}}\"]
untrusted = true
"
    )
}

/// Whether the row of the live calls table for call `arguments[0]` of the session
/// `arguments[1]` shows outcome `arguments[2]`.
const ROW: &str = "return [...document.querySelectorAll('#call-rows tr')].some(r =>
  r.cells[2].textContent === String(arguments[0]) && r.dataset.session === arguments[1]
  && r.dataset.outcome === arguments[2]);";

/// The visible rows' tools.
const VISIBLE: &str = "return [...document.querySelectorAll('#call-rows tr')]
  .filter(r => !r.hidden).map(r => r.dataset.tool).sort().join(',');";

/// Opens `path` of the console and waits for its live stream.
fn open_live(browser: &Browser, console: &Console, path: &str) {
    browser.go(&format!("{}{path}", console.origin));
    browser.wait_for(
        "the live stream connected",
        "const l = document.getElementById('live'); return !!l && l.textContent === 'connected';",
        json!([]),
    );
}

#[test]
fn live_calls_arrive_as_they_happen_and_the_filter_hides_the_others() {
    let broker = BrokerProcess::start(&grants(), "");
    std::fs::write(broker.work.join("notes.txt"), "the tide tables").unwrap();
    let console = Console::start(&broker);
    let browser = Browser::start();
    browser.log_in(&console);
    open_live(&browser, &console, "/calls");

    let mut reader = AgentClient::open(&broker.socket(), None);
    let read = json!({ "path": broker.work.join("notes.txt") }).to_string();
    assert!(matches!(
        reader.call(1, "read_file", &read),
        Ok(proto::ToolResponse::Result { .. })
    ));
    let mut writer = AgentClient::open(&broker.socket(), None);
    let denied = json!({ "path": "/nonexistent/x", "content": "x" }).to_string();
    assert!(matches!(
        writer.call(1, "write_file", &denied),
        Ok(proto::ToolResponse::Denied { .. })
    ));
    let reader_id = reader.session_id().to_string();
    let writer_id = writer.session_id().to_string();
    browser.wait_for("the read's result", ROW, json!([1, reader_id, "result"]));
    browser.wait_for("the denied write", ROW, json!([1, writer_id, "denied"]));
    assert_eq!(
        browser.run(VISIBLE, json!([])),
        json!("read_file,write_file")
    );

    browser.type_into("#call-filter input[name=tool]", "write");
    assert_eq!(browser.run(VISIBLE, json!([])), json!("write_file"));
    browser.run(
        "const f = document.getElementById('call-filter');
         f.elements.tool.value = '';
         f.elements.outcome.value = 'result';
         f.elements.outcome.dispatchEvent(new Event('change', { bubbles: true }));",
        json!([]),
    );
    assert_eq!(browser.run(VISIBLE, json!([])), json!("read_file"));
    browser.run(
        "const f = document.getElementById('call-filter');
         f.elements.outcome.value = '';
         f.elements.session.value = arguments[0];
         f.elements.session.dispatchEvent(new Event('input', { bubbles: true }));",
        json!([writer_id]),
    );
    assert_eq!(browser.run(VISIBLE, json!([])), json!("write_file"));
    // A call that arrives while the filter is on is filtered too.
    let again = json!({ "path": broker.work.join("notes.txt") }).to_string();
    assert!(reader.call(2, "read_file", &again).is_ok());
    browser.wait_for("the second read", ROW, json!([2, reader_id, "result"]));
    assert_eq!(browser.run(VISIBLE, json!([])), json!("write_file"));
}

#[test]
fn a_session_s_timeline_marks_its_first_untrusted_data_and_the_audit_view_finds_exports_and_checks()
{
    let broker = BrokerProcess::start(&grants(), "");
    std::fs::write(broker.work.join("notes.txt"), "the tide tables").unwrap();
    let console = Console::start(&broker);
    let browser = Browser::start();
    browser.log_in(&console);
    let mut client = AgentClient::open(&broker.socket(), None);
    let outside = json!({ "path": "/etc/hostname" }).to_string();
    assert!(matches!(
        client.call(1, "read_file", &outside),
        Ok(proto::ToolResponse::Denied { .. })
    ));
    let notes = json!({ "path": broker.work.join("notes.txt") }).to_string();
    assert!(matches!(
        client.call(2, "read_file", &notes),
        Ok(proto::ToolResponse::Result {
            untrusted: true,
            ..
        })
    ));
    let missing = broker.work.join("missing-harbour.txt");
    let gone = json!({ "path": missing }).to_string();
    assert!(matches!(
        client.call(3, "read_file", &gone),
        Ok(proto::ToolResponse::Failed { .. })
    ));
    let session = client.session_id().to_string();

    // The sessions list links to the session; its page has the timeline.
    browser.go(&format!("{}/sessions", console.origin));
    browser.wait_for(
        "the session listed",
        "return [...document.querySelectorAll('a.session')].some(a => a.textContent === arguments[0]);",
        json!([session]),
    );
    browser.click("a.session");
    browser.wait_for(
        "the timeline",
        "return !!document.querySelector('svg.timeline');",
        json!([]),
    );
    let bars = browser.run(
        "return [...document.querySelectorAll('svg.timeline rect.call')]
           .map(r => r.dataset.call + ':' + r.classList[1] + ':' + r.getAttribute('fill'));",
        json!([]),
    );
    assert_eq!(
        bars,
        json!(["1:denied:#b00020", "2:result:#2e7d32", "3:failed:#c77700"])
    );
    let marks = browser.run(
        "return [...document.querySelectorAll('svg.timeline g.label-change')]
           .map(g => g.dataset.what + '@' + g.dataset.call);",
        json!([]),
    );
    assert_eq!(marks, json!(["untrusted private@2"]));
    let changes = browser.text("#changes");
    assert!(
        changes.contains("first saw untrusted data") && changes.contains("from call 2 (read_file)"),
        "{changes}"
    );
    assert!(browser.text("#calls").contains("missing-harbour.txt"));

    // The audit view: search by tool and decision, through the form.
    browser.go(&format!("{}/audit", console.origin));
    browser.wait_for(
        "the audit view",
        "return !!document.getElementById('search');",
        json!([]),
    );
    assert!(
        browser.text("#chain").contains("the chain holds"),
        "{}",
        browser.text("#chain")
    );
    browser.type_into("#search input[name=tool]", "read_file");
    browser.run(
        "document.querySelector('#search select[name=decision]').value = 'failed';",
        json!([]),
    );
    browser.click("#search button");
    browser.wait_for(
        "the search's results",
        "return location.search.includes('decision=failed') && !!document.getElementById('records');",
        json!([]),
    );
    let rows = browser.run(
        "return [...document.querySelectorAll('#records tbody tr')].map(r => r.textContent);",
        json!([]),
    );
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert!(
        rows[0].as_str().unwrap().contains("missing-harbour.txt"),
        "{rows:?}"
    );

    // Its export: the records found, as the log holds them.
    let exported = browser.run_async(
        "const done = arguments[arguments.length - 1];
         const link = document.getElementById('export');
         fetch(link.href).then(r => r.text().then(t => done([r.status,
           r.headers.get('content-disposition'), t])));",
        json!([]),
    );
    assert_eq!(exported[0], json!(200));
    assert!(exported[1].as_str().unwrap().starts_with("attachment"));
    let lines: Vec<Value> = exported[2]
        .as_str()
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0]["event"]["type"], json!("answered"));
    assert_eq!(lines[0]["event"]["call_id"], json!(3));
    let log = std::fs::read_to_string(broker.state.join("audit.jsonl")).unwrap();
    assert!(
        log.lines()
            .any(|l| l == exported[2].as_str().unwrap().trim_end())
    );

    // Change the record that holds the file's text: the view reports the break, naming it.
    let changed = log.replacen("the tide tables", "the tide TABLES", 1);
    assert_ne!(changed, log);
    std::fs::write(broker.state.join("audit.jsonl"), &changed).unwrap();
    let (number, _) = changed
        .lines()
        .enumerate()
        .find(|(_, l)| l.contains("the tide TABLES"))
        .unwrap();
    browser.go(&format!("{}/audit", console.origin));
    browser.wait_for(
        "the audit view",
        "return !!document.getElementById('chain');",
        json!([]),
    );
    let chain = browser.text("#chain");
    assert!(chain.contains("The chain is broken."), "{chain}");
    assert!(
        chain.contains(&format!("(line {}): record", number + 1)),
        "{chain}"
    );
    assert!(browser.text("#broken-line").contains("the tide TABLES"));
    assert_eq!(
        browser.run(
            "return document.querySelectorAll('#records tr.broken').length;",
            json!([])
        ),
        json!(1)
    );
}

#[test]
fn the_grants_view_shows_a_problem_with_its_file_and_line_as_text() {
    let broker = BrokerProcess::start(GRANTS, "");
    broker.write_grants(
        "broken.toml",
        "[[grant]]\nid = \"x\"\ntool = \"<img src=x onerror=document.title='pwned'>\"\n",
    );
    let console = Console::start(&broker);
    let browser = Browser::start();
    browser.log_in(&console);
    browser.go(&format!("{}/grants", console.origin));
    browser.wait_for(
        "the grants check",
        "return !!document.getElementById('verdict');",
        json!([]),
    );
    let problems = browser.text("#problems");
    assert!(
        problems.contains("broken.toml:3")
            && problems.contains("\"<img src=x onerror=document\" is not a server name"),
        "{problems}"
    );
    assert!(browser.text("#verdict").contains("1 problem(s)"));
    assert_eq!(
        browser.run(
            "return document.querySelectorAll('main img').length === 0 && document.title;",
            json!([])
        ),
        json!("boxmaker console: grants")
    );
}

/// A downstream MCP server (JSON-RPC on standard input and output, no SDK) with one tool,
/// `note`, described by the file `description` beside it; when that file changes, it says
/// its tool list changed.
const CHANGING: &str = r#"
import json, os, sys, threading, time
here = os.path.dirname(os.path.abspath(__file__))
lock = threading.Lock()
def description():
    with open(os.path.join(here, "description"), encoding="utf-8") as f:
        return f.read()
def send(message):
    with lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()
def watch():
    seen = description()
    while True:
        time.sleep(0.1)
        now = description()
        if now != seen:
            seen = now
            send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
threading.Thread(target=watch, daemon=True).start()
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {"tools": {"listChanged": True}},
                  "serverInfo": {"name": "changing", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "note", "description": description(),
                             "inputSchema": {"type": "object", "properties": {}}}]}
    else:
        send({"jsonrpc": "2.0", "id": message["id"], "error": {"code": -32601, "message": "no"}})
        continue
    send({"jsonrpc": "2.0", "id": message["id"], "result": result})
"#;

/// Whether `bx grants check --json` on `broker` says `chg.note` changed since pinned.
fn note_changed(broker: &BrokerProcess) -> bool {
    let ran = crate::bx(broker, &["grants", "check", "--json"]);
    let Ok(checked) = serde_json::from_str::<Value>(&ran.stdout) else {
        return false;
    };
    checked["downstream"]["servers"][0]["tools"]
        .as_array()
        .is_some_and(|tools| {
            tools
                .iter()
                .any(|t| t["name"] == "chg.note" && t["status"] == "changed")
        })
}

#[test]
fn the_grants_view_shows_a_changed_definition_s_difference_from_its_pin_as_text() {
    let script = testkit::temp_dir();
    let folder = script.path().canonicalize().unwrap();
    std::fs::write(folder.join("changing.py"), CHANGING).unwrap();
    std::fs::write(folder.join("description"), "Notes a line.").unwrap();
    let config = format!(
        "[[mcp.servers]]\nname = \"chg\"\ncommand = [\"/usr/bin/python3\", {:?}]\nread_only = [{:?}]\nstart_ms = 30000\n",
        folder.join("changing.py").display().to_string(),
        folder.display().to_string()
    );
    let box_grant = "[[grant]]\nid = \"chg-box\"\nserver = \"chg\"\npaths = [\"{work}\"]\n\n[[grant]]\nid = \"chg-tools\"\ntool = \"chg.*\"\n";
    let broker = BrokerProcess::start(box_grant, &config);
    let pinned = crate::bx(&broker, &["grants", "pin", "chg.note"]);
    assert_eq!(pinned.code, 0, "{}{}", pinned.stdout, pinned.stderr);
    // The server now describes its tool with markup, script and a right-to-left override.
    std::fs::write(
        folder.join("description"),
        "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\"> \u{202e}txt.exe",
    )
    .unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !note_changed(&broker) {
        assert!(
            std::time::Instant::now() < deadline,
            "the broker never saw chg.note change:\n{}",
            broker.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let console = Console::start(&broker);
    let browser = Browser::start();
    browser.log_in(&console);
    browser.go(&format!("{}/grants", console.origin));
    browser.wait_for(
        "the grants check",
        "return !!document.getElementById('verdict');",
        json!([]),
    );
    let diff = browser.text("tr.tool.changed pre.diff");
    assert!(
        diff.contains("--- pinned") && diff.contains("+++ now"),
        "{diff}"
    );
    assert!(
        diff.contains("-  \"description\": \"Notes a line.\""),
        "{diff}"
    );
    assert!(
        diff.contains(
            "+  \"description\": \"<script>document.title='pwned'</script><img src=x onerror=\\\"document.title='pwned'\\\"> \\u{202e}txt.exe\""
        ),
        "{diff}"
    );
    assert!(!diff.contains('\u{202e}'), "{diff}");
    assert_eq!(
        browser.run(
            "return document.querySelectorAll('main script, main img, main [onerror]').length === 0
               && document.title;",
            json!([])
        ),
        json!("boxmaker console: grants")
    );
}
