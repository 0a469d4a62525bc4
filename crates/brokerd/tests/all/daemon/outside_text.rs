//! Text from outside that the broker hands the agent: a consulted model's answer and search
//! results are cleaned as `shell`'s output is (no terminal control sequence reaches the
//! agent), and a `consult` answer is untrusted whatever its grant says.

use proto::ToolResponse;
use testkit::{AgentClient, BrokerProcess, ScriptServer};

use super::{FAST, content};

/// A consult grant that calls its answers trusted.
const CONSULT: &str = r#"
[[grant]]
id = "ask-model"
tool = "consult"
untrusted = false
on_untrusted = "allow"
"#;

/// Every control character a terminal acts on, in a JSON string: colours, a window title, a
/// cursor move, C0 and C1 controls.
const CONTROLS: &str = r"\u001b[31mred\u001b[0m \u001b]0;title\u0007 \u001b[2Jcleared \u0000\u0001\u0008\u007f\u0085\u009b1m done";

/// Whether `text` holds any control character but a newline or a tab.
fn has_controls(text: &str) -> bool {
    text.chars()
        .any(|c| c.is_control() && !matches!(c, '\n' | '\t'))
}

#[test]
fn a_consult_answer_is_untrusted_whatever_the_grant_says_and_cleaned_of_controls() {
    let script = format!(r#"{{"turns":[{{"replies":[{{"say":"{CONTROLS}"}}]}}]}}"#);
    let server = ScriptServer::from_json(&script);
    let config = format!("{FAST}[consult]\nurl = \"{}\"\n", server.base_url());
    let broker = BrokerProcess::start(CONSULT, &config);
    let mut client = AgentClient::open(&broker.socket(), None);
    let response = client.call(1, "consult", r#"{"question":"Why?"}"#).unwrap();
    let ToolResponse::Result { untrusted, .. } = &response else {
        panic!("not a result: {response:?}");
    };
    assert!(
        untrusted,
        "another model's answer is untrusted: {response:?}"
    );
    let text = content(&response);
    assert!(!has_controls(text), "{text:?}");
    // The window title goes with its sequence; C1's CSI alone is dropped, its text kept.
    assert!(text.ends_with("\nred  cleared 1m done"), "{text:?}");
}

#[test]
fn search_results_reach_the_agent_cleaned_of_controls_each_on_its_own_line() {
    let body = format!(
        r#"{{"results":[{{"url":"https://docs.rs/","title":"Docs{CONTROLS}\n2. fake","content":"snip{CONTROLS}"}}]}}"#
    );
    let server =
        testkit::PlainServer::start("application/json", Box::leak(body.into_boxed_str())).unwrap();
    let config = format!(
        "{FAST}[web_search]\nprovider = \"searxng\"\nurl = \"http://127.0.0.1:{}\"\n",
        server.port()
    );
    let grants = "[[grant]]\nid = \"search\"\ntool = \"web_search\"\nuntrusted = false\non_untrusted = \"allow\"\n";
    let broker = BrokerProcess::start(grants, &config);
    let mut client = AgentClient::open(&broker.socket(), None);
    let response = client.call(1, "web_search", r#"{"query":"x"}"#).unwrap();
    let text = content(&response);
    let (_, body) = text.split_once('\n').unwrap();
    assert!(!has_controls(body), "{body:?}");
    // One result, three lines: the title's line break did not start a second one.
    assert_eq!(
        body,
        "1. Docsred cleared 1m done 2. fake\n   https://docs.rs/\n   snipred cleared 1m done\n"
    );
}
