//! The Audit view: the log's records, newest first, paged and searched by session, tool,
//! grant, decision, time and record number; the chain's check with the first broken record
//! shown; and the records found, exported as JSON Lines (the lines exactly as the log holds
//! them).

use std::fmt::Write;
use std::path::PathBuf;

use hyper::header::{self, HeaderValue};
use hyper::{Response, StatusCode};
use ledger::{Answer, Event, Record};
use proto::{Resolution, Timestamp};

use super::broker::{self, Line, Verified};
use super::history::{denial, field_text, session_of};
use super::http::{Body, Query, encode, html, no_broker, respond};
use super::page::{self, arguments, header, shown, text};

/// Records on one page.
const PER_PAGE: usize = 50;

/// The decisions the search offers, as a record's [`decision`] names them.
const DECISIONS: [&str; 13] = [
    "result",
    "failed",
    "denied",
    "decided",
    "asked",
    "approved once",
    "approved for the session",
    "refused",
    "answered",
    "expired",
    "abandoned",
    "session",
    "other",
];

/// What a search asks for; every field optional.
#[derive(Debug, Default)]
struct Search {
    session: Option<String>,
    tool: Option<String>,
    grant: Option<String>,
    decision: Option<String>,
    from: Option<Timestamp>,
    to: Option<Timestamp>,
    first: Option<u64>,
    last: Option<u64>,
}

impl Search {
    /// The search a query asks for, or what is wrong with it.
    fn of(query: &Query) -> Result<Search, String> {
        let time = |name: &str| {
            query
                .get(name)
                .map(|t| {
                    Timestamp::parse(t).map_err(|e| {
                        format!("{name}: {e} (write an RFC 3339 time, e.g. 2026-12-05T08:00:00Z)")
                    })
                })
                .transpose()
        };
        let number = |name: &str| {
            query
                .get(name)
                .map(|n| {
                    n.parse::<u64>()
                        .map_err(|_| format!("{name}: {n:?} is not a record number"))
                })
                .transpose()
        };
        let owned = |name: &str| query.get(name).map(str::to_string);
        let decision = owned("decision").filter(|d| d != "any");
        if let Some(d) = &decision
            && !DECISIONS.contains(&d.as_str())
        {
            return Err(format!(
                "decision: {d:?} is not one of {}",
                DECISIONS.join(", ")
            ));
        }
        Ok(Search {
            session: owned("session"),
            tool: owned("tool"),
            grant: owned("grant"),
            decision,
            from: time("from")?,
            to: time("to")?,
            first: number("first")?,
            last: number("last")?,
        })
    }

    /// Whether `line` is found. An unreadable line is found by a search that names no field
    /// of a record (the owner must see it).
    fn finds(&self, line: &Line) -> bool {
        let Some(record) = &line.record else {
            return self.session.is_none()
                && self.tool.is_none()
                && self.grant.is_none()
                && self.decision.is_none()
                && self.from.is_none()
                && self.to.is_none();
        };
        let has = |wanted: &Option<String>, value: Option<&str>| match wanted {
            None => true,
            Some(w) => value.is_some_and(|v| v.contains(w.as_str())),
        };
        has(&self.session, session_of(&record.event).map(|s| s.as_str()))
            && has(&self.tool, tool_of(&record.event))
            && has(&self.grant, grant_of(&record.event))
            && self
                .decision
                .as_deref()
                .is_none_or(|d| d == decision(&record.event))
            && self.from.is_none_or(|t| record.at >= t)
            && self.to.is_none_or(|t| record.at <= t)
            && self.first.is_none_or(|n| record.seq >= n)
            && self.last.is_none_or(|n| record.seq <= n)
    }

    /// The query that asks for this search again (for the pager and the export link).
    fn query(&self) -> String {
        let mut out = String::new();
        let mut add = |name: &str, value: Option<String>| {
            if let Some(value) = value {
                let _ = write!(out, "&{name}={}", encode(&value));
            }
        };
        add("session", self.session.clone());
        add("tool", self.tool.clone());
        add("grant", self.grant.clone());
        add("decision", self.decision.clone());
        add("from", self.from.map(|t| t.to_string()));
        add("to", self.to.map(|t| t.to_string()));
        add("first", self.first.map(|n| n.to_string()));
        add("last", self.last.map(|n| n.to_string()));
        out
    }
}

/// The tool a record names.
fn tool_of(event: &Event) -> Option<&str> {
    match event {
        Event::Decided { tool, .. }
        | Event::Answered { tool, .. }
        | Event::ApprovalRequested { tool, .. } => Some(tool),
        _ => None,
    }
}

/// The grant a record names.
fn grant_of(event: &Event) -> Option<&str> {
    match event {
        Event::Decided { grant, .. }
        | Event::Answered { grant, .. }
        | Event::ApprovalRequested { grant, .. }
        | Event::ApprovalResolved { grant, .. } => grant.as_ref().map(|g| g.as_str()),
        _ => None,
    }
}

/// A record's decision, as the search names it.
pub fn decision(event: &Event) -> &'static str {
    match event {
        Event::Answered { answer, .. } => match answer {
            Answer::Result { .. } => "result",
            Answer::Failed { .. } => "failed",
            Answer::Denied { .. } => "denied",
        },
        Event::Decided { .. } => "decided",
        Event::ApprovalRequested { .. } => "asked",
        Event::ApprovalResolved { resolution, .. } => match resolution {
            Resolution::ApprovedOnce => "approved once",
            Resolution::ApprovedForSession => "approved for the session",
            Resolution::Refused => "refused",
            Resolution::Answered { .. } => "answered",
            Resolution::Expired => "expired",
            Resolution::Abandoned { .. } => "abandoned",
        },
        Event::SessionOpened { .. } | Event::SessionResumed { .. } | Event::SessionEnded { .. } => {
            "session"
        }
        _ => "other",
    }
}

/// The record's type as the log names it.
fn kind(event: &Event) -> String {
    serde_json::to_value(event)
        .ok()
        .and_then(|v| v.get("type").and_then(|t| t.as_str()).map(str::to_string))
        .unwrap_or_default()
}

/// `GET /audit`: the chain's check, the search form, one page of records found.
pub async fn view(socket: PathBuf, query: &Query) -> Response<Body> {
    let search = match Search::of(query) {
        Ok(search) => search,
        Err(message) => {
            return html(
                StatusCode::BAD_REQUEST,
                page::message("Bad search", &message),
            );
        }
    };
    let read =
        broker::blocking(move || Ok((broker::verify(&socket)?, broker::read_log(&socket)?))).await;
    let (verified, lines) = match read {
        Ok(read) => read,
        Err(message) => return no_broker(&message),
    };
    let found: Vec<&Line> = lines.iter().rev().filter(|l| search.finds(l)).collect();
    let pages = found.len().div_ceil(PER_PAGE).max(1);
    let wanted = query
        .get("record")
        .and_then(|n| n.parse::<u64>().ok())
        .and_then(|seq| {
            found
                .iter()
                .position(|l| l.record.as_ref().is_some_and(|r| r.seq == seq))
        })
        .map(|at| at / PER_PAGE + 1);
    let page_no = wanted
        .or_else(|| query.get("page").and_then(|p| p.parse::<usize>().ok()))
        .unwrap_or(1)
        .clamp(1, pages);
    let mut body = header("audit", false);
    body.push_str("<main>\n<h2>Audit</h2>\n");
    chain(&mut body, &verified, &lines);
    form(&mut body, &search);
    let shown_lines = &found[(page_no - 1) * PER_PAGE..(page_no * PER_PAGE).min(found.len())];
    let _ = writeln!(
        body,
        "<p id=\"found\">{} of {} records found; page {page_no} of {pages}, newest first. <a id=\"export\" href=\"/audit/export?{}\" download>Export these as JSON Lines</a></p>",
        found.len(),
        lines.len(),
        text(search.query().trim_start_matches('&')),
    );
    records(
        &mut body,
        shown_lines,
        verified.broken.as_ref().map(|b| b.line),
    );
    pager(&mut body, &search, page_no, pages);
    body.push_str("</main>");
    html(StatusCode::OK, page::page("boxmaker console: audit", &body))
}

/// The chain's check; when broken, the first broken record as the log holds it.
fn chain(body: &mut String, verified: &Verified, lines: &[Line]) {
    if verified.holds {
        let _ = writeln!(
            body,
            "<p id=\"chain\" class=\"holds\">{}</p>",
            shown(&verified.message)
        );
        return;
    }
    let _ = writeln!(
        body,
        "<div id=\"chain\" class=\"broken\"><p><strong>The chain is broken.</strong> {}</p>",
        shown(&verified.message)
    );
    if let Some(broken) = &verified.broken {
        let _ = writeln!(
            body,
            "<p>First broken: record {} (line {}): {}</p>",
            broken.record,
            broken.line,
            shown(&broken.what)
        );
        if let Some(line) = lines.iter().find(|l| l.number == broken.line) {
            let _ = writeln!(
                body,
                "<p>The line as the log holds it:</p><pre id=\"broken-line\">{}</pre>",
                shown(&line.raw)
            );
        }
    }
    body.push_str("</div>\n");
}

fn form(body: &mut String, search: &Search) {
    let value = |v: &Option<String>| text(v.as_deref().unwrap_or(""));
    let time = |t: &Option<Timestamp>| t.map(|t| t.to_string()).unwrap_or_default();
    let number = |n: &Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
    let _ = write!(
        body,
        "<form id=\"search\" method=\"get\" action=\"/audit\" class=\"filters\">\
         <label>session <input name=\"session\" value=\"{}\"></label>\
         <label>tool <input name=\"tool\" value=\"{}\"></label>\
         <label>grant <input name=\"grant\" value=\"{}\"></label>\
         <label>decision <select name=\"decision\"><option value=\"any\">any</option>",
        value(&search.session),
        value(&search.tool),
        value(&search.grant),
    );
    for d in DECISIONS {
        let selected = if search.decision.as_deref() == Some(d) {
            " selected"
        } else {
            ""
        };
        let _ = write!(body, "<option{selected}>{d}</option>");
    }
    let _ = writeln!(
        body,
        "</select></label>\
         <label>from <input name=\"from\" value=\"{}\" placeholder=\"2026-12-05T08:00:00Z\"></label>\
         <label>to <input name=\"to\" value=\"{}\" placeholder=\"2026-12-05T18:00:00Z\"></label>\
         <label>records <input name=\"first\" value=\"{}\" size=\"6\" inputmode=\"numeric\"> to \
         <input name=\"last\" value=\"{}\" size=\"6\" inputmode=\"numeric\"></label>\
         <button>Search</button> <a href=\"/audit\">clear</a></form>",
        time(&search.from),
        time(&search.to),
        number(&search.first),
        number(&search.last),
    );
}

fn records(body: &mut String, lines: &[&Line], broken: Option<u64>) {
    body.push_str(
        "<table id=\"records\"><thead><tr><th>record</th><th>at</th><th>what</th><th>session</th>\
         <th>call</th><th>tool</th><th>grant</th><th>decision</th><th>detail</th></tr></thead><tbody>\n",
    );
    for line in lines {
        let class = if Some(line.number) == broken {
            " class=\"broken\""
        } else {
            ""
        };
        match &line.record {
            Some(record) => row(body, record, class),
            None => {
                let _ = writeln!(
                    body,
                    "<tr{class}><td>line {}</td><td colspan=\"8\">not a record: <pre>{}</pre></td></tr>",
                    line.number,
                    shown(&line.raw)
                );
            }
        }
    }
    body.push_str("</tbody></table>\n");
}

fn row(body: &mut String, record: &Record, class: &str) {
    let event = &record.event;
    let call = match event {
        Event::Decided { call_id, .. }
        | Event::Answered { call_id, .. }
        | Event::ApprovalRequested { call_id, .. }
        | Event::ApprovalResolved { call_id, .. }
        | Event::Interrupted { call_id, .. } => call_id.to_string(),
        _ => String::new(),
    };
    let detail = match event {
        Event::Decided { arguments: a, .. } | Event::ApprovalRequested { arguments: a, .. } => {
            arguments(&field_text(a))
        }
        Event::Answered {
            arguments: a,
            detail,
            answer,
            ..
        } => {
            let said = match answer {
                Answer::Denied { reason } => denial(*reason, detail),
                Answer::Failed { message } if detail.is_empty() => field_text(message),
                Answer::Failed { message } => format!("{} ({detail})", field_text(message)),
                Answer::Result {
                    class, untrusted, ..
                } => format!(
                    "{}{}{}",
                    class.as_str(),
                    if *untrusted { ", untrusted" } else { "" },
                    if detail.is_empty() {
                        String::new()
                    } else {
                        format!("; {detail}")
                    }
                ),
            };
            format!("{}<p>{}</p>", arguments(&field_text(a)), shown(&said))
        }
        other => {
            let json = serde_json::to_string(other).unwrap_or_default();
            format!("<code>{}</code>", shown(&json))
        }
    };
    let session = session_of(event)
        .map(|s| {
            format!(
                "<a href=\"/session?id={}\">{}</a>",
                text(&encode(s.as_str())),
                shown(s.as_str())
            )
        })
        .unwrap_or_default();
    let _ = writeln!(
        body,
        "<tr id=\"record-{seq}\" data-record=\"{seq}\"{class}><td>{seq}</td><td>{at}</td><td>{kind}</td><td>{session}</td><td>{call}</td><td><code class=\"tool\">{tool}</code></td><td>{grant}</td><td class=\"decision\">{decision}</td><td class=\"detail\">{detail}</td></tr>",
        seq = record.seq,
        at = record.at,
        kind = text(&kind(event)),
        tool = shown(tool_of(event).unwrap_or("")),
        grant = shown(grant_of(event).unwrap_or("")),
        decision = decision(event),
    );
}

fn pager(body: &mut String, search: &Search, page_no: usize, pages: usize) {
    if pages <= 1 {
        return;
    }
    let query = text(&search.query());
    body.push_str("<nav class=\"pager\">");
    if page_no > 1 {
        let _ = write!(
            body,
            "<a rel=\"prev\" href=\"/audit?page={}{query}\">newer</a> ",
            page_no - 1
        );
    }
    let _ = write!(body, "page {page_no} of {pages}");
    if page_no < pages {
        let _ = write!(
            body,
            " <a rel=\"next\" href=\"/audit?page={}{query}\">older</a>",
            page_no + 1
        );
    }
    body.push_str("</nav>\n");
}

/// `GET /audit/export`: the records the search finds, oldest first, as the log holds them
/// (one JSON line each), as a download.
pub async fn export(socket: PathBuf, query: &Query) -> Response<Body> {
    let search = match Search::of(query) {
        Ok(search) => search,
        Err(message) => {
            return html(
                StatusCode::BAD_REQUEST,
                page::message("Bad search", &message),
            );
        }
    };
    let lines = match broker::blocking(move || broker::read_log(&socket)).await {
        Ok(lines) => lines,
        Err(message) => return no_broker(&message),
    };
    let mut out = String::new();
    for line in lines.iter().filter(|l| search.finds(l)) {
        out.push_str(&line.raw);
        out.push('\n');
    }
    let mut response = respond(
        StatusCode::OK,
        "application/jsonl",
        Body::Whole(Some(out.into())),
    );
    response.headers_mut().insert(
        header::CONTENT_DISPOSITION,
        HeaderValue::from_static("attachment; filename=\"boxmaker-audit.jsonl\""),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_search_names_what_is_wrong_with_a_bad_time_number_or_decision() {
        let bad = |q: &str| Search::of(&Query::parse(Some(q))).unwrap_err();
        assert!(
            bad("from=yesterday").starts_with("from: "),
            "{}",
            bad("from=yesterday")
        );
        assert!(bad("first=x").contains("not a record number"));
        assert!(bad("decision=maybe").contains("is not one of"));
        let ok = Search::of(&Query::parse(Some(
            "tool=write&decision=denied&from=2026-12-05T08:00:00Z",
        )))
        .unwrap();
        assert_eq!(
            ok.query(),
            "&tool=write&decision=denied&from=2026-12-05T08%3A00%3A00.000Z"
        );
    }
}
