//! Every control and bidirectional character, sent from outside (a downstream server's tool
//! names and descriptions, a model's arguments, memory entries), through every `bx` command
//! that prints such text: none arrives raw, and the lines meant to be copied (a pin, JSON)
//! still mean the same value.

use testkit::{AgentClient, BrokerProcess};

use super::bx;

/// Every character a terminal acts on: C0, DEL, C1, the bidirectional controls, and the line
/// and paragraph separators.
fn controls() -> Vec<char> {
    ('\u{0}'..='\u{1f}')
        .chain('\u{7f}'..='\u{9f}')
        .chain(['\u{61c}', '\u{200e}', '\u{200f}', '\u{2028}', '\u{2029}'])
        .chain('\u{202a}'..='\u{202e}')
        .chain('\u{2066}'..='\u{2069}')
        .collect()
}

/// Panics if `printed` holds any control raw: a line feed only between lines (never inside
/// one of the markers `<` `>` that surround each character sent).
fn assert_none_raw(what: &str, printed: &str) {
    for c in controls() {
        let marked = format!("<{c}>");
        assert!(
            !printed.contains(&marked),
            "{what}: U+{:04X} arrived raw:\n{printed}",
            u32::from(c)
        );
        if c != '\n' {
            assert!(
                !printed.contains(c),
                "{what}: U+{:04X} arrived raw:\n{printed}",
                u32::from(c)
            );
        }
    }
}

/// All the controls, each between `<` and `>`.
fn marked_controls() -> String {
    controls().iter().map(|c| format!("<{c}>")).collect()
}

/// A downstream MCP server (JSON-RPC on standard input and output, no SDK) whose tools are
/// named and described with every control: `evil.n<C>x` described `d<C>e`.
const EVIL: &str = r#"
import json, sys
controls = [chr(c) for c in list(range(0, 0x20)) + list(range(0x7f, 0xa0))
            + [0x61c, 0x200e, 0x200f, 0x2028, 0x2029] + list(range(0x202a, 0x202f))
            + list(range(0x2066, 0x206a))]
tools = [{"name": "n<%s>x%d" % (c, i), "description": "d<%s>e" % c,
          "inputSchema": {"type": "object", "properties": {}}} for i, c in enumerate(controls)]
for line in sys.stdin:
    message = json.loads(line)
    if "id" not in message:
        continue
    method = message.get("method")
    if method == "initialize":
        result = {"protocolVersion": message["params"]["protocolVersion"],
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "evil", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": tools}
    else:
        print(json.dumps({"jsonrpc": "2.0", "id": message["id"],
                          "error": {"code": -32601, "message": "no"}}), flush=True)
        continue
    print(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}), flush=True)
"#;

/// `bx grants check` on `broker`: its standard output.
fn grants_check(broker: &BrokerProcess) -> String {
    let ran = bx(broker, &["grants", "check"]);
    assert_ne!(ran.code, 2, "{}", ran.stderr);
    ran.stdout
}

#[test]
fn a_downstream_servers_names_and_descriptions_reach_grants_check_escaped_and_pins_copy() {
    let script = testkit::temp_dir();
    let folder = script.path().canonicalize().unwrap();
    std::fs::write(folder.join("evil.py"), EVIL).unwrap();
    let config = format!(
        "[[mcp.servers]]\nname = \"evil\"\ncommand = [\"/usr/bin/python3\", {:?}]\nread_only = [{:?}]\nstart_ms = 30000\n",
        folder.join("evil.py").display().to_string(),
        folder.display().to_string()
    );
    let box_grant = "[[grant]]\nid = \"evil-box\"\nserver = \"evil\"\npaths = [\"{work}\"]\n";
    let broker = BrokerProcess::start(box_grant, &config);
    let printed = grants_check(&broker);
    assert!(
        printed.contains(&format!("{} tool definition(s)", controls().len())),
        "{printed}\n{}",
        broker.log()
    );
    assert_none_raw("grants check", &printed);
    // The pin lines are TOML: pasted into a grant as they are, each pins its tool.
    let pins: Vec<&str> = printed
        .lines()
        .filter_map(|l| l.trim().strip_prefix("its pin: "))
        .collect();
    assert_eq!(pins.len(), controls().len(), "{printed}");
    broker.write_grants(
        "grants.toml",
        &format!(
            "{box_grant}\n[[grant]]\nid = \"evil-tools\"\ntool = \"evil.*\"\npins = {{ {} }}\n",
            pins.join(", ")
        ),
    );
    let printed = grants_check(&broker);
    assert_none_raw("grants check, pinned", &printed);
    assert_eq!(
        printed.matches(": pinned by grant evil-tools").count(),
        controls().len(),
        "{printed}"
    );
}

const ASK_AND_REMEMBER: &str = r#"
[[grant]]
id = "ask-write"
tool = "write_file"
paths = ["{work}"]
untrusted = false
approval = "ask"

[[grant]]
id = "remember"
tool = ["memory", "recall"]
on_untrusted = "allow"
"#;

#[test]
fn arguments_and_memory_entries_reach_approvals_watch_and_memory_escaped_and_json_stays_json() {
    let broker = BrokerProcess::start(ASK_AND_REMEMBER, "");
    let text = marked_controls();
    let mut client = AgentClient::open(&broker.socket(), None);
    let remembered = client
        .call(
            1,
            "memory",
            &serde_json::json!({ "text": format!("note {text}") }).to_string(),
        )
        .unwrap();
    assert!(
        matches!(remembered, proto::ToolResponse::Result { .. }),
        "{remembered:?}"
    );
    let args = serde_json::json!({ "path": broker.work.join("a.txt"), "content": text });
    let mut writer = AgentClient::open(&broker.socket(), None);
    writer.call_pending(1, "write_file", &args.to_string());

    for command in [
        &["approvals"][..],
        &["approvals", "--json"],
        &["memory", "list"],
        &["memory", "list", "--json"],
        &["memory", "show", "1"],
        &["memory", "show", "1", "--json"],
        &["memory", "export"],
    ] {
        let ran = bx(&broker, command);
        assert_eq!(ran.code, 0, "{command:?}: {}", ran.stderr);
        assert_none_raw(&format!("{command:?}"), &ran.stdout);
        assert_none_raw(&format!("{command:?}"), &ran.stderr);
        assert!(ran.stdout.contains("<\\u"), "{command:?}: {}", ran.stdout);
    }
    // JSON is still JSON, with the same text.
    let json = bx(&broker, &["approvals", "--json"]).stdout;
    let pending: Vec<proto::PendingView> = serde_json::from_str(&json).unwrap();
    let arguments: serde_json::Value = serde_json::from_str(&pending[0].arguments).unwrap();
    assert_eq!(arguments["content"], text, "{json}");
    let json = bx(&broker, &["memory", "export"]).stdout;
    let entry: proto::MemoryEntry = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(entry.text, format!("note {text}"));

    for json in [false, true] {
        let printed = watch_lines(&broker, json, 1);
        assert_none_raw(&format!("watch (json: {json})"), &printed);
    }
}

/// `bx watch [--json]` until it has printed `lines` lines that mention `write_file`.
fn watch_lines(broker: &BrokerProcess, json: bool, lines: usize) -> String {
    use std::io::{BufRead, BufReader};
    let mut command = std::process::Command::new(testkit::binary("bx").unwrap());
    command
        .arg("--runtime-dir")
        .arg(&broker.runtime)
        .arg("watch");
    if json {
        command.arg("--json");
    }
    let mut child = command
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut seen = String::new();
    while seen.matches("write_file").count() < lines {
        let mut line = String::new();
        if out.read_line(&mut line).unwrap() == 0 {
            break;
        }
        seen.push_str(&line);
    }
    let _ = child.kill();
    let _ = child.wait();
    seen
}
