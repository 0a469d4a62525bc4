//! The file worker's request (the tool's arguments and what it must know beside them) and its
//! run inside the box.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use tools::fs::{
    EditFileArgs, EditFileResult, Expected, FileError, GrantedDir, ReadFileArgs, ReadFileResult,
    WriteFileArgs, WriteFileResult,
};
use tools::search::{
    GlobArgs, GlobResult, GrepArgs, GrepResult, ListFilesArgs, ListFilesResult, SearchError,
    WalkLimits, WarmIndex,
};

/// Where the request lies in the worker's box.
pub const REQUEST: &str = "/tmp/boxmaker-request.json";

/// What the worker is asked to do.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Request {
    /// The tool's arguments, paths resolved.
    pub tool: FileCall,
    /// The granted folder the path is below.
    pub base: PathBuf,
    /// `read_file`'s cap in bytes.
    pub cap: usize,
    /// A walker's limits (what it prunes and leaves out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub walk: Option<WalkLimits>,
    /// What read before write expects of the file a write replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<Expected>,
}

/// A file call (adjacently tagged: the arguments keep every name, `grep`'s `type` too).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "tool", content = "args", rename_all = "snake_case")]
pub enum FileCall {
    /// `read_file`.
    ReadFile(ReadFileArgs),
    /// `write_file`.
    WriteFile(WriteFileArgs),
    /// `edit_file`.
    EditFile(EditFileArgs),
    /// `list_files`.
    ListFiles(ListFilesArgs),
    /// `glob`.
    Glob(GlobArgs),
    /// `grep`.
    Grep(GrepArgs),
}

impl FileCall {
    /// Whether it walks a tree.
    pub fn walks(&self) -> bool {
        matches!(
            self,
            FileCall::ListFiles(_) | FileCall::Glob(_) | FileCall::Grep(_)
        )
    }
}

/// What a file call gave.
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

/// Why a file call did not give a [`FileOutcome`].
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

/// Runs `request` on its granted folder, opened here (in the box).
pub fn run(request: &Request) -> Result<FileOutcome, FileRunError> {
    run_with(request, None)
}

/// [`run`], the walkers answered from `index` (a warm worker's, kept across its calls) when it
/// is current.
pub fn run_with(
    request: &Request,
    index: Option<&mut WarmIndex>,
) -> Result<FileOutcome, FileRunError> {
    let granted = |path: &str| GrantedDir::for_target(&request.base, Path::new(path));
    let expected = request.expected.as_ref();
    let limits = request.walk.clone().unwrap_or_default();
    Ok(match &request.tool {
        FileCall::ReadFile(args) => FileOutcome::Read(tools::fs::read_file(
            &granted(&args.path)?,
            args,
            request.cap,
        )?),
        FileCall::WriteFile(args) => FileOutcome::Wrote(tools::fs::write_file_expecting(
            &granted(&args.path)?,
            args,
            expected,
        )?),
        FileCall::EditFile(args) => FileOutcome::Edited(tools::fs::edit_file_expecting(
            &granted(&args.path)?,
            args,
            expected,
        )?),
        FileCall::ListFiles(args) => {
            let (dir, options) = (granted(&args.path)?, limits.options()?);
            FileOutcome::Listed(match index {
                Some(index) => index.list_files(&dir, args, &limits, &options)?,
                None => tools::search::list_files(&dir, args, &options)?,
            })
        }
        FileCall::Glob(args) => {
            let (dir, options) = (granted(&args.path)?, limits.options()?);
            FileOutcome::Globbed(match index {
                Some(index) => index.glob(&dir, args, &limits, &options)?,
                None => tools::search::glob(&dir, args, &options)?,
            })
        }
        FileCall::Grep(args) => {
            let (dir, options) = (granted(&args.path)?, limits.options()?);
            FileOutcome::Grepped(match index {
                Some(index) => index.grep(&dir, args, &limits, &options)?,
                None => tools::search::grep(&dir, args, &options)?,
            })
        }
    })
}
