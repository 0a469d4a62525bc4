//! Seeds M2b/03 and M3a/16: the registry, the schemas, `dispatch` row by row, `cap_result`,
//! `FakeTools` and `denial_text` (the seeds name them at `loopd::tools`, which re-exports
//! these; loopd's own tests check the re-export and the bytes of the tools array).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proto::ToolSchema;
use proto::{Class, DenyReason, Timestamp, ToolRequest, ToolResponse};
use serde_json::json;
use toolport::{
    CALL_TOOL, CLOCK, Dispatch, Entry, FIND_LIMIT, FIND_TOOL, FakeTools, Pending, Registry,
    ToolPort, call_tool_schema, cap_result, clock_schema, denial_text, dispatch, echo_schema,
    find_tool_schema, http_fetch_schema, read_file_schema, shell_schema, write_file_schema,
};

fn local(d: Dispatch) -> String {
    match d {
        Dispatch::Local(text) => text,
        other => panic!("expected Local, got {other:?}"),
    }
}

fn request(tool: &str, arguments: &str) -> ToolRequest {
    ToolRequest {
        session: "s".into(),
        call_id: 1,
        tool: tool.into(),
        arguments: arguments.into(),
    }
}

fn names(schemas: &[ToolSchema]) -> Vec<&str> {
    schemas.iter().map(|s| s.name.as_str()).collect()
}

// ---- the registry ----

#[test]
fn the_m2b_registry_has_clock_as_core_and_echo_to_be_found() {
    let registry = Registry::m2b();
    assert_eq!(
        registry.entries(),
        &[
            Entry {
                schema: clock_schema(),
                core: true
            },
            Entry {
                schema: echo_schema(),
                core: false
            }
        ]
    );
    assert_eq!(
        names(&registry.core_schemas()),
        ["clock", "find_tool", "call_tool"]
    );
}

#[test]
fn the_m3a_registry_has_the_same_core_and_the_four_broker_tools() {
    let m3a = Registry::m3a();
    assert_eq!(m3a.core_schemas(), Registry::m2b().core_schemas());
    let order: Vec<(&str, bool)> = m3a
        .entries()
        .iter()
        .map(|e| (e.schema.name.as_str(), e.core))
        .collect();
    assert_eq!(
        order,
        [
            ("clock", true),
            ("read_file", false),
            ("write_file", false),
            ("shell", false),
            ("http_fetch", false)
        ]
    );
}

#[test]
fn the_demo_registry_is_m3a_and_echo() {
    let demo = Registry::demo();
    let mut expected = Registry::m3a().entries().to_vec();
    expected.push(Entry {
        schema: echo_schema(),
        core: false,
    });
    assert_eq!(demo.entries(), expected.as_slice());
    assert_eq!(demo.core_schemas(), Registry::m3a().core_schemas());
}

#[test]
fn core_schemas_are_the_core_entries_then_find_tool_then_call_tool() {
    let registry = Registry::new(vec![
        Entry {
            schema: echo_schema(),
            core: true,
        },
        Entry {
            schema: shell_schema(),
            core: false,
        },
        Entry {
            schema: clock_schema(),
            core: true,
        },
    ]);
    assert_eq!(
        names(&registry.core_schemas()),
        ["echo", "clock", "find_tool", "call_tool"]
    );
}

#[test]
fn get_finds_an_entry_by_its_exact_name() {
    let registry = Registry::m3a();
    assert_eq!(registry.get("shell").map(|e| e.core), Some(false));
    assert!(registry.get("Shell").is_none());
    assert!(registry.get("find_tool").is_none());
}

#[test]
fn find_matches_name_or_description_ignoring_case_in_registry_order() {
    let registry = Registry::m3a();
    assert_eq!(
        registry
            .find("FILE")
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        ["read_file", "write_file"]
    );
    assert_eq!(registry.find("sandbox")[0].name, "shell");
    assert_eq!(registry.find("RFC 3339")[0].name, "clock");
}

#[test]
fn find_with_an_empty_query_matches_nothing() {
    assert!(Registry::m3a().find("").is_empty());
}

// ---- the schemas ----

#[test]
fn the_seed_texts_of_the_core_schemas_are_exact() {
    assert_eq!(
        clock_schema().description,
        "The current date and time, as RFC 3339 in UTC."
    );
    assert_eq!(
        clock_schema().parameters,
        json!({"type":"object","properties":{}})
    );
    assert_eq!(
        echo_schema().description,
        "Returns its text argument unchanged."
    );
    assert_eq!(echo_schema().parameters["required"], json!(["text"]));
    assert_eq!(
        echo_schema().parameters["properties"]["text"]["type"],
        "string"
    );
    assert_eq!(
        find_tool_schema().description,
        "Search for more tools by keyword. Returns the schemas of the tools that match."
    );
    assert_eq!(find_tool_schema().parameters["required"], json!(["query"]));
    assert!(find_tool_schema().parameters["properties"]["query"]["description"].is_string());
    assert_eq!(
        call_tool_schema().description,
        "Call a tool that find_tool returned. Pass its name and an arguments object that fits its schema."
    );
    assert_eq!(
        call_tool_schema().parameters["required"],
        json!(["name", "arguments"])
    );
    assert_eq!(
        call_tool_schema().parameters["properties"]["name"]["type"],
        "string"
    );
    assert_eq!(
        call_tool_schema().parameters["properties"]["arguments"]["type"],
        "object"
    );
}

#[test]
fn the_four_broker_schemas_have_the_seed_texts_exactly() {
    let path = "The absolute path of the file.";
    let cases = [
        (
            read_file_schema(),
            "read_file",
            "Read a text file. Needs a grant from the owner for the path.",
            json!({"type":"object","properties":{"path":{"type":"string","description":path}},"required":["path"]}),
        ),
        (
            write_file_schema(),
            "write_file",
            "Write a text file, replacing it. Needs a grant from the owner for the path.",
            json!({"type":"object","properties":{"path":{"type":"string","description":path},"content":{"type":"string","description":"The whole new content of the file."}},"required":["path","content"]}),
        ),
        (
            shell_schema(),
            "shell",
            "Run a shell command in a sandbox. Needs a grant from the owner.",
            json!({"type":"object","properties":{"command":{"type":"string","description":"The command line to run."},"cwd":{"type":"string","description":"The absolute path of the directory to run it in."}},"required":["command"]}),
        ),
        (
            http_fetch_schema(),
            "http_fetch",
            "Fetch an https URL. Needs a grant from the owner for the host.",
            json!({"type":"object","properties":{"url":{"type":"string","description":"The URL. It must start with https://."}},"required":["url"]}),
        ),
    ];
    for (schema, name, description, parameters) in cases {
        assert_eq!(schema.name, name);
        assert_eq!(schema.description, description);
        assert_eq!(schema.parameters, parameters);
    }
}

#[test]
fn a_schema_with_an_unknown_field_is_refused() {
    let text = r#"{"name":"x","description":"y","parameters":{},"strict":true}"#;
    let error = serde_json::from_str::<ToolSchema>(text).unwrap_err();
    assert!(
        error.to_string().contains("unknown field `strict`"),
        "{error}"
    );
}

// ---- dispatch, one row of the M2b/03 table per test ----

#[test]
fn find_tool_with_matches_lists_each_schema_as_compact_json_then_the_hint() {
    let text = local(dispatch(&Registry::m2b(), FIND_TOOL, r#"{"query":"echo"}"#));
    let schema = serde_json::to_string(&echo_schema()).unwrap();
    assert_eq!(
        text,
        format!("1 tool(s) match:\n{schema}\nCall it with call_tool.")
    );
}

#[test]
fn find_tool_without_a_match_says_no_tool_matches() {
    let text = local(dispatch(
        &Registry::m2b(),
        FIND_TOOL,
        r#"{"query":"teleport"}"#,
    ));
    assert_eq!(text, "No tool matches.");
}

#[test]
fn find_tool_with_arguments_that_are_not_json_with_a_string_query_says_no_tool_matches() {
    for arguments in ["not json", "{}", r#"{"query":5}"#, "[]", r#""echo""#] {
        let text = local(dispatch(&Registry::m2b(), FIND_TOOL, arguments));
        assert_eq!(text, "No tool matches.", "{arguments}");
    }
}

#[test]
fn find_tool_lists_substring_matches_first_then_ranked_ones() {
    let text = local(dispatch(
        &Registry::demo(),
        FIND_TOOL,
        r#"{"query":"read a file"}"#,
    ));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "2 tool(s) match:");
    assert!(lines[1].starts_with(r#"{"name":"read_file""#), "{text}");
    assert!(lines[2].starts_with(r#"{"name":"write_file""#), "{text}");
}

#[test]
fn find_tool_lists_at_most_ten_and_says_how_many_more() {
    let entries: Vec<Entry> = (0..25)
        .map(|i| Entry {
            schema: ToolSchema {
                name: format!("tool_{i}"),
                description: "Does a thing with widgets.".into(),
                parameters: json!({"type":"object","properties":{}}),
            },
            core: false,
        })
        .collect();
    let text = local(dispatch(
        &Registry::new(entries),
        FIND_TOOL,
        r#"{"query":"widgets"}"#,
    ));
    assert!(
        text.starts_with(&format!("{FIND_LIMIT} tool(s) match:\n")),
        "{text}"
    );
    assert_eq!(
        text.lines().filter(|l| l.starts_with('{')).count(),
        FIND_LIMIT
    );
    assert!(text.contains("15 more match"), "{text}");
    assert!(text.ends_with("Call it with call_tool."));
}

#[test]
fn call_tool_with_a_known_non_core_tool_goes_to_the_port_with_its_arguments_as_json_text() {
    let d = dispatch(
        &Registry::m2b(),
        CALL_TOOL,
        r#"{"name": "echo", "arguments": {"text": "hi"}}"#,
    );
    assert_eq!(
        d,
        Dispatch::Port {
            tool: "echo".into(),
            arguments: r#"{"text":"hi"}"#.into()
        }
    );
}

#[test]
fn call_tool_with_a_core_tool_says_to_call_it_directly() {
    let text = local(dispatch(
        &Registry::m2b(),
        CALL_TOOL,
        r#"{"name":"clock","arguments":{}}"#,
    ));
    assert!(text.contains("core tool"), "{text}");
    assert!(text.contains("directly"), "{text}");
}

#[test]
fn call_tool_with_an_unknown_tool_says_no_tool_named_it() {
    let text = local(dispatch(
        &Registry::m2b(),
        CALL_TOOL,
        r#"{"name":"rm","arguments":{}}"#,
    ));
    assert!(text.contains(r#"No tool named "rm""#), "{text}");
}

#[test]
fn call_tool_without_a_name_says_no_tool_named_the_empty_name() {
    let text = local(dispatch(&Registry::m2b(), CALL_TOOL, r#"{"arguments":{}}"#));
    assert!(text.contains(r#"No tool named """#), "{text}");
}

#[test]
fn call_tool_with_arguments_that_are_not_a_json_object_says_it_needs_one() {
    for arguments in [
        "not json",
        "[1]",
        r#"{"name":"echo","arguments":5}"#,
        r#"{"name":"echo","arguments":"plain words"}"#,
        r#"{"name":"echo","arguments":[]}"#,
    ] {
        let text = local(dispatch(&Registry::m2b(), CALL_TOOL, arguments));
        assert!(text.contains("needs a JSON object"), "{arguments}: {text}");
    }
}

#[test]
fn call_tool_accepts_an_arguments_object_written_as_a_json_string() {
    let d = dispatch(
        &Registry::m2b(),
        CALL_TOOL,
        r#"{"name":"echo","arguments":"{\"text\":\"hi\"}"}"#,
    );
    assert_eq!(
        d,
        Dispatch::Port {
            tool: "echo".into(),
            arguments: r#"{"text":"hi"}"#.into()
        }
    );
}

#[test]
fn call_tool_without_arguments_sends_an_empty_object() {
    let d = dispatch(&Registry::m2b(), CALL_TOOL, r#"{"name":"echo"}"#);
    assert_eq!(
        d,
        Dispatch::Port {
            tool: "echo".into(),
            arguments: "{}".into()
        }
    );
}

#[test]
fn any_other_name_goes_to_the_port_unchanged_even_one_the_registry_does_not_know() {
    for (name, arguments) in [("echo", r#"{"text": "x"}"#), ("rm_rf", "not json at all")] {
        assert_eq!(
            dispatch(&Registry::m2b(), name, arguments),
            Dispatch::Port {
                tool: name.into(),
                arguments: arguments.into()
            }
        );
    }
}

#[test]
fn clock_is_answered_locally_whatever_the_arguments_and_the_registry() {
    for registry in [Registry::m2b(), Registry::m3a(), Registry::default()] {
        for arguments in ["{}", "garbage", r#"{"tz":"CET"}"#] {
            let before = Timestamp::now();
            let text = local(dispatch(&registry, CLOCK, arguments));
            let at = Timestamp::parse(&text).unwrap();
            assert!(at >= before && at <= Timestamp::now());
            assert!(text.ends_with('Z') && text.len() == 24, "{text}");
        }
    }
}

// ---- cap_result ----

#[test]
fn cap_result_leaves_a_short_text_alone() {
    assert_eq!(cap_result("hello", 5), ("hello".to_string(), false));
}

#[test]
fn cap_result_cuts_on_a_character_boundary_and_marks_the_cut() {
    assert_eq!(cap_result("héllo", 2), ("h\n[truncated]".to_string(), true));
    assert_eq!(
        cap_result("hello", 3),
        ("hel\n[truncated]".to_string(), true)
    );
    assert_eq!(cap_result("日本", 0), ("\n[truncated]".to_string(), true));
}

// ---- FakeTools ----

#[test]
fn fake_tools_echoes_text_as_a_public_trusted_result() {
    let fake = FakeTools::new();
    let response = fake.call(&request("echo", r#"{"text":"hi"}"#), &mut |_| {});
    assert_eq!(
        response,
        ToolResponse::Result {
            content: "hi".into(),
            class: Class::Public,
            untrusted: false,
            truncated: false
        }
    );
}

#[test]
fn fake_tools_fails_echo_without_a_string_text() {
    let fake = FakeTools::new();
    for arguments in ["{}", r#"{"text":1}"#, "nope"] {
        let response = fake.call(&request("echo", arguments), &mut |_| {});
        assert!(
            matches!(response, ToolResponse::Failed { .. }),
            "{arguments}"
        );
    }
}

#[test]
fn fake_tools_denies_every_other_tool_including_clock() {
    let fake = FakeTools::new();
    for tool in ["clock", "read_file", "shell", "anything"] {
        assert_eq!(
            fake.call(&request(tool, "{}"), &mut |_| {}),
            ToolResponse::Denied {
                reason: DenyReason::NoGrant
            }
        );
    }
}

#[test]
fn fake_tools_records_every_request_and_never_reports_pending() {
    let fake = FakeTools::new();
    let mut pending: Vec<Pending> = Vec::new();
    fake.call(&request("echo", r#"{"text":"a"}"#), &mut |p| {
        pending.push(*p)
    });
    fake.call(&request("shell", "{}"), &mut |p| pending.push(*p));
    let tools: Vec<String> = fake.calls().into_iter().map(|r| r.tool).collect();
    assert_eq!(tools, ["echo", "shell"]);
    assert!(pending.is_empty());
}

// ---- denial_text ----

#[test]
fn each_denial_has_its_sentence_and_the_ten_seed_ones_are_exact() {
    let sentences = [
        (DenyReason::NoGrant, "Denied: no grant allows this call."),
        (
            DenyReason::GrantExpired,
            "Denied: the grant for this call has expired.",
        ),
        (
            DenyReason::TaintTooHigh,
            "Denied: this session has seen data too sensitive for this call.",
        ),
        (
            DenyReason::DeniedByGrant,
            "Denied: a grant forbids this call.",
        ),
        (
            DenyReason::ApprovalRefused,
            "Denied: the owner refused this call.",
        ),
        (
            DenyReason::ApprovalExpired,
            "Denied: the approval request expired without an answer.",
        ),
        (
            DenyReason::InvalidArguments,
            "Denied: the arguments are not valid for this tool.",
        ),
        (
            DenyReason::GrantsInvalid,
            "Denied: the grant files have an error; the owner has been told.",
        ),
        (
            DenyReason::AuditUnavailable,
            "Denied: the audit log cannot be written; the owner has been told.",
        ),
        (
            DenyReason::StateUnreadable,
            "Denied: this session's broker state is damaged; the owner has been told.",
        ),
        (
            DenyReason::ProtectedPath,
            "Denied: this path belongs to boxmaker itself; no tool may read or write it.",
        ),
        (
            DenyReason::UnsafeAddress,
            "Denied: the address is loopback, private or link-local, and no grant names it.",
        ),
        (
            DenyReason::UntrustedInput,
            "Denied: this session has received untrusted content, and the grant forbids this call after that.",
        ),
        (
            DenyReason::CatastrophicCommand,
            "Denied: this command could destroy the machine or the owner's files (a recursive delete of a root, home or granted folder, a write to a disk, a fork bomb or a shutdown); no grant can allow it.",
        ),
        (
            DenyReason::BackgroundCommand,
            "Denied: `&` would leave a command running after this call ends; start it with bash_bg instead.",
        ),
        (
            DenyReason::TrustedPlace,
            "Denied: this path is configuration that programs outside the box read or run (git, the shell, ssh, an agent's or editor's settings); only a grant that names it may change it.",
        ),
    ];
    for (reason, sentence) in sentences {
        assert_eq!(denial_text(reason), sentence);
    }
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn cap_result_never_exceeds_the_cap_plus_the_marker(text in ".*", cap in 0usize..64) {
            let (out, cut) = cap_result(&text, cap);
            prop_assert!(out.len() <= cap + "\n[truncated]".len());
            prop_assert_eq!(cut, text.len() > cap);
            if !cut {
                prop_assert_eq!(&out, &text);
            } else {
                let head = out.strip_suffix("\n[truncated]").unwrap();
                prop_assert!(text.starts_with(head));
            }
        }

        #[test]
        fn find_ignores_case(query in "[a-zA-Z_ ]{1,8}") {
            let registry = Registry::demo();
            let lower: Vec<String> = registry.find(&query.to_lowercase()).iter().map(|s| s.name.clone()).collect();
            let upper: Vec<String> = registry.find(&query.to_uppercase()).iter().map(|s| s.name.clone()).collect();
            prop_assert_eq!(lower, upper);
        }

        #[test]
        fn find_with_an_empty_query_matches_nothing_in_any_registry(descriptions in proptest::collection::vec(".{0,20}", 0..8)) {
            let entries = descriptions.iter().enumerate().map(|(i, description)| Entry {
                schema: ToolSchema { name: format!("t{i}"), description: description.clone(), parameters: json!({}) },
                core: i % 2 == 0,
            }).collect();
            prop_assert!(Registry::new(entries).find("").is_empty());
        }

        #[test]
        fn dispatch_never_panics_and_only_passes_on_known_names_through_call_tool(name in ".{0,12}", arguments in ".{0,40}") {
            let registry = Registry::demo();
            let _ = dispatch(&registry, &name, &arguments);
            if let Dispatch::Port { tool, arguments } = dispatch(&registry, CALL_TOOL, &arguments) {
                prop_assert!(registry.get(&tool).is_some_and(|e| !e.core));
                prop_assert!(serde_json::from_str::<serde_json::Value>(&arguments).is_ok_and(|v| v.is_object()));
            }
        }
    }
}
