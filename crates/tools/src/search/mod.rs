//! `list_files`, `glob` and `grep`: the walkers, on ripgrep's crates (`ignore` walks and honours
//! `.gitignore`, `.ignore` and hidden files as `rg` does; `globset` matches globs;
//! `grep-searcher` and `grep-regex` search), never by spawning a program.
//!
//! Every walker starts at a folder the broker granted and pinned ([`GrantedDir`]): the start
//! is checked to be the very folder pinned (same device and inode, reached without a symbolic
//! link), then walked by path. The walk never follows a symbolic link and prunes every folder
//! in [`SearchOptions::prune`] (boxmaker's own config, ledger, audit log and conversations),
//! so a grant on `~` cannot reach them. The broker runs the walkers in a box holding only the
//! granted folder (brokerd's worker), handing it what to leave out as data ([`WalkLimits`]);
//! with the file walls off they run in the broker's process, where a folder swapped between the
//! check and the walk is caught only at the start.

mod glob;
mod grep;
mod index;
mod list;
mod walk;

pub use glob::{GlobArgs, GlobResult, glob, glob_schema};
pub use grep::{GrepArgs, GrepResult, OutputMode, grep, grep_schema};
pub use index::{MAX_ENTRIES, MAX_TREES, WarmIndex};
pub use list::{ListEntry, ListFilesArgs, ListFilesResult, list_files, list_files_schema};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use globset::GlobBuilder;
use serde::{Deserialize, Serialize};

use crate::fs::FileError;

/// The default cap on the entries `list_files` and `glob` return.
pub const ENTRY_CAP: usize = 1000;
/// The default cap on the lines `grep` returns.
pub const LINE_CAP: usize = 1000;
/// The default cap on the characters of one line `grep` shows.
pub const LINE_CHARS: usize = 500;

/// A test on a path found by a walk: `true` leaves it out (and, for a folder, all below it).
pub type Skip = Arc<dyn Fn(&Path) -> bool + Send + Sync>;

/// What the broker hands every walker besides the arguments.
#[derive(Clone)]
pub struct SearchOptions {
    /// Folders never entered nor listed (absolute, as resolved).
    pub prune: Vec<PathBuf>,
    /// Paths left out besides `prune` (the broker's deny grants below the start).
    pub skip: Option<Skip>,
    /// The most entries `list_files` and `glob` return.
    pub max_entries: usize,
    /// The most lines (or files, or counts) `grep` returns.
    pub max_lines: usize,
    /// The most characters of a line `grep` shows; the rest is cut on a character boundary.
    pub max_line_chars: usize,
    /// Threads of the parallel walks of `grep` and `list_files` (0: as many as the machine
    /// has cores).
    pub threads: usize,
    /// The start lies in a git work tree whose `.git` the walk cannot see (a box holding only a
    /// folder inside the repository): `.gitignore` files are honoured without looking for it.
    pub git_repo_above: bool,
}

impl Default for SearchOptions {
    fn default() -> SearchOptions {
        SearchOptions {
            prune: Vec::new(),
            skip: None,
            max_entries: ENTRY_CAP,
            max_lines: LINE_CAP,
            max_line_chars: LINE_CHARS,
            threads: 0,
            git_repo_above: false,
        }
    }
}

impl std::fmt::Debug for SearchOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SearchOptions")
            .field("prune", &self.prune)
            .field("skip", &self.skip.is_some())
            .field("max_entries", &self.max_entries)
            .field("max_lines", &self.max_lines)
            .field("max_line_chars", &self.max_line_chars)
            .field("threads", &self.threads)
            .field("git_repo_above", &self.git_repo_above)
            .finish()
    }
}

impl SearchOptions {
    /// Whether a walk leaves `path` out.
    pub fn excludes(&self, path: &Path) -> bool {
        self.prune.iter().any(|p| path.starts_with(p))
            || self.skip.as_ref().is_some_and(|skip| skip(path))
    }

    /// These options for a walk from `root`, keeping only the pruned folders that can hold one
    /// of its paths (below `root`, or `root` itself or above it): the others cannot, and each
    /// entry of the walk is checked against every one kept.
    pub(crate) fn for_walk_from(&self, root: &Path) -> SearchOptions {
        let mut options = self.clone();
        options
            .prune
            .retain(|p| p.starts_with(root) || root.starts_with(p));
        options
    }
}

/// A path rule a walk leaves out, as data (what a walker in a box is handed of the broker's
/// deny grants).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Exclusion {
    /// This path and everything below it.
    Below {
        /// The path, absolute and resolved.
        path: PathBuf,
    },
    /// What this absolute glob matches (globset's syntax, `*` not crossing `/`, `\` escaping),
    /// and everything below that.
    Glob {
        /// The glob.
        glob: String,
    },
    /// Everything (a deny grant of the tool that names no path).
    Everything,
}

/// What a walk leaves out and how it reads ignore files, as data: what the broker hands a walker
/// in a box, which makes the [`SearchOptions`] from it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WalkLimits {
    /// Folders never entered nor listed ([`SearchOptions::prune`]).
    pub prune: Vec<PathBuf>,
    /// Paths left out besides `prune`.
    pub excluded: Vec<Exclusion>,
    /// [`SearchOptions::git_repo_above`].
    #[serde(default)]
    pub git_repo_above: bool,
}

impl WalkLimits {
    /// The walk's options (default caps and threads), or the glob of an exclusion that does
    /// not parse.
    pub fn options(&self) -> Result<SearchOptions, SearchError> {
        let mut below = Vec::new();
        let mut globs = Vec::new();
        let mut everything = false;
        for exclusion in &self.excluded {
            match exclusion {
                Exclusion::Below { path } => below.push(path.clone()),
                Exclusion::Glob { glob } => globs.push(
                    GlobBuilder::new(glob)
                        .literal_separator(true)
                        .backslash_escape(true)
                        .build()
                        .map_err(|e| SearchError::BadGlob {
                            glob: glob.clone(),
                            message: e.kind().to_string(),
                        })?
                        .compile_matcher(),
                ),
                Exclusion::Everything => everything = true,
            }
        }
        let skip: Option<Skip> = if below.is_empty() && globs.is_empty() && !everything {
            None
        } else {
            Some(Arc::new(move |path: &Path| {
                everything
                    || below.iter().any(|b| path.starts_with(b))
                    || path
                        .ancestors()
                        .any(|p| globs.iter().any(|g| g.is_match(p)))
            }))
        };
        Ok(SearchOptions {
            prune: self.prune.clone(),
            skip,
            git_repo_above: self.git_repo_above,
            ..SearchOptions::default()
        })
    }
}

/// Why a walker could not do its work.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// The start could not be reached as granted.
    #[error(transparent)]
    File(#[from] FileError),
    /// The start of `list_files` or `glob` is not a folder.
    #[error("{0} is not a directory")]
    NotADirectory(String),
    /// The regular expression does not compile.
    #[error("the pattern {pattern:?} is not a valid regular expression: {message}")]
    BadPattern {
        /// The pattern.
        pattern: String,
        /// The engine's message.
        message: String,
    },
    /// The glob does not parse.
    #[error("the glob {glob:?} is not valid: {message}")]
    BadGlob {
        /// The glob.
        glob: String,
        /// The parser's message.
        message: String,
    },
    /// The file type is not one `grep` knows.
    #[error("{message}; the types are ripgrep's (rg --type-list), e.g. rust, py, js, md")]
    UnknownType {
        /// The matcher's message.
        message: String,
    },
}
