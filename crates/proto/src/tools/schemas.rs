//! The schema of every built-in tool, as models read it: the seed-pinned texts (seeds M3a/16
//! and 002) byte for byte, and the broker's wider versions of the seed's four tools (the seed's
//! name, description and properties, with optional properties added). [`super::ToolName::schema`]
//! picks a tool's; the argument structs that parse them (`tools`, `policy`) are checked against
//! them by `crates/tools/tests/all/schemas.rs` and `policy::memory`'s tests.

use serde_json::json;

use crate::ToolSchema;

/// The longest time limit a `shell` call may ask for, in seconds (seed 002).
pub const MAX_TIMEOUT_SECS: u64 = 300;
/// The most results a `web_search` call may ask for (seed 002).
pub const MAX_RESULTS: u32 = 10;
/// The most characters of text an `http_fetch` call may ask for.
pub const MAX_MAX_LENGTH: usize = 1_000_000;
/// The most path filters a `git_diff` call takes.
pub const MAX_DIFF_PATHS: usize = 100;

/// `read_file`'s schema, with the texts of seed M3a/16.
pub fn read_file_schema() -> ToolSchema {
    ToolSchema {
        name: "read_file".to_string(),
        description: "Read a text file. Needs a grant from the owner for the path.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the file." }
            },
            "required": ["path"]
        }),
    }
}

/// `read_file`'s schema as the broker lists it: the seed's (same description, same `path`)
/// with the optional `offset` and `limit`.
pub fn broker_read_file_schema() -> ToolSchema {
    let mut schema = read_file_schema();
    if let Some(properties) = schema.parameters["properties"].as_object_mut() {
        properties.insert(
            "offset".to_string(),
            json!({ "type": "integer", "minimum": 1, "description": "The first line to read, counted from 1 (default: 1)." }),
        );
        properties.insert(
            "limit".to_string(),
            json!({ "type": "integer", "minimum": 0, "description": "How many lines to read at most (default: to the end, within the size cap)." }),
        );
    }
    schema
}

/// `write_file`'s schema, with the texts of seed M3a/16.
pub fn write_file_schema() -> ToolSchema {
    ToolSchema {
        name: "write_file".to_string(),
        description: "Write a text file, replacing it. Needs a grant from the owner for the path."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the file." },
                "content": { "type": "string", "description": "The whole new content of the file." }
            },
            "required": ["path", "content"]
        }),
    }
}

/// `edit_file`'s schema.
pub fn edit_file_schema() -> ToolSchema {
    ToolSchema {
        name: "edit_file".to_string(),
        description: "Edit a text file by exact snippets, applied in order, all or none. \
            Needs a grant from the owner for the path."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the file." },
                "edits": {
                    "type": "array",
                    "description": "The edits, applied in order.",
                    "items": {
                        "type": "object",
                        "properties": {
                            "old_str": { "type": "string", "description": "The exact text to find; empty appends new_str (creating the file)." },
                            "new_str": { "type": "string", "description": "The text that replaces it." },
                            "replace_all": { "type": "boolean", "description": "Replace every occurrence (default false: old_str must occur once)." }
                        },
                        "required": ["old_str", "new_str"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["path", "edits"]
        }),
    }
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

/// `glob`'s schema.
pub fn glob_schema() -> ToolSchema {
    ToolSchema {
        name: "glob".to_string(),
        description: "Find files by a glob pattern such as **/*.rs, newest first, honouring \
            .gitignore and skipping hidden files. Needs a grant from the owner for the path."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": { "type": "string", "description": "The glob, matched against paths relative to path: * stays within a folder, ** crosses folders." },
                "path": { "type": "string", "description": "The absolute path of the folder to search." }
            },
            "required": ["pattern", "path"],
            "additionalProperties": false
        }),
    }
}

/// `grep`'s schema.
pub fn grep_schema() -> ToolSchema {
    let count = |text: &str| json!({ "type": "integer", "minimum": 0, "description": text });
    ToolSchema {
        name: "grep".to_string(),
        description: "Search file contents with a regular expression (ripgrep's engine and \
            syntax), honouring .gitignore and skipping hidden and binary files. Needs a grant \
            from the owner for the path."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "pattern": { "type": "string", "description": "The regular expression." },
                "path": { "type": "string", "description": "The absolute path of the file or folder to search." },
                "output_mode": { "type": "string", "enum": ["content", "files_with_matches", "count"], "description": "content: matching lines with line numbers; files_with_matches (default): paths; count: matches per file." },
                "case_insensitive": { "type": "boolean", "description": "Ignore case." },
                "before": count("Lines of context before each match (content mode)."),
                "after": count("Lines of context after each match (content mode)."),
                "context": count("Lines of context before and after each match (content mode)."),
                "glob": { "type": "string", "description": "Only files matching this glob, e.g. *.rs or !*.min.js." },
                "type": { "type": "string", "description": "Only files of this type, e.g. rust, py, js." },
                "multiline": { "type": "boolean", "description": "Let the pattern span lines; . matches a newline." }
            },
            "required": ["pattern", "path"],
            "additionalProperties": false
        }),
    }
}

/// `shell`'s schema, with the texts of seed M3a/16.
pub fn shell_schema() -> ToolSchema {
    ToolSchema {
        name: "shell".to_string(),
        description: "Run a shell command in a sandbox. Needs a grant from the owner.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "command": { "type": "string", "description": "The command line to run." },
                "cwd": { "type": "string", "description": "The absolute path of the directory to run it in." }
            },
            "required": ["command"]
        }),
    }
}

/// `shell`'s schema as the broker lists it: the seed's (same description, same `command` and
/// `cwd`) with the optional `timeout_secs` of seed 002.
pub fn broker_shell_schema() -> ToolSchema {
    let mut schema = shell_schema();
    if let Some(properties) = schema.parameters["properties"].as_object_mut() {
        properties.insert(
            "timeout_secs".to_string(),
            json!({ "type": "integer", "minimum": 1, "maximum": MAX_TIMEOUT_SECS, "description": "Timeout in seconds (default: 60, max: 300)." }),
        );
    }
    schema
}

/// The schema of `http_fetch`, with the seed's exact texts.
pub fn http_fetch_schema() -> ToolSchema {
    ToolSchema {
        name: "http_fetch".to_string(),
        description: "Fetch an https URL. Needs a grant from the owner for the host.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "url": { "type": "string", "description": "The URL. It must start with https://." }
            },
            "required": ["url"]
        }),
    }
}

/// `http_fetch`'s schema as the broker lists it: the seed's (same description, same `url`)
/// with the optional `max_length` and `start_index` for paging.
pub fn broker_http_fetch_schema() -> ToolSchema {
    let mut schema = http_fetch_schema();
    if let Some(properties) = schema.parameters["properties"].as_object_mut() {
        properties.insert(
            "max_length".to_string(),
            json!({ "type": "integer", "minimum": 1, "maximum": MAX_MAX_LENGTH, "description": "The most characters of the page's text to return (default: 16000). HTML comes back as Markdown." }),
        );
        properties.insert(
            "start_index".to_string(),
            json!({ "type": "integer", "minimum": 0, "description": "The character to start at, to read the next page (default: 0); the result's next_start_index gives it." }),
        );
    }
    schema
}

/// `web_search`'s schema, with seed 002's parameter texts.
pub fn web_search_schema() -> ToolSchema {
    ToolSchema {
        name: "web_search".to_string(),
        description: "Search the web; results are titles, URLs and snippets from outside. Needs a grant from the owner.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": { "type": "string", "description": "Search query in natural language" },
                "max_results": { "type": "integer", "minimum": 1, "maximum": MAX_RESULTS, "description": "Maximum results (default: 5, max: 10)" }
            },
            "required": ["query"]
        }),
    }
}

/// `git_status`'s schema.
pub fn git_status_schema() -> ToolSchema {
    ToolSchema {
        name: "git_status".to_string(),
        description: "Show a git repository's status (branch, staged, unstaged and untracked files). Needs a grant from the owner for the folder.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the repository, or of a folder inside it or holding it." }
            },
            "required": ["path"]
        }),
    }
}

/// `git_diff`'s schema.
pub fn git_diff_schema() -> ToolSchema {
    ToolSchema {
        name: "git_diff".to_string(),
        description: "Show a git repository's changes as a unified diff: unstaged by default, staged with staged = true. Needs a grant from the owner for the folder.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "path": { "type": "string", "description": "The absolute path of the repository, or of a folder inside it or holding it." },
                "staged": { "type": "boolean", "description": "Show the staged changes (git diff --staged) instead of the unstaged ones (default: false)." },
                "paths": { "type": "array", "items": { "type": "string" }, "maxItems": MAX_DIFF_PATHS, "description": "Only these files or folders, relative to the repository's top folder." }
            },
            "required": ["path"]
        }),
    }
}

/// `git_clone`'s schema.
pub fn git_clone_schema() -> ToolSchema {
    ToolSchema {
        name: "git_clone".to_string(),
        description: "Clone a git repository over https into a new folder. Needs a grant from the owner for the host and the folder.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "url": { "type": "string", "description": "The repository's URL. It must start with https://." },
                "path": { "type": "string", "description": "The absolute path of the folder to clone into; it must not exist yet, or be empty." }
            },
            "required": ["url", "path"]
        }),
    }
}

/// `bash_bg`'s schema: `shell`'s `command` and `cwd` (the seed's words, taken from
/// [`shell_schema`]), without a time limit.
pub fn bash_bg_schema() -> ToolSchema {
    ToolSchema {
        name: "bash_bg".to_string(),
        description: "Start a shell command in the background, in a sandbox, and return its job id at once; read its output with bash_tail and stop it with bash_kill. Needs a grant from the owner.".to_string(),
        parameters: shell_schema().parameters,
    }
}

/// `bash_tail`'s schema.
pub fn bash_tail_schema() -> ToolSchema {
    ToolSchema {
        name: "bash_tail".to_string(),
        description: "Read the output a background job (bash_bg) wrote since the last read, with its state and exit code.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "job": { "type": "integer", "minimum": 1, "description": "The job id bash_bg returned." },
                "max_bytes": { "type": "integer", "minimum": 1, "description": "The most bytes of output to return (default: 16384)." }
            },
            "required": ["job"]
        }),
    }
}

/// `bash_kill`'s schema.
pub fn bash_kill_schema() -> ToolSchema {
    ToolSchema {
        name: "bash_kill".to_string(),
        description: "Stop a background job (bash_bg) and every process it started.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "job": { "type": "integer", "minimum": 1, "description": "The job id bash_bg returned." }
            },
            "required": ["job"]
        }),
    }
}

/// `consult`'s schema.
pub fn consult_schema() -> ToolSchema {
    ToolSchema {
        name: "consult".to_string(),
        description: "Ask another model one question and get its answer. It sees only the question. Needs a grant from the owner.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "question": { "type": "string", "description": "The whole question, with any context the other model needs." }
            },
            "required": ["question"]
        }),
    }
}

/// `ask`'s schema.
pub fn ask_schema() -> ToolSchema {
    ToolSchema {
        name: "ask".to_string(),
        description: "Ask the owner a question and wait for the answer. Use it when only the owner can decide or knows the answer.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "question": { "type": "string", "description": "The question, complete enough to answer without seeing the conversation." },
                "choices": { "type": "array", "items": { "type": "string" }, "description": "Optional answers the owner may pick from." }
            },
            "required": ["question"]
        }),
    }
}

/// `delegate`'s schema: open a child session bound by the caller's grants, or collect its
/// report.
pub fn delegate_schema() -> ToolSchema {
    ToolSchema {
        name: "delegate".to_string(),
        description: "Hand a task to a child session that may use only the grants you name (a subset of yours), or collect a child's report. Open with task and grants; collect with collect (the child's session id), which waits until the child reports or ends. The child starts with this session's labels, and its labels come back with its report.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "task": { "type": "string", "description": "The child's task, complete enough to do without seeing this conversation." },
                "grants": { "type": "array", "items": { "type": "string" }, "description": "The ids of the grants the child may use, each one that covers this session." },
                "collect": { "type": "string", "description": "Instead of task and grants: the child session whose report to wait for." }
            }
        }),
    }
}

/// `recall`'s schema.
pub fn recall_schema() -> ToolSchema {
    ToolSchema {
        name: "recall".to_string(),
        description: "Search the memory: what was remembered in earlier conversations and this one, best match first, each entry with its id, tags and a snippet. The query may use FTS5 syntax (\"a phrase\", prefix*, OR, NOT, NEAR); anything else is read as plain words.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": { "type": "string", "description": "Words to look for, or an FTS5 query." },
                "tags": { "type": "array", "items": { "type": "string" }, "description": "Only entries carrying every one of these tags." },
                "limit": { "type": "integer", "description": "The most entries to return (default 10, at most 50)." }
            },
            "required": ["query"]
        }),
    }
}

/// `memory`'s schema.
pub fn memory_schema() -> ToolSchema {
    ToolSchema {
        name: "memory".to_string(),
        description: "Remember something for later conversations (text, optional tags) and get its id, or forget an entry by its id (forget). Give either text or forget.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "text": { "type": "string", "description": "What to remember, complete enough to be useful without this conversation." },
                "tags": { "type": "array", "items": { "type": "string" }, "description": "Optional tags (letters, digits, - _ . : /) to find it by." },
                "forget": { "type": "integer", "description": "The id of an entry to forget, instead of text." }
            }
        }),
    }
}

/// `ask_memory`'s schema.
pub fn ask_memory_schema() -> ToolSchema {
    ToolSchema {
        name: "ask_memory".to_string(),
        description: "Ask a question answered from the memory: the best entries are given to another model, which answers from them and names the ids it used; without that model, the entries themselves come back.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "question": { "type": "string", "description": "The question, in plain words." }
            },
            "required": ["question"]
        }),
    }
}
