//! The built-in tools and their rows. One macro invocation declares [`ToolName`], its lists and
//! [`ToolName::builtin`]'s exhaustive `match`: a tool added to the list without a row, or a row
//! without one of [`Builtin`]'s fields, does not compile.

use std::borrow::Cow;

use super::schemas::*;
use super::{
    Arg, Builtin, Effect, GRANT_DEFAULT_LABELS, Hints, Home, Labels, Role, TimeLimit, ToolFacts,
    Untrusted,
};
use crate::Class;

/// The number of identifiers given, as a constant expression.
macro_rules! count {
    () => { 0usize };
    ($first:ident $($rest:ident)*) => { 1usize + count!($($rest)*) };
}

/// Declares the built-in tools: first those a grant names (in the order error messages list
/// them), then those granted with another tool; each with its row.
macro_rules! builtin_tools {
    (
        named { $( $(#[$doc:meta])* $tool:ident => $row:ident, )* }
        companions { $( $(#[$cdoc:meta])* $companion:ident => $crow:ident, )* }
    ) => {
        /// The built-in tools the broker can dispatch to: the file, search, shell, web and git
        /// tools that run in a sandbox, the background jobs, the three memory tools (routed to
        /// the memory store, never to a runner), `consult`, and `ask` (answered by the owner).
        /// Each has a row of facts ([`ToolName::builtin`]).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ToolName {
            $( $(#[$doc])* $tool, )*
            $( $(#[$cdoc])* $companion, )*
        }

        impl ToolName {
            /// Every built-in tool: [`ToolName::KNOWN`], then [`ToolName::JOB_COMPANIONS`].
            pub const EVERY: [ToolName; count!($($tool)* $($companion)*)] =
                [$(ToolName::$tool,)* $(ToolName::$companion,)*];

            /// Every tool a grant may name, in the order error messages list them.
            pub const KNOWN: [ToolName; count!($($tool)*)] = [$(ToolName::$tool,)*];

            /// The tools a grant does not name itself: a grant of [`ToolName::BashBg`] covers
            /// them for the session's own jobs ([`ToolName::granted_by`]).
            pub const JOB_COMPANIONS: [ToolName; count!($($companion)*)] =
                [$(ToolName::$companion,)*];

            /// This tool's row: every fact boxmaker keeps about it.
            pub fn builtin(self) -> &'static Builtin {
                match self {
                    $( ToolName::$tool => &$row, )*
                    $( ToolName::$companion => &$crow, )*
                }
            }
        }
    };
}

builtin_tools! {
    named {
        /// Read a text file.
        ReadFile => READ_FILE,
        /// Write a text file.
        WriteFile => WRITE_FILE,
        /// Edit a text file by exact snippets.
        EditFile => EDIT_FILE,
        /// List a folder's files.
        ListFiles => LIST_FILES,
        /// Find files by a glob.
        Glob => GLOB,
        /// Search file contents with a regular expression.
        Grep => GREP,
        /// Run a shell command.
        Shell => SHELL,
        /// Start a shell command as a background job.
        BashBg => BASH_BG,
        /// Fetch an https URL.
        HttpFetch => HTTP_FETCH,
        /// Search the web with the provider the owner configured.
        WebSearch => WEB_SEARCH,
        /// Show a git repository's status.
        GitStatus => GIT_STATUS,
        /// Show a git repository's changes.
        GitDiff => GIT_DIFF,
        /// Clone a git repository over https.
        GitClone => GIT_CLONE,
        /// Ask another model a question.
        Consult => CONSULT,
        /// Ask the owner a question and wait for the answer.
        Ask => ASK,
        /// Search the memory.
        Recall => RECALL,
        /// Write to the memory, or forget an entry.
        Memory => MEMORY,
        /// Ask a question answered from the memory.
        AskMemory => ASK_MEMORY,
        /// Open a child session bound by its parent, or collect its report.
        Delegate => DELEGATE,
    }
    companions {
        /// Read a background job's output since the last read.
        BashTail => BASH_TAIL,
        /// Stop a background job.
        BashKill => BASH_KILL,
    }
}

/// What reads changes nothing and reaches nothing beyond the machine.
const READS: Hints = Hints::new(true, false, true, false);

/// A row of a tool granted by its own name, with the grants' default labels.
const fn row(
    name: &'static str,
    schema: fn() -> crate::ToolSchema,
    args: &'static [Arg],
    effect: Effect,
    time_limit: TimeLimit,
    hints: Hints,
    home: Home,
) -> Builtin {
    Builtin {
        name,
        schema,
        facts: ToolFacts {
            args: Cow::Borrowed(args),
            effect,
            labels: GRANT_DEFAULT_LABELS,
            time_limit,
            hints,
        },
        home,
        granted_with: None,
        target_path: None,
        search_words: &[],
    }
}

/// `row`, with the path argument grants' `paths` cover.
const fn with_target(mut builtin: Builtin, path: &'static str) -> Builtin {
    builtin.target_path = Some(path);
    builtin
}

/// `row`, with words for loopd's ranking.
const fn with_words(mut builtin: Builtin, words: &'static [&'static str]) -> Builtin {
    builtin.search_words = words;
    builtin
}

/// `row`, whose results are the outside world's text whatever a grant says.
const fn always_untrusted(mut builtin: Builtin) -> Builtin {
    builtin.facts.labels = Labels {
        class: Class::Private,
        untrusted: Untrusted::Always,
    };
    builtin
}

/// A row whose results echo its arguments: they carry the arguments' labels.
const fn echoes_arguments(mut builtin: Builtin) -> Builtin {
    builtin.facts.labels = Labels {
        class: Class::Private,
        untrusted: Untrusted::FromArguments,
    };
    builtin
}

/// `row`, granted with `tool`.
const fn granted_with(mut builtin: Builtin, tool: ToolName) -> Builtin {
    builtin.granted_with = Some(tool);
    builtin
}

const READ_FILE_ARGS: &[Arg] = &[
    Arg::new("path", Role::Path),
    Arg::new("offset", Role::Setting),
    Arg::new("limit", Role::Setting),
];
static READ_FILE: Builtin = with_words(
    with_target(
        row(
            "read_file",
            broker_read_file_schema,
            READ_FILE_ARGS,
            Effect::Read,
            TimeLimit::ReadFile,
            READS,
            Home::Runner,
        ),
        "path",
    ),
    &["open", "view", "show", "cat", "contents"],
);

const WRITE_FILE_ARGS: &[Arg] = &[
    Arg::new("path", Role::Path),
    Arg::new("content", Role::FreeText),
];
static WRITE_FILE: Builtin = echoes_arguments(with_words(
    with_target(
        row(
            "write_file",
            write_file_schema,
            WRITE_FILE_ARGS,
            Effect::LocalWrite,
            TimeLimit::WriteFile,
            Hints::new(false, true, true, false),
            Home::Runner,
        ),
        "path",
    ),
    &["create", "save", "new", "overwrite"],
));

/// `edits` is a list of snippets: the text replaced and the text put in its place.
const EDIT_FILE_ARGS: &[Arg] = &[
    Arg::new("path", Role::Path),
    Arg::new("edits", Role::FreeText),
];
static EDIT_FILE: Builtin = echoes_arguments(with_words(
    with_target(
        row(
            "edit_file",
            edit_file_schema,
            EDIT_FILE_ARGS,
            Effect::LocalWrite,
            TimeLimit::WriteFile,
            Hints::new(false, true, false, false),
            Home::Runner,
        ),
        "path",
    ),
    &["change", "modify", "replace", "patch", "fix"],
));

const LIST_FILES_ARGS: &[Arg] = &[
    Arg::new("path", Role::Path),
    Arg::new("recursive", Role::Setting),
    Arg::new("max_depth", Role::Setting),
];
static LIST_FILES: Builtin = with_words(
    with_target(
        row(
            "list_files",
            list_files_schema,
            LIST_FILES_ARGS,
            Effect::Read,
            TimeLimit::ReadFile,
            READS,
            Home::Runner,
        ),
        "path",
    ),
    &["ls", "directory", "folder", "tree"],
);

const GLOB_ARGS: &[Arg] = &[
    Arg::new("pattern", Role::Pattern),
    Arg::new("path", Role::Path),
];
static GLOB: Builtin = with_words(
    with_target(
        row(
            "glob",
            glob_schema,
            GLOB_ARGS,
            Effect::Read,
            TimeLimit::ReadFile,
            READS,
            Home::Runner,
        ),
        "path",
    ),
    &["pattern", "wildcard", "names", "find"],
);

const GREP_ARGS: &[Arg] = &[
    Arg::new("pattern", Role::Pattern),
    Arg::new("path", Role::Path),
    Arg::new("output_mode", Role::Setting),
    Arg::new("case_insensitive", Role::Setting),
    Arg::new("before", Role::Setting),
    Arg::new("after", Role::Setting),
    Arg::new("context", Role::Setting),
    Arg::new("glob", Role::Pattern),
    Arg::new("type", Role::Setting),
    Arg::new("multiline", Role::Setting),
];
static GREP: Builtin = with_words(
    with_target(
        row(
            "grep",
            grep_schema,
            GREP_ARGS,
            Effect::Read,
            TimeLimit::ReadFile,
            READS,
            Home::Runner,
        ),
        "path",
    ),
    &["search", "find", "text", "regex", "code"],
);

/// `cwd` is where the command runs, not what it reads: `shell` has no target path. With hosts
/// from its grant a command reaches the network, but what it changes is decided by the words of
/// its command line, so it counts as a local write.
const SHELL_ARGS: &[Arg] = &[
    Arg::new("command", Role::Command),
    Arg::new("cwd", Role::Path),
    Arg::new("timeout_secs", Role::Setting),
];
static SHELL: Builtin = with_words(
    row(
        "shell",
        broker_shell_schema,
        SHELL_ARGS,
        Effect::LocalWrite,
        TimeLimit::Shell,
        Hints::new(false, true, false, false),
        Home::Runner,
    ),
    &[
        "run", "test", "build", "compile", "execute", "command", "script",
    ],
);

const BASH_BG_ARGS: &[Arg] = &[
    Arg::new("command", Role::Command),
    Arg::new("cwd", Role::Path),
];
static BASH_BG: Builtin = with_words(
    row(
        "bash_bg",
        bash_bg_schema,
        BASH_BG_ARGS,
        Effect::LocalWrite,
        TimeLimit::Shell,
        Hints::new(false, true, false, false),
        Home::Jobs,
    ),
    &["background", "server", "watch", "job", "long"],
);

const BASH_TAIL_ARGS: &[Arg] = &[
    Arg::new("job", Role::Identifier),
    Arg::new("max_bytes", Role::Setting),
];
static BASH_TAIL: Builtin = granted_with(
    row(
        "bash_tail",
        bash_tail_schema,
        BASH_TAIL_ARGS,
        Effect::Read,
        TimeLimit::Shell,
        READS,
        Home::Jobs,
    ),
    ToolName::BashBg,
);

const BASH_KILL_ARGS: &[Arg] = &[Arg::new("job", Role::Identifier)];
static BASH_KILL: Builtin = granted_with(
    row(
        "bash_kill",
        bash_kill_schema,
        BASH_KILL_ARGS,
        Effect::LocalWrite,
        TimeLimit::Shell,
        Hints::new(false, true, true, false),
        Home::Jobs,
    ),
    ToolName::BashBg,
);

const HTTP_FETCH_ARGS: &[Arg] = &[
    Arg::new("url", Role::Url),
    Arg::new("max_length", Role::Setting),
    Arg::new("start_index", Role::Setting),
];
static HTTP_FETCH: Builtin = with_words(
    row(
        "http_fetch",
        broker_http_fetch_schema,
        HTTP_FETCH_ARGS,
        Effect::Outbound,
        TimeLimit::HttpFetch,
        Hints::new(true, false, true, true),
        Home::Runner,
    ),
    &["download", "web", "page", "browse"],
);

/// The query goes to the search provider as it is written.
const WEB_SEARCH_ARGS: &[Arg] = &[
    Arg::new("query", Role::FreeText),
    Arg::new("max_results", Role::Setting),
];
static WEB_SEARCH: Builtin = always_untrusted(with_words(
    row(
        "web_search",
        web_search_schema,
        WEB_SEARCH_ARGS,
        Effect::Outbound,
        TimeLimit::WebSearch,
        Hints::new(true, false, true, true),
        Home::Runner,
    ),
    &["internet", "online", "lookup", "google"],
));

const GIT_STATUS_ARGS: &[Arg] = &[Arg::new("path", Role::Path)];
static GIT_STATUS: Builtin = with_words(
    with_target(
        row(
            "git_status",
            git_status_schema,
            GIT_STATUS_ARGS,
            Effect::Read,
            TimeLimit::Git,
            READS,
            Home::Runner,
        ),
        "path",
    ),
    &["changes", "modified", "repository"],
);

/// `paths` are relative to the repository's top folder.
const GIT_DIFF_ARGS: &[Arg] = &[
    Arg::new("path", Role::Path),
    Arg::new("staged", Role::Setting),
    Arg::new("paths", Role::Path),
];
static GIT_DIFF: Builtin = with_words(
    with_target(
        row(
            "git_diff",
            git_diff_schema,
            GIT_DIFF_ARGS,
            Effect::Read,
            TimeLimit::Git,
            READS,
            Home::Runner,
        ),
        "path",
    ),
    &["changes", "compare", "patch"],
);

const GIT_CLONE_ARGS: &[Arg] = &[Arg::new("url", Role::Url), Arg::new("path", Role::Path)];
static GIT_CLONE: Builtin = always_untrusted(with_words(
    with_target(
        row(
            "git_clone",
            git_clone_schema,
            GIT_CLONE_ARGS,
            Effect::Outbound,
            TimeLimit::GitClone,
            Hints::new(false, false, false, true),
            Home::Runner,
        ),
        "path",
    ),
    &["download", "repository", "checkout"],
));

/// The question goes to another model; its answer may carry what the question carried.
const CONSULT_ARGS: &[Arg] = &[Arg::new("question", Role::FreeText)];
static CONSULT: Builtin = always_untrusted(with_words(
    row(
        "consult",
        consult_schema,
        CONSULT_ARGS,
        Effect::Outbound,
        TimeLimit::Consult,
        Hints::new(true, false, false, true),
        Home::Broker,
    ),
    &["model", "opinion", "review", "advice"],
));

const ASK_ARGS: &[Arg] = &[
    Arg::new("question", Role::FreeText),
    Arg::new("choices", Role::FreeText),
];
static ASK: Builtin = with_words(
    row(
        "ask",
        ask_schema,
        ASK_ARGS,
        Effect::Read,
        TimeLimit::Approval,
        Hints::new(true, false, false, false),
        Home::Owner,
    ),
    &["question", "user", "confirm", "choose"],
);

const RECALL_ARGS: &[Arg] = &[
    Arg::new("query", Role::FreeText),
    Arg::new("tags", Role::Identifier),
    Arg::new("limit", Role::Setting),
];
static RECALL: Builtin = with_words(
    row(
        "recall",
        recall_schema,
        RECALL_ARGS,
        Effect::Read,
        TimeLimit::Memory,
        READS,
        Home::Memory,
    ),
    &["remember", "retrieve", "notes"],
);

const MEMORY_ARGS: &[Arg] = &[
    Arg::new("text", Role::FreeText),
    Arg::new("tags", Role::Identifier),
    Arg::new("forget", Role::Identifier),
];
static MEMORY: Builtin = with_words(
    row(
        "memory",
        memory_schema,
        MEMORY_ARGS,
        Effect::LocalWrite,
        TimeLimit::Memory,
        Hints::new(false, false, false, false),
        Home::Memory,
    ),
    &["remember", "note", "save"],
);

const DELEGATE_ARGS: &[Arg] = &[
    Arg::new("task", Role::FreeText),
    Arg::new("grants", Role::Identifier),
    Arg::new("collect", Role::Identifier),
];
/// Opens a child session (the broker's own state: a session, its grants and labels) or waits
/// for one's report; the child's calls are decided like any other.
static DELEGATE: Builtin = with_words(
    row(
        "delegate",
        delegate_schema,
        DELEGATE_ARGS,
        Effect::LocalWrite,
        TimeLimit::Approval,
        Hints::new(false, false, false, false),
        Home::Broker,
    ),
    &["subagent", "child", "task", "helper"],
);

/// A read of the memory; when the broker has a consult model the entries go to it, and the
/// call has side effects (`policy`'s `ToolArgs::has_side_effects` says when).
const ASK_MEMORY_ARGS: &[Arg] = &[Arg::new("question", Role::FreeText)];
static ASK_MEMORY: Builtin = with_words(
    row(
        "ask_memory",
        ask_memory_schema,
        ASK_MEMORY_ARGS,
        Effect::Read,
        TimeLimit::Memory,
        READS,
        Home::Memory,
    ),
    &["remember", "question", "notes"],
);
