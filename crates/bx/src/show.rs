//! How `bx` prints pending approvals and events for a person. Everything a model controls
//! (arguments, questions, choices, paths, details) is printed whole, through
//! `proto::text::escape_terminal`, so no byte of it can move the cursor, recolour, retitle or
//! reorder the owner's terminal.

use std::fmt::Write;

use proto::text::escape_terminal;
use proto::{AskWhy, OwnerEvent, PendingKind, PendingView, Resolution, Timestamp};

/// The lines that show one pending approval or question.
pub fn pending(view: &PendingView) -> String {
    let mut out = String::new();
    let left = (view.expires.as_millis() - Timestamp::now().as_millis()).max(0) / 1000;
    let what = match view.kind {
        PendingKind::Approval => "approval",
        PendingKind::Question => "question",
    };
    let _ = writeln!(
        out,
        "{what} {}: {} call {} of session {} (expires in {left} s, at {})",
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
    let grant = view.grant.as_ref().map_or("(none)".to_string(), |g| {
        escape_terminal(g.as_str()).into_owned()
    });
    let why = match view.why {
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
        AskWhy::Provenance => format!(
            "a value of this call came only from untrusted results, and grant {grant} says on_untrusted = \"provenance\""
        ),
    };
    let _ = writeln!(out, "  why:       {why}");
    for line in &view.provenance {
        let _ = writeln!(out, "  value:     {}", escape_terminal(line));
    }
    let _ = writeln!(
        out,
        "  labels:    the session has seen {} data{}",
        view.taint.as_str(),
        if view.untrusted {
            ", some of it untrusted"
        } else {
            ""
        }
    );
    out
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
        OwnerEvent::Lagged { missed } => {
            format!("(missed {missed} events: this watch fell behind)")
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
