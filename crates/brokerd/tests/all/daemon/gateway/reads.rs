//! Read-only downstream tools through the running broker: a tool its grant declares read-only
//! (`read_only = true`), or whose pinned definition says `readOnlyHint: true` under a grant
//! with `read_only = "hint"`, is no side effect, so it runs after untrusted input under the
//! default `on_untrusted = "ask"`; every other downstream call still waits for the owner. The
//! hint is part of the pinned definition: a server that gives a tool a hint has changed it.

use proto::{DenyReason, OwnerRequest, ToolResponse};
use testkit::OwnerClient;

use super::{Probe, content, denied, pins_of, tool_grant};

#[test]
fn a_read_only_tool_runs_after_untrusted_input_and_every_other_call_waits_for_the_owner() {
    let mut probe = Probe::start("");
    let pins = pins_of(&probe.broker, "probe");
    // read says readOnlyHint: true; echo says nothing; connect is declared a read by the owner.
    probe.grant(&format!(
        "{}{}{}{}",
        tool_grant("read-hint", "read", &pins, "read_only = \"hint\""),
        tool_grant("echo-hint", "echo", &pins, "read_only = \"hint\""),
        tool_grant("connect-read", "connect", &pins, "read_only = true"),
        tool_grant("relabel", "relabel", &pins, "on_untrusted = \"allow\""),
    ));
    std::fs::write(probe.broker.work.join("notes.txt"), "planted text").unwrap();
    let read = serde_json::json!({ "path": probe.broker.work.join("notes.txt") }).to_string();
    let mut client = probe.client();
    let first = client.call(1, "probe.read", &read).unwrap();
    assert!(content(&first).contains("planted text"), "{first:?}");
    let ToolResponse::Result { untrusted, .. } = &first else {
        unreachable!()
    };
    assert!(*untrusted, "the session has now received untrusted content");

    // Reads run without asking.
    let again = client.call(2, "probe.read", &read).unwrap();
    assert!(content(&again).contains("planted text"), "{again:?}");
    let connect = client
        .call(3, "probe.connect", r#"{"target":"example.org:443"}"#)
        .unwrap();
    assert!(content(&connect).contains("no proxy"), "{connect:?}");

    // echo has no hint: a side effect, so it waits for the owner.
    let approval = client.call_pending(4, "probe.echo", r#"{"text":"x"}"#);
    let mut owner = OwnerClient::open(&probe.broker.owner_socket());
    owner.send(&OwnerRequest::Refuse {
        approval: proto::ApprovalId(approval),
    });
    let (_, refused) = client.finish_call();
    assert_eq!(denied(&refused.unwrap()), DenyReason::ApprovalRefused);

    let (code, out) = super::grants_check(&probe.broker);
    assert!(
        out.contains("probe.read: pinned by grant read-hint (a read: no side effect)"),
        "{out}"
    );
    assert!(
        out.contains("probe.echo: pinned by grant echo-hint\n"),
        "{out}"
    );
    assert_eq!(code, 0, "{out}");

    // The server gives echo a read-only hint: a changed tool, hidden until pinned again, so a
    // server cannot make its own tool a read.
    let hint = r#"{"text":"","tool":"echo","hint":true}"#;
    assert!(content(&client.call(5, "probe.relabel", hint).unwrap()).contains("relabelled"));
    let echo = client.call(6, "probe.echo", r#"{"text":"x"}"#).unwrap();
    assert_eq!(denied(&echo), DenyReason::NoGrant);
    let (code, out) = super::grants_check(&probe.broker);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("probe.echo: CHANGED since grant echo-hint pinned it"),
        "{out}"
    );
    assert!(out.contains("+  \"annotations\": {"), "{out}");
    assert!(out.contains("+    \"readOnlyHint\": true"), "{out}");
}
