//! Running a decided file call: the decision's granted folder is opened (refusing any symbolic
//! link on its way) and the tool works through that descriptor, so a folder swapped for a link
//! between the decision and the run makes the call fail instead of redirecting it. This is the
//! one place that opens a decided folder; the runner calls it.
//!
//! The walkers (`list_files`, `glob`, `grep`) start at that pinned folder, prune boxmaker's own
//! folders and leave out what a live deny grant of the same tool covers. Until the sandbox
//! lands they run in the broker's process (the `DirectRunner`); the box will run them inside.

use std::path::Path;
use std::sync::Arc;

use tools::fs::{
    EditFileResult, FileError, GrantedDir, ReadFileResult, WriteFileResult, edit_file, read_file,
    write_file,
};
use tools::search::{
    GlobResult, GrepResult, ListFilesResult, SearchError, SearchOptions, glob, grep, list_files,
};

use crate::args::ToolArgs;
use crate::grants::Grant;
use crate::policy::{Allowed, Protected, Scope};

/// What a decided file call gave.
#[derive(Debug)]
pub enum FileOutcome {
    /// `read_file`'s result.
    Read(ReadFileResult),
    /// `write_file`'s result.
    Wrote(WriteFileResult),
    /// `edit_file`'s result.
    Edited(EditFileResult),
    /// `list_files`'s result.
    Listed(ListFilesResult),
    /// `glob`'s result.
    Globbed(GlobResult),
    /// `grep`'s result.
    Grepped(GrepResult),
}

/// Why a decided call is not a file call this module runs.
#[derive(Debug, thiserror::Error)]
pub enum FileRunError {
    /// The decision is for another tool, or carries no granted folder for the path.
    #[error("the decision for {0} names no granted folder for a file tool")]
    NotAFileCall(&'static str),
    /// The tool failed.
    #[error(transparent)]
    File(#[from] FileError),
    /// A walker failed.
    #[error(transparent)]
    Search(#[from] SearchError),
}

/// What a walker is given besides its decision: the grants and boxmaker's folders.
pub struct WalkContext<'a> {
    /// The grants the call was decided against.
    pub grants: &'a [Grant],
    /// boxmaker's own folders, pruned.
    pub protected: &'a Protected,
}

/// Runs an allowed file tool or walker through its granted folder; `read_file` with `cap`.
pub fn run_file_call(
    allowed: &Allowed,
    cap: usize,
    walk: &WalkContext<'_>,
) -> Result<FileOutcome, FileRunError> {
    let tool = allowed.args.tool().as_str();
    let Some(Scope::Paths(bases)) = &allowed.scope else {
        return Err(FileRunError::NotAFileCall(tool));
    };
    let (Some(base), Some(path)) = (bases.first(), allowed.args.path()) else {
        return Err(FileRunError::NotAFileCall(tool));
    };
    let dir = GrantedDir::for_target(base, Path::new(path))?;
    Ok(match &allowed.args {
        ToolArgs::ReadFile(args) => FileOutcome::Read(read_file(&dir, args, cap)?),
        ToolArgs::WriteFile(args) => FileOutcome::Wrote(write_file(&dir, args)?),
        ToolArgs::EditFile(args) => FileOutcome::Edited(edit_file(&dir, args)?),
        ToolArgs::ListFiles(args) => {
            FileOutcome::Listed(list_files(&dir, args, &options(allowed, walk))?)
        }
        ToolArgs::Glob(args) => FileOutcome::Globbed(glob(&dir, args, &options(allowed, walk))?),
        ToolArgs::Grep(args) => FileOutcome::Grepped(grep(&dir, args, &options(allowed, walk))?),
        _ => return Err(FileRunError::NotAFileCall(tool)),
    })
}

/// The walk's limits: boxmaker's folders pruned, and every path a live deny grant of this tool
/// covers left out (a deny on `~/proj/**/*.pem` hides the keys from a `grep` on `~/proj`).
fn options(allowed: &Allowed, walk: &WalkContext<'_>) -> SearchOptions {
    let tool = allowed.args.tool();
    let now = proto::Timestamp::now();
    let denied: Vec<_> = walk
        .grants
        .iter()
        .filter(|g| g.deny && g.tool == tool && !g.expired(now))
        .flat_map(|g| g.paths.iter().cloned())
        .collect();
    let everything = walk
        .grants
        .iter()
        .any(|g| g.deny && g.tool == tool && !g.expired(now) && g.paths.is_empty());
    let skip: Option<tools::search::Skip> = if denied.is_empty() && !everything {
        None
    } else {
        Some(Arc::new(move |path: &Path| {
            everything || denied.iter().any(|rule| rule.covers(path))
        }))
    };
    SearchOptions {
        prune: walk.protected.folders().to_vec(),
        skip,
        ..SearchOptions::default()
    }
}
