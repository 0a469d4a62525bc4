//! boxmaker's three folders, each a flag, a variable and an XDG default: one meaning for
//! `--config-dir`, `--state-dir` and `--runtime-dir` in every binary (brokerd, loopd, bx).
//!
//! | folder | flag | variable | default |
//! |---|---|---|---|
//! | config (`brokerd.toml`, `grants/`) | `--config-dir` | `BOXMAKER_CONFIG_DIR` | `$XDG_CONFIG_HOME/boxmaker`, else `~/.config/boxmaker` |
//! | state (ledger, audit log, loopd's `sessions/`) | `--state-dir` | `BOXMAKER_STATE_DIR` | `$XDG_STATE_HOME/boxmaker`, else `~/.local/state/boxmaker` |
//! | runtime (`agent.sock`, `owner.sock`) | `--runtime-dir` | `BOXMAKER_RUNTIME_DIR` | `$XDG_RUNTIME_DIR/boxmaker`, else `/tmp/boxmaker-<uid>` |

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// The agent socket's file name in the runtime folder.
pub const AGENT_SOCKET: &str = "agent.sock";
/// The owner socket's file name in the runtime folder.
pub const OWNER_SOCKET: &str = "owner.sock";
/// The ledger's file name in the state folder.
pub const LEDGER_FILE: &str = "ledger.sqlite";
/// The audit log's file name in the state folder.
pub const AUDIT_FILE: &str = "audit.jsonl";
/// The lock file (holding the broker's pid) in the state folder.
pub const LOCK_FILE: &str = "brokerd.lock";
/// The longest path a Unix socket may have, in bytes (`sun_path` is 108 with its NUL).
pub const MAX_SOCKET_PATH: usize = 107;

/// The folders a broker (or `bx`, or loopd) works with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dirs {
    /// `brokerd.toml` and `grants/`.
    pub config: PathBuf,
    /// The ledger, the audit log and loopd's `sessions/`.
    pub state: PathBuf,
    /// The sockets.
    pub runtime: PathBuf,
}

/// Why a folder cannot be named.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirsError {
    /// No flag, variable or `HOME` says where the folder is.
    #[error("cannot tell where the {which} folder is: set {flag}, {variable} or HOME")]
    Unknown {
        /// Which folder.
        which: &'static str,
        /// Its flag.
        flag: &'static str,
        /// Its variable.
        variable: &'static str,
    },
    /// A folder given is not absolute.
    #[error("the {which} folder {path} must be an absolute path")]
    NotAbsolute {
        /// Which folder.
        which: &'static str,
        /// The path given.
        path: String,
    },
}

/// One folder as given: a flag's value, else the variable's, else the default.
fn pick(
    flag_value: Option<&Path>,
    env: &dyn Fn(&str) -> Option<OsString>,
    variable: &'static str,
    default: impl FnOnce() -> Option<PathBuf>,
    which: &'static str,
    flag: &'static str,
) -> Result<PathBuf, DirsError> {
    let chosen = flag_value
        .map(Path::to_path_buf)
        .or_else(|| env(variable).filter(|v| !v.is_empty()).map(PathBuf::from))
        .or_else(default)
        .ok_or(DirsError::Unknown {
            which,
            flag,
            variable,
        })?;
    if !chosen.is_absolute() {
        return Err(DirsError::NotAbsolute {
            which,
            path: chosen.display().to_string(),
        });
    }
    Ok(chosen)
}

fn xdg(
    env: &dyn Fn(&str) -> Option<OsString>,
    variable: &str,
    home_relative: &str,
) -> Option<PathBuf> {
    env(variable)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .map(|p| p.join("boxmaker"))
        .or_else(|| {
            env("HOME")
                .filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(home_relative).join("boxmaker"))
        })
}

impl Dirs {
    /// The folders from the flags given (each `None` when its flag was not), the variables
    /// (read through `env`, so this stays a pure function) and the XDG defaults; `uid` names
    /// the fallback runtime folder.
    pub fn resolve(
        config: Option<&Path>,
        state: Option<&Path>,
        runtime: Option<&Path>,
        env: &dyn Fn(&str) -> Option<OsString>,
        uid: u32,
    ) -> Result<Dirs, DirsError> {
        Ok(Dirs {
            config: Dirs::config_dir(config, env)?,
            state: Dirs::state_dir(state, env)?,
            runtime: Dirs::runtime_dir(runtime, env, uid)?,
        })
    }

    /// The config folder alone: `--config-dir`, else `BOXMAKER_CONFIG_DIR`, else
    /// `$XDG_CONFIG_HOME/boxmaker` (or `~/.config/boxmaker`).
    pub fn config_dir(
        flag: Option<&Path>,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<PathBuf, DirsError> {
        pick(
            flag,
            env,
            "BOXMAKER_CONFIG_DIR",
            || xdg(env, "XDG_CONFIG_HOME", ".config"),
            "config",
            "--config-dir",
        )
    }

    /// The state folder alone: `--state-dir`, else `BOXMAKER_STATE_DIR`, else
    /// `$XDG_STATE_HOME/boxmaker` (or `~/.local/state/boxmaker`).
    pub fn state_dir(
        flag: Option<&Path>,
        env: &dyn Fn(&str) -> Option<OsString>,
    ) -> Result<PathBuf, DirsError> {
        pick(
            flag,
            env,
            "BOXMAKER_STATE_DIR",
            || xdg(env, "XDG_STATE_HOME", ".local/state"),
            "state",
            "--state-dir",
        )
    }

    /// The runtime folder alone: `--runtime-dir`, else `BOXMAKER_RUNTIME_DIR`, else
    /// `$XDG_RUNTIME_DIR/boxmaker`, else `/tmp/boxmaker-<uid>`.
    pub fn runtime_dir(
        flag: Option<&Path>,
        env: &dyn Fn(&str) -> Option<OsString>,
        uid: u32,
    ) -> Result<PathBuf, DirsError> {
        pick(
            flag,
            env,
            "BOXMAKER_RUNTIME_DIR",
            || {
                Some(
                    env("XDG_RUNTIME_DIR")
                        .map(PathBuf::from)
                        .filter(|p| p.is_absolute())
                        .map(|p| p.join("boxmaker"))
                        .unwrap_or_else(|| PathBuf::from(format!("/tmp/boxmaker-{uid}"))),
                )
            },
            "runtime",
            "--runtime-dir",
        )
    }

    /// The grants folder.
    pub fn grants(&self) -> PathBuf {
        self.config.join("grants")
    }

    /// `brokerd.toml`.
    pub fn config_file(&self) -> PathBuf {
        self.config.join("brokerd.toml")
    }

    /// The agent socket.
    pub fn agent_socket(&self) -> PathBuf {
        self.runtime.join(AGENT_SOCKET)
    }

    /// The owner socket.
    pub fn owner_socket(&self) -> PathBuf {
        self.runtime.join(OWNER_SOCKET)
    }

    /// The ledger.
    pub fn ledger(&self) -> PathBuf {
        self.state.join(LEDGER_FILE)
    }

    /// The audit log.
    pub fn audit_log(&self) -> PathBuf {
        self.state.join(AUDIT_FILE)
    }

    /// loopd's conversations.
    pub fn sessions(&self) -> PathBuf {
        self.state.join("sessions")
    }

    /// The memory folder (the store behind `recall`, `memory` and `ask_memory`).
    pub fn memory(&self) -> PathBuf {
        self.state.join("memory")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<OsString> {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    }

    #[test]
    fn a_flag_wins_over_the_variable_which_wins_over_xdg_which_wins_over_home() {
        let all = env_of(&[
            ("BOXMAKER_STATE_DIR", "/var/b"),
            ("XDG_STATE_HOME", "/x"),
            ("HOME", "/h"),
        ]);
        let flag = Path::new("/flag");
        assert_eq!(Dirs::state_dir(Some(flag), &all).unwrap(), flag);
        assert_eq!(Dirs::state_dir(None, &all).unwrap(), Path::new("/var/b"));
        let xdg = env_of(&[("XDG_STATE_HOME", "/x"), ("HOME", "/h")]);
        assert_eq!(
            Dirs::state_dir(None, &xdg).unwrap(),
            Path::new("/x/boxmaker")
        );
        let home = env_of(&[("HOME", "/h")]);
        assert_eq!(
            Dirs::state_dir(None, &home).unwrap(),
            Path::new("/h/.local/state/boxmaker")
        );
        assert_eq!(
            Dirs::config_dir(None, &home).unwrap(),
            Path::new("/h/.config/boxmaker")
        );
    }

    #[test]
    fn the_runtime_folder_falls_back_to_a_folder_of_the_uid_in_tmp() {
        let none = env_of(&[]);
        assert_eq!(
            Dirs::runtime_dir(None, &none, 1000).unwrap(),
            Path::new("/tmp/boxmaker-1000")
        );
        let xdg = env_of(&[("XDG_RUNTIME_DIR", "/run/user/1000")]);
        assert_eq!(
            Dirs::runtime_dir(None, &xdg, 1000).unwrap(),
            Path::new("/run/user/1000/boxmaker")
        );
    }

    #[test]
    fn a_relative_folder_or_none_at_all_is_an_error_naming_the_folder() {
        let relative = env_of(&[("BOXMAKER_STATE_DIR", "state")]);
        assert_eq!(
            Dirs::state_dir(None, &relative),
            Err(DirsError::NotAbsolute {
                which: "state",
                path: "state".into()
            })
        );
        let none = env_of(&[]);
        assert_eq!(
            Dirs::config_dir(None, &none),
            Err(DirsError::Unknown {
                which: "config",
                flag: "--config-dir",
                variable: "BOXMAKER_CONFIG_DIR",
            })
        );
        // Each folder reads only its own flag and variable: a bad config variable does not
        // stop a program that needs only the state folder.
        let bad_config = env_of(&[("BOXMAKER_CONFIG_DIR", "rel"), ("HOME", "/h")]);
        assert!(Dirs::state_dir(None, &bad_config).is_ok());
        assert!(Dirs::resolve(None, None, None, &bad_config, 0).is_err());
    }
}
