//! `edit_file`: snippet edits applied in order on the file's bytes, all or none, written
//! atomically through the granted folder's descriptor like `write_file`.
//!
//! Semantics of seed 002: an empty `old_str` appends `new_str` (creating a missing file); an
//! `old_str` found once is replaced; found several times it is an error unless `replace_all`;
//! not found it is an error that names the closest text, so a model can correct itself. Every
//! byte an edit does not replace stays as it was: CRLF line ends, a missing final newline,
//! invalid UTF-8 elsewhere in the file.

use serde::{Deserialize, Serialize};

use super::write::Target;
use super::{Expected, FileError, GrantedDir};

pub use proto::tools::schemas::edit_file_schema;

/// The largest file `edit_file` edits, in bytes: 128 MiB.
pub const EDIT_LIMIT: u64 = 128 * 1024 * 1024;

/// The lowest similarity (`similar`'s ratio, 0 to 1) at which a not-found error names the
/// closest text.
pub const HINT_THRESHOLD: f32 = 0.6;

/// The arguments of `edit_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditFileArgs {
    /// The absolute path of the file.
    pub path: String,
    /// The edits, applied in order.
    pub edits: Vec<Edit>,
}

/// One edit of `edit_file`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Edit {
    /// The exact text to find; empty appends `new_str` to the file (creating it).
    pub old_str: String,
    /// The text that replaces it.
    pub new_str: String,
    /// Replace every occurrence instead of requiring exactly one.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replace_all: bool,
}

/// What `edit_file` did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EditFileResult {
    /// The file edited.
    pub path: String,
    /// How many edits were applied (all of them).
    pub edits_applied: usize,
    /// How many occurrences were replaced, over all edits.
    pub replacements: usize,
    /// The size before, in bytes (0 for a new file).
    pub original_bytes: u64,
    /// The size after, in bytes.
    pub new_bytes: u64,
    /// Whether the file did not exist before.
    pub created: bool,
    /// What changed, as a unified diff (3 lines of context; invalid UTF-8 shown as U+FFFD), or
    /// a one-line summary when either side is over [`super::DIFF_LIMIT`] bytes.
    pub diff: String,
    /// The SHA-256 (lower-case hex) of the first [`EDIT_LIMIT`] + 1 bytes of what the edit
    /// wrote: what read before write records as the session's, from the edit itself rather than
    /// the file read again (never serialized).
    #[serde(skip)]
    pub sha256: String,
}

/// Applies `args.edits` in order to the file at `args.path`, below `dir`, and replaces it
/// atomically; on any error nothing is written.
pub fn edit_file(dir: &GrantedDir, args: &EditFileArgs) -> Result<EditFileResult, FileError> {
    edit_file_expecting(dir, args, None)
}

/// [`edit_file`], refused with [`FileError::Unread`] unless the file it edits is what
/// `expected` says (read before write): the content hashed is the very content edited, read
/// through the descriptor held, and the file is looked at again just before the rename.
pub fn edit_file_expecting(
    dir: &GrantedDir,
    args: &EditFileArgs,
    expected: Option<&Expected>,
) -> Result<EditFileResult, FileError> {
    let shown = args.path.as_str();
    let target = Target::open(dir, shown)?;
    let original = match target.previous_size() {
        Some(size) if size > EDIT_LIMIT => {
            return Err(FileError::TooLarge {
                path: shown.to_string(),
                size,
                limit: EDIT_LIMIT,
            });
        }
        Some(_) => target
            .read_old(EDIT_LIMIT + 1)
            .ok_or_else(|| FileError::Moved(shown.to_string()))?,
        None => Vec::new(),
    };
    let created = target.previous_size().is_none();
    target.check(expected, (!created).then_some(original.as_slice()), shown)?;
    let (edited, replacements) = apply_edits(&original, &args.edits, shown, created)?;
    let diff = if original.len().max(edited.len()) > super::DIFF_LIMIT {
        format!(
            "({shown} was {} bytes and is now {}; too large to diff)",
            original.len(),
            edited.len()
        )
    } else {
        similar::TextDiff::from_lines(
            String::from_utf8_lossy(&original).as_ref(),
            String::from_utf8_lossy(&edited).as_ref(),
        )
        .unified_diff()
        .context_radius(3)
        .header(if created { "/dev/null" } else { shown }, shown)
        .to_string()
    };
    target.replace(&edited, shown, expected.is_some())?;
    let mut hash = super::write::PrefixHash::new(EDIT_LIMIT + 1);
    hash.update(&edited);
    Ok(EditFileResult {
        path: args.path.clone(),
        edits_applied: args.edits.len(),
        replacements,
        original_bytes: original.len() as u64,
        new_bytes: edited.len() as u64,
        created,
        diff,
        sha256: hash.finish(),
    })
}

/// The content after `edits`, in order, and how many occurrences they replaced; the first edit
/// that cannot apply is the error (numbered from 1).
pub fn apply_edits(
    original: &[u8],
    edits: &[Edit],
    shown: &str,
    missing: bool,
) -> Result<(Vec<u8>, usize), FileError> {
    let mut content = original.to_vec();
    let mut replacements = 0;
    for (index, edit) in edits.iter().enumerate() {
        let number = index + 1;
        let old = edit.old_str.as_bytes();
        if old.is_empty() {
            content.extend_from_slice(edit.new_str.as_bytes());
            replacements += 1;
            continue;
        }
        if missing && content.is_empty() {
            return Err(FileError::NotFound(shown.to_string()));
        }
        let found: Vec<usize> = memchr::memmem::find_iter(&content, old).collect();
        match found.len() {
            0 => {
                return Err(FileError::EditNotFound {
                    path: shown.to_string(),
                    edit: number,
                    hint: closest_hint(&content, &edit.old_str),
                });
            }
            1 => {}
            count if !edit.replace_all => {
                return Err(FileError::EditAmbiguous {
                    path: shown.to_string(),
                    edit: number,
                    count,
                });
            }
            _ => {}
        }
        replacements += found.len();
        content = replace_at(&content, &found, old.len(), edit.new_str.as_bytes());
    }
    Ok((content, replacements))
}

/// `content` with the `len` bytes at each of `starts` (in order, not overlapping) replaced.
///
/// Invariant, kept by the one caller: `starts` are where `len`-byte matches were found in
/// `content`, in order and not overlapping, so each slice below lies inside `content` and
/// begins at or before its end; a violation is a bug and panics rather than write a file with
/// text silently left out.
fn replace_at(content: &[u8], starts: &[usize], len: usize, new: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(content.len() + starts.len() * new.len());
    let mut from = 0;
    for &at in starts {
        out.extend_from_slice(&content[from..at]);
        out.extend_from_slice(new);
        from = at + len;
    }
    out.extend_from_slice(&content[from..]);
    out
}

/// The most lines a not-found hint compares `old_str` against.
const HINT_WINDOWS: usize = 20_000;

/// "; the closest text (similarity 0.93) is at line 12:\n…", when some window of the file's
/// lines, as many as `old_str` has, is similar enough once each line is trimmed and CRLF made
/// LF; empty otherwise.
pub fn closest_hint(content: &[u8], old_str: &str) -> String {
    let text = String::from_utf8_lossy(content);
    let lines: Vec<&str> = text.split('\n').collect();
    let wanted = normalize(old_str.split('\n'));
    let span = old_str.trim_end_matches('\n').split('\n').count().max(1);
    let mut best: Option<(f32, usize)> = None;
    for start in 0..lines.len().min(HINT_WINDOWS) {
        let end = (start + span).min(lines.len());
        // Invariant: `start` is below the length and `end` between it and the length.
        let window = normalize(lines[start..end].iter().copied());
        // The ratio is at most 2·min/(a+b): skip windows whose length alone rules them out.
        let (a, b) = (window.chars().count(), wanted.chars().count());
        let bound = 2.0 * a.min(b) as f32 / (a + b).max(1) as f32;
        if bound <= best.map_or(HINT_THRESHOLD, |(r, _)| r) {
            continue;
        }
        let ratio = similar::TextDiff::from_chars(window.as_str(), wanted.as_str()).ratio();
        if ratio > best.map_or(HINT_THRESHOLD, |(r, _)| r) {
            best = Some((ratio, start));
        }
    }
    match best {
        Some((ratio, start)) => {
            let end = (start + span).min(lines.len());
            // Invariant: `start` is one of the loop's, below the length; `end` is as there.
            let shown: Vec<&str> = lines[start..end]
                .iter()
                .map(|l| l.trim_end_matches('\r'))
                .collect();
            format!(
                "; the closest text (similarity {ratio:.2}) is at line {}:\n{}",
                start + 1,
                shown.join("\n")
            )
        }
        None => String::new(),
    }
}

fn normalize<'a>(lines: impl Iterator<Item = &'a str>) -> String {
    let trimmed: Vec<&str> = lines.map(str::trim).collect();
    trimmed.join("\n").trim().to_string()
}
