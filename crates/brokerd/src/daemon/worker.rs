//! The in-process file tools in a box: the broker starts its own binary in a fresh box
//! (`brokerd box-file`) that holds only the granted folder (read-only for `read_file`,
//! read-write for `write_file` and `edit_file`) with the protected folders masked, hands it the request as a
//! file in the box's `/tmp`, and reads the rendered outcome from its standard output. No
//! directory descriptor of the broker enters the box: the worker opens the folder itself,
//! inside, where only what the grant names exists.

use std::path::{Path, PathBuf};

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
}

/// A file call.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum FileCall {
    /// `read_file`.
    ReadFile(tools::fs::ReadFileArgs),
    /// `write_file`.
    WriteFile(tools::fs::WriteFileArgs),
    /// `edit_file`.
    EditFile(tools::fs::EditFileArgs),
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
    let outcome = file_outcome(run(&request));
    let value = match outcome {
        Outcome::Ran { fields, body } => json!({ "fields": fields, "body": body }),
        Outcome::Failed(message) => json!({ "failed": message }),
        Outcome::Denied(_, message) => json!({ "failed": message }),
    };
    println!("{value}");
    Ok(())
}

fn run(request: &Request) -> Result<FileOutcome, FileRunError> {
    match &request.tool {
        FileCall::ReadFile(args) => {
            let dir = tools::fs::GrantedDir::for_target(&request.base, Path::new(&args.path))?;
            Ok(FileOutcome::Read(tools::fs::read_file(
                &dir,
                args,
                request.cap,
            )?))
        }
        FileCall::WriteFile(args) => {
            let dir = tools::fs::GrantedDir::for_target(&request.base, Path::new(&args.path))?;
            Ok(FileOutcome::Wrote(tools::fs::write_file(&dir, args)?))
        }
        FileCall::EditFile(args) => {
            let dir = tools::fs::GrantedDir::for_target(&request.base, Path::new(&args.path))?;
            Ok(FileOutcome::Edited(tools::fs::edit_file(&dir, args)?))
        }
    }
}

/// The outcome the worker printed, or a failure naming what went wrong.
pub fn outcome(stdout: &[u8], stderr: &[u8], exit: Option<sandbox::Exit>) -> Outcome {
    let parsed: Option<Map<String, Value>> = serde_json::from_slice(stdout).ok();
    match parsed {
        Some(mut map) => {
            if let Some(Value::String(message)) = map.remove("failed") {
                return Outcome::Failed(message);
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
            "the file tool's box ended ({exit:?}) without an answer: {}",
            String::from_utf8_lossy(stderr).trim()
        )),
    }
}
