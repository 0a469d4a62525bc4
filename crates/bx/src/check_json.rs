//! `bx grants check --json`: what the text check says, as one JSON object for scripts. Its
//! field names are stable and documented in docs/GRANTS.md ("Checking grants from a script").

use std::path::Path;

use policy::grants::{GrantSet, Problem};
use proto::dirs::Dirs;
use serde::Serialize;

use crate::Exit;
use crate::downstream::{Report, Status};
use crate::grant_text::{FileLines, acknowledged};
use crate::owner::OwnerError;

/// The whole answer (also what `bx console`'s Grants view shows).
#[derive(Serialize)]
pub struct Checked {
    /// The grants folder.
    pub folder: String,
    /// Whether the check passes (exit 0): no problem, no downstream tool unpinned or changed.
    pub ok: bool,
    /// How many grants are in force (0 with a problem).
    pub grants: usize,
    /// What keeps the folder from loading.
    pub problems: Vec<Found>,
    /// What loads but deserves a look.
    pub warnings: Vec<Found>,
    /// The downstream servers' tools; absent when the folder has a problem.
    pub downstream: Option<Downstream>,
}

/// A problem or warning with its place.
#[derive(Serialize)]
pub struct Found {
    /// The grant file.
    pub file: String,
    /// Its line, when known.
    pub line: Option<usize>,
    /// What is wrong.
    pub message: String,
    /// A warning the owner keeps as a comment beside its line (always false for a problem).
    pub kept: bool,
}

/// The downstream part.
#[derive(Serialize)]
pub struct Downstream {
    /// `running`, `not_running` (nothing more is known), or `error` (see `error`).
    pub broker: &'static str,
    /// Why the broker could not say, when `broker` is `error`.
    pub error: Option<String>,
    /// How many tools are `unpinned`.
    pub unpinned: usize,
    /// How many tools are `changed`.
    pub changed: usize,
    /// The servers and their tools.
    #[serde(flatten)]
    pub report: Report,
}

fn found(problem: &Problem, kept: bool) -> Found {
    Found {
        file: problem.file.display().to_string(),
        line: problem.line,
        message: problem.message.clone(),
        kept,
    }
}

/// Prints the check of `folder`, loaded as `loaded`, as one JSON object.
pub fn check(dirs: &Dirs, folder: &Path, loaded: Result<GrantSet, Vec<Problem>>) -> Exit {
    let answer = checked(dirs, folder, loaded);
    let ok = answer.ok;
    match serde_json::to_string_pretty(&answer) {
        Ok(text) => println!("{text}"),
        Err(e) => {
            eprintln!("bx: cannot write the check as JSON: {e}");
            return Exit::Failed;
        }
    }
    if ok { Exit::Done } else { Exit::Failed }
}

/// The check of `folder`, loaded as `loaded`.
pub fn checked(dirs: &Dirs, folder: &Path, loaded: Result<GrantSet, Vec<Problem>>) -> Checked {
    match loaded {
        Err(problems) => Checked {
            folder: folder.display().to_string(),
            ok: false,
            grants: 0,
            problems: problems.iter().map(|p| found(p, false)).collect(),
            warnings: Vec::new(),
            downstream: None,
        },
        Ok(set) => {
            let mut files = FileLines::default();
            let warnings = set
                .warnings
                .iter()
                .map(|w| found(w, acknowledged(w, &mut files)))
                .collect();
            let downstream = downstream(&set.downstream, dirs);
            let ok = downstream.broker != "error" && downstream.unpinned + downstream.changed == 0;
            Checked {
                folder: folder.display().to_string(),
                ok,
                grants: set.grants.len()
                    + set.downstream.tools.len()
                    + set.downstream.servers.len(),
                problems: Vec::new(),
                warnings,
                downstream: Some(downstream),
            }
        }
    }
}

fn downstream(grants: &policy::downstream::Downstream, dirs: &Dirs) -> Downstream {
    let (broker, error, report) = match crate::downstream::report(grants, &dirs.owner_socket()) {
        Ok(report) => ("running", None, report),
        Err(OwnerError::NoBroker(_)) => ("not_running", None, Report::default()),
        Err(e) => ("error", Some(e.to_string()), Report::default()),
    };
    Downstream {
        broker,
        error,
        unpinned: report.count(Status::Unpinned),
        changed: report.count(Status::Changed),
        report,
    }
}
