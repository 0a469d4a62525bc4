//! Where a running brokerd serves, for clients whose environment lost `XDG_RUNTIME_DIR`.
//!
//! MCP SDKs start a stdio server with a filtered environment (HOME, LOGNAME, PATH, SHELL, TERM,
//! USER): a `bx mcp` so started resolves the runtime folder to `/tmp/boxmaker-<uid>` while the
//! broker, started from the owner's shell, serves `$XDG_RUNTIME_DIR/boxmaker`. So brokerd
//! records the runtime folder it serves in its config folder ([`RECORD_FILE`]), which is found
//! from `HOME` alone by default; `bx`, `bx mcp` and loopd read it when the runtime folder they
//! resolved was not given (no `--runtime-dir`, no `BOXMAKER_RUNTIME_DIR`) and no broker answers
//! there.
//!
//! The config folder rather than a fixed per-uid folder in `/tmp`: another user can create
//! `/tmp/boxmaker-<uid>` first (a shared `/tmp`), a service with a private `/tmp` would not see
//! it, and the config folder is where the broker's grants are, so a client finds the broker of
//! the grants it shares. The record is used only when the config folder and the record are
//! owned by the uid and writable by no one else, and the recorded socket is a socket owned by
//! the uid; it is written atomically (a temporary file renamed over it) and removed at exit when
//! it still names this broker's folder. A record left by a killed broker names a socket nobody
//! listens on: the client then says no broker is running, as it would without a record.

use std::ffi::OsString;
use std::io::Write;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::dirs::{AGENT_SOCKET, Dirs, DirsError};

/// The record's file name in the config folder: the runtime folder, one line.
pub const RECORD_FILE: &str = "brokerd.runtime";

/// Writes the record of `runtime` in `config`, atomically, mode 0600.
pub fn record(config: &Path, runtime: &Path) -> std::io::Result<()> {
    let temporary = config.join(format!(".{RECORD_FILE}.{}", std::process::id()));
    let _ = std::fs::remove_file(&temporary);
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&temporary)
        .and_then(|mut file| {
            file.write_all(runtime.as_os_str().as_bytes())?;
            file.write_all(b"\n")?;
            file.sync_all()
        })
        .and_then(|()| std::fs::rename(&temporary, config.join(RECORD_FILE)));
    if written.is_err() {
        let _ = std::fs::remove_file(&temporary);
    }
    written
}

/// Removes the record in `config` when it still names `runtime` (another broker on the same
/// config folder may have written its own since).
pub fn forget(config: &Path, runtime: &Path) {
    let path = config.join(RECORD_FILE);
    if let Ok(text) = std::fs::read(&path)
        && text.strip_suffix(b"\n").unwrap_or(&text) == runtime.as_os_str().as_bytes()
    {
        let _ = std::fs::remove_file(&path);
    }
}

/// Why a record is not used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unusable {
    /// There is no record (or no config folder).
    #[error("there is no record at {0}")]
    Missing(String),
    /// The config folder, the record or the socket fails a check.
    #[error("{path} {why}")]
    Unsafe {
        /// What failed.
        path: String,
        /// How.
        why: String,
    },
}

/// Whether `meta` is owned by `uid` and writable by no one else.
fn private(path: &Path, meta: &std::fs::Metadata, uid: u32) -> Result<(), Unusable> {
    let unsafe_because = |why: String| Unusable::Unsafe {
        path: path.display().to_string(),
        why,
    };
    if meta.uid() != uid {
        return Err(unsafe_because(format!(
            "is owned by uid {}, not {uid}",
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(unsafe_because(format!(
            "is writable by others (mode {:04o})",
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// The runtime folder recorded in `config`, after the checks: the folder and the record owned by
/// `uid` and writable by no one else, the record a regular file naming an absolute folder whose
/// agent socket is a socket owned by `uid`.
pub fn recorded(config: &Path, uid: u32) -> Result<PathBuf, Unusable> {
    let path = config.join(RECORD_FILE);
    let folder =
        std::fs::metadata(config).map_err(|_| Unusable::Missing(path.display().to_string()))?;
    private(config, &folder, uid)?;
    let meta = std::fs::symlink_metadata(&path)
        .map_err(|_| Unusable::Missing(path.display().to_string()))?;
    if !meta.file_type().is_file() {
        return Err(Unusable::Unsafe {
            path: path.display().to_string(),
            why: "is not a regular file".into(),
        });
    }
    private(&path, &meta, uid)?;
    let text = std::fs::read(&path).map_err(|e| Unusable::Unsafe {
        path: path.display().to_string(),
        why: format!("cannot be read: {e}"),
    })?;
    let runtime = PathBuf::from(OsString::from(std::ffi::OsStr::from_bytes(
        text.strip_suffix(b"\n").unwrap_or(&text),
    )));
    if !runtime.is_absolute() {
        return Err(Unusable::Unsafe {
            path: path.display().to_string(),
            why: "does not name an absolute folder".into(),
        });
    }
    let socket = runtime.join(AGENT_SOCKET);
    let meta = std::fs::symlink_metadata(&socket).map_err(|_| Unusable::Unsafe {
        path: socket.display().to_string(),
        why: "is gone (the broker that recorded it has stopped)".into(),
    })?;
    if !meta.file_type().is_socket() {
        return Err(Unusable::Unsafe {
            path: socket.display().to_string(),
            why: "is not a socket".into(),
        });
    }
    if meta.uid() != uid {
        return Err(Unusable::Unsafe {
            path: socket.display().to_string(),
            why: format!("is owned by uid {}, not {uid}", meta.uid()),
        });
    }
    Ok(runtime)
}

/// The runtime folder a client of the broker uses: the one `--runtime-dir` (`flag`) or
/// `BOXMAKER_RUNTIME_DIR` names; else the XDG default when a broker answers there; else the
/// one recorded in `config` when it passes [`recorded`]'s checks; else the XDG default.
pub fn runtime_for_client(
    flag: Option<&Path>,
    config: Option<&Path>,
    env: &dyn Fn(&str) -> Option<OsString>,
    uid: u32,
) -> Result<PathBuf, DirsError> {
    let resolved = Dirs::runtime_dir(flag, env, uid)?;
    let given = flag.is_some() || env("BOXMAKER_RUNTIME_DIR").is_some_and(|v| !v.is_empty());
    // A socket file left by a killed broker answers nothing: only one that accepts counts.
    if given || std::os::unix::net::UnixStream::connect(resolved.join(AGENT_SOCKET)).is_ok() {
        return Ok(resolved);
    }
    Ok(config
        .and_then(|config| recorded(config, uid).ok())
        .unwrap_or(resolved))
}

/// The sentence for "nothing listens on `socket`": start a broker, or name the one running,
/// whose folder may differ (another `XDG_RUNTIME_DIR`, `--runtime-dir` or config folder);
/// `flag` is the printing program's own way to name it (e.g. `--runtime-dir DIR`).
pub fn no_broker(socket: &Path, flag: &str) -> String {
    format!(
        "no broker is running on {}: start one with `brokerd serve`; if one is running, it serves another folder (it was started with another XDG_RUNTIME_DIR, --runtime-dir or config folder, where it records the folder it serves in {RECORD_FILE}): pass {flag} (`bx status` in the broker's shell shows where its sockets are)",
        socket.display()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn uid() -> u32 {
        std::fs::metadata("/proc/self").map(|m| m.uid()).unwrap()
    }

    fn temp() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        let path = dir.path().to_path_buf();
        (dir, path)
    }

    /// A config folder and a runtime folder with a listening agent socket, recorded.
    fn served() -> (
        tempfile::TempDir,
        PathBuf,
        PathBuf,
        std::os::unix::net::UnixListener,
    ) {
        let (dir, root) = temp();
        let config = root.join("config");
        let runtime = root.join("rt");
        for dir in [&config, &runtime] {
            std::fs::create_dir(dir).unwrap();
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).unwrap();
        }
        let listener = std::os::unix::net::UnixListener::bind(runtime.join(AGENT_SOCKET)).unwrap();
        record(&config, &runtime).unwrap();
        (dir, config, runtime, listener)
    }

    #[test]
    fn a_record_names_the_runtime_folder_until_it_is_forgotten_by_its_broker() {
        let (_dir, config, runtime, _listener) = served();
        assert_eq!(recorded(&config, uid()), Ok(runtime.clone()));
        let mode = std::fs::metadata(config.join(RECORD_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        forget(&config, Path::new("/another/broker"));
        assert_eq!(recorded(&config, uid()), Ok(runtime.clone()));
        forget(&config, &runtime);
        assert!(matches!(
            recorded(&config, uid()),
            Err(Unusable::Missing(_))
        ));
    }

    #[test]
    fn a_record_writable_by_others_or_in_a_folder_writable_by_others_is_not_used() {
        let (_dir, config, _runtime, _listener) = served();
        let file = config.join(RECORD_FILE);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o622)).unwrap();
        assert!(matches!(
            recorded(&config, uid()),
            Err(Unusable::Unsafe { .. })
        ));
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(matches!(
            recorded(&config, uid()),
            Err(Unusable::Unsafe { .. })
        ));
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(0o755)).unwrap();
        assert!(recorded(&config, uid()).is_ok());
        // Another uid's record (as seen by a client of another uid) is not used.
        assert!(matches!(
            recorded(&config, uid() + 1),
            Err(Unusable::Unsafe { .. })
        ));
    }

    #[test]
    fn a_record_naming_no_socket_or_a_file_that_is_not_one_is_not_used() {
        let (_dir, config, runtime, listener) = served();
        drop(listener);
        std::fs::remove_file(runtime.join(AGENT_SOCKET)).unwrap();
        assert!(matches!(
            recorded(&config, uid()),
            Err(Unusable::Unsafe { .. })
        ));
        std::fs::write(runtime.join(AGENT_SOCKET), "not a socket").unwrap();
        assert!(matches!(
            recorded(&config, uid()),
            Err(Unusable::Unsafe { .. })
        ));
        std::fs::write(config.join(RECORD_FILE), "relative/folder\n").unwrap();
        assert!(matches!(
            recorded(&config, uid()),
            Err(Unusable::Unsafe { .. })
        ));
        // A link in place of the record is not followed.
        std::fs::remove_file(config.join(RECORD_FILE)).unwrap();
        std::os::unix::fs::symlink("/etc/hostname", config.join(RECORD_FILE)).unwrap();
        assert!(matches!(
            recorded(&config, uid()),
            Err(Unusable::Unsafe { .. })
        ));
    }

    #[test]
    fn a_client_uses_the_record_only_when_its_folder_was_not_given_and_no_broker_answers_there() {
        let (_dir, config, runtime, _listener) = served();
        let (_other_dir, elsewhere) = temp();
        let xdg = elsewhere.clone();
        let env = move |name: &str| (name == "XDG_RUNTIME_DIR").then(|| xdg.clone().into());
        // The default (XDG_RUNTIME_DIR/boxmaker) has no socket: the record wins.
        assert_eq!(
            runtime_for_client(None, Some(&config), &env, uid()),
            Ok(runtime.clone())
        );
        // A flag wins, socket or not.
        assert_eq!(
            runtime_for_client(Some(&elsewhere), Some(&config), &env, uid()),
            Ok(elsewhere.clone())
        );
        // So does the variable.
        let given = elsewhere.clone();
        let variable =
            move |name: &str| (name == "BOXMAKER_RUNTIME_DIR").then(|| given.clone().into());
        assert_eq!(
            runtime_for_client(None, Some(&config), &variable, uid()),
            Ok(elsewhere.clone())
        );
        // A default folder with a broker's socket in it wins over the record.
        let default = elsewhere.join("boxmaker");
        std::fs::create_dir(&default).unwrap();
        let other = std::os::unix::net::UnixListener::bind(default.join(AGENT_SOCKET)).unwrap();
        assert_eq!(
            runtime_for_client(None, Some(&config), &env, uid()),
            Ok(default.clone())
        );
        // A socket file nobody listens on (a killed broker's) does not.
        drop(other);
        assert!(default.join(AGENT_SOCKET).exists());
        assert_eq!(
            runtime_for_client(None, Some(&config), &env, uid()),
            Ok(runtime)
        );
    }

    #[test]
    fn the_no_broker_sentence_names_the_flag_given_and_the_likely_cause() {
        let sentence = no_broker(Path::new("/tmp/boxmaker-0/agent.sock"), "--runtime-dir DIR");
        assert!(sentence.starts_with(
            "no broker is running on /tmp/boxmaker-0/agent.sock: start one with `brokerd serve`"
        ));
        assert!(sentence.contains("another XDG_RUNTIME_DIR"), "{sentence}");
        assert!(sentence.contains("pass --runtime-dir DIR"), "{sentence}");
        assert!(!sentence.contains("--socket"), "{sentence}");
    }
}
