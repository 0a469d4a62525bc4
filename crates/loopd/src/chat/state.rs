//! Where `loopd chat` keeps its conversations: `sessions/` in boxmaker's state folder (the
//! same folder brokerd keeps its ledger and audit log in), or a temporary folder that is
//! removed at the end (`loopd demo`).

use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use super::ChatError;

/// The folder of conversations inside the state folder.
pub const SESSIONS_DIR: &str = "sessions";

/// Which state folder a chat uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StateFolder {
    /// boxmaker's state folder (`--state-dir`, `BOXMAKER_STATE_DIR`, or
    /// `$XDG_STATE_HOME/boxmaker`); made (mode 0700) when missing.
    Dir(PathBuf),
    /// A new folder under the system's temporary folder, removed when the chat ends.
    Temporary,
}

/// A state folder in use.
pub(super) struct Opened {
    sessions: PathBuf,
    temporary: Option<PathBuf>,
}

impl StateFolder {
    /// Makes the folder ready (checked, or made) and says where its sessions go.
    pub(super) fn open(&self) -> Result<Opened, ChatError> {
        match self {
            StateFolder::Dir(dir) => {
                match fs::symlink_metadata(dir) {
                    Ok(meta) if meta.is_dir() => {}
                    // A link to a folder is the owner's choice; anything else is not a folder.
                    Ok(meta) if meta.is_symlink() && dir.is_dir() => {}
                    Ok(_) => {
                        return Err(ChatError::State(format!(
                            "the state folder {} (--state-dir or BOXMAKER_STATE_DIR) is not a folder",
                            dir.display()
                        )));
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => make(dir)?,
                    Err(e) => return Err(state_error(dir, "cannot read", &e)),
                }
                Ok(Opened {
                    sessions: dir.join(SESSIONS_DIR),
                    temporary: None,
                })
            }
            StateFolder::Temporary => {
                let mut bytes = [0u8; 8];
                getrandom::fill(&mut bytes).map_err(|e| {
                    ChatError::State(format!(
                        "cannot name a temporary folder: no random bytes ({e})"
                    ))
                })?;
                let name: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
                let dir = std::env::temp_dir().join(format!("loopd-demo-{name}"));
                fs::DirBuilder::new()
                    .mode(0o700)
                    .create(&dir)
                    .map_err(|e| {
                        ChatError::State(format!(
                            "cannot make the temporary state folder {}: {e}",
                            dir.display()
                        ))
                    })?;
                Ok(Opened {
                    sessions: dir.join(SESSIONS_DIR),
                    temporary: Some(dir),
                })
            }
        }
    }
}

impl Opened {
    /// The folder of conversations.
    pub(super) fn sessions(&self) -> &Path {
        &self.sessions
    }

    /// Whether the folder is removed at the end.
    pub(super) fn is_temporary(&self) -> bool {
        self.temporary.is_some()
    }

    /// Removes a temporary folder with everything in it; a state folder stays.
    pub(super) fn remove(self) -> Result<(), ChatError> {
        match self.temporary {
            Some(dir) => fs::remove_dir_all(&dir).map_err(|e| {
                ChatError::State(format!(
                    "cannot remove the temporary state folder {}: {e}",
                    dir.display()
                ))
            }),
            None => Ok(()),
        }
    }
}

fn make(dir: &Path) -> Result<(), ChatError> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| state_error(dir, "cannot make the state folder", &e))
}

fn state_error(dir: &Path, what: &str, error: &io::Error) -> ChatError {
    ChatError::State(format!(
        "{what} {} (--state-dir or BOXMAKER_STATE_DIR): {error}",
        dir.display()
    ))
}
