//! The console's HTML, rendered on the server. Every string from outside (tool names,
//! arguments, questions, choices, grant names, session names, the broker's messages) goes
//! through [`text`], and through `proto::text`'s escapes first, so it reaches the page as text
//! that shows control and bidirectional characters as visible escapes, never as markup.

use std::fmt::Write;

use proto::text::{escape_terminal, escape_unicode};
use proto::{PendingKind, PendingView, Timestamp};

use crate::show;

/// Arguments longer than this (in characters), or with more lines than [`FOLD_LINES`], are
/// folded in a `<details>` that says their size; they are never cut.
const FOLD_CHARS: usize = 600;
/// See [`FOLD_CHARS`].
const FOLD_LINES: usize = 12;

/// `raw` as HTML text: the five characters that could start markup or end an attribute are
/// written as character references.
pub fn text(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len() + 16);
    for c in raw.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A whole page: the head with the embedded stylesheet and script, then `body`.
pub fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><link rel=\"stylesheet\" href=\"/static/console.css\">\
         <script src=\"/static/console.js\" defer></script></head>\n<body>\n{body}\n</body></html>\n",
        text(title)
    )
}

/// The views, as the navigation names them: path and words.
const VIEWS: [(&str, &str, &str); 5] = [
    ("inbox", "/", "Inbox"),
    ("calls", "/calls", "Live calls"),
    ("sessions", "/sessions", "Sessions"),
    ("audit", "/audit", "Audit"),
    ("grants", "/grants", "Grants"),
];

/// The header every view starts with: the title, the navigation (`current` marked), and
/// with `live` the state of the page's live stream.
pub fn header(current: &str, live: bool) -> String {
    let mut out = String::from("<header><h1>boxmaker: the owner's console</h1><nav>");
    for (key, path, words) in VIEWS {
        if key == current {
            let _ = write!(out, "<a href=\"{path}\" aria-current=\"page\">{words}</a> ");
        } else {
            let _ = write!(out, "<a href=\"{path}\">{words}</a> ");
        }
    }
    out.push_str("</nav>");
    if live {
        out.push_str("<p>Live: <span id=\"live\">connecting…</span></p>");
    }
    out.push_str("</header>\n");
    out
}

/// Outside text for the page: terminal escapes (control and bidirectional characters as
/// visible `\u` escapes) then HTML's.
pub fn shown(raw: &str) -> String {
    text(&escape_terminal(raw))
}

/// Outside text of several lines for a `<pre>`, as [`shown`] line by line: its line feeds
/// stay line feeds, every other control and bidirectional character is a visible escape.
pub fn shown_lines(raw: &str) -> String {
    raw.split('\n').map(shown).collect::<Vec<_>>().join("\n")
}

/// The inbox page: every waiting approval and question, newest first.
pub fn inbox(pending: &[PendingView], csrf: &str) -> String {
    let mut views: Vec<&PendingView> = pending.iter().collect();
    views.sort_by_key(|view| std::cmp::Reverse(view.approval.0));
    let mut body = header("inbox", true);
    body.push_str("<main>\n<h2>Inbox</h2>\n");
    let _ = write!(
        body,
        "<p id=\"empty\"{}>Nothing waits for you.</p>\n<ol id=\"inbox\">\n",
        if views.is_empty() { "" } else { " hidden" }
    );
    for view in views {
        body.push_str(&item(view, csrf));
    }
    body.push_str("</ol>\n</main>");
    page("boxmaker console: inbox", &body)
}

/// A page that says one thing (an error, a refusal).
pub fn message(title: &str, words: &str) -> String {
    page(
        title,
        &format!(
            "<main><h1>{}</h1><p class=\"message\">{}</p><p><a href=\"/\">Back to the inbox</a></p></main>",
            text(title),
            text(&escape_terminal(words))
        ),
    )
}

/// One waiting approval or question as an `<li>`, with its forms (each carrying `csrf`).
pub fn item(view: &PendingView, csrf: &str) -> String {
    let id = view.approval.0;
    let what = match view.kind {
        PendingKind::Approval => "approval",
        PendingKind::Question => "question",
    };
    let left = (view.expires.as_millis() - Timestamp::now().as_millis()).max(0) / 1000;
    let mut out = format!(
        "<li class=\"pending {what}\" id=\"pending-{id}\" data-approval=\"{id}\">\n\
         <h3>{what} {id}: <code class=\"tool\">{}</code> call {} of session <code class=\"session\">{}</code></h3>\n\
         <p class=\"expiry\">expires at <time>{}</time>, <span class=\"left\" data-expires=\"{}\">in {left} s</span></p>\n<dl>\n",
        text(&escape_terminal(&view.tool)),
        view.call_id,
        text(&escape_terminal(&view.session.to_string())),
        text(&view.expires.to_string()),
        view.expires.as_millis(),
    );
    if let Some(question) = &view.question {
        let _ = writeln!(
            out,
            "<dt>question</dt><dd class=\"question\">{}</dd>",
            text(&escape_terminal(question))
        );
        for (n, choice) in view.choices.iter().enumerate() {
            let _ = writeln!(
                out,
                "<dt>choice {}</dt><dd class=\"choice\">{}</dd>",
                n + 1,
                text(&escape_terminal(choice))
            );
        }
    } else {
        let _ = writeln!(
            out,
            "<dt>arguments</dt><dd class=\"arguments\">{}</dd>",
            arguments(&view.arguments)
        );
    }
    let _ = writeln!(
        out,
        "<dt>why</dt><dd class=\"why\">{}</dd>",
        text(&show::why(view))
    );
    for line in &view.provenance {
        let _ = writeln!(
            out,
            "<dt>value</dt><dd class=\"value\">{}</dd>",
            text(&escape_terminal(line))
        );
    }
    let _ = writeln!(
        out,
        "<dt>labels</dt><dd class=\"labels\">{}</dd>\n</dl>",
        text(&show::labels(view))
    );
    out.push_str(&forms(view, csrf));
    out.push_str("</li>\n");
    out
}

/// The arguments whole: pretty JSON when they parse (control and bidirectional characters as
/// `\uXXXX`), else the raw text escaped; folded when long, with their size in the summary.
pub fn arguments(raw: &str) -> String {
    let shown = match serde_json::from_str::<serde_json::Value>(raw)
        .and_then(|value| serde_json::to_string_pretty(&value))
    {
        Ok(pretty) => escape_unicode(&pretty).into_owned(),
        Err(_) => escape_terminal(raw).into_owned(),
    };
    let chars = shown.chars().count();
    let lines = shown.lines().count();
    let pre = format!("<pre>{}</pre>", text(&shown));
    if chars > FOLD_CHARS || lines > FOLD_LINES {
        format!(
            "<details><summary>{chars} characters in {lines} lines: open to read them all</summary>{pre}</details>"
        )
    } else {
        pre
    }
}

/// The buttons: approve once, for the session, refuse; for a question, the answer form and
/// one button per choice.
fn forms(view: &PendingView, csrf: &str) -> String {
    let id = view.approval.0;
    let hidden = format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\"><input type=\"hidden\" name=\"id\" value=\"{id}\">",
        text(csrf)
    );
    match view.kind {
        PendingKind::Approval => format!(
            "<div class=\"actions\">\
             <form method=\"post\" action=\"/approve\">{hidden}\
             <button class=\"approve-once\" name=\"scope\" value=\"once\">Approve once</button>\
             <button class=\"approve-session\" name=\"scope\" value=\"session\">Approve for the session</button></form>\
             <form method=\"post\" action=\"/refuse\">{hidden}<button class=\"refuse\">Refuse</button></form>\
             </div>\n"
        ),
        PendingKind::Question => {
            let mut out = format!(
                "<div class=\"actions\"><form method=\"post\" action=\"/answer\" class=\"answer\">{hidden}\
                 <label>Your answer <input name=\"text\" required autocomplete=\"off\"></label>\
                 <button class=\"answer\">Answer</button></form>"
            );
            for choice in &view.choices {
                let _ = write!(
                    out,
                    "<form method=\"post\" action=\"/answer\">{hidden}<button class=\"choose\" name=\"text\" value=\"{value}\">{shown}</button></form>",
                    value = text(choice),
                    shown = text(&escape_terminal(choice)),
                );
            }
            out.push_str("</div>\n");
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_in_outside_text_becomes_character_references() {
        assert_eq!(
            text("<img src=x onerror=\"a('b')\">&"),
            "&lt;img src=x onerror=&quot;a(&#39;b&#39;)&quot;&gt;&amp;"
        );
    }

    #[test]
    fn long_arguments_are_folded_whole_and_short_ones_shown_open() {
        let long = serde_json::json!({ "content": "x".repeat(2000) }).to_string();
        let shown = arguments(&long);
        assert!(shown.starts_with("<details><summary>"), "{shown}");
        assert!(shown.contains(&"x".repeat(2000)), "cut");
        let short = arguments(r#"{"path":"a\u202eb"}"#);
        assert!(short.starts_with("<pre>"), "{short}");
        assert!(short.contains("a\\u202Eb"), "{short}");
        assert_eq!(arguments("not json <b>"), "<pre>not json &lt;b&gt;</pre>");
        assert_eq!(
            shown_lines("- a <b>\n+ \u{202e}c\r"),
            "- a &lt;b&gt;\n+ \\u{202e}c\\r"
        );
    }
}
