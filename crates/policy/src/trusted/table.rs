//! The table of trusted places: each place a program running outside any box reads as its
//! configuration or runs, where it lies and what reads it.
//!
//! To add a place, add a row: its [`Anchor`], its path (components separated by `/`, a
//! component may hold one `*`, as `python3*`), its [`Kind`] and what reads it. Every write
//! check, every box and docs/GRANTS.md follow the table.

/// Where a place lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Anchor {
    /// Relative to the owner's home folder (`~/.bashrc`).
    Home,
    /// Relative to the owner's configuration folder: `~/.config`, and `$XDG_CONFIG_HOME` too
    /// when it is set elsewhere.
    Config,
    /// Wherever these components appear in a path (a workspace's `.claude`, any
    /// `.vscode/settings.json`); a box keeps those at the top of each read-write folder and of
    /// the repository holding it.
    Workspace,
}

/// What a place is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A file.
    File,
    /// A folder, kept whole with everything below it.
    Folder,
    /// A git directory (`.git`): git's own rules (see [`crate::git`]) say which of its entries
    /// change what git runs (`config`, `config.worktree`, `hooks`, `info/attributes`, or a
    /// `.git` file pointing elsewhere); objects, refs, the index and `HEAD` stay writable.
    GitDir,
}

/// One row of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrustedPlace {
    /// Where it lies.
    pub anchor: Anchor,
    /// Its path from its anchor, components separated by `/`.
    pub path: &'static str,
    /// A file, a folder or a git directory.
    pub kind: Kind,
    /// The program that reads or runs it outside any box.
    pub read_by: &'static str,
}

const fn home(path: &'static str, kind: Kind, read_by: &'static str) -> TrustedPlace {
    TrustedPlace {
        anchor: Anchor::Home,
        path,
        kind,
        read_by,
    }
}

const fn config(path: &'static str, kind: Kind, read_by: &'static str) -> TrustedPlace {
    TrustedPlace {
        anchor: Anchor::Config,
        path,
        kind,
        read_by,
    }
}

const fn workspace(path: &'static str, kind: Kind, read_by: &'static str) -> TrustedPlace {
    TrustedPlace {
        anchor: Anchor::Workspace,
        path,
        kind,
        read_by,
    }
}

use Kind::{File, Folder, GitDir};

/// Every trusted place. A floor, not a ceiling: any file that a program running outside the
/// box reads as its configuration or runs belongs here.
pub const PLACES: &[TrustedPlace] = &[
    // git: what it runs (hooks, `core.fsmonitor`, filters, `diff.external`, aliases).
    workspace(".git", GitDir, "git"),
    home(".gitconfig", File, "git"),
    config("git", Folder, "git"),
    // Shells' start-up files.
    home(".bashrc", File, "bash"),
    home(".bash_profile", File, "bash"),
    home(".bash_login", File, "bash"),
    home(".bash_logout", File, "bash"),
    home(".profile", File, "sh and bash"),
    home(".zshrc", File, "zsh"),
    home(".zshenv", File, "zsh"),
    home(".zprofile", File, "zsh"),
    home(".zlogin", File, "zsh"),
    config("fish", Folder, "fish"),
    // Remote logins into this account, and ssh's own settings (`ProxyCommand`).
    home(".ssh", Folder, "ssh and sshd"),
    // Programs found on `PATH` or loaded by others.
    home(".local/bin", Folder, "the shell, through PATH"),
    home(
        ".local/lib/python3*/site-packages",
        Folder,
        "python (.pth files)",
    ),
    config("systemd/user", Folder, "systemd --user"),
    config("autostart", Folder, "the desktop session"),
    // Agents' and editors' own settings in the home folder (a workspace row below applies
    // there too: `~/.claude`, `~/.codex`, `~/.cursor`, `~/.gemini`, `~/.cargo/config.toml`).
    home(".claude.json", File, "Claude Code"),
    config("goose", Folder, "Goose"),
    config("opencode", Folder, "opencode"),
    config("Code/User", Folder, "VS Code"),
    config("nvim", Folder, "Neovim"),
    home(".vimrc", File, "Vim"),
    home(".emacs", File, "Emacs"),
    home(".emacs.d", Folder, "Emacs"),
    // A workspace's settings that programs run from it read.
    workspace(".envrc", File, "direnv"),
    workspace(".pre-commit-config.yaml", File, "pre-commit"),
    workspace(".claude", Folder, "Claude Code"),
    workspace(".mcp.json", File, "Claude Code and other MCP clients"),
    workspace(".codex", Folder, "Codex"),
    workspace(".cursor", Folder, "Cursor"),
    workspace(".gemini", Folder, "Gemini CLI"),
    workspace(".vscode/settings.json", File, "VS Code"),
    workspace(".vscode/tasks.json", File, "VS Code"),
    workspace(".vscode/launch.json", File, "VS Code"),
    workspace(".idea", Folder, "JetBrains IDEs"),
    workspace(".devcontainer", Folder, "dev containers"),
    workspace(".cargo/config.toml", File, "cargo (rustc-wrapper)"),
    workspace(".cargo/config", File, "cargo (rustc-wrapper)"),
];
