//! `run_chat` as a library: where messages come from, and the prompt at a terminal.

use std::collections::BTreeMap;

use loopd::chat::{
    ChatOptions, DEFAULT_SYSTEM_PROMPT, ModelSource, PortKind, StateFolder, run_chat,
};
use loopd::llama::LlamaConfig;
use loopd::turn::Limits;

fn options(dir: &std::path::Path, messages: Vec<String>) -> ChatOptions {
    ChatOptions {
        model: ModelSource::Demo,
        llama: LlamaConfig::default(),
        port: PortKind::Fake,
        messages,
        state: StateFolder::Dir(dir.to_path_buf()),
        session: None,
        vars: BTreeMap::new(),
        system_prompt: DEFAULT_SYSTEM_PROMPT.to_string(),
        json: false,
        limits: Limits::default(),
        criteria: None,
    }
}

#[test]
fn at_a_terminal_each_message_is_prompted_for_and_not_echoed() {
    let dir = testkit::temp_dir();
    let demo_script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(
        demo_script.path(),
        r#"{"turns":[{"replies":[{"say":"first answer"}]},{"replies":[{"say":"second answer"}]}]}"#,
    )
    .unwrap();
    let mut opts = options(dir.path(), vec![]);
    opts.model = ModelSource::ScriptFile(demo_script.path().to_path_buf());
    let mut input = "hello\n\n  \nagain\n".as_bytes();
    let mut out = Vec::new();
    let summary = run_chat(&opts, &mut input, true, &mut out, &mut std::io::sink()).unwrap();
    let out = String::from_utf8(out).unwrap();
    assert_eq!(summary.done, 2);
    assert_eq!(
        out.matches("you> ").count(),
        5,
        "a prompt before each line read: {out}"
    );
    assert!(
        !out.contains("you> hello"),
        "typed text is not echoed: {out}"
    );
    assert!(out.contains("assistant> first answer\n"), "{out}");
    assert!(out.contains("assistant> second answer\n"), "{out}");
}

#[test]
fn given_messages_win_over_the_scripts_own() {
    let dir = testkit::temp_dir();
    let mut input = "ignored\n".as_bytes();
    let mut out = Vec::new();
    let summary = run_chat(
        &options(dir.path(), vec!["only this".into()]),
        &mut input,
        false,
        &mut out,
        &mut std::io::sink(),
    )
    .unwrap();
    let out = String::from_utf8(out).unwrap();
    assert_eq!(summary.done, 1);
    assert!(out.starts_with("you> only this\n"), "{out}");
    assert!(!out.contains("ignored"));
}

#[test]
fn a_resumed_session_keeps_its_id_and_folder() {
    let dir = testkit::temp_dir();
    let first = run_chat(
        &options(dir.path(), vec!["one".into()]),
        &mut "".as_bytes(),
        false,
        &mut Vec::new(),
        &mut std::io::sink(),
    )
    .unwrap();
    let mut again = options(dir.path(), vec!["Now read the file notes.txt".into()]);
    again.session = Some(first.session.clone());
    let second = run_chat(
        &again,
        &mut "".as_bytes(),
        false,
        &mut Vec::new(),
        &mut std::io::sink(),
    )
    .unwrap();
    assert_eq!(second.session, first.session);
    assert_eq!(second.dir, first.dir);
}
