//! The walk every search tool shares: the start pinned to the granted folder, symbolic links
//! never followed, protected folders pruned, ignore files honoured as `rg` does.

use std::fs::Metadata;
use std::os::unix::ffi::OsStrExt;
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
    let options = options.for_walk_from(root);
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

/// A path's bytes as a key whose byte order is the path's order component by component (the
/// order of a sorted depth-first walk): each `/` becomes NUL, which no path holds, so a
/// folder's name sorts before the names it prefixes (`a/b` before `a-b`) and a comparison is
/// one `memcmp` instead of a walk over components.
pub(crate) fn order_key(mut path: Vec<u8>) -> Vec<u8> {
    for byte in &mut path {
        if *byte == b'/' {
            *byte = 0;
        }
    }
    path
}

/// The path an [`order_key`] was made of, as text (invalid UTF-8 shown as U+FFFD).
pub(crate) fn key_path(key: &[u8]) -> String {
    let bytes: Vec<u8> = key.iter().map(|&b| if b == 0 { b'/' } else { b }).collect();
    match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    }
}

/// `path` relative to `root` (which it is below), as bytes: without the root and the `/`
/// after it.
pub(crate) fn relative_bytes<'p>(root: &[u8], path: &'p Path) -> &'p [u8] {
    let bytes = path.as_os_str().as_bytes();
    match bytes.strip_prefix(root) {
        Some(rest) => rest.strip_prefix(b"/").unwrap_or(rest),
        None => bytes,
    }
}

/// Whether `text` was cut to `max` characters, and the text (cut on a character boundary).
pub(crate) fn cut_chars(text: &str, max: usize) -> (String, bool) {
    match text.char_indices().nth(max) {
        // Invariant: `char_indices` gives character boundaries of `text`.
        Some((at, _)) => (format!("{}…", &text[..at]), true),
        None => (text.to_string(), false),
    }
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::super::SearchOptions;
    use super::{cut_chars, key_path, order_key, relative_bytes};

    #[test]
    fn keys_sort_as_paths_do_component_by_component() {
        let mut paths = [
            "a-b", "a/b", "a", "a.c", "a/b/c", "ab", "a/b-c", "a/b/c/d", "é/x",
        ];
        let mut keys: Vec<Vec<u8>> = paths
            .iter()
            .map(|p| order_key(p.as_bytes().to_vec()))
            .collect();
        keys.sort();
        paths.sort_by(|a, b| Path::new(a).cmp(Path::new(b)));
        let back: Vec<String> = keys.iter().map(|k| key_path(k)).collect();
        assert_eq!(back, paths);
        assert_eq!(relative_bytes(b"/r/s", Path::new("/r/s/a/b")), b"a/b");
        assert_eq!(relative_bytes(b"/", Path::new("/a")), b"a");
        assert_eq!(key_path(&order_key(b"a/\xff".to_vec())), "a/\u{fffd}");
    }

    #[test]
    fn a_walk_keeps_the_pruned_folders_that_can_hold_its_paths_and_leaves_out_the_same() {
        let options = SearchOptions {
            prune: ["/a/b/c", "/a", "/a/b", "/x/y", "/a/bc", "/a/b/c/d"]
                .iter()
                .map(PathBuf::from)
                .collect(),
            ..SearchOptions::default()
        };
        let kept = options.for_walk_from(Path::new("/a/b")).prune;
        let kept: Vec<&str> = kept.iter().filter_map(|p| p.to_str()).collect();
        assert_eq!(kept, ["/a/b/c", "/a", "/a/b", "/a/b/c/d"]);
        // Below a start that no pruned folder holds, each path is judged as with all of them.
        let below = SearchOptions {
            prune: vec![PathBuf::from("/w/p/q"), PathBuf::from("/other")],
            ..SearchOptions::default()
        };
        let walk = below.for_walk_from(Path::new("/w/p"));
        assert_eq!(walk.prune, [PathBuf::from("/w/p/q")]);
        for path in ["/w/p", "/w/p/q", "/w/p/q/r", "/w/p/qr", "/w/p/s/q"] {
            let path = Path::new(path);
            assert_eq!(
                walk.excludes(path),
                below.excludes(path),
                "{}",
                path.display()
            );
        }
    }

    #[test]
    fn a_line_is_cut_on_a_character_boundary() {
        assert_eq!(cut_chars("aé日😀b", 3), ("aé日…".to_string(), true));
        assert_eq!(cut_chars("aé日", 3), ("aé日".to_string(), false));
        assert_eq!(cut_chars("", 0), (String::new(), false));
    }
}
