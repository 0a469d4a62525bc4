//! The Grants view: what `bx grants check` says, through the same code
//! ([`crate::grants::check_dirs`]): each problem and warning with its file and line, and
//! each downstream server's tools with their pin state; a changed definition shows its
//! difference from the pinned one.

use std::fmt::Write;

use hyper::{Response, StatusCode};
use proto::dirs::Dirs;

use super::broker;
use super::http::{Body, html, no_broker};
use super::page::{self, header, shown, shown_lines};
use crate::check_json::{Checked, Found};
use crate::downstream::{ServerReport, Status, change, pin_line, pretty};
use crate::grants::check_dirs;

/// `GET /grants`.
pub async fn view(dirs: Dirs) -> Response<Body> {
    let checked = match broker::blocking(move || Ok(check_dirs(&dirs))).await {
        Ok(checked) => checked,
        Err(message) => return no_broker(&message),
    };
    html(
        StatusCode::OK,
        page::page("boxmaker console: grants", &render(&checked)),
    )
}

fn status_words(status: Status) -> &'static str {
    match status {
        Status::Pinned => "pinned",
        Status::Unpinned => "unpinned",
        Status::Changed => "changed",
        Status::Denied => "denied",
        Status::Ungranted => "ungranted",
    }
}

fn render(checked: &Checked) -> String {
    let mut body = header("grants", false);
    body.push_str("<main>\n<h2>Grants</h2>\n");
    let _ = writeln!(
        body,
        "<p id=\"verdict\" class=\"{}\"><code>{}</code>: {} grant(s) in force, {} problem(s), {} warning(s); the check {}.</p>",
        if checked.ok { "holds" } else { "broken" },
        shown(&checked.folder),
        checked.grants,
        checked.problems.len(),
        checked.warnings.len(),
        if checked.ok {
            "passes"
        } else {
            "fails (bx grants check exits 1)"
        },
    );
    if !checked.problems.is_empty() {
        body.push_str(
            "<p>Every call is refused (GrantsInvalid) until these are fixed:</p>\n<ul id=\"problems\">\n",
        );
        for found in &checked.problems {
            item(&mut body, "problem", found);
        }
        body.push_str("</ul>\n");
    }
    if !checked.warnings.is_empty() {
        body.push_str("<ul id=\"warnings\">\n");
        for found in &checked.warnings {
            item(&mut body, "warning", found);
        }
        body.push_str("</ul>\n");
    }
    if let Some(downstream) = &checked.downstream {
        body.push_str("<h3>Downstream servers</h3>\n");
        match downstream.broker {
            "not_running" => body.push_str(
                "<p>The broker is not running: start it to see the downstream servers' tools.</p>\n",
            ),
            "error" => {
                let _ = writeln!(
                    body,
                    "<p>The downstream servers' tools: {}</p>",
                    shown(downstream.error.as_deref().unwrap_or(""))
                );
            }
            _ => {}
        }
        if downstream.report.servers.is_empty() && downstream.broker == "running" {
            body.push_str("<p>brokerd.toml names no downstream MCP server.</p>\n");
        }
        for server in &downstream.report.servers {
            server_section(&mut body, server);
        }
        for name in &downstream.report.unlisted_servers {
            let _ = writeln!(
                body,
                "<p class=\"warning\">The grants name downstream server <code>{}</code>, which brokerd.toml's [[mcp.servers]] does not list.</p>",
                shown(name)
            );
        }
    }
    body.push_str("</main>");
    body
}

fn item(body: &mut String, what: &str, found: &Found) {
    let place = match found.line {
        Some(line) => format!("{}:{line}", found.file),
        None => found.file.clone(),
    };
    let _ = writeln!(
        body,
        "<li class=\"{what}{}\"><code class=\"place\">{}</code> {what}: {}{}</li>",
        if found.kept { " kept" } else { "" },
        shown(&place),
        shown(&found.message),
        if found.kept {
            " (kept as a comment beside its line)"
        } else {
            ""
        }
    );
}

fn server_section(body: &mut String, server: &ServerReport) {
    let _ = writeln!(
        body,
        "<section class=\"server\"><h4>server <code>{}</code></h4>",
        shown(&server.name)
    );
    if let Some(error) = &server.error {
        let _ = writeln!(
            body,
            "<p>It cannot list its tools: {}</p></section>",
            shown(error)
        );
        return;
    }
    body.push_str(
        "<table class=\"tools\"><thead><tr><th>tool</th><th>state</th><th>grant</th><th>definition</th></tr></thead><tbody>\n",
    );
    for tool in &server.tools {
        let definition = match (tool.status, change(tool)) {
            (Status::Changed, Some(diff)) => format!(
                "<p>Changed since pinned; hidden until pinned again:</p><pre class=\"diff\">{}</pre>",
                shown_lines(&diff)
            ),
            (Status::Changed, None) => format!(
                "<p>Changed; the pinned definition was never seen by this broker. Now:</p><pre>{}</pre>",
                shown_lines(&pretty(&tool.definition))
            ),
            _ => format!(
                "<details><summary>definition</summary><pre>{}</pre></details>",
                shown_lines(&pretty(&tool.definition))
            ),
        };
        let pin = match tool.status {
            Status::Pinned | Status::Denied => String::new(),
            _ => format!("<p>its pin: <code>{}</code></p>", shown(&pin_line(tool))),
        };
        let _ = writeln!(
            body,
            "<tr class=\"tool {status}\"><td><code>{name}</code></td><td class=\"state\">{status}{read}</td><td>{grant}</td><td>{definition}{pin}</td></tr>",
            status = status_words(tool.status),
            name = shown(&tool.name),
            read = if tool.read_only { " (a read)" } else { "" },
            grant = shown(tool.grant.as_deref().unwrap_or("")),
        );
    }
    body.push_str("</tbody></table></section>\n");
}
