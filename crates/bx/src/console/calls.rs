//! The Live calls view: the stream `bx watch` shows, one row per call, updated as it waits,
//! runs and is answered; filtered by session, tool and outcome in the page (the filter's
//! values are in the address too, so a filtered view can be bookmarked). The rows are
//! rendered here; the page's script only inserts them and hides the ones the filter leaves out.

use std::fmt::Write;

use hyper::{Response, StatusCode};
use proto::{OwnerEvent, SessionId, Timestamp};

use super::http::{Body, Query, html};
use super::page::{self, arguments, header, shown, text};

/// The outcomes the filter offers: arrived, waiting for the owner, and the three answers.
const OUTCOMES: [&str; 5] = ["called", "waiting", "result", "failed", "denied"];

/// `GET /calls`: the filter and an empty table the live stream fills.
pub fn view(query: &Query) -> Response<Body> {
    let value = |name: &str| text(query.get(name).unwrap_or(""));
    let mut body = header("calls", true);
    let _ = write!(
        body,
        "<main>\n<h2>Live calls</h2>\n\
         <form id=\"call-filter\" method=\"get\" action=\"/calls\" class=\"filters\">\
         <label>session <input name=\"session\" value=\"{}\" autocomplete=\"off\"></label>\
         <label>tool <input name=\"tool\" value=\"{}\" autocomplete=\"off\"></label>\
         <label>outcome <select name=\"outcome\"><option value=\"\">any</option>",
        value("session"),
        value("tool"),
    );
    for outcome in OUTCOMES {
        let selected = if query.get("outcome") == Some(outcome) {
            " selected"
        } else {
            ""
        };
        let _ = write!(body, "<option{selected}>{outcome}</option>");
    }
    body.push_str(
        "</select></label><button>Filter</button></form>\n\
         <p>Every call from when this page opened, newest first; earlier ones are in the Audit \
         and Sessions views.</p>\n\
         <table id=\"calls\"><thead><tr><th>at</th><th>session</th><th>call</th><th>tool</th>\
         <th>outcome</th><th>grant</th><th>arguments</th><th>detail</th></tr></thead>\
         <tbody id=\"call-rows\"></tbody></table>\n</main>",
    );
    html(
        StatusCode::OK,
        page::page("boxmaker console: live calls", &body),
    )
}

/// The id of a call's row: the session as hex, so any session id makes a plain id.
fn row_id(session: &SessionId, call: proto::CallId) -> String {
    let hex: String = session
        .as_str()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("call-{hex}-{call}")
}

/// The row an event makes or updates, if it is about a call.
pub fn row(event: &OwnerEvent) -> Option<String> {
    let (session, call, tool, outcome, grant, args, detail) = match event {
        OwnerEvent::Call {
            session,
            call_id,
            tool,
            arguments: a,
        } => (
            session,
            *call_id,
            tool,
            "called",
            None,
            arguments(a),
            String::new(),
        ),
        OwnerEvent::Pending { pending } => (
            &pending.session,
            pending.call_id,
            &pending.tool,
            "waiting",
            pending.grant.as_ref(),
            arguments(&pending.arguments),
            format!(
                "<a href=\"/#pending-{}\">approval {}</a>",
                pending.approval, pending.approval
            ),
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
            let mut said = reason
                .map(|r| r.model_text().to_string())
                .unwrap_or_default();
            if !detail.is_empty() {
                if !said.is_empty() {
                    said.push_str(": ");
                }
                said.push_str(detail);
            }
            let outcome = OUTCOMES
                .iter()
                .copied()
                .find(|o| o == outcome)
                .unwrap_or("failed");
            (
                session,
                *call_id,
                tool,
                outcome,
                grant.as_ref(),
                String::new(),
                shown(&said),
            )
        }
        _ => return None,
    };
    Some(format!(
        "<tr id=\"{id}\" class=\"call {outcome}\" data-session=\"{data_session}\" data-tool=\"{data_tool}\" data-outcome=\"{outcome}\">\
         <td>{at}</td><td><a href=\"/session?id={link}\">{session_shown}</a></td><td>{call}</td><td><code class=\"tool\">{tool_shown}</code></td>\
         <td class=\"outcome\">{outcome}</td><td>{grant}</td><td class=\"arguments\">{args}</td><td class=\"detail\">{detail}</td></tr>",
        id = row_id(session, call),
        data_session = text(session.as_str()),
        data_tool = text(tool),
        at = Timestamp::now(),
        link = text(&super::http::encode(session.as_str())),
        session_shown = shown(session.as_str()),
        tool_shown = shown(tool),
        grant = grant.map(|g| shown(g.as_str())).unwrap_or_default(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_row_keeps_markup_and_quotes_out_of_its_attributes_and_cells() {
        let event = OwnerEvent::Call {
            session: "s\"><script>".into(),
            call_id: proto::CallId(3),
            tool: "<img src=x onerror=alert(1)>".into(),
            arguments: "{}".into(),
        };
        let row = row(&event).unwrap();
        assert!(!row.contains("<script>") && !row.contains("<img"), "{row}");
        assert!(
            row.contains("data-session=\"s&quot;&gt;&lt;script&gt;\""),
            "{row}"
        );
        assert!(
            row.starts_with("<tr id=\"call-73223e3c7363726970743e-3\""),
            "{row}"
        );
    }
}
