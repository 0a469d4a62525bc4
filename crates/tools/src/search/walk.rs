//! The walk every search tool shares: the start pinned to the granted folder, symbolic links
//! never followed, protected folders pruned, ignore files honoured as `rg` does.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use ignore::WalkBuilder;
use rustix::fs::{Mode, OFlags};

use super::{SearchError, SearchOptions};
use crate::fs::{FileError, GrantedDir};

/// The start of a walk: `shown` (an absolute path at or below `dir`) checked to be the file or
/// folder `dir` reaches without a link, and its metadata.
pub(crate) fn pinned_start(
    dir: &GrantedDir,
    shown: &str,
) -> Result<(PathBuf, Metadata), SearchError> {
    let path = PathBuf::from(shown);
    if !path.is_absolute() {
        return Err(FileError::NotAbsolute(shown.to_string()).into());
    }
    let pinned = if path == dir.path() {
        dir.open_beneath(Path::new("."), OFlags::PATH, Mode::empty(), shown)?
    } else {
        let relative = dir.relative(&path)?;
        dir.open_beneath(relative, OFlags::PATH, Mode::empty(), shown)?
    };
    let held = std::fs::File::from(pinned)
        .metadata()
        .map_err(|e| io_error(shown, e))?;
    let seen = std::fs::symlink_metadata(&path).map_err(|e| io_error(shown, e))?;
    if held.dev() != seen.dev() || held.ino() != seen.ino() {
        return Err(FileError::Moved(shown.to_string()).into());
    }
    Ok((path, seen))
}

/// A walker from `root` as `rg` walks (hidden files skipped; `.gitignore` in a git work tree,
/// `.ignore` and `.rgignore` everywhere, parents' ignore files included; the user's global
/// gitignore left out so the result does not depend on whose broker it is), never following a
/// link and never entering what `options` excludes.
pub(crate) fn walker(root: &Path, options: &SearchOptions) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .follow_links(false)
        .hidden(true)
        .git_global(false)
        .require_git(!options.git_repo_above)
        .same_file_system(false);
    let options = options.clone();
    builder.filter_entry(move |entry| !options.excludes(entry.path()));
    builder
}

fn io_error(shown: &str, source: std::io::Error) -> SearchError {
    if source.kind() == std::io::ErrorKind::NotFound {
        return FileError::NotFound(shown.to_string()).into();
    }
    FileError::Io {
        path: shown.to_string(),
        source,
    }
    .into()
}

/// Whether `text` was cut to `max` characters, and the text (cut on a character boundary).
pub(crate) fn cut_chars(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        Some((at, _)) => (format!("{}…", text.get(..at).unwrap_or(text)), true),
        None => (text.to_string(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::cut_chars;

    #[test]
    fn a_line_is_cut_on_a_character_boundary() {
        assert_eq!(cut_chars("aé日😀b", 3), ("aé日…".to_string(), true));
        assert_eq!(cut_chars("aé日", 3), ("aé日".to_string(), false));
        assert_eq!(cut_chars("", 0), (String::new(), false));
    }
}
