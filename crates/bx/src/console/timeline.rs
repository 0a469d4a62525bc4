//! A session's timeline as an inline SVG made on the server: one bar per call in the order
//! the calls came, coloured by outcome, and a marked line where the session's labels rose
//! (its first untrusted, private or secret data). Colours are presentation attributes, not
//! style, so the page's Content-Security-Policy stays as it is; every string from outside is
//! in a `<title>` as text.

use std::fmt::Write;

use super::history::{Change, Outcome, Session};
use super::page::shown;

/// The drawing's width and the room for the bars.
const WIDTH: usize = 900;
const LEFT: usize = 10;
const BARS: usize = WIDTH - 2 * LEFT;
/// The widest a bar gets.
const BAR_MAX: usize = 72;
/// The bars' top and height; the marks' text sits above them.
const TOP: usize = 44;
const HEIGHT: usize = 60;

/// The fill of an outcome.
pub fn colour(outcome: Outcome) -> &'static str {
    match outcome {
        Outcome::Result => "#2e7d32",
        Outcome::Failed => "#c77700",
        Outcome::Denied => "#b00020",
        Outcome::Waiting => "#2a62b8",
        Outcome::Running => "#888888",
    }
}

/// The timeline of `session` (a short note when it has no calls).
pub fn svg(session: &Session) -> String {
    let calls = &session.calls;
    if calls.is_empty() {
        return "<p class=\"timeline-empty\">No calls yet.</p>".to_string();
    }
    let step = (BARS / calls.len()).clamp(3, BAR_MAX + 4);
    let width = (LEFT * 2 + step * calls.len()).max(300);
    let mut out = format!(
        "<svg class=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" role=\"img\" width=\"{width}\" height=\"{}\" viewBox=\"0 0 {width} {}\">\
         <title>calls of session {} in order, coloured by outcome; marked lines are label changes</title>\
         <line x1=\"{LEFT}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#999\"/>",
        TOP + HEIGHT + 24,
        TOP + HEIGHT + 24,
        shown(session.id.as_str()),
        TOP + HEIGHT,
        width - LEFT,
        TOP + HEIGHT,
    );
    let gap = if step > 6 { 2 } else { 0 };
    for (n, call) in calls.iter().enumerate() {
        let x = LEFT + n * step;
        let _ = write!(
            out,
            "<rect class=\"call {outcome}\" data-call=\"{id}\" x=\"{x}\" y=\"{TOP}\" width=\"{w}\" height=\"{HEIGHT}\" fill=\"{fill}\">\
             <title>call {id} {tool}: {outcome} at {at}</title></rect>",
            outcome = call.outcome.as_str(),
            id = call.id,
            w = step - gap,
            fill = colour(call.outcome),
            tool = shown(&call.tool),
            at = call.at,
        );
    }
    // One mark per call: a call may bring untrusted and private data at once.
    let mut marks: Vec<(usize, Vec<&str>, &Change)> = Vec::new();
    for change in &session.changes {
        let Some(n) = calls.iter().position(|c| c.id == change.call) else {
            continue;
        };
        match marks.iter_mut().find(|(at, _, _)| *at == n) {
            Some((_, what, _)) => what.push(change.what),
            None => marks.push((n, vec![change.what], change)),
        }
    }
    for (k, (n, what, change)) in marks.into_iter().enumerate() {
        let x = LEFT + n * step + (step - gap) / 2;
        // Marks close together take turns between two rows of text.
        let ty = 12 + (k % 2) * 16;
        let _ = write!(
            out,
            "<g class=\"label-change\" data-what=\"{data}\" data-call=\"{call}\">\
             <line x1=\"{x}\" y1=\"{ly}\" x2=\"{x}\" y2=\"{bottom}\" stroke=\"#6a1b9a\" stroke-width=\"2\" stroke-dasharray=\"4 2\"/>\
             <text x=\"{tx}\" y=\"{ty}\" font-size=\"12\" fill=\"#6a1b9a\">{words} from call {call}</text>\
             <title>the session first saw {words} data at {at}, from call {call} ({tool})</title></g>",
            data = what.join(" "),
            words = what.join(", "),
            call = change.call,
            bottom = TOP + HEIGHT + 4,
            tx = x + 3,
            ly = ty + 2,
            at = change.at,
            tool = shown(&change.tool),
        );
    }
    let _ = write!(
        out,
        "<text x=\"{LEFT}\" y=\"{}\" font-size=\"12\" fill=\"#555\">call {} … call {}</text></svg>",
        TOP + HEIGHT + 18,
        calls[0].id,
        calls[calls.len() - 1].id
    );
    out
}

/// The key to the colours, as HTML.
pub fn legend() -> String {
    let mut out = String::from("<p class=\"legend\">");
    for outcome in [
        Outcome::Result,
        Outcome::Failed,
        Outcome::Denied,
        Outcome::Waiting,
        Outcome::Running,
    ] {
        let _ = write!(
            out,
            "<svg width=\"12\" height=\"12\" aria-hidden=\"true\"><rect width=\"12\" height=\"12\" fill=\"{}\"/></svg> {} ",
            colour(outcome),
            outcome.as_str()
        );
    }
    out.push_str("<svg width=\"12\" height=\"12\" aria-hidden=\"true\"><line x1=\"6\" y1=\"0\" x2=\"6\" y2=\"12\" stroke=\"#6a1b9a\" stroke-width=\"2\"/></svg> labels rose</p>");
    out
}
