//! `bx grants check` and `bx grants preset coding`: both work with no broker running.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use proto::dirs::Dirs;
use proto::text::escape_terminal;

use crate::Exit;
use crate::grant_text::{FileLines, acknowledged, toml_string};
use crate::owner::OwnerError;

/// The owner's home folder (`$HOME` when absolute, else `/`): what `~/` in a grant means.
pub(crate) fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// `bx grants check`: every problem and warning with file and line, and with the broker
/// running, every downstream tool against the grants; `json`: the same as one JSON object
/// ([`crate::check_json`]). Exit 1 on a problem, or a downstream tool changed or unpinned.
pub fn check(dirs: &Dirs, json: bool) -> Exit {
    let folder = dirs.grants();
    let loaded = policy::grants::load_dir(&folder, &home());
    if json {
        return crate::check_json::check(dirs, &folder, loaded);
    }
    match loaded {
        Ok(set) => {
            let mut files = FileLines::default();
            let (kept, shown): (Vec<_>, Vec<_>) = set
                .warnings
                .iter()
                .partition(|warning| acknowledged(warning, &mut files));
            for warning in &shown {
                println!("warning: {}", escape_terminal(&warning.to_string()));
            }
            let downstream = &set.downstream;
            println!(
                "{}: {} grant(s), no problems{}{}",
                folder.display(),
                set.grants.len() + downstream.tools.len() + downstream.servers.len(),
                match shown.len() {
                    0 => String::new(),
                    n => format!(", {n} warning(s) above"),
                },
                match kept.len() {
                    0 => String::new(),
                    n => format!(", {n} warning(s) kept as comments beside their lines"),
                }
            );
            check_downstream(downstream, dirs)
        }
        Err(problems) => {
            for problem in &problems {
                println!("problem: {}", escape_terminal(&problem.to_string()));
            }
            println!(
                "{}: {} problem(s); the broker refuses every call (GrantsInvalid) until they are fixed",
                folder.display(),
                problems.len()
            );
            Exit::Failed
        }
    }
}

/// The check of the grants folder of `dirs` as `bx grants check --json` makes it (what
/// `bx console`'s Grants view shows).
pub fn check_dirs(dirs: &Dirs) -> crate::check_json::Checked {
    let folder = dirs.grants();
    let loaded = policy::grants::load_dir(&folder, &home());
    crate::check_json::checked(dirs, &folder, loaded)
}

/// The downstream servers' tools against the grants, when the broker runs (only it starts
/// the servers); exit 1 when a named tool is not pinned or a pinned tool has changed.
fn check_downstream(grants: &policy::downstream::Downstream, dirs: &Dirs) -> Exit {
    match crate::downstream::report(grants, &dirs.owner_socket()) {
        Ok(report) => {
            let checked = crate::downstream::print(&report);
            if checked.unpinned > 0 {
                println!(
                    "{} downstream tool(s) named by a grant but not pinned: sessions do not see them until a grant pins their definition (`bx grants pin TOOL`)",
                    checked.unpinned
                );
            }
            if checked.changed > 0 {
                println!(
                    "{} downstream tool(s) changed since pinned: sessions do not see them until a grant pins their new definition (`bx grants pin TOOL`)",
                    checked.changed
                );
            }
            if checked.unpinned + checked.changed > 0 {
                Exit::Failed
            } else {
                Exit::Done
            }
        }
        Err(OwnerError::NoBroker(_)) => {
            if !grants.tools.is_empty() || !grants.servers.is_empty() {
                println!(
                    "the broker is not running: start it to see the downstream servers' tools and pins"
                );
            }
            Exit::Done
        }
        Err(error) => {
            println!(
                "the downstream servers' tools: {}",
                escape_terminal(&error.to_string())
            );
            Exit::Failed
        }
    }
}

/// A kind of project the coding preset recognises by a file at the workspace's top.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProjectKind {
    /// The kind's name, as the preset's comments and docs/GRANTS.md say it.
    pub name: &'static str,
    /// The files whose presence at the workspace's top marks this kind.
    pub markers: &'static [&'static str],
    /// The build and test command prefixes the preset grants for it: nothing that installs
    /// from the network (the box has none), nothing that publishes.
    pub commands: &'static [&'static str],
    /// The documentation hosts `docs-fetch` names for it.
    pub hosts: &'static [&'static str],
}

/// Every kind the preset knows, in the order its grant lists them (docs/GRANTS.md's table).
pub const PROJECT_KINDS: &[ProjectKind] = &[
    ProjectKind {
        name: "rust",
        markers: &["Cargo.toml"],
        commands: &[
            "cargo build",
            "cargo check",
            "cargo test",
            "cargo clippy",
            "cargo fmt",
        ],
        hosts: &["docs.rs", "crates.io", "doc.rust-lang.org"],
    },
    ProjectKind {
        name: "python",
        markers: &["pyproject.toml", "setup.py", "setup.cfg"],
        commands: &[
            "pytest",
            "python -m pytest",
            "python3 -m pytest",
            "python -m unittest",
            "python3 -m unittest",
        ],
        hosts: &["docs.python.org", "pypi.org"],
    },
    ProjectKind {
        name: "node",
        markers: &["package.json"],
        commands: &["npm test", "npm run build", "npx tsc"],
        hosts: &["nodejs.org", "developer.mozilla.org", "www.npmjs.com"],
    },
    ProjectKind {
        name: "go",
        markers: &["go.mod"],
        commands: &["go build", "go test", "go vet"],
        hosts: &["pkg.go.dev", "go.dev"],
    },
    ProjectKind {
        name: "make",
        markers: &["Makefile", "makefile", "GNUmakefile"],
        // The conventional targets by name as well: a word of a grant's prefix is the owner's,
        // so `make test` runs unasked after reading a README that mentions "test".
        commands: &["make", "make test", "make check", "make build"],
        hosts: &[],
    },
];

/// The commands every project's `shell` grant adds to its kinds' own: git's read-only
/// subcommands and the file viewers.
const COMMON_COMMANDS: &[&str] = &[
    "git status",
    "git diff",
    "git log",
    "ls",
    "cat",
    "wc",
    "head",
    "tail",
];

/// The hosts `docs-fetch` names whatever the project.
const COMMON_HOSTS: &[&str] = &["github.com", "*.github.com"];

/// The kinds of project at the top of `workspace`, in [`PROJECT_KINDS`]' order (several can be
/// present: a Python package with a Makefile).
pub fn project_kinds(workspace: &Path) -> Vec<&'static ProjectKind> {
    PROJECT_KINDS
        .iter()
        .filter(|kind| {
            kind.markers
                .iter()
                .any(|marker| workspace.join(marker).is_file())
        })
        .collect()
}

/// One command prefix as a line of the `commands` list; a prefix `bx grants check` warns about
/// carries the warning, word for word, as a comment beside it (see [`acknowledged`]).
fn command_line(prefix: &str) -> String {
    let warning = policy::shell::prefix_words(prefix)
        .ok()
        .and_then(|words| policy::shell::prefix_warning(&words));
    let value = toml_string(prefix);
    match warning {
        Some(warning) => format!("    {value}, # warning: {warning}\n"),
        None => format!("    {value},\n"),
    }
}

/// The `shell` grant of the coding preset for these kinds, offered where the full box is.
fn shell_grant(ws: &str, kinds: &[&ProjectKind]) -> String {
    let names: Vec<&str> = kinds.iter().map(|kind| kind.name).collect();
    let mut commands = String::new();
    for prefix in kinds
        .iter()
        .flat_map(|kind| kind.commands.iter())
        .chain(COMMON_COMMANDS)
    {
        commands.push_str(&command_line(prefix));
    }
    format!(
        r#"
# Commands in the workspace ({names} project): each runs in a fresh box holding the workspace
# (read-write), a read-only system and the toolchains of brokerd.toml's [sandbox] read_only,
# with no network and nothing else of this machine (boxmaker's own folders masked).
# The build and test commands run whatever the project's own files say (build.rs, a Makefile,
# package.json's scripts, conftest.py, a _test.go file), and the write grant above lets the
# agent change those files: the box, not the command's name, is what holds them in.
#
# Every workspace read is untrusted, and this grant says on_untrusted = "provenance": after
# a read, a command runs unasked when each of its words is yours (a prefix below, a word of
# your messages to loopd, a trusted result) or was never handed to the agent; a command with
# a word that only an untrusted result gave (a file, a test's output) waits for you
# (`bx approvals`, `bx watch`), naming the word and the call it came from. `bx approve ID`
# runs that one command. Results are untrusted too (a test's output can hold planted text).
#
# A line marked `# warning:` is a warning `bx grants check` gives for that prefix, kept here
# beside it; check does not repeat a warning its line carries word for word.
[[grant]]
id = "workspace-shell"
tool = "shell"
commands = [
{commands}]
paths = [{ws}]
class = "private"
on_untrusted = "provenance"
"#,
        names = names.join(", "),
    )
}

/// What the preset says instead where there is no full box.
const NO_SHELL: &str = "# No `shell` grant: this machine has no bubblewrap (or no user namespaces), so a command's\n# box would be Landlock alone, with the host's processes and sockets in view. Install\n# bubblewrap (`bx doctor` says what is missing) and write the preset again.\n";

/// What the preset says where the workspace shows no project it knows.
const NO_PROJECT: &str = "# No `shell` grant: the workspace has none of Cargo.toml, pyproject.toml, setup.py, setup.cfg,\n# package.json, go.mod or a Makefile at its top, so the preset knows no build or test command\n# to grant. Write the preset again once it has one, or add a shell grant (docs/GRANTS.md).\n";

/// Whether `shell` joins the coding preset: only where its commands run in the full box.
pub fn shell_in_preset() -> bool {
    sandbox::FileWalls::detect() == sandbox::FileWalls::Bubblewrap
}

/// The coding preset for `workspace` (an absolute folder) holding projects of `kinds`, with a
/// `shell` grant when `shell` (the full box is here) and `kinds` is not empty.
pub fn coding_preset(workspace: &Path, kinds: &[&ProjectKind], shell: bool) -> String {
    let ws = toml_string(&workspace.display().to_string());
    let (header, shell_part) = match (shell, kinds.is_empty()) {
        (false, _) => (NO_SHELL, String::new()),
        (true, true) => (NO_PROJECT, String::new()),
        (true, false) => (
            "# shell runs each command in a fresh box (`bx doctor` shows its walls).\n",
            shell_grant(&ws, kinds),
        ),
    };
    let hosts: Vec<String> = kinds
        .iter()
        .flat_map(|kind| kind.hosts.iter())
        .chain(COMMON_HOSTS)
        .map(|host| toml_string(host))
        .collect();
    format!(
        r#"# boxmaker grants: a starting set for coding in {shown}
# (written by `bx grants preset coding`). Edit freely: the broker reloads this folder when it
# changes, and `bx grants check` reports any problem with its file and line.
#
{header}
# Read anything in the workspace (the group read: read_file, grep, glob, list_files). Results
# are untrusted (the default): a file may hold text someone else planted, so side effects after
# it follow each grant's on_untrusted (for shell below: ask you about a command with a word
# only an untrusted result gave).
[[grant]]
id = "workspace-read"
tool = "read"
paths = [{ws}]
class = "private"

# Write files in the workspace (the group write: write_file, edit_file). Edits stay inside it
# and come back as diffs, so they still run after untrusted input.
[[grant]]
id = "workspace-write"
tool = "write"
paths = [{ws}]
class = "private"
untrusted = false
on_untrusted = "allow"

# Fetch documentation over https: asks you every time.
[[grant]]
id = "docs-fetch"
tool = "http_fetch"
hosts = [{hosts}]
class = "public"
approval = "ask"

# Ask another model (needs [consult] in brokerd.toml): asks you every time, since the
# question leaves the session.
[[grant]]
id = "second-opinion"
tool = "consult"
approval = "ask"

# Let the model ask you a question (`ask`); you answer with `bx answer` or in `bx watch`.
[[grant]]
id = "questions"
tool = "ask"
untrusted = false
class = "public"
{shell_part}"#,
        shown = workspace.display(),
        hosts = hosts.join(", "),
    )
}

/// The `[sandbox] read_only` line for brokerd.toml naming the toolchains found under `home`,
/// if any.
pub fn read_only_line(home: &Path) -> Option<String> {
    let found = sandbox::toolchains(home);
    if found.is_empty() {
        return None;
    }
    let list: Vec<String> = found
        .iter()
        .map(|p| toml_string(&p.display().to_string()))
        .collect();
    Some(format!("[sandbox]\nread_only = [{}]", list.join(", ")))
}

/// `bx grants preset coding --workspace DIR`: writes `grants/coding.toml`, never over a file.
pub fn preset_coding(dirs: &Dirs, workspace: &Path) -> Exit {
    let workspace = match workspace.canonicalize() {
        Ok(path) if path.is_dir() => path,
        Ok(path) => {
            eprintln!("bx: {} is not a folder", path.display());
            return Exit::Usage;
        }
        Err(e) => {
            eprintln!(
                "bx: the workspace {}: {e}; name an existing folder",
                workspace.display()
            );
            return Exit::Usage;
        }
    };
    let folder = dirs.grants();
    let file = folder.join("coding.toml");
    let shell = shell_in_preset();
    let kinds = project_kinds(&workspace);
    let text = coding_preset(&workspace, &kinds, shell);
    let parsed = policy::grants::parse_file(&text, &file, &home());
    if let Some(problem) = parsed.problems.first() {
        eprintln!("bx: the preset for this workspace has a problem: {problem}");
        return Exit::Failed;
    }
    if let Err(e) = std::fs::DirBuilder::new().recursive(true).create(&folder) {
        eprintln!("bx: cannot make {}: {e}", folder.display());
        return Exit::Failed;
    }
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&file);
    let mut out = match created {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            eprintln!(
                "bx: {} already exists; edit it, or remove it to write the preset again",
                file.display()
            );
            return Exit::Failed;
        }
        Err(e) => {
            eprintln!("bx: cannot write {}: {e}", file.display());
            return Exit::Failed;
        }
    };
    if let Err(e) = out.write_all(text.as_bytes()).and_then(|()| out.sync_all()) {
        eprintln!("bx: cannot write {}: {e}", file.display());
        return Exit::Failed;
    }
    let names: Vec<&str> = kinds.iter().map(|kind| kind.name).collect();
    println!(
        "wrote {} ({} grants, one per tool as `bx grants check` counts them, for {}: {}); check it with `bx grants check`",
        file.display(),
        parsed.grants.len(),
        workspace.display(),
        match names.len() {
            0 => "no project found".to_string(),
            _ => format!("project kinds {}", names.join(", ")),
        }
    );
    if !shell {
        println!("no shell grant: this machine has no full box (see `bx doctor`)");
        return Exit::Done;
    }
    if kinds.is_empty() {
        println!(
            "no shell grant: no Cargo.toml, pyproject.toml, setup.py, setup.cfg, package.json, go.mod or Makefile at the workspace's top"
        );
        return Exit::Done;
    }
    println!(
        "after a workspace read, a shell command with a word that only an untrusted result gave waits for you (`bx approvals`); the others run unasked: the shell grant says on_untrusted = \"provenance\""
    );
    match read_only_line(&home()) {
        Some(line) => println!(
            "shell's box sees only the workspace and the system; for commands like `cargo test`, add the toolchains found to brokerd.toml:\n{line}"
        ),
        None => println!(
            "shell's box sees only the workspace and the system; no toolchain found under {} (brokerd.toml's [sandbox] read_only names more folders)",
            home().display()
        ),
    }
    Exit::Done
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::{PROJECT_KINDS, coding_preset};

    #[test]
    fn the_preset_grants_shell_only_where_the_full_box_is_and_says_why_not() {
        let ws = Path::new("/home/owner/src/app");
        let rust: Vec<_> = PROJECT_KINDS.iter().take(1).collect();
        let with = coding_preset(ws, &rust, true);
        assert!(with.contains("id = \"workspace-shell\""), "{with}");
        let without = coding_preset(ws, &rust, false);
        assert!(!without.contains("tool = \"shell\""), "{without}");
        assert!(without.contains("No `shell` grant: this machine has no bubblewrap"));
        let no_project = coding_preset(ws, &[], true);
        assert!(!no_project.contains("tool = \"shell\""), "{no_project}");
        assert!(no_project.contains("the workspace has none of Cargo.toml"));
        for preset in [&with, &without, &no_project] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("coding.toml"), preset).unwrap();
            let loaded = policy::grants::load_dir(dir.path(), Path::new("/home/owner"));
            assert!(loaded.is_ok(), "{loaded:?}");
        }
    }
}
