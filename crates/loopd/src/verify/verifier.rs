//! The verifier role: its system prompt, the one message of facts it reads, its request (no
//! tools, no conversation) and the reading of its verdicts.

use proto::Timestamp;
use serde_json::value::RawValue;

use crate::criteria::{Criterion, CtxIsolated};
use crate::llama::{ChatRequest, Message, Role};

/// The verifier's system prompt. A request whose system message is this text is the
/// verifier's (the script player answers it from a script's `verifier` replies).
pub const VERIFIER_PROMPT: &str = "You are the verifier. You check a builder's work against \
the owner's acceptance criteria, using only the machine's facts given to you: the tool calls \
the builder made and what the machine answered. You have no tools. What the builder says about \
its own work is not evidence. For each criterion write one line: PASS <number> when the facts \
show it met, or FAIL <number>: <what is missing> when they do not. Write nothing else.";

/// How the verifier's message starts; the pass number follows.
pub const PASS_PREFIX: &str = "Verification pass ";

/// The most bytes of one tool result among the facts.
const RESULT_LIMIT: usize = 4 * 1024;
/// The most bytes of the calls and results among the facts (the newest are kept).
const FACTS_LIMIT: usize = 24 * 1024;

/// One verdict of the verifier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The criterion's number.
    pub id: usize,
    /// Whether it is met.
    pub passed: bool,
    /// What the verifier wrote after the verdict (what is missing, for a failure).
    pub finding: Option<String>,
}

/// The verifier's message: the pass number, the criteria to judge, and the machine's facts
/// (the date, loopd's folder, and the builder's tool calls with what they returned, from
/// `messages`, the builder's conversation since the owner's message; its text is left out).
pub fn facts_message(pass: usize, criteria: &[&Criterion], messages: &[Message]) -> String {
    let mut out = format!("{PASS_PREFIX}{pass}.\n\nCriteria:\n");
    for criterion in criteria {
        out.push_str(&format!("{}. {}\n", criterion.id, criterion.text));
    }
    out.push_str("\nMachine facts:\n");
    out.push_str(&format!("- date: {}\n", Timestamp::now()));
    if let Ok(dir) = std::env::current_dir() {
        out.push_str(&format!("- loopd's folder: {}\n", dir.display()));
    }
    let mut record = String::new();
    for message in messages {
        match message.role {
            Role::Assistant => {
                for call in &message.tool_calls {
                    record.push_str(&format!("call {} {}\n", call.name, call.arguments));
                }
            }
            Role::Tool => {
                record.push_str("result: ");
                record.push_str(cut(&message.content, RESULT_LIMIT));
                if message.content.len() > RESULT_LIMIT {
                    record.push_str(" […]");
                }
                record.push('\n');
            }
            Role::System | Role::User => {}
        }
    }
    if record.is_empty() {
        out.push_str("- the builder made no tool call.\n");
    } else {
        out.push_str("- the builder's tool calls and what the machine answered, oldest first:\n");
        if record.len() > FACTS_LIMIT {
            let start = record.len() - FACTS_LIMIT;
            let start = (start..record.len())
                .find(|i| record.is_char_boundary(*i))
                .unwrap_or(record.len());
            out.push_str(&format!("(the first {start} bytes are left out)\n"));
            out.push_str(&record[start..]);
        } else {
            out.push_str(&record);
        }
    }
    out
}

/// `text` cut to at most `limit` bytes on a character boundary.
fn cut(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let end = (0..=limit)
        .rev()
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(0);
    &text[..end]
}

/// The verifier's messages as raw JSON: its system prompt and `facts`, nothing else.
pub fn messages(facts: &str) -> Result<Vec<Box<RawValue>>, serde_json::Error> {
    [Message::system(VERIFIER_PROMPT), Message::user(facts)]
        .iter()
        .map(|m| serde_json::to_string(m).and_then(RawValue::from_string))
        .collect()
}

/// The verifier's request: `messages`, an empty tools array (which the client leaves out of
/// the body) and no `tool_choice`.
pub fn request<'a>(messages: &'a [Box<RawValue>], no_tools: &'a RawValue) -> ChatRequest<'a> {
    ChatRequest {
        messages: messages.iter().map(|m| &**m).collect(),
        tools: no_tools,
        tool_choice: None,
        keep_calls: 0,
    }
}

/// The measure of the verifier's isolation for the `role` event.
pub fn isolation(facts: &str, builder_messages: usize) -> CtxIsolated {
    CtxIsolated {
        messages: 2,
        bytes: VERIFIER_PROMPT.len() + facts.len(),
        tools: 0,
        builder_messages,
    }
}

/// Reads the verdicts in the verifier's `reply` on the criteria numbered `asked`: lines such as
/// `PASS 2`, `FAIL 3: no test`, `- 1. PASS`, `Criterion 4: FAIL, the file is empty`. Lines
/// that are no verdict and numbers not asked about are skipped; a criterion judged twice keeps
/// its first verdict.
pub fn parse_verdicts(reply: &str, asked: &[usize]) -> Vec<Verdict> {
    let mut verdicts: Vec<Verdict> = Vec::new();
    for line in reply.lines() {
        let Some(verdict) = parse_line(line) else {
            continue;
        };
        if asked.contains(&verdict.id) && !verdicts.iter().any(|v| v.id == verdict.id) {
            verdicts.push(verdict);
        }
    }
    verdicts
}

fn parse_line(line: &str) -> Option<Verdict> {
    let line = line
        .trim()
        .trim_start_matches(['-', '*', '#', '>', ' ', '\t'])
        .trim();
    // PASS 2 / FAIL 3: why
    if let Some((passed, rest)) = verdict_word(line) {
        let (id, rest) = number(rest)?;
        return Some(Verdict {
            id,
            passed,
            finding: finding(rest),
        });
    }
    // 2. PASS / Criterion 3: FAIL, why
    let (id, rest) = number(line)?;
    let (passed, rest) = verdict_word(rest)?;
    Some(Verdict {
        id,
        passed,
        finding: finding(rest),
    })
}

/// `PASS`/`PASSED`/`FAIL`/`FAILED` (any case, bold marks around it allowed) at the start of
/// `text`, and what follows.
fn verdict_word(text: &str) -> Option<(bool, &str)> {
    let text = text.trim_start_matches(['*', '_', ' ', '[']);
    for (word, passed) in [
        ("passed", true),
        ("pass", true),
        ("failed", false),
        ("fail", false),
    ] {
        let Some(head) = text.get(..word.len()) else {
            continue;
        };
        if head.eq_ignore_ascii_case(word) {
            let rest = &text[word.len()..];
            if rest.chars().next().is_none_or(|c| !c.is_alphanumeric()) {
                return Some((passed, rest.trim_start_matches(['*', '_', ']'])));
            }
        }
    }
    None
}

/// A criterion's number at the start of `text` (after `criterion` or `#`), and what follows
/// its separator.
fn number(text: &str) -> Option<(usize, &str)> {
    let mut text = text.trim_start();
    if let Some(head) = text.get(..9)
        && head.eq_ignore_ascii_case("criterion")
    {
        text = text[9..].trim_start();
    }
    text = text.trim_start_matches('#');
    let digits = text.chars().take_while(char::is_ascii_digit).count();
    let id = text[..digits].parse().ok()?;
    let rest = text[digits..].trim_start_matches([':', '.', ')', '-', ',', '*', ' ', '\t']);
    Some((id, rest))
}

fn finding(rest: &str) -> Option<String> {
    let text = rest
        .trim()
        .trim_start_matches([':', '-', ',', '.', '—', '–'])
        .trim();
    (!text.is_empty()).then(|| text.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::criteria::CriterionState;
    use crate::llama::ToolCall;

    #[test]
    fn verdicts_are_read_in_the_forms_models_write_them() {
        let reply = "Here is my check.\nPASS 1\nFAIL 2: hello.txt is empty\n- 3. passed\n\
                     **Criterion 4**: FAIL, no test ran\nFAIL 9: not asked\nPASS 2\nPASSWORD 1";
        let verdicts = parse_verdicts(reply, &[1, 2, 3, 4]);
        let short: Vec<(usize, bool, Option<&str>)> = verdicts
            .iter()
            .map(|v| (v.id, v.passed, v.finding.as_deref()))
            .collect();
        assert_eq!(
            short,
            vec![
                (1, true, None),
                (2, false, Some("hello.txt is empty")),
                (3, true, None),
                (4, false, Some("no test ran")),
            ]
        );
    }

    #[test]
    fn a_reply_without_a_verdict_gives_none() {
        assert!(parse_verdicts("All looks good to me!", &[1, 2]).is_empty());
        assert!(parse_verdicts("", &[1]).is_empty());
        assert!(parse_verdicts("PASS\nFAIL x", &[1]).is_empty());
    }

    #[test]
    fn the_facts_hold_calls_and_results_but_not_the_builders_words() {
        let criterion = Criterion {
            id: 2,
            text: "a.txt says hi".into(),
            state: CriterionState::Open,
            finding: None,
        };
        let call = ToolCall {
            id: "c1".into(),
            name: "call_tool".into(),
            arguments: r#"{"name":"read_file"}"#.into(),
        };
        let messages = vec![
            Message::user("do it"),
            Message::assistant("I am sure it works", vec![call]),
            Message::tool("c1", &"hi".repeat(RESULT_LIMIT)),
            Message::assistant("Done, trust me.", vec![]),
        ];
        let facts = facts_message(3, &[&criterion], &messages);
        assert!(facts.starts_with("Verification pass 3.\n"), "{facts}");
        assert!(facts.contains("2. a.txt says hi"), "{facts}");
        assert!(facts.contains(r#"call call_tool {"name":"read_file"}"#));
        assert!(facts.contains(" […]"));
        assert!(!facts.contains("trust me") && !facts.contains("I am sure"));
        let many: Vec<Message> = (0..40)
            .map(|_| Message::tool("c1", &"x".repeat(RESULT_LIMIT)))
            .collect();
        let facts = facts_message(1, &[&criterion], &many);
        assert!(
            facts.contains("bytes are left out"),
            "the newest facts are kept"
        );
        assert!(facts.len() < FACTS_LIMIT + 1024);
    }
}
