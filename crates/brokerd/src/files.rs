//! Running a decided file call: the decision's granted folder is opened (refusing any symbolic
//! link on its way) and the tool works through that descriptor, so a folder swapped for a link
//! between the decision and the run makes the call fail instead of redirecting it. This is the
//! one place that opens a decided folder; the runner calls it.
//!
//! The walkers (`list_files`, `glob`, `grep`) start at that pinned folder, prune boxmaker's own
//! folders and leave out what a live deny grant of the same tool covers ([`walk_limits`], data
//! that a walker in a box receives too). The `SandboxedRunner` runs them in brokerd's worker in
//! a box; the `DirectRunner` (file walls off) runs them here, in the broker's process.

use std::path::Path;

use tools::fs::{Expected, GrantedDir, edit_file_expecting, read_file, write_file_expecting};
use tools::search::{SearchError, SearchOptions, WalkLimits, glob, grep, list_files};

use policy::args::ToolArgs;
use policy::decide::{Allowed, Protected, Scope};
use policy::grants::Grant;

pub use worker::{FileOutcome, FileRunError};

/// What a file call is given besides its decision: the grants and boxmaker's folders (for a
/// walker), and what read before write expects of the file a write replaces.
pub struct WalkContext<'a> {
    /// The grants the call was decided against.
    pub grants: &'a [Grant],
    /// boxmaker's own folders, pruned.
    pub protected: &'a Protected,
    /// What `write_file` and `edit_file` must find (read before write), if anything.
    pub expected: Option<&'a Expected>,
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
        ToolArgs::WriteFile(args) => {
            FileOutcome::Wrote(write_file_expecting(&dir, args, walk.expected)?)
        }
        ToolArgs::EditFile(args) => {
            FileOutcome::Edited(edit_file_expecting(&dir, args, walk.expected)?)
        }
        ToolArgs::ListFiles(args) => {
            FileOutcome::Listed(list_files(&dir, args, &options(allowed, walk)?)?)
        }
        ToolArgs::Glob(args) => FileOutcome::Globbed(glob(&dir, args, &options(allowed, walk)?)?),
        ToolArgs::Grep(args) => FileOutcome::Grepped(grep(&dir, args, &options(allowed, walk)?)?),
        _ => return Err(FileRunError::NotAFileCall(tool)),
    })
}

fn options(allowed: &Allowed, walk: &WalkContext<'_>) -> Result<SearchOptions, SearchError> {
    walk_limits(allowed, walk.grants, walk.protected).options()
}

/// The walk's limits, as data: boxmaker's folders pruned, and every path a live deny grant of
/// this tool covers left out (a deny on `~/proj/**/*.pem` hides the keys from a `grep` on
/// `~/proj`).
pub fn walk_limits(allowed: &Allowed, grants: &[Grant], protected: &Protected) -> WalkLimits {
    let tool = allowed.args.tool();
    let now = proto::Timestamp::now();
    let mut excluded = Vec::new();
    for grant in grants
        .iter()
        .filter(|g| g.deny && g.tool == tool && !g.expired(now))
    {
        if grant.paths.is_empty() {
            excluded.push(tools::search::Exclusion::Everything);
        }
        excluded.extend(grant.paths.iter().flat_map(|rule| rule.exclusions()));
    }
    WalkLimits {
        prune: protected.folders().to_vec(),
        excluded,
        git_repo_above: false,
    }
}
