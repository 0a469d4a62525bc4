//! Finding the workspace's binaries for end-to-end tests, and refusing a stale one.

use std::path::{Path, PathBuf};
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
                "{} is missing: run `cargo build --workspace --bins` first",
                path.display()
            ),
            BinaryError::Stale { binary, source } => write!(
                f,
                "{} is older than {}: run `cargo build --workspace --bins` again",
                binary.display(),
                source.display()
            ),
        }
    }
}

impl std::error::Error for BinaryError {}

/// The path of the workspace binary `name` in the target folder of the running test, checked
/// to exist and to be newer than every `src` file of the workspace's crates.
pub fn binary(name: &str) -> Result<PathBuf, BinaryError> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace.join("target"));
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let path = target.join(profile).join(name);
    let built = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .map_err(|_| BinaryError::Missing(path.clone()))?;
    if let Some((source, modified)) = newest_source(&workspace.join("crates"))
        && modified > built
    {
        return Err(BinaryError::Stale {
            binary: path,
            source,
        });
    }
    Ok(path)
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
