//! `bx grants pin TOOL...`: with the broker running, shows each named downstream tool's
//! definition as its server lists it now (escaped: it is text from outside; a changed tool as
//! the difference from its pinned definition), then writes its pin into every allow grant that
//! names it, in place (`pin_edit`: comments and layout kept), each file replaced whole, mode
//! 0600. Nothing is written unless every tool named can be pinned.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use globset::{Glob, GlobMatcher};
use policy::downstream::{Downstream, ToolGrant, split};
use proto::dirs::Dirs;
use proto::text::escape_terminal;

use crate::Exit;
use crate::downstream::{Report, Status, ToolReport, print_change, print_definition};
use crate::grants::home;
use crate::owner::OwnerError;
use crate::pin_edit::{Pin, with_pins};

/// What the owner named on the command line: one tool, or a glob of several, and perhaps
/// which definition (`TOOL@HASH`, the hash or its first 8 or more digits).
struct Named {
    written: String,
    tool: String,
    glob: Option<GlobMatcher>,
    hash: Option<String>,
}

/// The fewest digits of a hash that name a definition.
const HASH_DIGITS: usize = 8;

impl Named {
    fn parse(written: &str) -> Result<Named, String> {
        let (tool, hash) = match written.split_once('@') {
            Some((tool, hash)) => (tool, Some(hash.to_string())),
            None => (written, None),
        };
        if split(tool).is_none() {
            return Err(format!(
                "{} names no downstream tool: write server.tool, or a glob like server.*",
                escape_terminal(written)
            ));
        }
        if let Some(hash) = &hash
            && (hash.len() < HASH_DIGITS
                || !hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')))
        {
            return Err(format!(
                "{}: after @ comes a definition's hash, or its first {HASH_DIGITS} or more digits, as `bx grants check` prints it",
                escape_terminal(written)
            ));
        }
        let glob = if tool.contains(['*', '?', '[', '{']) {
            let glob = Glob::new(tool).map_err(|e| format!("{}: {e}", escape_terminal(written)))?;
            Some(glob.compile_matcher())
        } else {
            None
        };
        Ok(Named {
            written: written.to_string(),
            tool: tool.to_string(),
            glob,
            hash,
        })
    }

    fn matches(&self, tool: &ToolReport) -> bool {
        let named = match &self.glob {
            Some(glob) => glob.is_match(&tool.name),
            None => self.tool == tool.name,
        };
        named
            && self
                .hash
                .as_ref()
                .is_none_or(|prefix| tool.hash.starts_with(prefix.as_str()))
    }
}

/// `bx grants pin TOOL...`.
pub fn pin(dirs: &Dirs, written: &[String]) -> Exit {
    let mut named = Vec::new();
    for text in written {
        match Named::parse(text) {
            Ok(n) => named.push(n),
            Err(message) => {
                eprintln!("bx: {message}");
                return Exit::Usage;
            }
        }
    }
    let folder = dirs.grants();
    let set = match policy::grants::load_dir(&folder, &home()) {
        Ok(set) => set,
        Err(problems) => {
            for problem in &problems {
                eprintln!("problem: {}", escape_terminal(&problem.to_string()));
            }
            eprintln!(
                "bx: the grants in {} have {} problem(s); fix them first (`bx grants check`), then pin",
                folder.display(),
                problems.len()
            );
            return Exit::Failed;
        }
    };
    let report = match crate::downstream::report(&set.downstream, &dirs.owner_socket()) {
        Ok(report) => report,
        Err(error @ OwnerError::NoBroker(_)) => {
            eprintln!(
                "bx: nothing pinned: {error}. Only the running broker starts the downstream servers and knows their tools' definitions"
            );
            return Exit::NoBroker;
        }
        Err(error) => {
            eprintln!(
                "bx: nothing pinned: {}",
                escape_terminal(&error.to_string())
            );
            return Exit::Failed;
        }
    };
    let plan = match plan(&named, &report, &set.downstream) {
        Ok(plan) => plan,
        Err(refusals) => {
            for refusal in &refusals {
                eprintln!("bx: {refusal}");
            }
            eprintln!("bx: nothing pinned; no grant file was changed");
            return Exit::Failed;
        }
    };
    for note in &plan.notes {
        println!("{note}");
    }
    if plan.tools.is_empty() {
        println!("nothing to pin");
        return Exit::Done;
    }
    for tool in &plan.tools {
        show(tool);
    }
    for (file, pins) in &plan.files {
        if let Err(message) = write(file, pins) {
            eprintln!("bx: {} not changed: {message}", file.display());
            return Exit::Failed;
        }
        for pin in pins {
            println!(
                "pinned {} in grant {} ({})",
                escape_terminal(&pin.tool),
                escape_terminal(&pin.grant),
                file.display()
            );
        }
    }
    println!(
        "the broker reloads the grants folder: sessions see the pinned tools in their next catalog (`bx grants check` shows every tool)"
    );
    Exit::Done
}

/// What `bx grants pin` does: notes on what it leaves alone, the tools it pins (shown first),
/// and the pins by file.
struct Plan<'r> {
    notes: Vec<String>,
    tools: Vec<&'r ToolReport>,
    files: BTreeMap<PathBuf, Vec<Pin>>,
}

/// The plan for `named`, or every reason it cannot be carried out.
fn plan<'r>(
    named: &[Named],
    report: &'r Report,
    grants: &Downstream,
) -> Result<Plan<'r>, Vec<String>> {
    let mut refusals = Vec::new();
    let mut plan = Plan {
        notes: Vec::new(),
        tools: Vec::new(),
        files: BTreeMap::new(),
    };
    for name in named {
        let shown = escape_terminal(&name.written);
        let matched: Vec<&ToolReport> = report.tools().filter(|t| name.matches(t)).collect();
        if matched.is_empty() {
            refusals.push(no_such_tool(&shown, report));
            continue;
        }
        // Each tool once, with every definition the server's instances list for it now.
        let mut tools: Vec<Vec<&ToolReport>> = Vec::new();
        for tool in matched {
            match tools.iter_mut().find(|same| same[0].name == tool.name) {
                Some(same) => same.push(tool),
                None => tools.push(vec![tool]),
            }
        }
        for definitions in tools {
            let tool = definitions[0];
            if plan.tools.iter().any(|t| t.name == tool.name) {
                continue;
            }
            let tool_name = escape_terminal(&tool.name);
            let grant = escape_terminal(tool.grant.as_deref().unwrap_or(""));
            let refused = if definitions.len() > 1 {
                several(&tool_name, &definitions)
            } else {
                match tool.status {
                    Status::Pinned => {
                        plan.notes.push(format!(
                            "{tool_name}: already pinned by grant {grant}; nothing to write"
                        ));
                        continue;
                    }
                    Status::Denied => format!(
                        "{tool_name} is denied by grant {grant}: a denied tool is not pinned (remove the deny grant first if you mean to grant it)"
                    ),
                    Status::Ungranted => format!(
                        "no grant names {tool_name}: add a [[grant]] with tool = \"{tool_name}\" (or \"{}.*\") first, then pin it",
                        escape_terminal(split(&tool.name).map_or("server", |(server, _)| server))
                    ),
                    Status::Unpinned | Status::Changed => {
                        plan.tools.push(tool);
                        for grant in naming(grants, &tool.name) {
                            plan.files
                                .entry(grant.origin.file.clone())
                                .or_default()
                                .push(Pin {
                                    grant: grant.id.clone(),
                                    tool: tool.name.clone(),
                                    hash: tool.hash.clone(),
                                });
                        }
                        continue;
                    }
                }
            };
            // A glob pins what it can and says what it leaves; a name must be pinnable.
            if name.glob.is_some() {
                plan.notes.push(format!("left out of {shown}: {refused}"));
            } else {
                refusals.push(refused);
            }
        }
    }
    if refusals.is_empty() {
        Ok(plan)
    } else {
        Err(refusals)
    }
}

/// Why a tool listed with several definitions is not pinned by its name alone: a grant pins
/// one definition of a tool, and the owner chooses which.
fn several(tool_name: &str, definitions: &[&ToolReport]) -> String {
    let each: Vec<String> = definitions
        .iter()
        .map(|d| {
            let status = match d.status {
                Status::Pinned => "pinned",
                Status::Changed => "changed since pinned",
                _ => "not pinned",
            };
            format!("{} ({status})", d.hash.get(..12).unwrap_or(&d.hash))
        })
        .collect();
    format!(
        "{tool_name} has {} definitions now, listed by different running instances of its server (a session's instance may have changed it): {}; name the one to pin as {tool_name}@HASH (`bx grants check` shows each)",
        definitions.len(),
        each.join(", ")
    )
}

/// Why `shown` matches no tool: the servers and what they list.
fn no_such_tool(shown: &str, report: &Report) -> String {
    let servers: Vec<String> = report
        .servers
        .iter()
        .map(|s| match &s.error {
            Some(error) => format!(
                "{} (cannot list its tools: {})",
                escape_terminal(&s.name),
                escape_terminal(error)
            ),
            None => format!("{} ({} tools)", escape_terminal(&s.name), s.tools.len()),
        })
        .collect();
    if servers.is_empty() {
        format!("no downstream tool matches {shown}: brokerd.toml names no downstream server")
    } else {
        format!(
            "no downstream tool matches {shown}; the servers are {} (`bx grants check` lists their tools)",
            servers.join(", ")
        )
    }
}

/// The allow grants that name `full` (`server.tool`), one per table (a table naming several
/// patterns is several grants with one id and one place).
fn naming<'g>(grants: &'g Downstream, full: &str) -> Vec<&'g ToolGrant> {
    let Some((server, tool)) = split(full) else {
        return Vec::new();
    };
    let mut out: Vec<&ToolGrant> = Vec::new();
    for grant in grants
        .tools
        .iter()
        .filter(|g| !g.deny && g.names(server, tool))
    {
        if !out.iter().any(|g| g.id == grant.id) {
            out.push(grant);
        }
    }
    out
}

/// Shows the definition that is about to be pinned.
fn show(tool: &ToolReport) {
    let shown = escape_terminal(&tool.name);
    match tool.status {
        Status::Changed => {
            println!(
                "{shown}: changed since grant {} pinned it; its definition now:",
                escape_terminal(tool.grant.as_deref().unwrap_or(""))
            );
            print_change(tool);
        }
        _ => {
            println!("{shown}: its definition as its server lists it now:");
            print_definition(&tool.definition);
        }
    }
    println!("    pin: {}", tool.hash);
}

/// Writes `pins` into `file` in place: the new text must read back with no problem and pin
/// what it should; then it replaces the file whole (mode 0600).
fn write(file: &Path, pins: &[Pin]) -> Result<(), String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("cannot read it: {e}"))?;
    let edited = with_pins(&text, pins)?;
    let parsed = policy::grants::parse_file(&edited, file, &home());
    if let Some(problem) = parsed.problems.first() {
        return Err(format!(
            "with the pins it would have a problem: {}",
            escape_terminal(&problem.to_string())
        ));
    }
    let written = pins.iter().all(|pin| {
        parsed
            .downstream
            .tools
            .iter()
            .any(|g| g.id == pin.grant && g.pins.get(&pin.tool) == Some(&pin.hash))
    });
    if !written {
        return Err("the edited file does not read back with the pins".to_string());
    }
    // The place itself, so a grant file that is a link stays one.
    let place = std::fs::canonicalize(file).unwrap_or_else(|_| file.to_path_buf());
    sandbox::secret::write_secret(&place, edited.as_bytes()).map_err(|e| e.to_string())
}
