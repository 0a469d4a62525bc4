//! `read_file`, `write_file` and `edit_file`: text files, read by lines with a cap, written and
//! edited atomically.
//!
//! The broker hands these functions the folder it granted, held open ([`GrantedDir`]), and a
//! path it has already resolved and checked against the grants and boxmaker's protected
//! folders. They open the file through that folder's descriptor, so a folder swapped for a
//! symbolic link after the decision makes the call fail instead of redirecting it, and they
//! refuse what no file tool should touch (a relative path, a directory, a device or a pipe, a
//! symbolic link to be replaced).

mod diff;
mod edit;
mod granted;
mod read;
mod write;

pub use edit::{
    EDIT_LIMIT, Edit, EditFileArgs, EditFileResult, HINT_THRESHOLD, apply_edits, closest_hint,
    edit_file, edit_file_expecting, edit_file_schema,
};
pub use granted::GrantedDir;
pub use read::read_file;
pub use write::{current_content, sha256_hex, write_file, write_file_expecting};

use std::fs;
use std::io;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

pub use proto::tools::schemas::{broker_read_file_schema, read_file_schema, write_file_schema};

/// The default cap of `read_file`: 1 MiB.
pub const READ_CAP: usize = 1024 * 1024;

/// The arguments of `read_file`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadFileArgs {
    /// The absolute path of the file.
    pub path: String,
    /// The first line to read, counted from 1; the first line when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<u64>,
    /// How many lines to read at most; up to the end (and the cap) when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<u64>,
}

/// What read before write expects of the file a write replaces: checked on the descriptor the
/// write reads the old file through, and again (same file, unchanged) just before the atomic
/// rename, so a file changed after the broker's decision is refused instead of overwritten.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "sha256", rename_all = "snake_case")]
pub enum Expected {
    /// No file there: the write creates it.
    Absent,
    /// A file whose whole content has this SHA-256 (lower-case hex): what the session read.
    Sha256(String),
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

/// What `read_file` read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ReadFileResult {
    /// The file read.
    pub path: String,
    /// The text: UTF-8, each invalid sequence replaced by U+FFFD, cut on a character boundary.
    pub content: String,
    /// The file's size in bytes.
    pub size: u64,
    /// Whether the cap cut the content before the end of the file (or of the lines asked for).
    pub truncated: bool,
    /// How many lines the whole file has (a last line without a newline counts); when
    /// `total_lines_partial`, a lower bound: the lines begun in the part read.
    pub total_lines: u64,
    /// Whether the read stopped before the end of the file (past the window it returns and
    /// the first [`EDIT_LIMIT`] + 1 bytes, which read before write hashes): the rest is neither
    /// read nor counted, and `total_lines` is a lower bound.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub total_lines_partial: bool,
    /// The line the content starts at, counted from 1, when the call asked for lines.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_line: Option<u64>,
    /// The last line the content holds whole (a line the cap cut is not whole); `None` when it
    /// holds none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end_line: Option<u64>,
    /// Whether the file is binary (a NUL byte in its first [`BINARY_PROBE`] bytes): then the
    /// content is one sentence saying so, and `total_lines` is 0.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub binary: bool,
    /// The SHA-256 (lower-case hex) of the file's first [`EDIT_LIMIT`] + 1 bytes as this read
    /// saw them: what read before write records for the session, taken from the same read that
    /// produced the content, so a file changed after it cannot be recorded as seen.
    #[serde(skip)]
    pub sha256: String,
}

impl ReadFileResult {
    /// Which lines came back, for the result's header: `"2-4 of 8"`; `"part of line 3 of 8"`
    /// when the cap cut the window's first line; `"none of 8"` when the window holds no line;
    /// `"1-500 of at least 9000"` when the read stopped before the end (`total_lines_partial`).
    /// `None` for a binary file.
    pub fn lines(&self) -> Option<String> {
        if self.binary {
            return None;
        }
        let first = self.first_line();
        let total = if self.total_lines_partial {
            format!("at least {}", self.total_lines)
        } else {
            self.total_lines.to_string()
        };
        Some(match self.end_line {
            Some(end) => format!("{first}-{end} of {total}"),
            None if self.truncated => format!("part of line {first} of {total}"),
            None => format!("none of {total}"),
        })
    }

    /// The `offset` that reads on from where the content stopped, when lines follow it: the
    /// line after the last whole one (a line the cap cut is read again from its start), or after
    /// a first line too long for the cap.
    pub fn next_offset(&self) -> Option<u64> {
        if self.binary {
            return None;
        }
        let next = match self.end_line {
            Some(end) => end + 1,
            None if self.truncated => self.first_line() + 1,
            None => self.first_line(),
        };
        (next <= self.total_lines).then_some(next)
    }

    fn first_line(&self) -> u64 {
        self.start_line.unwrap_or(1)
    }
}

/// How many bytes at the start of a file `read_file` looks at for a NUL byte, as ripgrep and
/// git do, to call the file binary.
pub const BINARY_PROBE: usize = 8192;

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
    /// The path is not below the folder the call was granted.
    #[error("{path} is not inside the granted folder {folder}")]
    Outside {
        /// The path.
        path: String,
        /// The granted folder.
        folder: String,
    },
    /// A symbolic link appeared on the way, or the way left the granted folder: the tree
    /// changed after the call was decided.
    #[error(
        "{0} goes through a symbolic link or leaves its granted folder; the files changed after the call was decided"
    )]
    Moved(String),
    /// An edit's `old_str` is not in the file (as the earlier edits left it).
    #[error("edit {edit}: old_str not found in {path}{hint}")]
    EditNotFound {
        /// The file.
        path: String,
        /// The edit, counted from 1.
        edit: usize,
        /// The closest text and its line, or empty.
        hint: String,
    },
    /// An edit's `old_str` is in the file several times and `replace_all` is not set.
    #[error(
        "edit {edit}: old_str found {count} times in {path}; add surrounding lines to make it unique, or set replace_all"
    )]
    EditAmbiguous {
        /// The file.
        path: String,
        /// The edit, counted from 1.
        edit: usize,
        /// How many times it occurs.
        count: usize,
    },
    /// Read before write: the file the write opened is not the one the session read (it
    /// changed, or appeared, after the call was decided).
    #[error("{path} {why}; read it with read_file first, then write")]
    Unread {
        /// The file.
        path: String,
        /// What happened to it.
        why: &'static str,
    },
    /// The file is larger than the tool handles.
    #[error("{path} is {size} bytes, over the {limit}-byte limit of this tool")]
    TooLarge {
        /// The file.
        path: String,
        /// Its size.
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The operating system refused.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: io::Error,
    },
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

fn io_error(path: &str, source: io::Error) -> FileError {
    FileError::Io {
        path: path.to_string(),
        source,
    }
}
