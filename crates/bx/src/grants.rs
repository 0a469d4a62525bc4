//! `bx grants check` and `bx grants preset coding`: both work with no broker running.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use proto::dirs::Dirs;
use proto::text::escape_terminal;

use crate::Exit;
use crate::owner::OwnerError;

fn home() -> PathBuf {
    std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/"))
}

/// `bx grants check`: every problem and warning with file and line.
pub fn check(dirs: &Dirs) -> Exit {
    let folder = dirs.grants();
    match policy::grants::load_dir(&folder, &home()) {
        Ok(set) => {
            for warning in &set.warnings {
                println!("warning: {}", escape_terminal(&warning.to_string()));
            }
            let downstream = &set.downstream;
            println!(
                "{}: {} grant(s), no problems{}",
                folder.display(),
                set.grants.len() + downstream.tools.len() + downstream.servers.len(),
                match set.warnings.len() {
                    0 => String::new(),
                    n => format!(", {n} warning(s) above"),
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

/// The downstream servers' tools against the grants, when the broker runs (only it starts
/// the servers); exit 1 when a pinned tool has changed.
fn check_downstream(grants: &policy::downstream::Downstream, dirs: &Dirs) -> Exit {
    match crate::downstream::check(grants, &dirs.owner_socket()) {
        Ok(checked) if checked.changed > 0 => {
            println!(
                "{} downstream tool(s) changed since pinned: sessions do not see them until a grant pins their new definition",
                checked.changed
            );
            Exit::Failed
        }
        Ok(_) => Exit::Done,
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

/// The `shell` grant of the coding preset, offered where the full box is available.
const SHELL_GRANT: &str = r#"
# Commands in the workspace: each runs in a fresh box holding the workspace (read-write), a
# read-only system and the toolchains of brokerd.toml's [sandbox] read_only, with no network
# and nothing else of this machine (boxmaker's own folders masked). Results are untrusted (a
# test's output can hold planted text), so after untrusted input a command asks you.
[[grant]]
id = "workspace-shell"
tool = "shell"
commands = ["cargo build", "cargo check", "cargo test", "cargo clippy", "cargo fmt", "git status", "git diff", "git log", "ls", "cat", "wc", "head", "tail"]
paths = [{ws}]
class = "private"
"#;

/// What the preset says instead where there is no full box.
const NO_SHELL: &str = "# No `shell` grant: this machine has no bubblewrap (or no user namespaces), so a command's\n# box would be Landlock alone, with the host's processes and sockets in view. Install\n# bubblewrap (`bx doctor` says what is missing) and write the preset again.\n";

/// Whether `shell` joins the coding preset: only where its commands run in the full box.
pub fn shell_in_preset() -> bool {
    sandbox::FileWalls::detect() == sandbox::FileWalls::Bubblewrap
}

/// The coding preset for `workspace` (an absolute folder), with a `shell` grant when `shell`.
pub fn coding_preset(workspace: &Path, shell: bool) -> String {
    let ws = toml_string(&workspace.display().to_string());
    let shell_part = if shell {
        SHELL_GRANT.replace("{ws}", &ws)
    } else {
        String::new()
    };
    let header = if shell {
        "# shell runs each command in a fresh box (`bx doctor` shows its walls).\n"
    } else {
        NO_SHELL
    };
    format!(
        r#"# boxmaker grants: a starting set for coding in {shown}
# (written by `bx grants preset coding`). Edit freely: the broker reloads this folder when it
# changes, and `bx grants check` reports any problem with its file and line.
#
{header}
# Read anything in the workspace (the group read: read_file, grep, glob, list_files). Results
# are untrusted (the default): a file may hold text someone else planted, so side effects after
# it follow each grant's on_untrusted.
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
hosts = ["docs.rs", "crates.io", "doc.rust-lang.org", "github.com", "*.github.com"]
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

/// `text` as a TOML basic string, every character a terminal acts on written as TOML's
/// `\uXXXX` (`proto::text::needs_escape`: C0 and C1 controls, DEL, the bidirectional
/// controls), so the line is valid TOML, copies as the same value, and shows unambiguously.
pub(crate) fn toml_string(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if proto::text::needs_escape(c) => {
                out.push_str(&format!("\\u{:04X}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
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
    let text = coding_preset(&workspace, shell);
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
    println!(
        "wrote {} ({} grants for {}); check it with `bx grants check`",
        file.display(),
        parsed.grants.len(),
        workspace.display()
    );
    if shell {
        match read_only_line(&home()) {
            Some(line) => println!(
                "shell's box sees only the workspace and the system; for commands like `cargo test`, add the toolchains found to brokerd.toml:\n{line}"
            ),
            None => println!(
                "shell's box sees only the workspace and the system; no toolchain found under {} (brokerd.toml's [sandbox] read_only names more folders)",
                home().display()
            ),
        }
    } else {
        println!("no shell grant: this machine has no full box (see `bx doctor`)");
    }
    Exit::Done
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::coding_preset;

    #[test]
    fn the_preset_grants_shell_only_where_the_full_box_is_and_says_why_not() {
        let ws = Path::new("/home/owner/src/app");
        let with = coding_preset(ws, true);
        assert!(with.contains("id = \"workspace-shell\""), "{with}");
        let without = coding_preset(ws, false);
        assert!(!without.contains("tool = \"shell\""), "{without}");
        assert!(without.contains("No `shell` grant: this machine has no bubblewrap"));
        for preset in [&with, &without] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join("coding.toml"), preset).unwrap();
            let loaded = policy::grants::load_dir(dir.path(), Path::new("/home/owner"));
            assert!(loaded.is_ok(), "{loaded:?}");
        }
    }
}
