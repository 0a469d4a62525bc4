//! The npm folders `scripts/test-deps` installs below `$BOXMAKER_NPM_DIR` (default
//! `/opt/boxmaker-npm`), each from `scripts/npm/NAME`'s pinned `package.json` and lock file.

use std::path::PathBuf;

/// The folder npm packages are installed below: `$BOXMAKER_NPM_DIR`, else `/opt/boxmaker-npm`.
pub fn root() -> PathBuf {
    std::env::var_os("BOXMAKER_NPM_DIR")
        .map_or_else(|| PathBuf::from("/opt/boxmaker-npm"), PathBuf::from)
}

/// The installed folder of `scripts/npm/NAME` (its `node_modules` inside).
pub fn folder(name: &str) -> PathBuf {
    root().join(name)
}

/// The program `program` that folder `name`'s packages install (`node_modules/.bin/PROGRAM`);
/// panics naming `scripts/test-deps` when it is not installed, so a test fails, never skips.
pub fn program(name: &str, program: &str) -> PathBuf {
    let path = folder(name).join("node_modules/.bin").join(program);
    assert!(
        path.exists(),
        "{} is missing: run scripts/test-deps (or set BOXMAKER_NPM_DIR)",
        path.display()
    );
    path
}
