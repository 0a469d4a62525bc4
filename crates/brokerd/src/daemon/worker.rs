//! The in-process file tools in a box: the broker starts its own binary in a fresh box
//! (`brokerd box-file`) that holds only the granted folder (read-only for `read_file` and the
//! walkers `list_files`, `glob` and `grep`, read-write for `write_file` and `edit_file`) with
//! the protected folders masked, hands it the request as a file in the box's `/tmp`, and reads
//! the rendered outcome from its standard output. No directory descriptor of the broker enters
//! the box: the worker opens the folder itself, inside, where only what the grant names exists.
//!
//! What the worker must know beyond the arguments comes as data in the request: for a walker,
//! the folders to prune and what the live deny grants cover ([`tools::search::WalkLimits`]);
//! for a write, the content read before write expects ([`tools::fs::Expected`]), compared on
//! the descriptor the write uses. The ignore files of the granted folder's parents are bound
//! read-only beside it, so a walk honours them as it does outside the box.

use std::io::Write;
use std::path::{Path, PathBuf};

use proto::DenyReason;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use super::runner::{Outcome, file_outcome};
use crate::files::{FileOutcome, FileRunError};

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
    pub walk: Option<tools::search::WalkLimits>,
    /// What read before write expects of the file a write replaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expected: Option<tools::fs::Expected>,
}

/// A file call (adjacently tagged: the arguments keep every name, `grep`'s `type` too).
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "tool", content = "args", rename_all = "snake_case")]
pub enum FileCall {
    /// `read_file`.
    ReadFile(tools::fs::ReadFileArgs),
    /// `write_file`.
    WriteFile(tools::fs::WriteFileArgs),
    /// `edit_file`.
    EditFile(tools::fs::EditFileArgs),
    /// `list_files`.
    ListFiles(tools::search::ListFilesArgs),
    /// `glob`.
    Glob(tools::search::GlobArgs),
    /// `grep`.
    Grep(tools::search::GrepArgs),
}

impl FileCall {
    /// The call for `args`, and whether it writes; `None` for a tool the worker does not run.
    pub fn of(args: &crate::args::ToolArgs) -> Option<(FileCall, bool)> {
        use crate::args::ToolArgs;
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

    /// Whether it walks a tree.
    pub fn walks(&self) -> bool {
        matches!(
            self,
            FileCall::ListFiles(_) | FileCall::Glob(_) | FileCall::Grep(_)
        )
    }
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

/// Runs the request at [`REQUEST`] (in the box; in a box without bubblewrap, the same name in
/// its scratch folder, `TMPDIR`) and prints its outcome as one JSON object.
pub fn serve() -> Result<(), String> {
    let path = match std::env::var_os("TMPDIR") {
        Some(dir) => Path::new(&dir).join(
            Path::new(REQUEST)
                .strip_prefix("/tmp")
                .unwrap_or(Path::new(REQUEST)),
        ),
        None => PathBuf::from(REQUEST),
    };
    let shown = path.display();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let request: Request =
        serde_json::from_str(&text).map_err(|e| format!("{shown} is not a request: {e}"))?;
    // Flushed here: `brokerd-files` starts without std's runtime, whose exit would flush it.
    let mut output = std::io::stdout().lock();
    writeln!(output, "{}", answer(file_outcome(run(&request))))
        .and_then(|()| output.flush())
        .map_err(|e| format!("cannot write the answer: {e}"))
}

/// The most bytes of one request line a warm worker reads (a `write_file` of the largest frame,
/// escaped, fits).
pub const MAX_REQUEST: u64 = 64 << 20;

/// The warm worker (`brokerd box-file --warm`, see [`super::warm`]): reads one request per
/// line on standard input and prints one answer line for each, until standard input ends.
pub fn serve_warm() -> Result<(), String> {
    serve_lines(|line| match serde_json::from_slice::<Request>(line) {
        Ok(request) => answer(file_outcome(run(&request))),
        Err(e) => answer(Outcome::Failed(format!(
            "the warm worker got a request it cannot read: {e}"
        ))),
    })
}

/// A warm worker's loop (the file tools', the fetcher's): non-dumpable first, then one request
/// line at a time from standard input (at most [`MAX_REQUEST`] bytes), `handle`'s answer
/// printed on one line for each, until standard input ends.
pub(super) fn serve_lines(mut handle: impl FnMut(&[u8]) -> Value) -> Result<(), String> {
    use std::io::{BufRead, Read};
    // A worker lives across a session's calls: no other process may read its memory.
    sandbox::make_non_dumpable()
        .map_err(|e| format!("cannot make the worker non-dumpable: {e}"))?;
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    loop {
        let mut line = Vec::new();
        let read = input
            .by_ref()
            .take(MAX_REQUEST)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("cannot read a request: {e}"))?;
        if read == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') {
            return Err(format!(
                "a request ended without a newline or passed {MAX_REQUEST} bytes"
            ));
        }
        let answered = handle(&line);
        writeln!(output, "{answered}")
            .and_then(|()| output.flush())
            .map_err(|e| format!("cannot write an answer: {e}"))?;
    }
}

/// The worker's answer for `outcome`, as [`outcome`] reads it back.
pub(super) fn answer(outcome: Outcome) -> Value {
    match outcome {
        Outcome::Ran { fields, body } => json!({ "fields": fields, "body": body }),
        Outcome::Failed(message) => json!({ "failed": message }),
        Outcome::Denied(reason, message) => json!({ "denied": reason, "detail": message }),
    }
}

fn run(request: &Request) -> Result<FileOutcome, FileRunError> {
    let granted = |path: &str| tools::fs::GrantedDir::for_target(&request.base, Path::new(path));
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
        FileCall::ListFiles(args) => FileOutcome::Listed(tools::search::list_files(
            &granted(&args.path)?,
            args,
            &limits.options()?,
        )?),
        FileCall::Glob(args) => FileOutcome::Globbed(tools::search::glob(
            &granted(&args.path)?,
            args,
            &limits.options()?,
        )?),
        FileCall::Grep(args) => FileOutcome::Grepped(tools::search::grep(
            &granted(&args.path)?,
            args,
            &limits.options()?,
        )?),
    })
}

/// The outcome the worker printed, or a failure naming what went wrong.
pub fn outcome(stdout: &[u8], stderr: &[u8], exit: Option<sandbox::Exit>) -> Outcome {
    let parsed: Option<Map<String, Value>> = serde_json::from_slice(stdout).ok();
    match parsed {
        Some(mut map) => {
            if let Some(Value::String(message)) = map.remove("failed") {
                return Outcome::Failed(message);
            }
            if let Some(denied) = map.remove("denied") {
                let detail = match map.remove("detail") {
                    Some(Value::String(detail)) => detail,
                    _ => String::new(),
                };
                return match serde_json::from_value::<DenyReason>(denied) {
                    Ok(reason) => Outcome::Denied(reason, detail),
                    Err(e) => Outcome::Failed(format!(
                        "the file tool's box refused with a reason the broker does not know ({e}): {detail}"
                    )),
                };
            }
            let fields = match map.remove("fields") {
                Some(Value::Object(fields)) => fields,
                _ => Map::new(),
            };
            let body = match map.remove("body") {
                Some(Value::String(body)) => body,
                _ => String::new(),
            };
            Outcome::Ran { fields, body }
        }
        None => Outcome::Failed(format!(
            "the tool's box ended ({exit:?}) without an answer: {}",
            String::from_utf8_lossy(stderr).trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::{answer, outcome};
    use crate::daemon::runner::{Outcome, file_outcome};
    use crate::files::FileRunError;
    use proto::DenyReason;

    #[test]
    fn a_write_the_worker_refuses_as_unread_reaches_the_broker_as_a_read_before_write_denial() {
        let refused = file_outcome(Err(FileRunError::File(tools::fs::FileError::Unread {
            path: "/w/a.txt".to_string(),
            why: "changed since this session last read it",
        })));
        let text = answer(refused).to_string();
        let Outcome::Denied(reason, detail) = outcome(text.as_bytes(), b"", None) else {
            panic!("not a denial: {text}")
        };
        assert_eq!(reason, DenyReason::ReadBeforeWrite);
        assert!(detail.contains("/w/a.txt changed since"), "{detail}");
    }

    #[test]
    fn a_result_and_a_failure_cross_the_box_unchanged() {
        let mut fields = serde_json::Map::new();
        fields.insert("files".to_string(), serde_json::json!(2));
        let ran = Outcome::Ran {
            fields,
            body: "a\nb".to_string(),
        };
        let text = answer(ran.clone()).to_string();
        assert_eq!(outcome(text.as_bytes(), b"", None), ran);
        let failed = Outcome::Failed("bad pattern".to_string());
        let text = answer(failed.clone()).to_string();
        assert_eq!(outcome(text.as_bytes(), b"", None), failed);
    }
}
