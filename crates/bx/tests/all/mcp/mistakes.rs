//! A model's mistakes reach an MCP client as errors it can act on: arguments that do not fit
//! name the argument and what it must be, and a path that does not exist names the nearest
//! folder and a close name (never a denial's sentence, which names neither).

use serde_json::json;
use testkit::BrokerProcess;

use super::{FAST, GRANTS, call_tool, run};

#[test]
fn an_mcp_client_is_told_which_argument_is_wrong_and_where_a_missing_file_may_be() {
    let broker = BrokerProcess::start(GRANTS, FAST);
    std::fs::write(broker.work.join("notes.txt"), "the notes\n").unwrap();
    let work = broker.work.display().to_string();
    let plan = json!([
        call_tool("read_file", json!({ "path": "notes.txt" })),
        call_tool(
            "read_file",
            json!({ "file": broker.work.join("notes.txt") })
        ),
        call_tool(
            "read_file",
            json!({ "path": broker.work.join("notes.txt"), "limit": "5" })
        ),
        call_tool("read_file", json!({ "path": broker.work.join("notes.tx") })),
    ]);
    for mode in ["modern", "v1"] {
        let (answers, _) = run(&broker, mode, &plan, &["--session", mode]);
        for answer in &answers {
            assert_eq!(answer["isError"], true, "{mode}: {answer}");
            assert!(answer["meta"].get("boxmaker/denied").is_none(), "{answer}");
        }
        assert_eq!(
            answers[0]["text"],
            format!(
                "argument `path` must be an absolute path; got `notes.txt` (relative to the granted folder {work}: {work}/notes.txt)"
            ),
            "{mode}"
        );
        let unknown = answers[1]["text"].as_str().unwrap();
        assert!(
            unknown.contains("argument `file` is not one of read_file's arguments; read_file takes `path`, `offset`, `limit`")
                && unknown.contains("argument `path` is missing: it must be a string"),
            "{mode}: {unknown}"
        );
        assert_eq!(
            answers[2]["text"], "argument `limit` must be an integer; got \"5\"",
            "{mode}"
        );
        let missing = answers[3]["text"].as_str().unwrap();
        assert!(
            missing.ends_with(&format!(
                "{work}/notes.tx does not exist; the nearest existing folder is {work}; did you mean {work}/notes.txt?"
            )),
            "{mode}: {missing}"
        );
    }
}
