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

/// The `[[mcp.servers]]` table of PyPI `mcp-server-git` as server `git` (its program and the
/// folders its Python needs read-only), with `keys` (TOML lines) added; panics naming
/// `scripts/test-deps` when it is not installed.
pub fn mcp_git_server(keys: &str) -> String {
    let venv = mcp_git_venv();
    let program = venv.join("bin/mcp-server-git");
    assert!(
        program.exists(),
        "{} is missing: run scripts/test-deps",
        program.display()
    );
    format!(
        "[[mcp.servers]]\nname = \"git\"\ncommand = [{:?}]\nread_only = {:?}\n{keys}\n",
        program.display().to_string(),
        python_folders(&venv),
    )
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
