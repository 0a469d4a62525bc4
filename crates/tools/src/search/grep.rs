//! `grep`: ripgrep's engine on a granted tree, in a parallel walk, output sorted by path.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::WalkState;
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use serde::{Deserialize, Serialize};

use super::walk::{cut_chars, pinned_start, walker};
use super::{SearchError, SearchOptions};
use crate::fs::GrantedDir;

pub use proto::tools::schemas::grep_schema;

/// What `grep` returns, with Claude Code's names.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// The matching lines, `path:line:text`, with context lines `path-line-text`.
    Content,
    /// The paths of the files that match (the default).
    #[default]
    FilesWithMatches,
    /// `path:count` of matching lines per file.
    Count,
}

/// The arguments of `grep`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GrepArgs {
    /// The regular expression (ripgrep's syntax).
    pub pattern: String,
    /// The absolute path of the file or folder to search.
    pub path: String,
    /// What to return.
    #[serde(default)]
    pub output_mode: OutputMode,
    /// Match without regard to case.
    #[serde(default)]
    pub case_insensitive: bool,
    /// Lines of context before each match (content mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<usize>,
    /// Lines of context after each match (content mode).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<usize>,
    /// Lines of context before and after (content mode); `before`/`after` win.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<usize>,
    /// Search only files whose path matches this glob (`*.rs`, `!*.min.js`), as `rg -g`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub glob: Option<String>,
    /// Search only files of this type (`rust`, `py`), as `rg -t`.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub file_type: Option<String>,
    /// Let the pattern span lines (`.` matches a newline), as `rg -U --multiline-dotall`.
    #[serde(default)]
    pub multiline: bool,
}

/// What `grep` found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GrepResult {
    /// The lines, files or counts, one a line, sorted by path (invalid UTF-8 as U+FFFD).
    pub output: String,
    /// How many files matched.
    pub files: usize,
    /// How many lines matched, over all files.
    pub matches: usize,
    /// Whether a cap (on lines, or on a line's characters) cut the output.
    pub truncated: bool,
}

/// Searches the file or tree at `args.path`, below `dir`.
pub fn grep(
    dir: &GrantedDir,
    args: &GrepArgs,
    options: &SearchOptions,
) -> Result<GrepResult, SearchError> {
    let (matcher, searcher, report) = prepare(args, options)?;
    let (root, meta) = pinned_start(dir, &args.path)?;
    let mut found = if meta.is_file() && !options.excludes(&root) {
        search_one(&matcher, &mut searcher.build(), &root, &report)
            .into_iter()
            .collect()
    } else {
        search_tree(&root, args, options, &matcher, &searcher, &report)?
    };
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(report.finish(found))
}

/// [`grep`] on the files `paths` (what a walk from the start would search, as a warm index
/// holds them), searched in parallel on `options.threads` threads.
pub(crate) fn grep_files(
    args: &GrepArgs,
    options: &SearchOptions,
    paths: &[PathBuf],
) -> Result<GrepResult, SearchError> {
    let (matcher, searcher, report) = prepare(args, options)?;
    let threads = match options.threads {
        0 => std::thread::available_parallelism().map_or(1, |n| n.get()),
        n => n,
    };
    let next = std::sync::atomic::AtomicUsize::new(0);
    let found = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..threads {
            scope.spawn(|| {
                let mut searcher = searcher.build();
                let mut mine = Vec::new();
                loop {
                    let at = next.fetch_add(64, std::sync::atomic::Ordering::Relaxed);
                    let Some(chunk) = paths.get(at..paths.len().min(at + 64)) else {
                        break;
                    };
                    if chunk.is_empty() {
                        break;
                    }
                    for path in chunk {
                        mine.extend(search_one(&matcher, &mut searcher, path, &report));
                    }
                }
                if let Ok(mut all) = found.lock() {
                    all.append(&mut mine);
                }
            });
        }
    });
    // A thread that panicked is re-raised by the scope before this line.
    let mut found = found
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(report.finish(found))
}

/// The call's matcher, searcher and report, or why the pattern cannot be used.
fn prepare(
    args: &GrepArgs,
    options: &SearchOptions,
) -> Result<(RegexMatcher, SearcherBuilder, Report), SearchError> {
    let matcher = RegexMatcherBuilder::new()
        .case_insensitive(args.case_insensitive)
        .multi_line(true)
        .dot_matches_new_line(args.multiline)
        .line_terminator(if args.multiline { None } else { Some(b'\n') })
        .build(&args.pattern)
        .map_err(|e| SearchError::BadPattern {
            pattern: args.pattern.clone(),
            message: e.to_string(),
        })?;
    let context = args.context.unwrap_or(0);
    let mut searcher = SearcherBuilder::new();
    searcher
        .line_number(true)
        .multi_line(args.multiline)
        .binary_detection(BinaryDetection::quit(0))
        .before_context(args.before.unwrap_or(context))
        .after_context(args.after.unwrap_or(context));
    let report = Report {
        mode: args.output_mode,
        max_line_chars: options.max_line_chars,
        max_lines: options.max_lines,
        context: args
            .before
            .or(args.after)
            .or(args.context)
            .is_some_and(|n| n > 0),
    };
    Ok((matcher, searcher, report))
}

fn search_tree(
    root: &Path,
    args: &GrepArgs,
    options: &SearchOptions,
    matcher: &RegexMatcher,
    searcher: &SearcherBuilder,
    report: &Report,
) -> Result<Vec<FileHits>, SearchError> {
    let mut builder = walker(root, options);
    builder.threads(options.threads);
    if let Some(glob) = &args.glob {
        let mut overrides = OverrideBuilder::new(root);
        overrides
            .add(glob)
            .map_err(|e| bad_glob(glob, e.to_string()))?;
        builder.overrides(
            overrides
                .build()
                .map_err(|e| bad_glob(glob, e.to_string()))?,
        );
    }
    if let Some(name) = &args.file_type {
        let mut types = TypesBuilder::new();
        types.add_defaults().select(name);
        let types = types.build().map_err(|e| SearchError::UnknownType {
            message: e.to_string(),
        })?;
        builder.types(types);
    }
    let found = Mutex::new(Vec::new());
    builder.build_parallel().run(|| {
        let mut searcher = searcher.build();
        let found = &found;
        Box::new(move |entry| {
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if entry.file_type().is_some_and(|t| t.is_file())
                && let Some(hits) = search_one(matcher, &mut searcher, entry.path(), report)
                && let Ok(mut all) = found.lock()
            {
                all.push(hits);
            }
            WalkState::Continue
        })
    });
    // A walker thread that panicked holding the lock is re-raised by `run` (a scoped
    // thread) before this line; were the lock poisoned anyway, what the walkers found is kept,
    // not silently emptied.
    Ok(found
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner))
}

fn bad_glob(glob: &str, message: String) -> SearchError {
    SearchError::BadGlob {
        glob: glob.to_string(),
        message,
    }
}

/// How the hits are shown and capped.
struct Report {
    mode: OutputMode,
    max_line_chars: usize,
    max_lines: usize,
    context: bool,
}

/// One file's hits.
struct FileHits {
    path: PathBuf,
    lines: Vec<String>,
    matches: usize,
    cut: bool,
}

/// The file's hits, or nothing when it has none or cannot be read.
fn search_one(
    matcher: &RegexMatcher,
    searcher: &mut Searcher,
    path: &Path,
    report: &Report,
) -> Option<FileHits> {
    let mut sink = Collector {
        shown: path.to_string_lossy().into_owned(),
        report,
        hits: FileHits {
            path: path.to_path_buf(),
            lines: Vec::new(),
            matches: 0,
            cut: false,
        },
    };
    searcher.search_path(matcher, path, &mut sink).ok()?;
    (sink.hits.matches > 0).then_some(sink.hits)
}

/// The sink that keeps one file's lines, as `rg -n --no-heading -H` prints them.
struct Collector<'a> {
    shown: String,
    report: &'a Report,
    hits: FileHits,
}

impl Collector<'_> {
    fn push(&mut self, separator: char, number: u64, bytes: &[u8]) {
        // The file's own lines are capped too, so one huge file cannot fill memory.
        if self.hits.lines.len() > self.report.max_lines {
            self.hits.cut = true;
            return;
        }
        let text = String::from_utf8_lossy(bytes.strip_suffix(b"\n").unwrap_or(bytes));
        let (text, cut) = cut_chars(&text, self.report.max_line_chars);
        self.hits.cut |= cut;
        self.hits.lines.push(format!(
            "{}{separator}{number}{separator}{text}",
            self.shown
        ));
    }
}

impl Sink for Collector<'_> {
    type Error = io::Error;

    fn matched(&mut self, _: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        let first = found.line_number().unwrap_or(0);
        for (n, line) in (0u64..).zip(found.lines()) {
            self.hits.matches += 1;
            if self.report.mode == OutputMode::Content {
                self.push(':', first + n, line);
            }
        }
        Ok(self.report.mode != OutputMode::FilesWithMatches)
    }

    fn context(&mut self, _: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.report.mode == OutputMode::Content {
            self.push('-', context.line_number().unwrap_or(0), context.bytes());
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, io::Error> {
        if self.report.mode == OutputMode::Content {
            self.hits.lines.push("--".to_string());
        }
        Ok(true)
    }
}

impl Report {
    /// The hits of every file, in path order, as one output capped at `max_lines` lines.
    fn finish(&self, found: Vec<FileHits>) -> GrepResult {
        let files = found.len();
        let matches = found.iter().map(|h| h.matches).sum();
        let mut lines: Vec<String> = Vec::new();
        let mut truncated = false;
        for hits in found {
            truncated |= hits.cut;
            match self.mode {
                OutputMode::Content => {
                    // Files are separated by `--` when context lines are shown, as rg does.
                    if self.context && !lines.is_empty() {
                        lines.push("--".to_string());
                    }
                    lines.extend(hits.lines);
                }
                OutputMode::FilesWithMatches => {
                    lines.push(hits.path.to_string_lossy().into_owned());
                }
                OutputMode::Count => {
                    lines.push(format!("{}:{}", hits.path.to_string_lossy(), hits.matches))
                }
            }
        }
        if lines.len() > self.max_lines {
            lines.truncate(self.max_lines);
            truncated = true;
        }
        GrepResult {
            output: lines.join("\n"),
            files,
            matches,
            truncated,
        }
    }
}
