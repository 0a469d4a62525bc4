//! The build script of `loopd` and `bx` (and part of `brokerd`'s): sets `BOXMAKER_BUILD_ID`, a hash of every
//! source file of the workspace's crates, `Cargo.lock` and the profile, which each binary
//! prints in `--version`. Binaries built from the same tree with the same profile print the
//! same id; `bx demo` refuses to run a `brokerd` or `loopd` whose id is not its own.

use std::collections::hash_map::DefaultHasher;
use std::hash::Hasher;
use std::path::{Path, PathBuf};

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

/// Sets `BOXMAKER_BUILD_ID` for the crate being built.
pub fn main() {
    let manifest = std::env::var_os("CARGO_MANIFEST_DIR").map(PathBuf::from);
    let workspace = manifest
        .as_deref()
        .and_then(|m| m.parent())
        .and_then(|crates| crates.parent())
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let crates = workspace.join("crates");
    let mut sources = Vec::new();
    if let Ok(entries) = std::fs::read_dir(&crates) {
        for entry in entries.flatten() {
            let src = entry.path().join("src");
            println!("cargo:rerun-if-changed={}", src.display());
            files(&src, &mut sources);
        }
    }
    let lock = workspace.join("Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock.display());
    sources.push(lock);
    sources.sort();
    // SipHash with fixed keys: the same bytes give the same id in every build script.
    let mut hasher = DefaultHasher::new();
    hasher.write(std::env::var("PROFILE").unwrap_or_default().as_bytes());
    for path in &sources {
        hasher.write(
            path.strip_prefix(&workspace)
                .unwrap_or(path)
                .as_os_str()
                .as_encoded_bytes(),
        );
        hasher.write(&std::fs::read(path).unwrap_or_default());
    }
    println!("cargo:rustc-env=BOXMAKER_BUILD_ID={:016x}", hasher.finish());
}
