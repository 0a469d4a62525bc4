//! The wire format, pinned: golden JSON for every type, round trips, and the frame codec.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proto::{
    AgentFrame, BrokerFrame, Class, DenyReason, FrameError, MAX_FRAME, PROTOCOL_VERSION, Resume,
    Timestamp, ToolRequest, ToolResponse, ToolSchema, decode_frame, encode_frame, read_frame,
    write_frame,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// Serializes `value`, checks the exact JSON, and checks that the JSON reads back as `value`.
fn golden<T: Serialize + DeserializeOwned + PartialEq + Debug>(value: &T, json: &str) {
    let written = serde_json::to_string(value).unwrap();
    assert_eq!(written, json);
    let read: T = serde_json::from_str(json).unwrap();
    assert_eq!(&read, value);
}

fn at(text: &str) -> Timestamp {
    Timestamp::parse(text).unwrap()
}

#[test]
fn a_tool_request_carries_session_call_tool_and_raw_arguments() {
    golden(
        &ToolRequest {
            session: "s1".into(),
            call_id: 7,
            tool: "read_file".into(),
            arguments: r#"{"path":"/a"}"#.into(),
        },
        r#"{"session":"s1","call_id":7,"tool":"read_file","arguments":"{\"path\":\"/a\"}"}"#,
    );
}

#[test]
fn each_tool_response_variant_is_tagged_with_its_snake_case_type() {
    golden(
        &ToolResponse::Result {
            content: "hi".into(),
            class: Class::Private,
            untrusted: true,
            truncated: false,
        },
        r#"{"type":"result","content":"hi","class":"private","untrusted":true,"truncated":false}"#,
    );
    golden(
        &ToolResponse::Failed {
            message: "boom".into(),
        },
        r#"{"type":"failed","message":"boom"}"#,
    );
    golden(
        &ToolResponse::Denied {
            reason: DenyReason::NoGrant,
        },
        r#"{"type":"denied","reason":"no_grant"}"#,
    );
    golden(
        &ToolResponse::PendingApproval {
            approval: 3,
            expires: at("2026-11-30T01:02:03.004Z"),
            answerable: false,
        },
        r#"{"type":"pending_approval","approval":3,"expires":"2026-11-30T01:02:03.004Z"}"#,
    );
    golden(
        &ToolResponse::PendingApproval {
            approval: 3,
            expires: at("2026-11-30T01:02:03.004Z"),
            answerable: true,
        },
        r#"{"type":"pending_approval","approval":3,"expires":"2026-11-30T01:02:03.004Z","answerable":true}"#,
    );
}

#[test]
fn every_deny_reason_has_its_snake_case_name() {
    let names = [
        (DenyReason::NoGrant, "no_grant"),
        (DenyReason::GrantExpired, "grant_expired"),
        (DenyReason::TaintTooHigh, "taint_too_high"),
        (DenyReason::DeniedByGrant, "denied_by_grant"),
        (DenyReason::ApprovalRefused, "approval_refused"),
        (DenyReason::ApprovalExpired, "approval_expired"),
        (DenyReason::InvalidArguments, "invalid_arguments"),
        (DenyReason::GrantsInvalid, "grants_invalid"),
        (DenyReason::AuditUnavailable, "audit_unavailable"),
        (DenyReason::StateUnreadable, "state_unreadable"),
        (DenyReason::ProtectedPath, "protected_path"),
        (DenyReason::UnsafeAddress, "unsafe_address"),
        (DenyReason::UntrustedInput, "untrusted_input"),
        (DenyReason::ReadBeforeWrite, "read_before_write"),
        (DenyReason::CatastrophicCommand, "catastrophic_command"),
        (DenyReason::BackgroundCommand, "background_command"),
        (DenyReason::TrustedPlace, "trusted_place"),
    ];
    for (reason, name) in names {
        golden(&reason, &format!("\"{name}\""));
    }
}

#[test]
fn classes_order_public_private_secret_and_default_to_public() {
    assert!(Class::Public < Class::Private && Class::Private < Class::Secret);
    assert_eq!(Class::default(), Class::Public);
    for class in [Class::Public, Class::Private, Class::Secret] {
        golden(&class, &format!("\"{}\"", class.as_str()));
    }
}

#[test]
fn a_timestamp_is_an_rfc3339_string_with_milliseconds() {
    golden(
        &Timestamp::from_millis(1_796_000_000_123).unwrap(),
        r#""2026-11-30T00:53:20.123Z""#,
    );
}

#[test]
fn a_tool_schema_keeps_its_parameters_in_written_order() {
    golden(
        &ToolSchema {
            name: "echo".into(),
            description: "Returns its text argument unchanged.".into(),
            parameters: serde_json::json!({"type":"object","properties":{},"required":[]}),
        },
        r#"{"name":"echo","description":"Returns its text argument unchanged.","parameters":{"type":"object","properties":{},"required":[]}}"#,
    );
}

#[test]
fn unknown_fields_are_refused_everywhere() {
    let cases = [
        r#"{"name":"a","description":"b","parameters":{},"extra":1}"#,
        r#"{"session":"s","call_id":1,"tool":"t","arguments":"{}","x":0}"#,
    ];
    let refusals = [
        (
            serde_json::from_str::<ToolSchema>(cases[0]).err(),
            "unknown field `extra`",
        ),
        (
            serde_json::from_str::<ToolRequest>(cases[1]).err(),
            "unknown field `x`",
        ),
        (
            serde_json::from_str::<ToolResponse>(r#"{"type":"failed","message":"m","x":1}"#).err(),
            "unknown field `x`",
        ),
        (
            serde_json::from_str::<AgentFrame>(r#"{"type":"list_tools","x":1}"#).err(),
            "unknown field `x`",
        ),
    ];
    for (refusal, why) in refusals {
        let text = refusal.map(|e| e.to_string());
        assert!(
            text.as_ref().is_some_and(|e| e.starts_with(why)),
            "{text:?} is not {why:?}"
        );
    }
}

#[test]
fn agent_frames_have_golden_json() {
    golden(
        &AgentFrame::Hello {
            version: PROTOCOL_VERSION,
            client: None,
            resume: None,
        },
        r#"{"type":"hello","version":1}"#,
    );
    golden(
        &AgentFrame::Hello {
            version: 1,
            client: None,
            resume: Some(Resume {
                session: "s1".into(),
                token: "t".into(),
            }),
        },
        r#"{"type":"hello","version":1,"resume":{"session":"s1","token":"t"}}"#,
    );
    golden(&AgentFrame::ListTools {}, r#"{"type":"list_tools"}"#);
    golden(
        &AgentFrame::Call {
            request: ToolRequest {
                session: "s".into(),
                call_id: 1,
                tool: "echo".into(),
                arguments: "{}".into(),
            },
        },
        r#"{"type":"call","request":{"session":"s","call_id":1,"tool":"echo","arguments":"{}"}}"#,
    );
}

#[test]
fn broker_frames_have_golden_json() {
    golden(
        &BrokerFrame::Welcome {
            version: 1,
            session: "s1".into(),
            resume_token: "tok".into(),
        },
        r#"{"type":"welcome","version":1,"session":"s1","resume_token":"tok"}"#,
    );
    golden(
        &BrokerFrame::Tools { tools: vec![] },
        r#"{"type":"tools","tools":[]}"#,
    );
    golden(
        &BrokerFrame::Response {
            call_id: proto::CallId(2),
            response: ToolResponse::Denied {
                reason: DenyReason::TaintTooHigh,
            },
        },
        r#"{"type":"response","call_id":2,"response":{"type":"denied","reason":"taint_too_high"}}"#,
    );
    golden(
        &BrokerFrame::Error {
            code: proto::ErrorCode::Version,
            message: "unknown protocol version 9".into(),
        },
        r#"{"type":"error","code":"version","message":"unknown protocol version 9"}"#,
    );
    golden(
        &BrokerFrame::Error {
            code: proto::ErrorCode::CallIdReused,
            message: "m".into(),
        },
        r#"{"type":"error","code":"call_id_reused","message":"m"}"#,
    );
    golden(&BrokerFrame::Closed {}, r#"{"type":"closed"}"#);
    golden(&AgentFrame::Close {}, r#"{"type":"close"}"#);
    golden(&AgentFrame::Withdraw {}, r#"{"type":"withdraw"}"#);
    golden(
        &AgentFrame::Report {
            text: "done".into(),
        },
        r#"{"type":"report","text":"done"}"#,
    );
    golden(
        &AgentFrame::Answer {
            approve: true,
            text: None,
        },
        r#"{"type":"answer","approve":true}"#,
    );
    golden(
        &AgentFrame::Answer {
            approve: false,
            text: Some("staging".into()),
        },
        r#"{"type":"answer","approve":false,"text":"staging"}"#,
    );
}

#[test]
fn a_frame_is_a_big_endian_length_and_a_json_body() {
    let frame = encode_frame(&AgentFrame::ListTools {}).unwrap();
    assert_eq!(&frame[..4], &[0, 0, 0, 21]);
    assert_eq!(&frame[4..], br#"{"type":"list_tools"}"#);
}

#[test]
fn frames_round_trip_through_a_stream_and_the_end_is_clean() {
    let mut wire = Vec::new();
    write_frame(&mut wire, &AgentFrame::ListTools {}).unwrap();
    write_frame(
        &mut wire,
        &AgentFrame::Hello {
            version: 1,
            client: None,
            resume: None,
        },
    )
    .unwrap();
    let mut reader = wire.as_slice();
    assert_eq!(
        read_frame::<AgentFrame, _>(&mut reader).unwrap(),
        Some(AgentFrame::ListTools {})
    );
    assert!(matches!(
        read_frame::<AgentFrame, _>(&mut reader).unwrap(),
        Some(AgentFrame::Hello { version: 1, .. })
    ));
    assert!(read_frame::<AgentFrame, _>(&mut reader).unwrap().is_none());
}

#[test]
fn a_length_over_16_mib_is_refused_before_the_body_is_read() {
    let mut wire = ((MAX_FRAME + 1) as u32).to_be_bytes().to_vec();
    wire.extend_from_slice(b"{}");
    let error = read_frame::<AgentFrame, _>(&mut wire.as_slice()).unwrap_err();
    assert!(matches!(error, FrameError::TooLarge { size } if size == MAX_FRAME as u64 + 1));
    assert!(matches!(
        decode_frame::<AgentFrame>(&wire),
        Err(FrameError::TooLarge { .. })
    ));
}

#[test]
fn a_body_of_exactly_16_mib_is_accepted_and_one_more_byte_is_not() {
    let at_limit = "x".repeat(MAX_FRAME - 2);
    assert!(encode_frame(&at_limit).is_ok());
    let over = "x".repeat(MAX_FRAME - 1);
    assert!(matches!(
        encode_frame(&over),
        Err(FrameError::TooLarge { .. })
    ));
}

#[test]
fn a_stream_cut_inside_a_frame_is_truncated_not_a_clean_end() {
    let frame = encode_frame(&AgentFrame::ListTools {}).unwrap();
    for cut in 1..frame.len() {
        let error = read_frame::<AgentFrame, _>(&mut &frame[..cut]).unwrap_err();
        assert!(
            matches!(error, FrameError::Truncated { .. }),
            "cut at {cut}: {error}"
        );
        assert!(decode_frame::<AgentFrame>(&frame[..cut]).unwrap().is_none());
    }
}

#[test]
fn a_body_of_the_wrong_shape_is_malformed_and_says_why() {
    let mut wire = 14u32.to_be_bytes().to_vec();
    wire.extend_from_slice(br#"{"type":"hug"}"#);
    let error = read_frame::<AgentFrame, _>(&mut wire.as_slice()).unwrap_err();
    assert!(error.to_string().contains("hug"), "{error}");
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn any_bytes_decode_to_a_frame_an_error_or_a_request_for_more(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_frame::<AgentFrame>(&bytes);
            let _ = read_frame::<BrokerFrame, _>(&mut bytes.as_slice());
        }

        #[test]
        fn any_length_prefix_with_any_body_never_panics(len in any::<u32>(), body in proptest::collection::vec(any::<u8>(), 0..64)) {
            let mut bytes = len.to_be_bytes().to_vec();
            bytes.extend_from_slice(&body);
            let decoded = decode_frame::<serde_json::Value>(&bytes);
            if len as usize > MAX_FRAME {
                let too_large = matches!(decoded, Err(FrameError::TooLarge { .. }));
                prop_assert!(too_large);
            }
        }

        #[test]
        fn any_request_round_trips(session in ".*", call_id in any::<u64>(), tool in ".*", arguments in ".*") {
            let frame = AgentFrame::Call { request: ToolRequest { session, call_id, tool, arguments } };
            let bytes = encode_frame(&frame).unwrap();
            let decoded = decode_frame::<AgentFrame>(&bytes).unwrap();
            prop_assert_eq!(decoded, Some((frame, bytes.len())));
        }

        #[test]
        fn any_timestamp_in_range_round_trips_through_rfc3339(millis in -62_167_219_200_000i64..=253_402_300_799_999i64) {
            let at = Timestamp::from_millis(millis).unwrap();
            prop_assert_eq!(Timestamp::parse(&at.to_rfc3339()).unwrap(), at);
        }
    }
}

#[test]
fn typed_ids_are_written_as_their_bare_values() {
    use proto::{ApprovalId, CallId, GrantId, SessionId};
    assert_eq!(
        serde_json::to_string(&SessionId::from("s1")).unwrap(),
        "\"s1\""
    );
    assert_eq!(
        serde_json::to_string(&GrantId::from("notes")).unwrap(),
        "\"notes\""
    );
    assert_eq!(serde_json::to_string(&CallId(7)).unwrap(), "7");
    assert_eq!(serde_json::to_string(&ApprovalId(9)).unwrap(), "9");
    let welcome = proto::BrokerFrame::Welcome {
        version: 1,
        session: SessionId::from("s1"),
        resume_token: "t".into(),
    };
    assert_eq!(
        serde_json::to_string(&welcome).unwrap(),
        r#"{"type":"welcome","version":1,"session":"s1","resume_token":"t"}"#
    );
}

#[test]
fn every_denial_reason_has_its_own_sentence() {
    use proto::DenyReason::*;
    let all = [
        NoGrant,
        GrantExpired,
        TaintTooHigh,
        DeniedByGrant,
        ApprovalRefused,
        ApprovalExpired,
        InvalidArguments,
        GrantsInvalid,
        AuditUnavailable,
        StateUnreadable,
        ProtectedPath,
        UnsafeAddress,
        UntrustedInput,
        ReadBeforeWrite,
        CatastrophicCommand,
        BackgroundCommand,
    ];
    let sentences: std::collections::BTreeSet<&str> = all.iter().map(|r| r.model_text()).collect();
    assert_eq!(sentences.len(), all.len());
    assert!(
        sentences
            .iter()
            .all(|s| s.starts_with("Denied: ") && s.ends_with('.'))
    );
}
