//! `bx memory list|show|forget|purge|export` against a real broker, each recorded in the audit
//! log, and against none.

use std::fs;

use proto::{Class, MemoryEntry, ToolResponse};
use testkit::{AgentClient, BrokerProcess};

use super::{bx, bx_in};

const GRANTS: &str = r#"
[[grant]]
id = "secret-file"
tool = "read_file"
paths = ["{work}/secret.txt"]
class = "secret"
untrusted = false

[[grant]]
id = "remember"
tool = ["memory", "recall"]
on_untrusted = "allow"
"#;

fn remember(client: &mut AgentClient, call: u64, text: &str) -> u64 {
    let args = serde_json::json!({ "text": text, "tags": ["proj"] }).to_string();
    let response = client.call(call, "memory", &args).unwrap();
    let ToolResponse::Result { content, .. } = &response else {
        panic!("{response:?}");
    };
    let header: serde_json::Value =
        serde_json::from_str(content.split_once('\n').unwrap().0).unwrap();
    header["id"].as_u64().unwrap()
}

#[test]
fn the_owner_lists_shows_forgets_purges_and_exports_the_memory_and_each_command_is_audited() {
    let broker = BrokerProcess::start(GRANTS, "");
    fs::write(broker.work.join("secret.txt"), "s3cret\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let plain = remember(&mut client, 1, "the printer is on floor 2");
    client
        .call(
            2,
            "read_file",
            &serde_json::json!({ "path": broker.work.join("secret.txt") }).to_string(),
        )
        .unwrap();
    let secret = remember(&mut client, 3, "the vault code is \u{1b}[31m4242");

    let listed = bx(&broker, &["memory", "list"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(
        listed
            .stdout
            .contains(&format!("entry {plain}: public; tags proj")),
        "{}",
        listed.stdout
    );
    assert!(
        listed.stdout.contains(&format!("entry {secret}: secret")),
        "{}",
        listed.stdout
    );
    // Model-controlled text reaches the terminal escaped.
    assert!(!listed.stdout.contains('\u{1b}'), "{}", listed.stdout);
    assert!(
        listed.stdout.contains("2 of 2 entries"),
        "{}",
        listed.stdout
    );

    let json = bx(&broker, &["memory", "list", "--json"]);
    let entries: Vec<MemoryEntry> = serde_json::from_str(&json.stdout).unwrap();
    assert_eq!(
        entries.iter().map(|e| e.id).collect::<Vec<_>>(),
        [secret, plain]
    );
    assert_eq!(entries[0].class, Class::Secret);
    assert_eq!(entries[0].session, client.session_id());

    let shown = bx(&broker, &["memory", "show", &plain.to_string(), "--json"]);
    assert_eq!(shown.code, 0, "{}", shown.stderr);
    let entry: MemoryEntry = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(entry.text, "the printer is on floor 2");
    let unknown = bx(&broker, &["memory", "show", "999"]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("there is no memory entry 999"),
        "{}",
        unknown.stderr
    );

    let forgot = bx(&broker, &["memory", "forget", &secret.to_string()]);
    assert_eq!(forgot.code, 0, "{}", forgot.stderr);
    assert!(forgot.stdout.contains("is forgotten"), "{}", forgot.stdout);
    let again = bx(&broker, &["memory", "forget", &secret.to_string()]);
    assert_eq!(again.code, 1);
    // No session recalls it; the owner still lists it.
    let args = serde_json::json!({ "query": "vault" }).to_string();
    let recalled = client.call(4, "recall", &args).unwrap();
    let ToolResponse::Result { content, class, .. } = &recalled else {
        panic!("{recalled:?}");
    };
    assert!(content.contains("\"entries\":0"), "{content}");
    assert_eq!(*class, Class::Public);
    let listed = bx(&broker, &["memory", "list"]);
    assert!(listed.stdout.contains("forgotten at"), "{}", listed.stdout);

    let exported = bx(&broker, &["memory", "export"]);
    assert_eq!(exported.code, 0, "{}", exported.stderr);
    let lines: Vec<MemoryEntry> = exported
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[1].class, Class::Secret);
    assert!(lines[1].forgotten.is_some());
    assert_eq!(lines[1].text, "the vault code is \u{1b}[31m4242");

    let purged = bx(&broker, &["memory", "purge"]);
    assert_eq!(purged.code, 0, "{}", purged.stderr);
    assert!(
        purged.stdout.contains("Purged 1 forgotten entries"),
        "{}",
        purged.stdout
    );
    let exported = bx(&broker, &["memory", "export"]);
    assert_eq!(exported.stdout.lines().count(), 1);

    let log = fs::read_to_string(broker.state.join("audit.jsonl")).unwrap();
    let owner: Vec<serde_json::Value> = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|r| r["event"]["type"] == "memory_owner")
        .collect();
    let commands: Vec<&str> = owner
        .iter()
        .map(|r| r["event"]["command"].as_str().unwrap())
        .collect();
    assert_eq!(
        commands,
        [
            "list", "list", "show", "show", "forget", "forget", "list", "export", "purge", "export"
        ]
    );
    assert_eq!(owner[4]["event"]["entry"], secret);
    assert_eq!(owner[4]["event"]["entries"], 1);
    let verified = bx(&broker, &["audit", "verify"]);
    assert_eq!(verified.code, 0, "{}", verified.stdout);
}

#[test]
fn the_memory_commands_need_a_broker_and_a_damaged_store_is_named() {
    let root = testkit::temp_dir();
    let (config, state, runtime) = (
        root.path().join("c"),
        root.path().join("s"),
        root.path().join("r"),
    );
    for args in [
        &["memory", "list"][..],
        &["memory", "show", "1"],
        &["memory", "forget", "1"],
        &["memory", "purge"],
        &["memory", "export"],
    ] {
        let ran = bx_in(&config, &state, &runtime, args);
        assert_eq!(ran.code, 3, "{args:?}: {}", ran.stderr);
    }
    let broker = BrokerProcess::start(GRANTS, "");
    fs::create_dir_all(broker.state.join("memory")).unwrap();
    fs::write(
        broker.state.join("memory/memory.sqlite"),
        b"garbage ".repeat(512),
    )
    .unwrap();
    for args in [&["memory", "list"][..], &["memory", "export"]] {
        let ran = bx(&broker, args);
        assert_eq!(ran.code, 1, "{args:?}");
        assert!(
            ran.stderr.contains("the memory store cannot be used")
                && ran.stderr.contains("memory.sqlite"),
            "{args:?}: {}",
            ran.stderr
        );
    }
    // bx status still works: only the memory is out.
    assert_eq!(bx(&broker, &["status"]).code, 0);
}
