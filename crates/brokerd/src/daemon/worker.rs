//! The broker's side of the file tools' worker in a box (the `worker` crate, whose
//! `brokerd-files box-file` runs them, as `brokerd box-file` does without it): which calls it
//! runs ([`file_call`]) and what a walk in a box needs of the folders above the grant
//! ([`above_the_grant`]: the ignore files of the granted folder's parents, bound read-only
//! beside it, so a walk honours them as it does outside the box). The request, the answer and
//! the worker's loop are the `worker` crate's, re-exported here.

use std::path::{Path, PathBuf};

pub use ::worker::{
    FileCall, MAX_REQUEST, REQUEST, Request, answer, outcome, serve, serve_lines, serve_warm,
};

use policy::args::ToolArgs;

/// The worker's call for `args`, and whether it writes; `None` for a tool the worker does not
/// run.
pub fn file_call(args: &ToolArgs) -> Option<(FileCall, bool)> {
    Some(match args {
        ToolArgs::ReadFile(a) => (FileCall::ReadFile(a.clone()), false),
        ToolArgs::WriteFile(a) => (FileCall::WriteFile(a.clone()), true),
        ToolArgs::EditFile(a) => (FileCall::EditFile(a.clone()), true),
        ToolArgs::ListFiles(a) => (FileCall::ListFiles(a.clone()), false),
        ToolArgs::Glob(a) => (FileCall::Glob(a.clone()), false),
        ToolArgs::Grep(a) => (FileCall::Grep(a.clone()), false),
        _ => return None,
    })
}

/// The names of the ignore files a walk reads in each folder above its start (`ignore`'s
/// defaults, as `rg` reads them).
const IGNORE_FILES: [&str; 3] = [".gitignore", ".ignore", ".rgignore"];

/// What a walk in a box holding only `base` needs of the folders above it: their ignore files
/// and a repository's `.git/info/exclude` (regular files only, bound read-only at the same
/// paths), and whether one of them holds a git work tree's `.git` (which stays outside the box
/// but for that file; its `.gitignore` rules then apply without it).
pub fn above_the_grant(base: &Path) -> (Vec<PathBuf>, bool) {
    let mut files = Vec::new();
    let mut git = false;
    for folder in base.ancestors().skip(1) {
        let dot_git = folder.join(".git");
        git |= dot_git.symlink_metadata().is_ok();
        // The repository's own exclude file applies as its .gitignore files do.
        let exclude = dot_git.join("info/exclude");
        if dot_git.symlink_metadata().is_ok_and(|m| m.is_dir())
            && exclude.symlink_metadata().is_ok_and(|m| m.is_file())
        {
            files.push(exclude);
        }
        for name in IGNORE_FILES {
            let file = folder.join(name);
            if file.symlink_metadata().is_ok_and(|m| m.is_file()) {
                files.push(file);
            }
        }
    }
    (files, git)
}
