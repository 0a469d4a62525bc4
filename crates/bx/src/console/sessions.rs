//! The Sessions view: every session the audit log names, and one session whole: its labels
//! over time (the first untrusted, private or secret data and the call that brought it), a
//! timeline of its calls, the calls, its memory entries and its approvals.

use std::fmt::Write;
use std::path::PathBuf;

use hyper::{Response, StatusCode};
use proto::{MemoryEntry, SessionId};

use super::broker;
use super::history::{self, Session};
use super::http::{Body, Query, encode, html, no_broker};
use super::page::{self, arguments, header, shown, text};
use super::timeline;
use crate::show::resolution_text;

/// `GET /sessions`: the list, the latest active first.
pub async fn list(socket: PathBuf) -> Response<Body> {
    let lines = match broker::blocking(move || broker::read_log(&socket)).await {
        Ok(lines) => lines,
        Err(message) => return no_broker(&message),
    };
    let mut sessions: Vec<Session> = history::sessions(&lines).into_values().collect();
    sessions.sort_by_key(|s| std::cmp::Reverse(s.last.as_millis()));
    let mut body = header("sessions", false);
    body.push_str("<main>\n<h2>Sessions</h2>\n");
    if sessions.is_empty() {
        body.push_str("<p>The audit log names no session yet.</p>\n");
    } else {
        body.push_str(
            "<table id=\"sessions\"><thead><tr><th>session</th><th>opened</th><th>last record</th>\
             <th>calls</th><th>labels</th><th>state</th></tr></thead><tbody>\n",
        );
        for s in &sessions {
            let _ = writeln!(
                body,
                "<tr><td><a class=\"session\" href=\"/session?id={}\">{}</a></td><td>{}</td><td>{}</td><td>{}</td><td class=\"labels\">{}</td><td>{}</td></tr>",
                text(&encode(s.id.as_str())),
                shown(s.id.as_str()),
                s.opened.map(|t| t.to_string()).unwrap_or_default(),
                s.last,
                s.calls.len(),
                labels_words(s),
                match &s.ended {
                    Some((_, why)) => format!("ended: {}", shown(why)),
                    None => "open".to_string(),
                }
            );
        }
        body.push_str("</tbody></table>\n");
    }
    body.push_str("</main>");
    html(
        StatusCode::OK,
        page::page("boxmaker console: sessions", &body),
    )
}

fn labels_words(session: &Session) -> String {
    format!(
        "{}{}",
        session.labels.taint.as_str(),
        if session.labels.untrusted {
            ", untrusted"
        } else {
            ""
        }
    )
}

/// `GET /session?id=…`: one session.
pub async fn one(socket: PathBuf, query: &Query) -> Response<Body> {
    let Some(id) = query.get("id").map(SessionId::from) else {
        return html(
            StatusCode::BAD_REQUEST,
            page::message("Bad request", "Name a session: /session?id=…"),
        );
    };
    let read = broker::blocking(move || {
        let lines = broker::read_log(&socket)?;
        let memory = broker::memory(&socket);
        Ok((lines, memory))
    })
    .await;
    let (lines, memory) = match read {
        Ok(read) => read,
        Err(message) => return no_broker(&message),
    };
    let Some(session) = history::sessions(&lines).remove(&id) else {
        return html(
            StatusCode::NOT_FOUND,
            page::message(
                "No such session",
                &format!("The audit log names no session {id}."),
            ),
        );
    };
    let title = format!("boxmaker console: session {}", session.id);
    html(
        StatusCode::OK,
        page::page(&title, &render(&session, memory)),
    )
}

fn render(session: &Session, memory: Result<Vec<MemoryEntry>, String>) -> String {
    let mut body = header("sessions", false);
    let _ = writeln!(
        body,
        "<main>\n<h2>Session <code class=\"session\">{}</code></h2>\n<p>Opened {}; {}. Labels now: <span class=\"labels\">{}</span>.</p>",
        shown(session.id.as_str()),
        session
            .opened
            .map(|t| format!("at {t}"))
            .unwrap_or_else(|| "before this log began".to_string()),
        match &session.ended {
            Some((at, why)) => format!("ended at {at} ({})", shown(why)),
            None => "still open".to_string(),
        },
        labels_words(session),
    );
    body.push_str("<h3>Labels over time</h3>\n");
    if session.changes.is_empty() {
        body.push_str(
            "<p id=\"changes\">The session has seen nothing untrusted, private or secret.</p>\n",
        );
    } else {
        body.push_str("<ol id=\"changes\">\n");
        for change in &session.changes {
            let _ = writeln!(
                body,
                "<li class=\"change\" data-what=\"{what}\">first saw <strong>{what}</strong> data at {at}, from call <a href=\"#call-{call}\">{call}</a> (<code>{tool}</code>)</li>",
                what = change.what,
                at = change.at,
                call = change.call,
                tool = shown(&change.tool),
            );
        }
        body.push_str("</ol>\n");
    }
    body.push_str("<h3>Timeline</h3>\n");
    body.push_str(&timeline::svg(session));
    body.push_str(&timeline::legend());
    calls(&mut body, session);
    approvals(&mut body, session);
    memory_entries(&mut body, session, memory);
    body.push_str("</main>");
    body
}

fn calls(body: &mut String, session: &Session) {
    let _ = writeln!(body, "<h3>Calls ({})</h3>", session.calls.len());
    if session.calls.is_empty() {
        return;
    }
    body.push_str(
        "<table id=\"calls\"><thead><tr><th>call</th><th>at</th><th>tool</th><th>outcome</th>\
         <th>grant</th><th>arguments</th><th>detail</th></tr></thead><tbody>\n",
    );
    for call in &session.calls {
        let record = match call.record {
            Some(seq) => format!(" (<a href=\"/audit?record={seq}\">record {seq}</a>)"),
            None => String::new(),
        };
        let _ = writeln!(
            body,
            "<tr id=\"call-{id}\" class=\"call {outcome}\"><td>{id}</td><td>{at}</td><td><code>{tool}</code></td><td class=\"outcome\">{outcome}{record}</td><td>{grant}</td><td>{args}</td><td>{detail}</td></tr>",
            id = call.id,
            at = call.at,
            tool = shown(&call.tool),
            outcome = call.outcome.as_str(),
            grant = call
                .grant
                .as_ref()
                .map(|g| shown(g.as_str()))
                .unwrap_or_default(),
            args = arguments(&call.arguments),
            detail = shown(&call.detail),
        );
    }
    body.push_str("</tbody></table>\n");
}

fn approvals(body: &mut String, session: &Session) {
    let _ = writeln!(body, "<h3>Approvals ({})</h3>", session.approvals.len());
    if session.approvals.is_empty() {
        return;
    }
    body.push_str("<ul id=\"approvals\">\n");
    for asked in &session.approvals {
        let _ = writeln!(
            body,
            "<li>approval {} at {}: call {} <code>{}</code>, {:?}{}: {}</li>",
            asked.id,
            asked.at,
            asked.call,
            shown(&asked.tool),
            asked.why,
            asked
                .grant
                .as_ref()
                .map(|g| format!(" (grant {})", shown(g.as_str())))
                .unwrap_or_default(),
            match &asked.resolution {
                Some(resolution) => text(&resolution_text(resolution)),
                None => "waiting".to_string(),
            }
        );
    }
    body.push_str("</ul>\n");
}

fn memory_entries(body: &mut String, session: &Session, memory: Result<Vec<MemoryEntry>, String>) {
    let entries = match memory {
        Ok(entries) => entries,
        Err(message) => {
            let _ = writeln!(
                body,
                "<h3>Memory entries</h3>\n<p>The memory store could not be read: {}</p>",
                shown(&message)
            );
            return;
        }
    };
    let mine: Vec<&MemoryEntry> = entries.iter().filter(|e| e.session == session.id).collect();
    let _ = writeln!(body, "<h3>Memory entries ({})</h3>", mine.len());
    if mine.is_empty() {
        return;
    }
    body.push_str("<ul id=\"memory\">\n");
    for entry in mine {
        let _ = writeln!(
            body,
            "<li>entry {} at {} ({}{}){}: <pre>{}</pre>{}</li>",
            entry.id,
            entry.at,
            entry.class.as_str(),
            if entry.untrusted { ", untrusted" } else { "" },
            entry
                .forgotten
                .map(|t| format!(", forgotten at {t}"))
                .unwrap_or_default(),
            shown(&entry.text),
            if entry.tags.is_empty() {
                String::new()
            } else {
                format!(
                    " tags: {}",
                    entry
                        .tags
                        .iter()
                        .map(|t| shown(t))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            }
        );
    }
    body.push_str("</ul>\n");
}
