//! Step 3 of the decision: a call's JSON arguments parsed strictly for its tool, with the
//! broker's caps on paths and texts.

use super::*;

/// The most bytes of `write_file` content or `shell` command the broker takes.
pub const TEXT_ARGUMENT_CAP: usize = 8 * 1024 * 1024;

/// Parses `arguments` (JSON text) for `tool`. Unknown fields are errors; a `consult` question
/// is cut to [`QUESTION_CAP`] bytes on a character boundary.
pub fn parse(tool: ToolName, arguments: &str) -> Result<ToolArgs, ArgsError> {
    match tool {
        ToolName::ReadFile => {
            let args: ReadFileArgs = shape(arguments)?;
            within_path_cap("path", &args.path)?;
            Ok(ToolArgs::ReadFile(args))
        }
        ToolName::WriteFile => {
            let args: WriteFileArgs = shape(arguments)?;
            within_path_cap("path", &args.path)?;
            within_cap("content", &args.content)?;
            Ok(ToolArgs::WriteFile(args))
        }
        ToolName::EditFile => {
            let args: EditFileArgs = shape(arguments)?;
            within_path_cap("path", &args.path)?;
            if args.edits.is_empty() {
                return Err(ArgsError::Shape(
                    "edits is empty: give at least one edit".into(),
                ));
            }
            let total: usize = args
                .edits
                .iter()
                .map(|e| e.old_str.len() + e.new_str.len())
                .sum();
            if total > TEXT_ARGUMENT_CAP {
                return Err(ArgsError::Shape(format!(
                    "edits are {total} bytes, more than the {TEXT_ARGUMENT_CAP} the broker takes"
                )));
            }
            Ok(ToolArgs::EditFile(args))
        }
        ToolName::ListFiles => {
            let args: ListFilesArgs = shape(arguments)?;
            within_path_cap("path", &args.path)?;
            Ok(ToolArgs::ListFiles(args))
        }
        ToolName::Glob => {
            let args: GlobArgs = shape(arguments)?;
            within_path_cap("path", &args.path)?;
            within_path_cap("pattern", &args.pattern)?;
            Ok(ToolArgs::Glob(args))
        }
        ToolName::Grep => {
            let args: GrepArgs = shape(arguments)?;
            within_path_cap("path", &args.path)?;
            within_cap("pattern", &args.pattern)?;
            Ok(ToolArgs::Grep(args))
        }
        ToolName::Shell => {
            let args: ShellArgs = shape(arguments)?;
            within_cap("command", &args.command)?;
            if let Some(cwd) = &args.cwd {
                within_path_cap("cwd", cwd)?;
            }
            if args.timeout_secs == Some(0) {
                return Err(ArgsError::Shape(
                    "timeout_secs is 0: give at least 1 second".into(),
                ));
            }
            Ok(ToolArgs::Shell(args))
        }
        ToolName::HttpFetch => {
            let args: HttpFetchArgs = shape(arguments)?;
            https_host(&args.url).map_err(|error| ArgsError::Shape(error.to_string()))?;
            if args.max_length == Some(0) {
                return Err(ArgsError::Shape(
                    "max_length is 0: give at least 1 character".into(),
                ));
            }
            Ok(ToolArgs::HttpFetch(args))
        }
        ToolName::Consult => Ok(ToolArgs::Consult {
            question: consult_question(arguments)?,
        }),
        ToolName::Ask => parse_ask(arguments)
            .map(ToolArgs::Ask)
            .map_err(ArgsError::Shape),
        ToolName::Recall => parse_recall(arguments)
            .map(ToolArgs::Recall)
            .map_err(ArgsError::Shape),
        ToolName::Memory => parse_memory(arguments)
            .map(ToolArgs::Memory)
            .map_err(ArgsError::Shape),
        ToolName::AskMemory => parse_ask_memory(arguments)
            .map(ToolArgs::AskMemory)
            .map_err(ArgsError::Shape),
        ToolName::Delegate => parse_delegate(arguments)
            .map(ToolArgs::Delegate)
            .map_err(ArgsError::Shape),
        ToolName::WebSearch => {
            let args: WebSearchArgs = shape(arguments)?;
            within_cap("query", &args.query)?;
            if args.query.trim().is_empty() {
                return Err(ArgsError::Shape(
                    "query is empty: say what to search for".into(),
                ));
            }
            if let Some(n) = args.max_results
                && !(1..=MAX_RESULTS).contains(&n)
            {
                return Err(ArgsError::Shape(format!(
                    "max_results is {n}: give 1 to {MAX_RESULTS}"
                )));
            }
            Ok(ToolArgs::WebSearch(args))
        }
        ToolName::GitStatus => {
            let args: GitStatusArgs = shape(arguments)?;
            within_path_cap("path", &args.path)?;
            Ok(ToolArgs::GitStatus(args))
        }
        ToolName::GitDiff => {
            let args: GitDiffArgs = shape(arguments)?;
            within_path_cap("path", &args.path)?;
            let filters = args.paths.as_deref().unwrap_or_default();
            if filters.len() > MAX_DIFF_PATHS {
                return Err(ArgsError::Shape(format!(
                    "paths has {} entries: give at most {MAX_DIFF_PATHS}",
                    filters.len()
                )));
            }
            for filter in filters {
                within_path_cap("paths", filter)?;
                check_diff_path(filter).map_err(ArgsError::Shape)?;
            }
            Ok(ToolArgs::GitDiff(args))
        }
        ToolName::GitClone => {
            let args: GitCloneArgs = shape(arguments)?;
            within_path_cap("path", &args.path)?;
            if args.url.starts_with("git@") || args.url.starts_with("ssh://") {
                return Err(ArgsError::Shape(SSH_NOT_SUPPORTED.to_string()));
            }
            within_path_cap("url", &args.url)?;
            https_host(&args.url).map_err(|error| ArgsError::Shape(error.to_string()))?;
            Ok(ToolArgs::GitClone(args))
        }
        ToolName::BashBg => {
            let args: BashBgArgs = shape(arguments)?;
            within_cap("command", &args.command)?;
            if let Some(cwd) = &args.cwd {
                within_path_cap("cwd", cwd)?;
            }
            Ok(ToolArgs::BashBg(args.script()))
        }
        ToolName::BashTail => {
            let args: BashTailArgs = shape(arguments)?;
            job_id(args.job)?;
            if args.max_bytes == Some(0) {
                return Err(ArgsError::Shape(
                    "max_bytes is 0: give at least 1 byte".into(),
                ));
            }
            Ok(ToolArgs::BashTail(args))
        }
        ToolName::BashKill => {
            let args: BashKillArgs = shape(arguments)?;
            job_id(args.job)?;
            Ok(ToolArgs::BashKill(args))
        }
    }
}

/// Job ids start at 1 (a job's id is the id of the `bash_bg` call that started it).
fn job_id(job: u64) -> Result<(), ArgsError> {
    if job == 0 {
        return Err(ArgsError::Shape(
            "job is 0: give the id bash_bg returned (1 or more)".into(),
        ));
    }
    Ok(())
}

/// A `consult` call's question, parsed as [`parse`] parses it (unknown fields refused) and cut
/// to [`QUESTION_CAP`] bytes on a character boundary.
pub fn consult_question(arguments: &str) -> Result<String, ArgsError> {
    let value: ConsultArgs = shape(arguments)?;
    Ok(cap_bytes(&value.question, QUESTION_CAP).0)
}

fn shape<T: serde::de::DeserializeOwned>(arguments: &str) -> Result<T, ArgsError> {
    serde_json::from_str(arguments).map_err(|error| ArgsError::Shape(error.to_string()))
}

fn within_path_cap(field: &str, path: &str) -> Result<(), ArgsError> {
    if path.len() > MAX_PATH_BYTES {
        return Err(ArgsError::Shape(format!(
            "{field} is {} bytes, longer than the {MAX_PATH_BYTES} a path may have",
            path.len()
        )));
    }
    Ok(())
}

fn within_cap(field: &str, text: &str) -> Result<(), ArgsError> {
    if text.len() > TEXT_ARGUMENT_CAP {
        return Err(ArgsError::Shape(format!(
            "{field} is {} bytes, more than the {TEXT_ARGUMENT_CAP} the broker takes",
            text.len()
        )));
    }
    Ok(())
}
