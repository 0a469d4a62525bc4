//! `args`: tool names and strict argument parsing (seed M6b/04).

use policy::args::{ArgsError, ToolArgs, ToolName, parse};
use policy::consult::QUESTION_CAP;
use policy::hosts::https_host;

#[test]
fn each_tool_name_parses_and_prints_the_same() {
    for tool in ToolName::KNOWN {
        assert_eq!(ToolName::parse(tool.as_str()), Some(tool));
    }
    assert_eq!(ToolName::parse("consult"), Some(ToolName::Consult));
    assert_eq!(ToolName::parse("Read_File"), None);
    assert_eq!(ToolName::parse("call_tool"), None);
}

#[test]
fn all_is_the_eight_sandboxed_tools_and_consult_is_not_memory() {
    assert_eq!(
        ToolName::ALL,
        [
            ToolName::ReadFile,
            ToolName::WriteFile,
            ToolName::EditFile,
            ToolName::ListFiles,
            ToolName::Glob,
            ToolName::Grep,
            ToolName::Shell,
            ToolName::HttpFetch
        ]
    );
    assert!(!ToolName::ALL.contains(&ToolName::Consult));
    assert!(!ToolName::Consult.is_memory());
    assert!(ToolName::Recall.is_memory() && ToolName::Memory.is_memory());
    assert!(ToolName::AskMemory.is_memory());
}

#[test]
fn side_effects_are_write_shell_fetch_and_consult_but_not_read() {
    assert!(!ToolName::ReadFile.has_side_effects());
    for tool in [
        ToolName::WriteFile,
        ToolName::Shell,
        ToolName::HttpFetch,
        ToolName::Consult,
    ] {
        assert!(tool.has_side_effects(), "{tool:?}");
    }
}

#[test]
fn the_coding_tools_parse_strictly_and_print_in_schema_order() {
    let edit = parse(
        ToolName::EditFile,
        r#"{"edits":[{"new_str":"b","old_str":"a"}],"path":"/a"}"#,
    )
    .unwrap();
    assert_eq!(
        edit.canonical_json(),
        r#"{"path":"/a","edits":[{"old_str":"a","new_str":"b"}]}"#
    );
    assert!(ToolName::EditFile.has_side_effects());
    for tool in [ToolName::ListFiles, ToolName::Glob, ToolName::Grep] {
        assert!(!tool.has_side_effects(), "{tool:?}");
    }
    let grep = parse(
        ToolName::Grep,
        r#"{"pattern":"x","path":"/a","output_mode":"count","type":"rust"}"#,
    )
    .unwrap();
    assert_eq!(
        grep.canonical_json(),
        r#"{"pattern":"x","path":"/a","output_mode":"count","case_insensitive":false,"type":"rust","multiline":false}"#
    );
    for (tool, arguments) in [
        (ToolName::Grep, r#"{"pattern":"x","path":"/a","-i":true}"#),
        (
            ToolName::Grep,
            r#"{"pattern":"x","path":"/a","output_mode":"lines"}"#,
        ),
        (ToolName::Glob, r#"{"pattern":"*"}"#),
        (ToolName::ListFiles, r#"{"path":"/a","depth":2}"#),
        (ToolName::EditFile, r#"{"path":"/a","edits":[]}"#),
        (
            ToolName::EditFile,
            r#"{"path":"/a","edits":[{"old_str":"a"}]}"#,
        ),
        (ToolName::ReadFile, r#"{"path":"/a","offset":-1}"#),
    ] {
        assert!(
            matches!(parse(tool, arguments), Err(ArgsError::Shape(_))),
            "{arguments}"
        );
    }
}

#[test]
fn each_tool_parses_its_own_arguments() {
    let read = parse(ToolName::ReadFile, r#"{"path":"/a"}"#).unwrap();
    assert_eq!(read.tool(), ToolName::ReadFile);
    assert_eq!(read.canonical_json(), r#"{"path":"/a"}"#);
    let write = parse(ToolName::WriteFile, r#"{"content":"x","path":"/a"}"#).unwrap();
    assert_eq!(write.canonical_json(), r#"{"path":"/a","content":"x"}"#);
    let shell = parse(ToolName::Shell, r#"{"command":"ls"}"#).unwrap();
    assert_eq!(shell.canonical_json(), r#"{"command":"ls"}"#);
    let fetch = parse(ToolName::HttpFetch, r#"{"url":"https://docs.rs/x"}"#).unwrap();
    assert_eq!(fetch.tool(), ToolName::HttpFetch);
    let consult = parse(ToolName::Consult, r#"{"question":"hello"}"#).unwrap();
    assert_eq!(
        consult,
        ToolArgs::Consult {
            question: "hello".into()
        }
    );
    assert_eq!(consult.canonical_json(), r#"{"question":"hello"}"#);
}

#[test]
fn unknown_fields_missing_fields_and_wrong_types_are_shape_errors_with_a_detail() {
    let cases = [
        (
            ToolName::ReadFile,
            r#"{"path":"/a","max_bytes":1}"#,
            "unknown field",
        ),
        (
            ToolName::WriteFile,
            r#"{"path":"/a"}"#,
            "missing field `content`",
        ),
        (ToolName::Shell, r#"{"command":5}"#, "invalid type"),
        (
            ToolName::Consult,
            r#"{"question":"q","history":[]}"#,
            "history",
        ),
        (ToolName::ReadFile, "not json", "expected"),
    ];
    for (tool, arguments, words) in cases {
        let error = parse(tool, arguments).unwrap_err();
        assert!(matches!(error, ArgsError::Shape(_)), "{arguments}");
        assert!(
            error.detail().contains(words),
            "{arguments}: {}",
            error.detail()
        );
    }
}

#[test]
fn a_consult_question_is_capped_on_a_character_boundary() {
    let question = format!("{}é", "a".repeat(QUESTION_CAP - 1));
    let arguments = serde_json::json!({ "question": question }).to_string();
    let ToolArgs::Consult { question } = parse(ToolName::Consult, &arguments).unwrap() else {
        panic!("not consult");
    };
    assert_eq!(question.len(), QUESTION_CAP - 1);
    assert_eq!(QUESTION_CAP, 16_384);
}

#[test]
fn memory_tools_parse_strictly_and_ask_memory_has_side_effects_only_with_a_consult_model() {
    for tool in [ToolName::Recall, ToolName::Memory, ToolName::AskMemory] {
        let error = parse(tool, "{}").unwrap_err();
        assert!(matches!(error, ArgsError::Shape(_)), "{tool:?}: {error:?}");
    }
    let recall = parse(ToolName::Recall, r#"{"query":"tea","limit":3}"#).unwrap();
    assert_eq!(recall.canonical_json(), r#"{"query":"tea","limit":3}"#);
    let memory = parse(ToolName::Memory, r#"{"tags":["home"],"text":"likes tea"}"#).unwrap();
    assert_eq!(
        memory.canonical_json(),
        r#"{"text":"likes tea","tags":["home"]}"#
    );
    assert!(memory.has_side_effects());
    let ToolArgs::AskMemory(mut ask) =
        parse(ToolName::AskMemory, r#"{"question":"tea?"}"#).unwrap()
    else {
        panic!("not ask_memory");
    };
    assert!(!ToolArgs::AskMemory(ask.clone()).has_side_effects());
    ask.consults = true;
    assert!(ToolArgs::AskMemory(ask.clone()).has_side_effects());
    assert_eq!(
        ToolArgs::AskMemory(ask).canonical_json(),
        r#"{"question":"tea?"}"#
    );
}

#[test]
fn a_fetch_url_must_be_https_with_a_host() {
    for (bad, why) in [
        ("http://docs.rs", "does not start with https://"),
        ("https://", "has an empty host"),
        ("https://user@host/", "carries user information"),
        ("https://a b/", "has a character no host name has (U+0020)"),
        ("https://a%62/", "has a %-escape in its host"),
        (
            "https://a\u{0}b/",
            "has a character no host name has (U+0000)",
        ),
        ("https://[fe80::1%25eth0]/", "has a zone id"),
        ("ftp://x", "does not start with https://"),
        ("https://h:0/", "has an invalid port"),
        ("https://h:99999/", "has an invalid port"),
    ] {
        let arguments = serde_json::json!({ "url": bad }).to_string();
        let result = parse(ToolName::HttpFetch, &arguments);
        assert!(
            matches!(&result, Err(ArgsError::Shape(detail)) if detail.contains(why)),
            "{bad}: {result:?}"
        );
    }
}

#[test]
fn the_host_and_port_of_a_url_are_read_like_a_browser() {
    assert_eq!(
        https_host("https://Docs.RS./x?y#z"),
        Ok(("docs.rs".into(), 443))
    );
    assert_eq!(https_host("https://h:8443"), Ok(("h".into(), 8443)));
    assert_eq!(https_host("https://[::1]:9/"), Ok(("::1".into(), 9)));
    // One spelling per IPv6 address, as the URL parser and the resolver write it.
    assert_eq!(https_host("https://[0:0::1]/"), Ok(("::1".into(), 443)));
    assert_eq!(
        https_host("https://[FE80:0:0::0:1]/"),
        Ok(("fe80::1".into(), 443))
    );
    assert_eq!(
        https_host("https://127.0.0.1/"),
        Ok(("127.0.0.1".into(), 443))
    );
    // Every IPv4 spelling is the address; IDNA names are their ASCII form.
    for spelling in ["0x7f.1", "2130706433", "0177.0.0.1", "[::ffff:127.0.0.1]"] {
        assert_eq!(
            https_host(&format!("https://{spelling}/")),
            Ok(("127.0.0.1".into(), 443)),
            "{spelling}"
        );
    }
    assert_eq!(
        https_host("https://B\u{dc}cher.de/"),
        Ok(("xn--bcher-kva.de".into(), 443))
    );
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn parse_never_panics(tool in 0usize..8, arguments in ".{0,64}") {
            let _ = parse(ToolName::KNOWN[tool], &arguments);
        }

        #[test]
        fn parse_never_panics_on_json_shaped_input(key in "[a-z]{1,8}", value in ".{0,32}") {
            let arguments = serde_json::json!({ key: value }).to_string();
            for tool in ToolName::KNOWN {
                let _ = parse(tool, &arguments);
            }
        }

        #[test]
        fn https_host_never_panics(url in "https://.{0,40}") {
            let _ = https_host(&url);
        }
    }
}

#[test]
fn every_tool_whose_row_has_a_command_argument_hands_its_script_to_the_shell_checks() {
    for tool in ToolName::EVERY {
        if !tool.runs_commands() {
            continue;
        }
        let args = parse(tool, r#"{"command":"echo hi"}"#).unwrap();
        assert_eq!(
            args.script().map(|s| s.command.as_str()),
            Some("echo hi"),
            "{}",
            tool.as_str()
        );
    }
    let read = parse(ToolName::ReadFile, r#"{"path":"/x"}"#).unwrap();
    assert!(read.script().is_none());
}
