//! `decide`, row by row: each reason it can give, each grant field and each default, and the
//! path rules (`..`, symbolic links, protected folders, prefix siblings, `~`, globs).

use std::fs;
use std::path::{Path, PathBuf};

use policy::args::{ToolName, parse};
use policy::decide::{Decision, Labels, Protected, decide};
use policy::grants::{Grant, parse_file};
use proto::{DenyReason, Timestamp};

/// A temporary tree: `root/notes/a.md`, `root/notes-private/b.md`, `root/boxmaker/grants/`.
struct Tree {
    dir: tempfile::TempDir,
}

impl Tree {
    fn new() -> Tree {
        let dir = testkit::temp_dir();
        for folder in ["notes", "notes-private", "boxmaker/grants", "work"] {
            fs::create_dir_all(dir.path().join(folder)).unwrap();
        }
        fs::write(dir.path().join("notes/a.md"), "a").unwrap();
        fs::write(dir.path().join("notes-private/b.md"), "b").unwrap();
        Tree { dir }
    }

    fn root(&self) -> PathBuf {
        self.dir.path().canonicalize().unwrap()
    }

    fn path(&self, rest: &str) -> String {
        self.root().join(rest).display().to_string()
    }

    fn grants(&self, text: &str) -> Vec<Grant> {
        let text = text.replace("{root}", &self.root().display().to_string());
        let parsed = parse_file(&text, Path::new("g.toml"), &self.root().join("home"));
        assert!(parsed.problems.is_empty(), "{:?}", parsed.problems);
        parsed.grants
    }

    fn protected(&self) -> Protected {
        Protected::new(&[self.root().join("boxmaker")])
    }

    fn decide(
        &self,
        grants: &[Grant],
        tool: ToolName,
        arguments: &str,
        labels: Labels,
    ) -> Decision {
        let args = parse(tool, arguments).unwrap();
        decide(&args, grants, labels, now(), &self.protected())
    }

    fn read(&self, grants: &[Grant], path: &str) -> Decision {
        let arguments = serde_json::json!({ "path": path }).to_string();
        self.decide(grants, ToolName::ReadFile, &arguments, Labels::default())
    }
}

fn now() -> Timestamp {
    Timestamp::parse("2026-11-30T12:00:00Z").unwrap()
}

fn reason(decision: &Decision) -> Option<DenyReason> {
    match decision {
        Decision::Deny(denied) => Some(denied.reason),
        _ => None,
    }
}

fn allowed_grant(decision: &Decision) -> Option<&str> {
    match decision {
        Decision::Allow(allowed) => Some(allowed.grant.as_str()),
        _ => None,
    }
}

const NOTES: &str = "[[grant]]\nid = \"notes\"\ntool = \"read_file\"\npaths = [\"{root}/notes\"]\n";

mod coding;
mod git;
mod hosts_and_shell;
mod indexed;
mod jobs;
mod network;
mod on_arguments;
mod paths;
mod provenance;
mod rails;
mod reasons;
mod writes;
