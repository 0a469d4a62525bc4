//! `list_files`: the entries of a folder, or of its tree down to a depth, sorted by path.

use serde::{Deserialize, Serialize};
use serde_json::json;

use proto::ToolSchema;

use super::walk::{pinned_start, walker};
use super::{SearchError, SearchOptions};
use crate::fs::GrantedDir;

/// The default depth of a recursive `list_files`.
pub const MAX_DEPTH: usize = 10;

/// The arguments of `list_files`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListFilesArgs {
    /// The absolute path of the folder.
    pub path: String,
    /// List the whole tree instead of the folder's own entries.
    #[serde(default)]
    pub recursive: bool,
    /// How deep a recursive listing goes (default 10).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_depth: Option<usize>,
}

/// One entry `list_files` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListEntry {
    /// The path relative to the folder listed (invalid UTF-8 shown as U+FFFD).
    pub path: String,
    /// The size in bytes (of the link itself for a symbolic link).
    pub size: u64,
    /// Whether it is a folder.
    pub is_dir: bool,
    /// Whether it is a symbolic link (listed, never followed).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub symlink: bool,
}

/// What `list_files` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ListFilesResult {
    /// The folder listed.
    pub path: String,
    /// The entries, sorted by path.
    pub entries: Vec<ListEntry>,
    /// Whether the cap cut the list.
    pub truncated: bool,
}

/// `list_files`'s schema (seed 002's parameters, with the path required and absolute).
pub fn list_files_schema() -> ToolSchema {
    ToolSchema {
        name: "list_files".to_string(),
        description: "List the files of a folder, or of its tree, honouring .gitignore and \
            skipping hidden files. Needs a grant from the owner for the path."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the folder." },
                "recursive": { "type": "boolean", "description": "List files recursively (default: false)." },
                "max_depth": { "type": "integer", "minimum": 1, "description": "Maximum recursion depth (default: 10)." }
            },
            "required": ["path"],
            "additionalProperties": false
        }),
    }
}

/// Lists the folder at `args.path`, below `dir`.
pub fn list_files(
    dir: &GrantedDir,
    args: &ListFilesArgs,
    options: &SearchOptions,
) -> Result<ListFilesResult, SearchError> {
    let (root, meta) = pinned_start(dir, &args.path)?;
    if !meta.is_dir() {
        return Err(SearchError::NotADirectory(args.path.clone()));
    }
    let depth = if args.recursive {
        args.max_depth.unwrap_or(MAX_DEPTH).max(1)
    } else {
        1
    };
    let mut builder = walker(&root, options);
    builder
        .max_depth(Some(depth))
        .sort_by_file_path(|a, b| a.cmp(b));
    let mut entries = Vec::new();
    let mut truncated = false;
    for entry in builder.build().flatten() {
        if entry.depth() == 0 {
            continue;
        }
        if entries.len() == options.max_entries {
            truncated = true;
            break;
        }
        let Some(kind) = entry.file_type() else {
            continue;
        };
        let size = entry.metadata().map_or(0, |m| m.len());
        let relative = entry.path().strip_prefix(&root).unwrap_or(entry.path());
        entries.push(ListEntry {
            path: relative.to_string_lossy().into_owned(),
            size,
            is_dir: kind.is_dir(),
            symlink: kind.is_symlink(),
        });
    }
    Ok(ListFilesResult {
        path: args.path.clone(),
        entries,
        truncated,
    })
}
