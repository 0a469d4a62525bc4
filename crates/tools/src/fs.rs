//! `read_file` and `write_file`: text files, read with a cap and written atomically.
//!
//! The broker hands these functions a path it has already resolved and checked against the
//! grants and boxmaker's protected folders; they only refuse what no file tool should touch
//! (a relative path, a directory, a device or a pipe, a symbolic link to be replaced).

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::json;

use proto::ToolSchema;

/// The default cap of `read_file`: 1 MiB.
pub const READ_CAP: usize = 1024 * 1024;

/// The arguments of `read_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// The absolute path of the file.
    pub path: String,
}

/// The arguments of `write_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WriteFileArgs {
    /// The absolute path of the file.
    pub path: String,
    /// The whole new content of the file.
    pub content: String,
}

/// `read_file`'s schema, with the texts of seed M3a/16.
pub fn read_file_schema() -> ToolSchema {
    ToolSchema {
        name: "read_file".to_string(),
        description: "Read a text file. Needs a grant from the owner for the path.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the file." }
            },
            "required": ["path"]
        }),
    }
}

/// `write_file`'s schema, with the texts of seed M3a/16.
pub fn write_file_schema() -> ToolSchema {
    ToolSchema {
        name: "write_file".to_string(),
        description: "Write a text file, replacing it. Needs a grant from the owner for the path."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the file." },
                "content": { "type": "string", "description": "The whole new content of the file." }
            },
            "required": ["path", "content"]
        }),
    }
}

/// What `read_file` read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadFileResult {
    /// The file read.
    pub path: String,
    /// The text: UTF-8, each invalid sequence replaced by U+FFFD, cut on a character boundary.
    pub content: String,
    /// The file's size in bytes.
    pub size: u64,
    /// Whether the content stops before the end of the file.
    pub truncated: bool,
}

/// What `write_file` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct WriteFileResult {
    /// The file written.
    pub path: String,
    /// Bytes written.
    pub bytes: u64,
    /// Whether the file did not exist before.
    pub created: bool,
    /// The file's size before, when it existed.
    pub previous_size: Option<u64>,
    /// What changed, as a unified diff (3 lines of context) from the old content (empty when the
    /// file is new) to the new; a one-line summary instead when either side is over
    /// [`DIFF_LIMIT`] bytes or the old content is not UTF-8.
    pub diff: String,
}

/// The largest old or new content `write_file` diffs, in bytes.
pub const DIFF_LIMIT: usize = 1024 * 1024;

/// Why a file tool could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    /// The path is not absolute.
    #[error("{0} is not an absolute path")]
    NotAbsolute(String),
    /// Nothing is at the path.
    #[error("{0} does not exist")]
    NotFound(String),
    /// The path names a directory, a device, a pipe or a socket.
    #[error("{path} is not a regular file ({kind})")]
    NotAFile {
        /// The path.
        path: String,
        /// What it is instead.
        kind: &'static str,
    },
    /// `write_file` would replace a symbolic link.
    #[error("{0} is a symbolic link; write to the file it points to")]
    Symlink(String),
    /// The folder the file goes in does not exist.
    #[error("the folder of {0} does not exist")]
    NoFolder(String),
    /// The operating system refused.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: io::Error,
    },
}

/// Reads the text file at `args.path`, at most `cap` bytes of it.
pub fn read_file(args: &ReadFileArgs, cap: usize) -> Result<ReadFileResult, FileError> {
    let path = absolute(&args.path)?;
    // O_NONBLOCK: opening a FIFO must not hang; the type is checked on the open descriptor, so
    // nothing can be swapped in between.
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&path)
        .map_err(|e| open_error(&args.path, e))?;
    let meta = file.metadata().map_err(|e| io_error(&args.path, e))?;
    if !meta.is_file() {
        return Err(FileError::NotAFile {
            path: args.path.clone(),
            kind: kind_of(&meta),
        });
    }
    let mut bytes = Vec::with_capacity(cap.min(meta.len() as usize).saturating_add(1));
    file.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(&args.path, e))?;
    let truncated = bytes.len() > cap;
    bytes.truncate(cap);
    let content = if truncated {
        lossy_head(&bytes)
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok(ReadFileResult {
        path: args.path.clone(),
        content,
        size: meta.len(),
        truncated,
    })
}

/// `bytes` as text where a sequence cut at the end by the cap is dropped, not replaced.
fn lossy_head(bytes: &[u8]) -> String {
    // The last character starts at the last byte that is not a continuation byte (10xxxxxx),
    // among the last four.
    let floor = bytes.len().saturating_sub(4);
    let start = (floor..bytes.len())
        .rev()
        .find(|&at| bytes.get(at).is_some_and(|b| b & 0xC0 != 0x80));
    let end = match start.and_then(|at| bytes.get(at..).map(|tail| (at, tail))) {
        Some((at, tail)) => match std::str::from_utf8(tail) {
            Err(error) if error.error_len().is_none() => at,
            _ => bytes.len(),
        },
        None => bytes.len(),
    };
    String::from_utf8_lossy(bytes.get(..end).unwrap_or(bytes)).into_owned()
}

/// Replaces the file at `args.path` with `args.content`, atomically: a temporary file in the same
/// folder, synced, given the old file's permissions, renamed over it, and the folder synced. A
/// reader sees the old content or the new, never a mix; a failure leaves the old file as it was.
pub fn write_file(args: &WriteFileArgs) -> Result<WriteFileResult, FileError> {
    let path = absolute(&args.path)?;
    let folder = match path.parent() {
        Some(folder) if folder.is_dir() => folder.to_path_buf(),
        _ => return Err(FileError::NoFolder(args.path.clone())),
    };
    let previous = match fs::symlink_metadata(&path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(FileError::Symlink(args.path.clone()));
        }
        Ok(meta) if !meta.is_file() => {
            return Err(FileError::NotAFile {
                path: args.path.clone(),
                kind: kind_of(&meta),
            });
        }
        Ok(meta) => Some(meta),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(io_error(&args.path, e)),
    };
    let mode = previous.as_ref().map_or(0o644, |m| m.mode() & 0o7777);
    let old = match &previous {
        Some(meta) if meta.len() <= DIFF_LIMIT as u64 => fs::read(&path).ok(),
        _ => None,
    };
    let diff = diff_of(
        &args.path,
        previous.as_ref().map(|m| m.len()),
        old,
        &args.content,
    );
    let temp = temporary_sibling(&path);
    let written = write_temp(&temp, args.content.as_bytes(), mode).and_then(|()| {
        if let Some(meta) = &previous {
            // Keep the owner and group when allowed to (root writing someone's file).
            let _ = std::os::unix::fs::chown(&temp, Some(meta.uid()), Some(meta.gid()));
        }
        fs::rename(&temp, &path)
    });
    if let Err(error) = written {
        let _ = fs::remove_file(&temp);
        return Err(io_error(&args.path, error));
    }
    if let Ok(dir) = File::open(&folder) {
        let _ = dir.sync_all();
    }
    Ok(WriteFileResult {
        path: args.path.clone(),
        bytes: args.content.len() as u64,
        created: previous.is_none(),
        previous_size: previous.map(|m| m.len()),
        diff,
    })
}

/// The unified diff of a write, or a summary when it would not be readable.
fn diff_of(path: &str, previous_size: Option<u64>, old: Option<Vec<u8>>, new: &str) -> String {
    let old_text = match (previous_size, old) {
        (None, _) => String::new(),
        (Some(_), Some(bytes)) => match String::from_utf8(bytes) {
            Ok(text) => text,
            Err(_) => return format!("(the old content of {path} is not UTF-8 text; not diffed)"),
        },
        (Some(size), None) => {
            return format!(
                "({path} was {size} bytes; too large to diff, now {} bytes)",
                new.len()
            );
        }
    };
    if new.len() > DIFF_LIMIT {
        return format!("({path} is now {} bytes; too large to diff)", new.len());
    }
    let old_name = if previous_size.is_some() {
        path
    } else {
        "/dev/null"
    };
    similar::TextDiff::from_lines(old_text.as_str(), new)
        .unified_diff()
        .context_radius(3)
        .header(old_name, path)
        .to_string()
}

fn write_temp(temp: &Path, bytes: &[u8], mode: u32) -> io::Result<()> {
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(temp)?;
    file.write_all(bytes)?;
    file.set_permissions(fs::Permissions::from_mode(mode))?;
    file.sync_all()
}

/// `.<name>.boxmaker-<pid>-<n>.tmp` beside `path`.
fn temporary_sibling(path: &Path) -> PathBuf {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.boxmaker-{}-{n}.tmp", std::process::id()))
}

fn absolute(path: &str) -> Result<PathBuf, FileError> {
    let buf = PathBuf::from(path);
    if buf.is_absolute() {
        Ok(buf)
    } else {
        Err(FileError::NotAbsolute(path.to_string()))
    }
}

fn kind_of(meta: &fs::Metadata) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    let kind = meta.file_type();
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a pipe"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "a device"
    } else if kind.is_symlink() {
        "a symbolic link"
    } else {
        "not a regular file"
    }
}

fn open_error(path: &str, error: io::Error) -> FileError {
    match error.kind() {
        io::ErrorKind::NotFound => FileError::NotFound(path.to_string()),
        _ => io_error(path, error),
    }
}

fn io_error(path: &str, source: io::Error) -> FileError {
    FileError::Io {
        path: path.to_string(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::lossy_head;

    #[test]
    fn a_sequence_cut_by_the_cap_is_dropped_and_an_invalid_one_inside_is_replaced() {
        assert_eq!(
            lossy_head("aé".as_bytes().get(..2).unwrap_or_default()),
            "a"
        );
        assert_eq!(lossy_head(&[b'a', 0xFF, b'b']), "a\u{FFFD}b");
        assert_eq!(
            lossy_head("日本".as_bytes().get(..4).unwrap_or_default()),
            "日"
        );
        assert_eq!(lossy_head("😀".as_bytes().get(..3).unwrap_or_default()), "");
        assert_eq!(lossy_head(b""), "");
    }
}
