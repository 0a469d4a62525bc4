//! The broker session an MCP client resumes: kept in `<state>/mcp/<name>.json` (mode 0600, in
//! a 0700 folder) as the broker's [`proto::Resume`], so a restarted client gets the same
//! session and its labels back: a reconnect never launders taint.
//!
//! A session is named by `--session NAME`, or by default after the client's name and the
//! workspace the server was started in ([`default_name`]).

use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use proto::Resume;

/// The folder of stored sessions below the state folder.
pub const FOLDER: &str = "mcp";

/// The file holding the session named `name` (any bytes of the name outside `[A-Za-z0-9._-]`
/// become `_`, and a name that is empty or only dots becomes `session`).
pub fn path_for(state_dir: &Path, name: &str) -> PathBuf {
    let mut clean: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(100)
        .collect();
    if clean.chars().all(|c| c == '.') {
        clean = "session".to_string();
    }
    state_dir.join(FOLDER).join(format!("{clean}.json"))
}

/// The default name: the client's name and a short hash of the workspace's path.
pub fn default_name(client: &str, workspace: &Path) -> String {
    let digest = proto::ids::sha256_hex(workspace.as_os_str().as_encoded_bytes());
    format!("{client}-{}", digest.get(..12).unwrap_or(&digest))
}

/// The session stored at `path`, if there is one. The file holds a resume token, so it must
/// be a secret file (`sandbox::secret`: this user's, mode 0600 or narrower).
pub fn load(path: &Path) -> Result<Option<Resume>, String> {
    let text = match sandbox::secret::read_secret(path) {
        Ok(text) => text,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    serde_json::from_str(&text).map(Some).map_err(|e| {
        format!(
            "{} is not a stored session ({e}); remove it or pass --new-session",
            path.display()
        )
    })
}

/// Stores `resume` at `path` whole or not at all, as a secret file (`sandbox::secret`: a new
/// file created 0600 renamed over it), in a folder made 0700.
pub fn store(path: &Path, resume: &Resume) -> Result<(), String> {
    let failed = |e: std::io::Error| format!("cannot keep the session in {}: {e}", path.display());
    let Some(folder) = path.parent() else {
        return Err(format!("{} has no folder", path.display()));
    };
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(folder)
        .map_err(failed)?;
    let text = serde_json::to_string(resume).map_err(|e| failed(std::io::Error::other(e)))?;
    sandbox::secret::write_secret(path, text.as_bytes())
        .map_err(|e| format!("cannot keep the session: {e}"))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    #[test]
    fn a_stored_session_comes_back_and_is_the_owners_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(dir.path(), "claude-code/../../x");
        assert_eq!(path.parent().unwrap(), dir.path().join(FOLDER));
        assert_eq!(load(&path).unwrap(), None);
        let resume = toolport::resume_of("s-1", "t-1");
        store(&path, &resume).unwrap();
        assert_eq!(load(&path).unwrap(), Some(resume));
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        let folder = fs::metadata(path.parent().unwrap())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(folder & 0o777, 0o700);
        fs::write(&path, "not json").unwrap();
        assert!(load(&path).unwrap_err().contains("--new-session"));
    }

    #[test]
    fn a_stored_session_other_users_could_read_is_refused_with_the_chmod_that_fixes_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = path_for(dir.path(), "s");
        store(&path, &toolport::resume_of("s-1", "t-1")).unwrap();
        for mode in [0o640, 0o604, 0o644] {
            fs::set_permissions(&path, fs::Permissions::from_mode(mode)).unwrap();
            let error = load(&path).unwrap_err();
            assert!(
                error.contains(&format!("chmod 600 {}", path.display())),
                "{mode:o}: {error}"
            );
        }
        // Stored again, it is 0600 again.
        store(&path, &toolport::resume_of("s-1", "t-1")).unwrap();
        let mode = fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
        assert!(load(&path).unwrap().is_some());
    }

    #[test]
    fn names_are_made_safe_and_defaults_differ_by_workspace() {
        let dir = Path::new("/state");
        assert_eq!(
            path_for(dir, ".."),
            PathBuf::from("/state/mcp/session.json")
        );
        assert_eq!(path_for(dir, "a b"), PathBuf::from("/state/mcp/a_b.json"));
        let one = default_name("goose", Path::new("/src/app"));
        let two = default_name("goose", Path::new("/src/other"));
        assert!(one.starts_with("goose-") && one.len() == "goose-".len() + 12);
        assert_ne!(one, two);
    }
}
