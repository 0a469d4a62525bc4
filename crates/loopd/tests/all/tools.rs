//! Seeds M2b/03 and M3a/16 at the paths they pin: `loopd::tools` and `loopd::broker` name the
//! `toolport` crate's items themselves (its own tests cover their behaviour), and the bytes of
//! the tools array loopd sends are pinned.

use loopd::llama::ToolSchema;
use loopd::tools::{
    CALL_TOOL, CLOCK, Dispatch, Entry, FIND_LIMIT, FIND_TOOL, FakeTools, Pending, Registry,
    ToolPort, call_tool_schema, cap_result, clock_schema, denial_text, dispatch, echo_schema,
    find_tool_schema, http_fetch_schema, read_file_schema, shell_schema, write_file_schema,
};
use proto::{DenyReason, Timestamp, ToolRequest};

#[test]
fn the_core_tools_array_is_pinned_byte_for_byte() {
    // The exact bytes of every session's tools array. A deliberate change is regenerated with
    // BOXMAKER_BLESS=1, and breaks the prompt cache of every existing session's server.
    let sent = loopd::llama::tools_json(&Registry::m3a().core_schemas()).unwrap();
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/all/golden/core_tools.json");
    if std::env::var_os("BOXMAKER_BLESS").is_some() {
        std::fs::write(&path, format!("{sent}\n")).unwrap();
    }
    let golden = std::fs::read_to_string(&path).unwrap();
    assert_eq!(sent, golden.trim_end());
}

#[test]
fn the_seed_paths_under_loopd_tools_are_toolports_own_items() {
    // Each binding below has a `toolport` type: it compiles only if `loopd::tools` re-exports
    // the very items, not copies of them.
    let registry: toolport::Registry = Registry::m3a();
    assert_eq!(registry, toolport::Registry::m3a());
    let entry: &toolport::Entry = registry.entries().first().unwrap();
    let _: &Entry = entry;
    let fake: toolport::FakeTools = FakeTools::new();
    let port: &dyn toolport::ToolPort = &fake;
    let _: &dyn ToolPort = port;
    let pending: toolport::Pending = Pending {
        approval: 1,
        expires: Timestamp::now(),
        answerable: false,
    };
    assert_eq!(pending.approval, 1);
    let dispatched: toolport::Dispatch = dispatch(&registry, "read_file", "{}");
    assert_eq!(
        dispatched,
        Dispatch::Port {
            tool: "read_file".to_string(),
            arguments: "{}".to_string()
        }
    );
    let schemas: [(ToolSchema, ToolSchema); 8] = [
        (clock_schema(), toolport::clock_schema()),
        (echo_schema(), toolport::echo_schema()),
        (find_tool_schema(), toolport::find_tool_schema()),
        (call_tool_schema(), toolport::call_tool_schema()),
        (read_file_schema(), toolport::read_file_schema()),
        (write_file_schema(), toolport::write_file_schema()),
        (shell_schema(), toolport::shell_schema()),
        (http_fetch_schema(), toolport::http_fetch_schema()),
    ];
    for (here, there) in schemas {
        assert_eq!(here, there);
    }
    assert_eq!(
        [CLOCK, FIND_TOOL, CALL_TOOL],
        [toolport::CLOCK, toolport::FIND_TOOL, toolport::CALL_TOOL]
    );
    assert_eq!(FIND_LIMIT, toolport::FIND_LIMIT);
    assert_eq!(cap_result("abc", 1), toolport::cap_result("abc", 1));
    assert_eq!(
        denial_text(DenyReason::NoGrant),
        toolport::denial_text(DenyReason::NoGrant)
    );
    let request = ToolRequest {
        session: "s".into(),
        call_id: 1,
        tool: "echo".into(),
        arguments: r#"{"text":"hi"}"#.into(),
    };
    let _ = fake.call(&request, &mut |_| {});
    assert_eq!(fake.calls(), vec![request]);
}

#[test]
fn the_broker_port_under_loopd_broker_is_toolports() {
    let reconnect: std::time::Duration = loopd::broker::RECONNECT_FOR;
    assert_eq!(reconnect, toolport::RECONNECT_FOR);
    let resume = loopd::broker::resume_of("s-1", "t-1");
    assert_eq!(resume, toolport::resume_of("s-1", "t-1"));
    // Nothing listens on a socket in a fresh folder: the error is toolport's own type.
    let folder = tempfile::tempdir().unwrap();
    let error: toolport::PortError =
        match loopd::broker::BrokerPort::connect(&folder.path().join("agent.sock"), None) {
            Ok(_) => panic!("connected to a socket nobody listens on"),
            Err(error) => error,
        };
    assert!(error.is_no_broker());
}
