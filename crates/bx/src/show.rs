//! How `bx` prints pending approvals and events for a person. Everything a model controls
//! (arguments, questions, choices, paths, details) is printed whole, through
//! `proto::text::escape_terminal`, so no byte of it can move the cursor, recolour, retitle or
//! reorder the owner's terminal.

use std::fmt::Write;

use proto::text::escape_terminal;
use proto::{
    AgentEvent, AgentRole, AskWhy, OwnerEvent, PendingKind, PendingView, Resolution, Timestamp,
    VerifyOutcome,
};

/// The lines that show one pending approval or question.
pub fn pending(view: &PendingView) -> String {
    let mut out = String::new();
    let left = (view.expires.as_millis() - Timestamp::now().as_millis()).max(0) / 1000;
    let what = match view.kind {
        PendingKind::Approval => "approval",
        PendingKind::Question => "question",
    };
    let parent = view
        .parent
        .as_ref()
        .map(|p| format!(", a child of session {p}"))
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "{what} {}: {} call {} of session {}{parent} (expires in {left} s, at {})",
        view.approval,
        escape_terminal(&view.tool),
        view.call_id,
        view.session,
        view.expires
    );
    if let Some(question) = &view.question {
        let _ = writeln!(out, "  question:  {}", escape_terminal(question));
        for (n, choice) in view.choices.iter().enumerate() {
            let _ = writeln!(out, "  choice {}:  {}", n + 1, escape_terminal(choice));
        }
    } else {
        let _ = writeln!(out, "  arguments: {}", escape_terminal(&view.arguments));
    }
    let _ = writeln!(out, "  why:       {}", why(view));
    for line in &view.provenance {
        let _ = writeln!(out, "  value:     {}", escape_terminal(line));
    }
    let _ = writeln!(out, "  labels:    {}", labels(view));
    out
}

/// Why `view` waits for the owner, in one sentence (what `bx approve ID --session` would cover
/// included): the `why:` line of `bx approvals` and the console's. Text a model controls in it
/// is escaped for a terminal.
pub fn why(view: &PendingView) -> String {
    let grant = view.grant.as_ref().map_or("(none)".to_string(), |g| {
        escape_terminal(g.as_str()).into_owned()
    });
    match view.why {
        AskWhy::GrantAsks => format!("grant {grant} says approval = \"ask\""),
        AskWhy::AfterUntrusted => format!(
            "the session has received untrusted content{}, and grant {grant} says on_untrusted = \"ask\"; `bx approve {id}` runs this call only, while `bx approve {id} --session` turns this integrity check off for grant {grant} for the rest of session {session}: its later calls run without asking, whatever untrusted content the session has read",
            view.untrusted_by
                .as_deref()
                .map(|by| format!(" (from {})", escape_terminal(by)))
                .unwrap_or_default(),
            id = view.approval,
            session = view.session,
        ),
        AskWhy::Question => format!("the model asks you (grant {grant})"),
        AskWhy::Provenance => provenance_why(view, &grant),
        AskWhy::ArgumentRule => rule_why(view, &grant),
    }
}

/// The session's labels when `view` asked, in words: the `labels:` line.
pub fn labels(view: &PendingView) -> String {
    format!(
        "the session has seen {} data{}",
        view.taint.as_str(),
        if view.untrusted {
            ", some of it untrusted"
        } else {
            ""
        }
    )
}

/// Why a provenance ask asks, and what `bx approve ID --session` covers: the grant with the
/// ask's values only when it names some, else (the session's values untracked) the grant whole.
fn provenance_why(view: &PendingView, grant: &str) -> String {
    let (id, session) = (view.approval, &view.session);
    let mut why = format!(
        "a value of this call came only from untrusted results, and grant {grant} says on_untrusted = \"provenance\"; `bx approve {id}` runs this call only, while `bx approve {id} --session` "
    );
    if view.why.scoped_to_values(&view.values) {
        let values: Vec<String> = view.values.iter().map(ToString::to_string).collect();
        let _ = write!(
            why,
            "also lets later calls of session {session} under grant {grant} run unasked when each value of theirs that came only from untrusted results is one of these: {}; any other such value asks again",
            values.join("; ")
        );
    } else {
        let _ = write!(
            why,
            "turns this integrity check off for grant {grant} for the rest of session {session}: its later calls run without asking, whatever their values"
        );
    }
    why
}

/// Why an ask by a rule on an argument (or a count per session) asks, and what `bx approve ID
/// --session` covers: the grant with the ask's values only.
fn rule_why(view: &PendingView, grant: &str) -> String {
    let (id, session) = (view.approval, &view.session);
    let values: Vec<String> = view.values.iter().map(ToString::to_string).collect();
    format!(
        "a value of this call is outside a rule of grant {grant} that says otherwise = \"ask\" (or its per_session count is reached; the value: lines say which); `bx approve {id}` runs this call only, while `bx approve {id} --session` also lets later calls of session {session} under grant {grant} run unasked when each value that asks is one of these: {}; any other such value asks again",
        values.join("; ")
    )
}

/// One line for an event.
pub fn event(event: &OwnerEvent) -> String {
    match event {
        OwnerEvent::Call {
            session,
            call_id,
            tool,
            arguments,
        } => format!(
            "call     {session} #{call_id} {} {}",
            escape_terminal(tool),
            escape_terminal(arguments)
        ),
        OwnerEvent::Answered {
            session,
            call_id,
            tool,
            outcome,
            reason,
            grant,
            detail,
        } => {
            let mut line = format!(
                "{outcome:<8} {session} #{call_id} {}",
                escape_terminal(tool)
            );
            if let Some(reason) = reason {
                let _ = write!(line, " {}", reason.model_text());
            }
            if let Some(grant) = grant {
                let _ = write!(line, " (grant {})", escape_terminal(grant.as_str()));
            }
            if !detail.is_empty() {
                let _ = write!(line, ": {}", escape_terminal(detail));
            }
            line
        }
        OwnerEvent::Pending { pending: view } => format!("pending  {}", pending(view).trim_end()),
        OwnerEvent::Resolved {
            approval,
            resolution,
        } => format!(
            "resolved approval {approval}: {}",
            resolution_text(resolution)
        ),
        OwnerEvent::SessionOpened { session } => format!("session  {session} opened"),
        OwnerEvent::Resumed { session } => format!("session  {session} resumed"),
        OwnerEvent::GrantsLoaded { grants } => format!("grants   reloaded: {grants} in force"),
        OwnerEvent::GrantProblems { problems } => {
            let mut line = format!(
                "grants   {} problem(s); every call is refused until they are fixed",
                problems.len()
            );
            for problem in problems {
                let _ = write!(line, "\n  {}", escape_terminal(problem));
            }
            line
        }
        OwnerEvent::Agent { session, event } => agent_event(session, event),
        OwnerEvent::Lagged { missed } => {
            format!("(missed {missed} events: this watch fell behind)")
        }
    }
}

/// One line for an agent loop's own event (`loopd`'s code mode): fixed words and numbers only.
fn agent_event(session: &proto::SessionId, event: &AgentEvent) -> String {
    match event {
        AgentEvent::Role { role } => {
            let role = match role {
                AgentRole::Builder => "builder",
                AgentRole::Verifier => "verifier (isolated, no tools)",
            };
            format!("role     {session} {role}")
        }
        AgentEvent::VerifyDone {
            outcome,
            passes,
            corrections,
            passed,
            open,
        } => {
            let outcome = match outcome {
                VerifyOutcome::Passed => "every criterion passed",
                VerifyOutcome::Stopped => "stopped after two corrections",
                VerifyOutcome::Unreadable => "stopped: the verifier gave no verdict",
                VerifyOutcome::Failed => "ended by a failure",
            };
            let list = |ids: &[u32]| {
                if ids.is_empty() {
                    "none".to_string()
                } else {
                    ids.iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(", ")
                }
            };
            format!(
                "verified {session} {outcome} ({passes} pass(es), {corrections} correction(s)); passed: {}; open: {}",
                list(passed),
                list(open)
            )
        }
    }
}

/// How an approval ended, in words.
pub fn resolution_text(resolution: &Resolution) -> String {
    match resolution {
        Resolution::ApprovedOnce => "approved once".to_string(),
        Resolution::ApprovedForSession => "approved for the session".to_string(),
        Resolution::Refused => "refused".to_string(),
        Resolution::Answered { text } => format!("answered: {}", escape_terminal(text)),
        Resolution::Expired => "expired".to_string(),
        Resolution::Abandoned { why } => format!("abandoned: {}", escape_terminal(why)),
    }
}

#[cfg(test)]
mod tests {
    use proto::{AskedValue, CallId, Class, GrantId, SessionId};

    use super::*;

    fn provenance_view(values: Vec<AskedValue>, provenance: Vec<String>) -> PendingView {
        PendingView {
            parent: None,
            approval: proto::ApprovalId(5),
            kind: PendingKind::Approval,
            session: SessionId("s1".into()),
            call_id: CallId(3),
            tool: "mail.send".into(),
            arguments: r#"{"recipient":"eve@evil.example"}"#.into(),
            grant: Some(GrantId("mail".into())),
            why: AskWhy::Provenance,
            taint: Class::Private,
            untrusted: true,
            untrusted_by: Some("call 1 (mail.read_inbox)".into()),
            question: None,
            choices: Vec::new(),
            provenance,
            values,
            requested: Timestamp::now(),
            expires: Timestamp::now().plus_millis(60_000),
        }
    }

    #[test]
    fn code_modes_events_are_one_line_each_with_the_session() {
        let session = SessionId("s-7".into());
        let role = OwnerEvent::Agent {
            session: session.clone(),
            event: AgentEvent::Role {
                role: AgentRole::Verifier,
            },
        };
        assert_eq!(event(&role), "role     s-7 verifier (isolated, no tools)");
        let done = OwnerEvent::Agent {
            session,
            event: AgentEvent::VerifyDone {
                outcome: VerifyOutcome::Stopped,
                passes: 3,
                corrections: 2,
                passed: vec![1, 3],
                open: vec![2],
            },
        };
        assert_eq!(
            event(&done),
            "verified s-7 stopped after two corrections (3 pass(es), 2 correction(s)); passed: 1, 3; open: 2"
        );
    }

    fn eve() -> AskedValue {
        AskedValue {
            argument: "recipient".into(),
            value: "eve@evil.example".into(),
        }
    }

    #[test]
    fn a_provenance_approval_keeps_its_first_line_and_shows_its_values_and_what_session_covers() {
        let view = provenance_view(
            vec![eve()],
            vec!["recipient eve@evil.example came from call 1, mail.read_inbox, untrusted".into()],
        );
        let shown = pending(&view);
        let lines: Vec<&str> = shown.lines().collect();
        assert!(
            lines[0].starts_with("approval 5: mail.send call 3 of session s1 (expires in "),
            "{shown}"
        );
        assert!(lines[1].starts_with("  arguments: "), "{shown}");
        assert!(lines[2].starts_with("  why:       a value of this call came only from untrusted results, and grant mail says on_untrusted = \"provenance\"; `bx approve 5` runs this call only, while `bx approve 5 --session` also lets later calls of session s1 under grant mail run unasked when each value of theirs that came only from untrusted results is one of these: recipient eve@evil.example; any other such value asks again"), "{shown}");
        assert_eq!(
            lines[3],
            "  value:     recipient eve@evil.example came from call 1, mail.read_inbox, untrusted"
        );
        assert!(lines[4].starts_with("  labels:    "), "{shown}");
        assert_eq!(lines.len(), 5, "{shown}");
    }

    #[test]
    fn an_ask_by_a_rule_on_an_argument_names_its_values_and_what_the_session_approval_covers() {
        let mut view = provenance_view(
            vec![eve()],
            vec![
                "recipient eve@evil.example matches none of allow [*@corp.example] (grant mail)"
                    .into(),
            ],
        );
        view.why = AskWhy::ArgumentRule;
        let shown = pending(&view);
        let lines: Vec<&str> = shown.lines().collect();
        assert!(
            lines[0].starts_with("approval 5: mail.send call 3"),
            "{shown}"
        );
        assert!(
            lines[2].contains("outside a rule of grant mail that says otherwise = \"ask\"")
                && lines[2].ends_with(
                    "one of these: recipient eve@evil.example; any other such value asks again"
                ),
            "{shown}"
        );
        assert_eq!(
            lines[3],
            "  value:     recipient eve@evil.example matches none of allow [*@corp.example] (grant mail)"
        );
    }

    #[test]
    fn a_provenance_ask_naming_no_value_says_the_session_approval_covers_the_grant_whole() {
        let untracked = "the session's values are not tracked, so none is proven clean";
        let shown = pending(&provenance_view(Vec::new(), vec![untracked.into()]));
        assert!(
            shown.contains("`bx approve 5 --session` turns this integrity check off for grant mail for the rest of session s1"),
            "{shown}"
        );
        assert!(!shown.contains("one of these"), "{shown}");
        assert!(
            shown.contains(&format!("  value:     {untracked}\n")),
            "{shown}"
        );
    }

    #[test]
    fn values_a_model_chose_are_escaped_and_cut_in_what_bx_prints() {
        let value = AskedValue {
            argument: "body".into(),
            value: format!("\x1b[2Jhi\n{}", "w".repeat(300)),
        };
        let shown = pending(&provenance_view(
            vec![value],
            vec!["body \x1b[2Jhi came from call 1, x, untrusted".into()],
        ));
        assert!(!shown.contains('\x1b'), "{shown}");
        assert_eq!(shown.lines().count(), 5, "{shown}");
        assert!(
            shown.contains("one of these: body \\x1b[2Jhi\\n"),
            "{shown}"
        );
        assert!(shown.contains("w…; any other"), "{shown}");
    }

    #[test]
    fn the_json_view_carries_provenance_and_values_and_omits_them_when_there_are_none() {
        let view = provenance_view(
            vec![eve()],
            vec!["recipient eve@evil.example came from call 1, mail.read_inbox, untrusted".into()],
        );
        let json = serde_json::to_value(&view).unwrap();
        assert_eq!(
            json["values"],
            serde_json::json!([{ "argument": "recipient", "value": "eve@evil.example" }])
        );
        assert_eq!(json["provenance"][0], view.provenance[0].as_str());
        let back: PendingView = serde_json::from_value(json).unwrap();
        assert_eq!(back, view);
        let plain = PendingView {
            why: AskWhy::GrantAsks,
            ..provenance_view(Vec::new(), Vec::new())
        };
        let json = serde_json::to_value(&plain).unwrap();
        assert!(
            json.get("values").is_none() && json.get("provenance").is_none(),
            "{json}"
        );
    }

    #[test]
    fn a_child_sessions_approval_names_its_parent() {
        let child = PendingView {
            session: proto::SessionId("s-child".into()),
            parent: Some(proto::SessionId("s-parent".into())),
            ..provenance_view(Vec::new(), Vec::new())
        };
        let shown = pending(&child);
        assert!(
            shown.contains("of session s-child, a child of session s-parent"),
            "{shown}"
        );
        let json = serde_json::to_value(&child).unwrap();
        assert_eq!(json["parent"], "s-parent");
        let root = PendingView {
            parent: None,
            ..child
        };
        assert!(!pending(&root).contains("a child of"));
        assert!(serde_json::to_value(&root).unwrap().get("parent").is_none());
    }
}
