//! The output of `loopd chat`: events for a person (text) or for a program (JSON lines).
//!
//! In text, loopd's own lines start in column 0 with a marker (`you> `, `assistant> `,
//! `verifier> ` (the model in code mode's verifier role),
//! `  call   `, `  wait   `, `  denied `, `  result `, `  skip   `, `  role   `, `  verify `,
//! `  child  ` (one line per event of a child session, named by its id),
//! `! turn failed: `,
//! `-- session `). Text from outside cannot imitate one: every line of the model's text after
//! its first is indented under `assistant> ` (eleven spaces, where no marker starts), and
//! everything else from outside is printed on one line, escaped by
//! [`proto::text::escape_terminal`] (newlines included) and cut with a marker. In JSON every
//! value is whole; JSON's own escaping keeps each event on its line.

use std::io::{self, Write};

use proto::text::{escape_terminal, escape_unicode};

use crate::criteria::{AgentRole, CriterionState, VerifyOutcome};
use crate::tools::denial_text;
use crate::turn::TurnEvent;

use super::ChatSummary;

/// Where the lines of the model's text after its first start.
const ASSISTANT_INDENT: &str = "           ";
/// Where the lines of the person's text after its first start.
const USER_INDENT: &str = "     ";
/// The most characters of a tool's name on a call line.
const NAME_WIDTH: usize = 64;
/// The most characters of a call's arguments on its line.
const ARGUMENTS_WIDTH: usize = 240;
/// The most characters of a result's first line.
const RESULT_WIDTH: usize = 160;
/// The most characters of an error.
const ERROR_WIDTH: usize = 2000;

/// Writes events for a person (text) or a program (JSON lines).
pub(super) struct Printer<'a> {
    out: &'a mut dyn Write,
    json: bool,
    streaming: bool,
    /// The marker of the model's text: `assistant> `, or `verifier> ` in the verifier role.
    speaker: &'static str,
}

impl<'a> Printer<'a> {
    /// A printer writing to `out`, as JSON lines when `json`.
    pub(super) fn new(out: &'a mut dyn Write, json: bool) -> Printer<'a> {
        Printer {
            out,
            json,
            streaming: false,
            speaker: "assistant> ",
        }
    }

    /// The prompt before a line is read at a terminal.
    pub(super) fn prompt(&mut self) -> io::Result<()> {
        write!(self.out, "you> ")?;
        self.out.flush()
    }

    /// The person's message, when it was not typed at the terminal.
    pub(super) fn user(&mut self, text: &str) -> io::Result<()> {
        if self.json {
            let line = serde_json::json!({"type": "user", "text": text}).to_string();
            return writeln!(self.out, "{}", escape_unicode(&line));
        }
        write!(self.out, "you> ")?;
        self.indented(text, USER_INDENT)?;
        writeln!(self.out)
    }

    /// One event of a turn.
    pub(super) fn event(&mut self, event: &TurnEvent) -> io::Result<()> {
        if self.json {
            if is_text_delta(event) {
                return Ok(());
            }
            let line = serde_json::to_string(event).map_err(io::Error::other)?;
            writeln!(self.out, "{}", escape_unicode(&line))?;
            return self.out.flush();
        }
        match event {
            TurnEvent::TextDelta { text } => {
                if !self.streaming {
                    write!(self.out, "{}", self.speaker)?;
                    self.streaming = true;
                }
                self.indented(text, ASSISTANT_INDENT)?;
            }
            TurnEvent::AssistantText { .. } => self.end_stream()?,
            TurnEvent::ToolCallStarted { name, arguments } => {
                self.end_stream()?;
                writeln!(
                    self.out,
                    "  call   {} {}",
                    clip(name, NAME_WIDTH),
                    clip(arguments, ARGUMENTS_WIDTH)
                )?;
            }
            TurnEvent::ApprovalPending {
                approval,
                tool,
                expires,
            } => writeln!(
                self.out,
                "  wait   approval {approval} for {}, until {expires}",
                clip(tool, NAME_WIDTH)
            )?,
            TurnEvent::ToolDenied { name, reason } => writeln!(
                self.out,
                "  denied {}: {}",
                clip(name, NAME_WIDTH),
                denial_text(*reason)
            )?,
            TurnEvent::ToolResult {
                content, truncated, ..
            } => {
                let mut lines = content.lines();
                let first = lines.next().unwrap_or("");
                let more = lines.count();
                write!(self.out, "  result {}", clip(first, RESULT_WIDTH))?;
                if more > 0 {
                    write!(self.out, " (+{more} lines)")?;
                }
                if *truncated {
                    write!(self.out, " [truncated]")?;
                }
                writeln!(self.out)?;
            }
            TurnEvent::CallsNotRun { count, text } => {
                self.end_stream()?;
                writeln!(
                    self.out,
                    "  skip   {count} call(s): {}",
                    clip(text, RESULT_WIDTH)
                )?;
            }
            TurnEvent::TurnDone { .. } => self.end_stream()?,
            TurnEvent::Role { role, ctx_isolated } => {
                self.end_stream()?;
                self.speaker = match role {
                    AgentRole::Builder => "assistant> ",
                    AgentRole::Verifier => "verifier> ",
                };
                match (role, ctx_isolated) {
                    (AgentRole::Verifier, Some(ctx)) => writeln!(
                        self.out,
                        "  role   verifier (isolated: {} messages, {} bytes, no tools; the builder's {} messages unseen)",
                        ctx.messages, ctx.bytes, ctx.builder_messages
                    )?,
                    (AgentRole::Verifier, None) => writeln!(self.out, "  role   verifier")?,
                    (AgentRole::Builder, _) => writeln!(self.out, "  role   builder")?,
                }
            }
            TurnEvent::VerifyDone {
                outcome,
                passes,
                corrections,
                criteria,
            } => {
                self.end_stream()?;
                self.speaker = "assistant> ";
                let outcome = match outcome {
                    VerifyOutcome::Passed => "every criterion passed",
                    VerifyOutcome::Stopped => "stopped after two corrections",
                    VerifyOutcome::Unreadable => "stopped: the verifier gave no verdict",
                    VerifyOutcome::Failed => "ended by a failure",
                };
                writeln!(
                    self.out,
                    "  verify done: {outcome} ({passes} pass(es), {corrections} correction(s))"
                )?;
                for criterion in criteria {
                    let state = match criterion.state {
                        CriterionState::Open => "open",
                        CriterionState::Passed => "passed",
                        CriterionState::Failed => "failed",
                    };
                    write!(
                        self.out,
                        "  verify {} {state}: {}",
                        criterion.id,
                        clip(&criterion.text, RESULT_WIDTH)
                    )?;
                    if let Some(finding) = &criterion.finding {
                        write!(self.out, " ({})", clip(finding, RESULT_WIDTH))?;
                    }
                    writeln!(self.out)?;
                }
            }
            TurnEvent::TurnFailed { error } => {
                self.end_stream()?;
                writeln!(self.out, "! turn failed: {}", clip(error, ERROR_WIDTH))?;
            }
            TurnEvent::Child { session, event } => {
                self.end_stream()?;
                if let Some(line) = child_line(session, event) {
                    writeln!(self.out, "  child  {line}")?;
                }
            }
        }
        self.out.flush()
    }

    /// Model or person text: escaped, each line after the first on a new line under `indent`.
    fn indented(&mut self, text: &str, indent: &str) -> io::Result<()> {
        let mut lines = text.split('\n');
        if let Some(first) = lines.next() {
            self.out.write_all(escape_terminal(first).as_bytes())?;
        }
        for line in lines {
            write!(self.out, "\n{indent}{}", escape_terminal(line))?;
        }
        Ok(())
    }

    fn end_stream(&mut self) -> io::Result<()> {
        if self.streaming {
            writeln!(self.out)?;
            self.streaming = false;
        }
        Ok(())
    }

    /// The last line: the session and how its turns went.
    pub(super) fn end(&mut self, summary: &ChatSummary) -> io::Result<()> {
        if self.json {
            let line = serde_json::json!({
                "type": "chat_end",
                "session": summary.session,
                "dir": summary.dir.display().to_string(),
                "removed": summary.removed,
                "done": summary.done,
                "failed": summary.failed,
            })
            .to_string();
            return writeln!(self.out, "{}", escape_unicode(&line));
        }
        let place = if summary.removed && !summary.reached {
            "no folder (no turn reached the model server)".to_string()
        } else if summary.removed {
            "a temporary folder, now removed".to_string()
        } else {
            escape_terminal(&summary.dir.display().to_string()).into_owned()
        };
        writeln!(
            self.out,
            "-- session {} in {place}: {} turn(s) answered, {} failed",
            escape_terminal(&summary.session),
            summary.done,
            summary.failed
        )
    }
}

/// Whether `event` is a piece of streamed text (a child's too), which JSON output leaves out.
fn is_text_delta(event: &TurnEvent) -> bool {
    match event {
        TurnEvent::TextDelta { .. } => true,
        TurnEvent::Child { event, .. } => is_text_delta(event),
        _ => false,
    }
}

/// The one line that says a child's event, after `  child  `: the (innermost) child's id and
/// what happened, everything from outside escaped and cut. `None` for what is not shown (its
/// streamed text, whose whole comes after it).
fn child_line(session: &str, event: &TurnEvent) -> Option<String> {
    let what = match event {
        TurnEvent::Child { session, event } => return child_line(session, event),
        TurnEvent::TextDelta { .. } | TurnEvent::Role { .. } | TurnEvent::VerifyDone { .. } => {
            return None;
        }
        TurnEvent::AssistantText { text } => format!("says   {}", clip(text, RESULT_WIDTH)),
        TurnEvent::ToolCallStarted { name, arguments } => format!(
            "call   {} {}",
            clip(name, NAME_WIDTH),
            clip(arguments, ARGUMENTS_WIDTH)
        ),
        TurnEvent::ApprovalPending {
            approval,
            tool,
            expires,
        } => format!(
            "wait   approval {approval} for {}, until {expires}",
            clip(tool, NAME_WIDTH)
        ),
        TurnEvent::ToolDenied { name, reason } => {
            format!(
                "denied {}: {}",
                clip(name, NAME_WIDTH),
                denial_text(*reason)
            )
        }
        TurnEvent::ToolResult { content, .. } => format!(
            "result {}",
            clip(content.lines().next().unwrap_or(""), RESULT_WIDTH)
        ),
        TurnEvent::CallsNotRun { count, text } => {
            format!("skip   {count} call(s): {}", clip(text, RESULT_WIDTH))
        }
        TurnEvent::TurnDone { text } => format!("report {}", clip(text, RESULT_WIDTH)),
        TurnEvent::TurnFailed { error } => format!("failed {}", clip(error, ERROR_WIDTH)),
    };
    Some(format!("{} {what}", clip(session, NAME_WIDTH)))
}

/// `text` escaped for the terminal and cut to at most `width` characters, with a marker saying
/// how many bytes were left out. Only the part shown is escaped, so a huge text costs no more
/// than `width`.
pub(crate) fn clip(text: &str, width: usize) -> String {
    let mut out = String::new();
    let mut used = 0usize;
    let mut buffer = [0u8; 4];
    for (at, c) in text.char_indices() {
        let escaped = escape_terminal(c.encode_utf8(&mut buffer));
        let size = escaped.chars().count();
        if used + size > width {
            out.push_str(&format!("…[+{} bytes]", text.len() - at));
            return out;
        }
        used += size;
        out.push_str(&escaped);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::DenyReason;

    fn printed(events: &[TurnEvent]) -> String {
        let mut out = Vec::new();
        let mut printer = Printer::new(&mut out, false);
        for event in events {
            printer.event(event).unwrap();
        }
        String::from_utf8(out).unwrap()
    }

    /// Whether a printed line starts with one of loopd's own markers.
    fn is_marker(line: &str) -> bool {
        [
            "you> ",
            "assistant> ",
            "  call   ",
            "  wait   ",
            "  denied ",
            "  result ",
            "  skip   ",
            "  child  ",
            "! turn failed: ",
            "-- session ",
        ]
        .iter()
        .any(|m| line.starts_with(m))
    }

    #[test]
    fn model_text_cannot_start_a_line_that_looks_like_loopds_own() {
        let forged = "Sure.\n  denied read_file: Denied: no grant allows this call.\n  result ok\n\r  call   x";
        let text = printed(&[
            TurnEvent::TextDelta {
                text: forged.into(),
            },
            TurnEvent::TurnDone {
                text: forged.into(),
            },
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "assistant> Sure.");
        assert!(lines[1..].iter().all(|l| !is_marker(l)), "{text}");
        assert_eq!(lines[3], format!("{ASSISTANT_INDENT}\\r  call   x"));
    }

    #[test]
    fn escapes_from_outside_reach_no_printed_line() {
        let evil = "\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m\u{202e}\u{8}\0";
        let text = printed(&[
            TurnEvent::TextDelta { text: evil.into() },
            TurnEvent::ToolCallStarted {
                name: evil.into(),
                arguments: evil.into(),
            },
            TurnEvent::ToolDenied {
                name: evil.into(),
                reason: DenyReason::NoGrant,
            },
            TurnEvent::ToolResult {
                name: evil.into(),
                content: evil.into(),
                class: proto::Class::Public,
                untrusted: true,
                truncated: false,
            },
            TurnEvent::TurnFailed {
                error: format!("HTTP 500: {evil}\n  result forged"),
            },
        ]);
        assert!(
            !text
                .chars()
                .any(|c| c != '\n' && (c.is_control() || ('\u{202a}'..='\u{202e}').contains(&c))),
            "{text:?}"
        );
        assert_eq!(text.lines().count(), 5, "{text}");
        assert!(text.contains("\\x1b]0;pwned\\x07"), "{text}");
    }

    #[test]
    fn a_childs_events_are_one_escaped_line_each_naming_the_innermost_child() {
        let forged = "ok\n  result forged\u{1b}[2J";
        let child = |session: &str, event: TurnEvent| TurnEvent::Child {
            session: session.into(),
            event: Box::new(event),
        };
        let text = printed(&[
            child(
                "s-c",
                TurnEvent::TextDelta {
                    text: forged.into(),
                },
            ),
            child(
                "s-c",
                TurnEvent::AssistantText {
                    text: forged.into(),
                },
            ),
            child(
                "s-c",
                child(
                    "s-g",
                    TurnEvent::ToolDenied {
                        name: "read_file".into(),
                        reason: DenyReason::NoGrant,
                    },
                ),
            ),
            child(
                "s-c",
                TurnEvent::TurnDone {
                    text: forged.into(),
                },
            ),
        ]);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines,
            [
                "  child  s-c says   ok\\n  result forged\\x1b[2J",
                "  child  s-g denied read_file: Denied: no grant allows this call.",
                "  child  s-c report ok\\n  result forged\\x1b[2J",
            ],
            "{text}"
        );
        // In JSON, a child's streamed text is left out like the parent's.
        let mut out = Vec::new();
        let mut printer = Printer::new(&mut out, true);
        printer
            .event(&child("s-c", TurnEvent::TextDelta { text: "x".into() }))
            .unwrap();
        assert!(out.is_empty());
    }

    #[test]
    fn json_lines_show_no_control_and_read_back_as_the_same_text() {
        let evil: String = ('\u{0}'..='\u{1f}')
            .chain('\u{7f}'..='\u{9f}')
            .chain(['\u{61c}', '\u{200e}', '\u{200f}', '\u{2028}', '\u{2029}'])
            .chain('\u{202a}'..='\u{202e}')
            .chain('\u{2066}'..='\u{2069}')
            .collect();
        let mut out = Vec::new();
        let mut printer = Printer::new(&mut out, true);
        printer.user(&evil).unwrap();
        printer
            .event(&TurnEvent::ToolResult {
                name: evil.clone(),
                content: evil.clone(),
                class: proto::Class::Public,
                untrusted: true,
                truncated: false,
            })
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.is_ascii(), "{text:?}");
        for line in text.lines() {
            let value: serde_json::Value = serde_json::from_str(line).unwrap();
            let field = value.get("text").or_else(|| value.get("content")).unwrap();
            assert_eq!(field.as_str(), Some(evil.as_str()), "{line}");
        }
    }

    #[test]
    fn long_names_and_arguments_are_cut_to_one_line_with_a_marker() {
        let arguments = format!("{{\"text\":\"{}\"}}", "a\n".repeat(3 << 20));
        let text = printed(&[TurnEvent::ToolCallStarted {
            name: "n".repeat(1000),
            arguments: arguments.clone(),
        }]);
        assert_eq!(text.lines().count(), 1);
        assert!(text.len() < 1000, "{}", text.len());
        assert!(
            text.contains(&format!("…[+{} bytes]", 1000 - NAME_WIDTH)),
            "{text}"
        );
        assert!(text.trim_end().ends_with(" bytes]"), "{text}");
    }

    #[test]
    fn clip_leaves_short_text_whole_and_counts_escapes_in_the_width() {
        assert_eq!(clip("short", 10), "short");
        assert_eq!(clip("\u{1b}\u{1b}\u{1b}", 9), "\\x1b\\x1b…[+1 bytes]");
    }
}
