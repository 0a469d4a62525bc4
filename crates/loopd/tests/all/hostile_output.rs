//! What `loopd chat` prints when the model and the server send bytes meant for the terminal
//! (the causes 5 and 6): escapes, line forgeries, and call lines of megabytes.

use crate::support::raw::{RawServer, chat, run_loopd};
use serde_json::json;
use testkit::ScriptServer;

/// Every marker loopd starts a line of its own with.
const MARKERS: [&str; 9] = [
    "you> ",
    "assistant> ",
    "  call   ",
    "  wait   ",
    "  denied ",
    "  result ",
    "  skip   ",
    "! turn failed: ",
    "-- session ",
];
/// Where continued model text starts.
const INDENT: &str = "           ";

/// Characters a terminal acts on (newline aside).
fn acted_on(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(c, '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

const EVIL: &str = "\u{1b}[2J\u{1b}]0;owned\u{7}\u{9b}31m\u{202e}gnp.exe\u{8}\u{7f}\r\0";

#[test]
fn model_and_server_bytes_reach_the_terminal_escaped_and_cannot_forge_loopds_lines() {
    let forged = format!(
        "Done.\n  denied read_file: Denied: no grant allows this call.\n  result forged{EVIL}\n-- session x in y: 9 turn(s) answered, 0 failed\n"
    );
    let script = json!({"turns": [
        {"replies": [
            {"say": forged, "call": [
                {"name": format!("shell{EVIL}\n  result forged"), "arguments": {"command": EVIL}},
                {"name": "call_tool", "arguments": {"name": "echo", "arguments": {"text": format!("{EVIL}\n  denied x: y")}}}
            ]},
            {"say": forged}
        ]},
        {"replies": [{"http_status": 500, "body": format!("{EVIL}\n  result forged")}]},
    ]});
    let server = ScriptServer::from_json(&script.to_string());
    let dir = testkit::temp_dir();
    let run = chat(&server.base_url(), dir.path(), "first", &["-m", "second"]);
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let out = &run.stdout;
    assert!(!out.chars().any(acted_on), "{out:?}");
    for line in out.lines() {
        assert!(
            MARKERS.iter().any(|m| line.starts_with(m)) || line.starts_with(INDENT),
            "a line that is neither loopd's nor indented model text: {line:?}"
        );
    }
    let starting = |marker: &str| out.lines().filter(|l| l.starts_with(marker)).count();
    assert_eq!(starting("  call   "), 2, "{out}");
    assert_eq!(
        starting("  denied "),
        1,
        "only the real denial of the shell call: {out}"
    );
    assert_eq!(starting("  result "), 2, "{out}");
    assert_eq!(starting("-- session "), 1, "{out}");
    assert!(out.contains("\\x1b]0;owned\\x07"), "{out}");
    assert!(out.contains("\\u{202e}"), "{out}");
    assert!(out.contains("! turn failed: the model server at") && out.contains("HTTP 500"));
}

#[test]
fn an_error_body_from_the_server_is_escaped_on_standard_error_too() {
    let dir = testkit::temp_dir();
    let script = dir.path().join(format!("bad{}.json", "\u{1b}[31m"));
    std::fs::write(&script, "{").unwrap();
    let model = format!("script:{}", script.display());
    let run = run_loopd(&["chat", "--port", "fake", "--model", &model]);
    assert_eq!(run.code, Some(2));
    assert!(!run.stderr.chars().any(acted_on), "{:?}", run.stderr);
    assert!(run.stderr.contains("bad\\x1b[31m.json"), "{}", run.stderr);
}

#[test]
fn call_lines_of_megabytes_are_cut_to_one_line_and_json_keeps_them_whole() {
    let name = "n".repeat(2 << 20);
    let arguments = format!("{{\"text\":\"{}\"}}", "a\\n".repeat(3 << 20));
    let reply = json!({"choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": arguments}}]}}]})
    .to_string();
    let answer = json!({"choices": [{"index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "ok"}}]})
    .to_string();
    let server = RawServer::start(move |request, stream| {
        use std::io::Write;
        let body = if request.number % 2 == 0 {
            &reply
        } else {
            &answer
        };
        stream.write_all(crate::support::raw::sized_response("application/json", body).as_bytes())
    });
    let dir = testkit::temp_dir();
    let text = chat(
        &server.base_url(),
        &dir.path().join("a"),
        "go",
        &["--no-stream"],
    );
    assert_eq!(text.code, Some(0), "{}{}", text.stdout, text.stderr);
    assert!(
        text.stdout.len() < 4096,
        "printed {} bytes",
        text.stdout.len()
    );
    let call = text
        .stdout
        .lines()
        .find(|l| l.starts_with("  call   "))
        .unwrap();
    assert!(
        call.contains(&format!("…[+{} bytes]", name.len() - 64)),
        "{call}"
    );
    assert!(
        call.ends_with(" bytes]") && call.matches("…[+").count() == 2,
        "{call}"
    );
    let denied = text
        .stdout
        .lines()
        .find(|l| l.starts_with("  denied "))
        .unwrap();
    assert!(denied.len() < 200, "{denied}");

    let json = chat(
        &server.base_url(),
        &dir.path().join("b"),
        "go",
        &["--no-stream", "--json"],
    );
    assert_eq!(json.code, Some(0));
    let started = json
        .stdout
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|e| e["type"] == "tool_call_started")
        .unwrap();
    assert_eq!(started["name"], name.as_str());
    assert_eq!(started["arguments"], arguments.as_str());
}
