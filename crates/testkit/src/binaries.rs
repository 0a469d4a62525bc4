//! Finding the workspace's binaries for end-to-end tests, built by cargo when missing or stale.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

/// Why a binary cannot be used.
#[derive(Debug)]
pub enum BinaryError {
    /// It has not been built.
    Missing(PathBuf),
    /// A source file is newer than the binary.
    Stale {
        /// The binary.
        binary: PathBuf,
        /// The newer source file.
        source: PathBuf,
    },
}

impl std::fmt::Display for BinaryError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BinaryError::Missing(path) => write!(
                f,
                "{} is missing and `cargo build` could not make it: run `cargo build --workspace --bins`",
                path.display()
            ),
            BinaryError::Stale { binary, source } => write!(
                f,
                "{} is older than {} and `cargo build` could not rebuild it: run `cargo build --workspace --bins`",
                binary.display(),
                source.display()
            ),
        }
    }
}

impl std::error::Error for BinaryError {}

/// The path of the workspace binary `name` in the target folder of the running test. When it
/// is missing or older than a `src` file of the workspace's crates, cargo is asked once to
/// build it (cargo knows which sources it depends on; a binary cargo finds up to date is used
/// as it is); if that fails, the error says which command to run.
pub fn binary(name: &str) -> Result<PathBuf, BinaryError> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let release = !cfg!(debug_assertions);
    let path = target
        .join(if release { "release" } else { "debug" })
        .join(name);
    let checked = check(&path, &workspace);
    if checked.is_ok() || cargo_build(&workspace, name, release) {
        return Ok(path);
    }
    checked.map(|()| path)
}

/// Whether `path` exists and is newer than every source file of the workspace's crates.
fn check(path: &Path, workspace: &Path) -> Result<(), BinaryError> {
    let built = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .map_err(|_| BinaryError::Missing(path.to_path_buf()))?;
    if let Some((source, modified)) = newest_source(&workspace.join("crates"))
        && modified > built
    {
        return Err(BinaryError::Stale {
            binary: path.to_path_buf(),
            source,
        });
    }
    Ok(())
}

/// `cargo build --bin name` in the test's profile, once per binary per test process.
fn cargo_build(workspace: &Path, name: &str, release: bool) -> bool {
    static BUILT: Mutex<Vec<(String, bool)>> = Mutex::new(Vec::new());
    let mut built = BUILT.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some((_, ok)) = built.iter().find(|(n, _)| n == name) {
        return *ok;
    }
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut command = Command::new(cargo);
    command
        .current_dir(workspace)
        .args(["build", "--quiet", "--bin", name]);
    if release {
        command.arg("--release");
    }
    let ok = command.status().is_ok_and(|status| status.success());
    built.push((name.to_string(), ok));
    ok
}

fn newest_source(crates: &Path) -> Option<(PathBuf, SystemTime)> {
    let mut newest: Option<(PathBuf, SystemTime)> = None;
    let mut stack: Vec<PathBuf> = std::fs::read_dir(crates)
        .ok()?
        .flatten()
        .map(|e| e.path().join("src"))
        .collect();
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if let Ok(modified) = entry.metadata().and_then(|m| m.modified())
                && newest.as_ref().is_none_or(|(_, t)| modified > *t)
            {
                newest = Some((path, modified));
            }
        }
    }
    newest
}
