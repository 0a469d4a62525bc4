//! The Python venvs `scripts/test-deps` installs (the official MCP SDK, `mcp-server-git`), and
//! what a box needs to run one of their programs.

use std::path::{Path, PathBuf};

/// The venv named by `variable`, else `default`.
pub fn venv(variable: &str, default: &str) -> PathBuf {
    std::env::var_os(variable).map_or_else(|| PathBuf::from(default), PathBuf::from)
}

/// The venv of PyPI `mcp-server-git`.
pub fn mcp_git_venv() -> PathBuf {
    venv("BOXMAKER_MCP_GIT_VENV", "/opt/boxmaker-mcp-git")
}

/// The folders a venv's Python needs in a box, to bind read-only: the venv and the Python it
/// was made from (`sys.base_prefix`, which the venv's `bin/python` links into).
pub fn python_folders(venv: &Path) -> Vec<String> {
    let output = match std::process::Command::new(venv.join("bin/python"))
        .args(["-c", "import sys; print(sys.base_prefix)"])
        .output()
    {
        Ok(output) => output,
        Err(e) => panic!("{}: {e} (run scripts/test-deps)", venv.display()),
    };
    let base = String::from_utf8_lossy(&output.stdout).trim().to_string();
    vec![venv.display().to_string(), base]
}
