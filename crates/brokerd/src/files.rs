//! Running a decided file call: the decision's granted folder is opened (refusing any symbolic
//! link on its way) and the tool works through that descriptor, so a folder swapped for a link
//! between the decision and the run makes the call fail instead of redirecting it. This is the
//! one place that opens a decided folder; the runner calls it.

use std::path::Path;

use tools::fs::{FileError, GrantedDir, ReadFileResult, WriteFileResult, read_file, write_file};

use crate::args::ToolArgs;
use crate::policy::{Allowed, Scope};

/// What a decided file call gave.
#[derive(Debug)]
pub enum FileOutcome {
    /// `read_file`'s result.
    Read(ReadFileResult),
    /// `write_file`'s result.
    Wrote(WriteFileResult),
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
}

/// Runs an allowed `read_file` (with `cap`) or `write_file` through its granted folder.
pub fn run_file_call(allowed: &Allowed, cap: usize) -> Result<FileOutcome, FileRunError> {
    let tool = allowed.args.tool().as_str();
    let Some(Scope::Paths(bases)) = &allowed.scope else {
        return Err(FileRunError::NotAFileCall(tool));
    };
    let Some(base) = bases.first() else {
        return Err(FileRunError::NotAFileCall(tool));
    };
    match &allowed.args {
        ToolArgs::ReadFile(args) => {
            let dir = GrantedDir::for_target(base, Path::new(&args.path))?;
            Ok(FileOutcome::Read(read_file(&dir, args, cap)?))
        }
        ToolArgs::WriteFile(args) => {
            let dir = GrantedDir::for_target(base, Path::new(&args.path))?;
            Ok(FileOutcome::Wrote(write_file(&dir, args)?))
        }
        _ => Err(FileRunError::NotAFileCall(tool)),
    }
}
