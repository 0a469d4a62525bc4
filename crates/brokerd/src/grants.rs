//! Grant files: the owner's TOML, read into [`Grant`]s with every problem named by file, line
//! and a sentence. A folder with any problem yields no grants at all, so a typo never leaves
//! half a policy in force.

use std::fs;
use std::path::{Component, Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};
use proto::{Class, Timestamp};
use serde_spanned::Spanned;
use toml::de::{DeTable, DeValue};

use crate::args::ToolName;
use crate::policy::shell::{prefix_warning, prefix_words};

/// The largest grant file read, in bytes.
pub const MAX_FILE_BYTES: u64 = 1024 * 1024;

/// The keys a `[[grant]]` table may have.
pub const KEYS: &[&str] = &[
    "id",
    "tool",
    "paths",
    "hosts",
    "commands",
    "class",
    "untrusted",
    "approval",
    "max_taint",
    "on_untrusted",
    "expires",
    "deny",
];

/// Whether the owner is asked before a covered call runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// Runs without asking.
    Auto,
    /// Asks the owner each time (or once for the session, if the owner says so).
    Ask,
}

/// What happens to a side-effecting call once the session has received untrusted content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnUntrusted {
    /// It runs as usual.
    Allow,
    /// The owner is asked.
    Ask,
    /// It is refused (`UntrustedInput`).
    Deny,
}

/// A path a grant names: a folder (covering everything below it) or a glob.
#[derive(Debug, Clone)]
pub struct PathRule {
    /// As the owner wrote it.
    pub written: String,
    kind: PathKind,
}

#[derive(Debug, Clone)]
enum PathKind {
    Folder(PathBuf),
    Glob(GlobMatcher),
}

impl PathRule {
    /// Whether `resolved` (absolute, without `..` or symbolic links) is this path or below it.
    /// A folder never covers a sibling that shares its prefix (`/a/notes` does not cover
    /// `/a/notes-private`); a glob covers what it matches and everything below that.
    pub fn covers(&self, resolved: &Path) -> bool {
        match &self.kind {
            PathKind::Folder(folder) => resolved.starts_with(folder),
            PathKind::Glob(glob) => resolved.ancestors().any(|p| glob.is_match(p)),
        }
    }

    /// The folder to make available for this rule: the folder itself, or a glob's longest
    /// literal leading folder.
    pub fn base(&self) -> PathBuf {
        match &self.kind {
            PathKind::Folder(folder) => folder.clone(),
            PathKind::Glob(glob) => {
                let mut base = PathBuf::from("/");
                for component in Path::new(glob.glob().glob()).components() {
                    let text = component.as_os_str().to_string_lossy();
                    if text.contains(['*', '?', '[', '{']) {
                        break;
                    }
                    base.push(component);
                }
                base
            }
        }
    }
}

/// A host a grant names: exactly, or every subdomain of a domain (`*.example.org`, which does
/// not cover `example.org` itself), on one port (443 unless written `host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// As the owner wrote it.
    pub written: String,
    /// The host, lower case; for a wildcard, the domain after `*.`.
    pub host: String,
    /// Whether it names subdomains of `host` rather than `host` itself.
    pub wildcard: bool,
    /// The port.
    pub port: u16,
}

impl HostRule {
    /// Whether `host` (lower case) on `port` is covered.
    pub fn covers(&self, host: &str, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        if self.wildcard {
            host.strip_suffix(&self.host)
                .is_some_and(|head| head.ends_with('.') && head.len() > 1)
        } else {
            host == self.host
        }
    }
}

/// Where a grant was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Origin {
    /// The file.
    pub file: PathBuf,
    /// The line of its `[[grant]]` table.
    pub line: usize,
}

/// One grant, validated.
#[derive(Debug, Clone)]
pub struct Grant {
    /// Its id, unique across the folder; named in audit records.
    pub id: String,
    /// The tool it covers.
    pub tool: ToolName,
    /// Paths (files and folders) it covers; for `shell`, where the command may run.
    pub paths: Vec<PathRule>,
    /// Hosts it covers (`http_fetch`).
    pub hosts: Vec<HostRule>,
    /// Command prefixes, word by word (`shell`).
    pub commands: Vec<Vec<String>>,
    /// The label of results (default private).
    pub class: Class,
    /// Whether results are marked untrusted (default true).
    pub untrusted: bool,
    /// Whether the owner is asked (default auto).
    pub approval: Approval,
    /// The most sensitive class the session may have seen for this grant to apply.
    pub max_taint: Option<Class>,
    /// Side-effecting calls after untrusted content (default ask).
    pub on_untrusted: OnUntrusted,
    /// When it stops covering calls.
    pub expires: Option<Timestamp>,
    /// Whether it forbids what it covers.
    pub deny: bool,
    /// Where it was written.
    pub origin: Origin,
}

impl Grant {
    /// A grant for `tool` with the defaults of the grant format and no constraints, as if
    /// written at line 1 of `grants.toml`; for tests and presets.
    pub fn new(id: &str, tool: ToolName) -> Grant {
        Grant {
            id: id.to_string(),
            tool,
            paths: Vec::new(),
            hosts: Vec::new(),
            commands: Vec::new(),
            class: Class::Private,
            untrusted: true,
            approval: Approval::Auto,
            max_taint: None,
            on_untrusted: OnUntrusted::Ask,
            expires: None,
            deny: false,
            origin: Origin {
                file: PathBuf::from("grants.toml"),
                line: 1,
            },
        }
    }

    /// Whether it has expired at `now`.
    pub fn expired(&self, now: Timestamp) -> bool {
        self.expires.is_some_and(|at| at <= now)
    }
}

/// A problem in a grant file: which file, which line, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: PathBuf,
    /// The line, when the problem has one.
    pub line: Option<usize>,
    /// What is wrong, as a sentence.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}: {}", self.file.display(), self.message),
            None => write!(f, "{}: {}", self.file.display(), self.message),
        }
    }
}

/// A folder's grants, all valid, with the warnings the owner should read.
#[derive(Debug, Clone, Default)]
pub struct GrantSet {
    /// The grants, in file-name order, then in file order.
    pub grants: Vec<Grant>,
    /// Things that are allowed but risky (prefixes that run other programs).
    pub warnings: Vec<Problem>,
}

/// Reads every `*.toml` file of `dir` (in name order). Any problem anywhere means no grants:
/// the problems are returned instead. A folder that does not exist holds no grants.
pub fn load_dir(dir: &Path, home: &Path) -> Result<GrantSet, Vec<Problem>> {
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(GrantSet::default()),
        Err(e) => {
            return Err(vec![problem(
                dir,
                None,
                format!("cannot read the folder: {e}"),
            )]);
        }
    };
    let mut files: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut set = GrantSet::default();
    let mut problems = Vec::new();
    for file in files {
        match read_limited(&file) {
            Ok(text) => {
                let parsed = parse_file(&text, &file, home);
                set.grants.extend(parsed.grants);
                set.warnings.extend(parsed.warnings);
                problems.extend(parsed.problems);
            }
            Err(p) => problems.push(p),
        }
    }
    check_unique_ids(&set.grants, &mut problems);
    if problems.is_empty() {
        Ok(set)
    } else {
        Err(problems)
    }
}

fn read_limited(file: &Path) -> Result<String, Problem> {
    let meta = fs::metadata(file).map_err(|e| problem(file, None, format!("cannot read: {e}")))?;
    if !meta.is_file() {
        return Err(problem(file, None, "is not a regular file".to_string()));
    }
    if meta.len() > MAX_FILE_BYTES {
        return Err(problem(
            file,
            None,
            format!(
                "is {} bytes; grant files are at most {MAX_FILE_BYTES} bytes",
                meta.len()
            ),
        ));
    }
    fs::read_to_string(file).map_err(|e| problem(file, None, format!("cannot read: {e}")))
}

fn check_unique_ids(grants: &[Grant], problems: &mut Vec<Problem>) {
    for (i, grant) in grants.iter().enumerate() {
        if let Some(first) = grants
            .get(..i)
            .and_then(|g| g.iter().find(|g| g.id == grant.id))
        {
            problems.push(problem(
                &grant.origin.file,
                Some(grant.origin.line),
                format!(
                    "grant id {:?} is already used at {}:{}",
                    grant.id,
                    first.origin.file.display(),
                    first.origin.line
                ),
            ));
        }
    }
}

/// What one file gave: its grants, its problems and its warnings.
#[derive(Debug, Clone, Default)]
pub struct ParsedFile {
    /// The valid grants (meaningless if there are problems).
    pub grants: Vec<Grant>,
    /// Everything wrong, each with its line.
    pub problems: Vec<Problem>,
    /// Things allowed but risky.
    pub warnings: Vec<Problem>,
}

/// Reads one grant file's text; `file` names it in problems, `home` expands `~`.
pub fn parse_file(text: &str, file: &Path, home: &Path) -> ParsedFile {
    let lines = Lines::new(text);
    let mut out = ParsedFile::default();
    let root = match DeTable::parse(text) {
        Ok(root) => root,
        Err(error) => {
            let line = error.span().map(|s| lines.of(s.start));
            let message = error.message().trim().to_string();
            out.problems
                .push(problem(file, line, format!("not valid TOML: {message}")));
            return out;
        }
    };
    for (key, value) in root.get_ref().iter() {
        let line = Some(lines.of(key.span().start));
        if key.get_ref().as_ref() != "grant" {
            out.problems.push(problem(
                file,
                line,
                format!(
                    "unknown top-level key {:?}; a grant file holds [[grant]] tables",
                    key.get_ref().as_ref()
                ),
            ));
            continue;
        }
        let DeValue::Array(tables) = value.get_ref() else {
            out.problems.push(problem(
                file,
                line,
                "grant must be written as [[grant]] tables".to_string(),
            ));
            continue;
        };
        for table in tables.iter() {
            let line = lines.of(table.span().start);
            let DeValue::Table(table) = table.get_ref() else {
                out.problems.push(problem(
                    file,
                    Some(line),
                    "each grant must be a table".to_string(),
                ));
                continue;
            };
            let mut reader = GrantReader {
                file,
                home,
                lines: &lines,
                problems: &mut out.problems,
                warnings: &mut out.warnings,
            };
            if let Some(grant) = reader.read(table, line) {
                out.grants.push(grant);
            }
        }
    }
    // Tables come back in key order, not file order: report in the order of the file.
    out.problems.sort_by_key(|p| p.line);
    out.warnings.sort_by_key(|p| p.line);
    out
}

/// Byte offsets of line starts, to turn a span into a line number.
struct Lines {
    starts: Vec<usize>,
}

impl Lines {
    fn new(text: &str) -> Lines {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(at, _)| at + 1));
        Lines { starts }
    }

    fn of(&self, offset: usize) -> usize {
        match self.starts.binary_search(&offset) {
            Ok(i) => i + 1,
            Err(i) => i,
        }
    }
}

type Value<'a> = Spanned<DeValue<'a>>;

struct GrantReader<'r> {
    file: &'r Path,
    home: &'r Path,
    lines: &'r Lines,
    problems: &'r mut Vec<Problem>,
    warnings: &'r mut Vec<Problem>,
}

impl GrantReader<'_> {
    fn say(&mut self, line: usize, message: String) {
        self.problems.push(problem(self.file, Some(line), message));
    }

    fn line_of(&self, value: &Value<'_>) -> usize {
        self.lines.of(value.span().start)
    }

    fn read(&mut self, table: &DeTable<'_>, line: usize) -> Option<Grant> {
        let before = self.problems.len();
        let field = |name: &str| -> Option<&Value<'_>> {
            table
                .iter()
                .find(|(k, _)| k.get_ref().as_ref() == name)
                .map(|(_, v)| v)
        };
        for (key, _) in table.iter() {
            let name = key.get_ref().as_ref();
            if !KEYS.contains(&name) {
                let at = self.lines.of(key.span().start);
                self.say(
                    at,
                    format!(
                        "unknown key {name:?} in a grant; the keys are {}",
                        KEYS.join(", ")
                    ),
                );
            }
        }
        let id = match field("id") {
            None => {
                self.say(line, "a grant needs an id".to_string());
                None
            }
            Some(v) => self.id(v),
        };
        let tool = match field("tool") {
            None => {
                self.say(line, "a grant needs a tool".to_string());
                None
            }
            Some(v) => self.tool(v),
        };
        let paths = field("paths").map(|v| self.paths(v)).unwrap_or_default();
        let hosts = field("hosts").map(|v| self.hosts(v)).unwrap_or_default();
        let commands = field("commands")
            .map(|v| self.commands(v))
            .unwrap_or_default();
        let class = field("class")
            .and_then(|v| self.class(v, "class"))
            .unwrap_or(Class::Private);
        let max_taint = field("max_taint").and_then(|v| self.class(v, "max_taint"));
        let untrusted = field("untrusted")
            .and_then(|v| self.boolean(v, "untrusted"))
            .unwrap_or(true);
        let deny = field("deny")
            .and_then(|v| self.boolean(v, "deny"))
            .unwrap_or(false);
        let approval = field("approval")
            .and_then(|v| {
                self.word(v, "approval", &["auto", "ask"]).map(|w| match w {
                    "ask" => Approval::Ask,
                    _ => Approval::Auto,
                })
            })
            .unwrap_or(Approval::Auto);
        let on_untrusted = field("on_untrusted")
            .and_then(|v| {
                self.word(v, "on_untrusted", &["allow", "ask", "deny"])
                    .map(|w| match w {
                        "allow" => OnUntrusted::Allow,
                        "deny" => OnUntrusted::Deny,
                        _ => OnUntrusted::Ask,
                    })
            })
            .unwrap_or(OnUntrusted::Ask);
        let expires = field("expires").and_then(|v| self.expires(v));
        let tool = tool?;
        self.check_constraints(tool, deny, line, &paths, &hosts, &commands, &field);
        let id = id?;
        if self.problems.len() > before {
            return None;
        }
        Some(Grant {
            id,
            tool,
            paths,
            hosts,
            commands,
            class,
            untrusted,
            approval,
            max_taint,
            on_untrusted,
            expires,
            deny,
            origin: Origin {
                file: self.file.to_path_buf(),
                line,
            },
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn check_constraints<'v>(
        &mut self,
        tool: ToolName,
        deny: bool,
        line: usize,
        paths: &[PathRule],
        hosts: &[HostRule],
        commands: &[Vec<String>],
        field: &dyn Fn(&str) -> Option<&'v Value<'v>>,
    ) {
        let name = tool.as_str();
        let at = |key: &str, this: &Self| field(key).map_or(line, |v| this.line_of(v));
        let takes_paths = matches!(
            tool,
            ToolName::ReadFile | ToolName::WriteFile | ToolName::Shell
        );
        if !paths.is_empty() && !takes_paths {
            let line = at("paths", self);
            self.say(line, format!("{name} does not take paths"));
        }
        if !hosts.is_empty() && tool != ToolName::HttpFetch {
            let line = at("hosts", self);
            self.say(line, format!("{name} does not take hosts"));
        }
        if !commands.is_empty() && tool != ToolName::Shell {
            let line = at("commands", self);
            self.say(line, format!("{name} does not take commands"));
        }
        if deny {
            return; // a deny grant without constraints forbids every call of its tool
        }
        match tool {
            ToolName::ReadFile | ToolName::WriteFile if paths.is_empty() => self.say(
                line,
                format!("{name} needs paths: the files and folders it may open"),
            ),
            ToolName::Shell if commands.is_empty() => self.say(
                line,
                "shell needs commands: the command prefixes it may run".to_string(),
            ),
            ToolName::HttpFetch if hosts.is_empty() => self.say(
                line,
                "http_fetch needs hosts: the hosts it may fetch from".to_string(),
            ),
            _ => {}
        }
    }

    fn string<'v>(&mut self, value: &'v Value<'_>, key: &str) -> Option<&'v str> {
        match value.get_ref() {
            DeValue::String(text) => Some(text.as_ref()),
            _ => {
                let line = self.line_of(value);
                self.say(line, format!("{key} must be a string"));
                None
            }
        }
    }

    fn strings(&mut self, value: &Value<'_>, key: &str) -> Vec<(String, usize)> {
        let DeValue::Array(items) = value.get_ref() else {
            let line = self.line_of(value);
            self.say(line, format!("{key} must be a list of strings"));
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items.iter() {
            let line = self.line_of(item);
            match item.get_ref() {
                DeValue::String(text) => out.push((text.to_string(), line)),
                _ => self.say(line, format!("{key} must be a list of strings")),
            }
        }
        out
    }

    fn id(&mut self, value: &Value<'_>) -> Option<String> {
        let text = self.string(value, "id")?.to_string();
        let valid = !text.is_empty()
            && text.len() <= 64
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if valid {
            Some(text)
        } else {
            let line = self.line_of(value);
            self.say(
                line,
                format!("id {text:?} must be 1 to 64 letters, digits, '-', '_' or '.'"),
            );
            None
        }
    }

    fn tool(&mut self, value: &Value<'_>) -> Option<ToolName> {
        let text = self.string(value, "tool")?;
        let tool = ToolName::parse(text);
        if tool.is_none() {
            let line = self.line_of(value);
            self.say(
                line,
                format!(
                    "unknown tool {text:?}; the known tools are {}",
                    ToolName::known_list()
                ),
            );
        }
        tool
    }

    fn class(&mut self, value: &Value<'_>, key: &str) -> Option<Class> {
        let word = self.word(value, key, &["public", "private", "secret"])?;
        Some(match word {
            "public" => Class::Public,
            "secret" => Class::Secret,
            _ => Class::Private,
        })
    }

    fn word(
        &mut self,
        value: &Value<'_>,
        key: &str,
        allowed: &[&'static str],
    ) -> Option<&'static str> {
        let text = self.string(value, key)?;
        let found = allowed.iter().copied().find(|w| *w == text);
        if found.is_none() {
            let line = self.line_of(value);
            self.say(
                line,
                format!(
                    "{key} is {text:?}; it must be one of {}",
                    allowed.join(", ")
                ),
            );
        }
        found
    }

    fn boolean(&mut self, value: &Value<'_>, key: &str) -> Option<bool> {
        match value.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            _ => {
                let line = self.line_of(value);
                self.say(line, format!("{key} must be true or false"));
                None
            }
        }
    }

    fn expires(&mut self, value: &Value<'_>) -> Option<Timestamp> {
        let text = match value.get_ref() {
            DeValue::Datetime(at) => at.to_string(),
            DeValue::String(text) => text.to_string(),
            _ => {
                let line = self.line_of(value);
                self.say(
                    line,
                    "expires must be an RFC 3339 date and time".to_string(),
                );
                return None;
            }
        };
        match Timestamp::parse(&text) {
            Ok(at) => Some(at),
            Err(_) => {
                let line = self.line_of(value);
                self.say(
                    line,
                    format!(
                        "expires {text:?} is not an RFC 3339 date and time with an offset, such as 2026-12-31T00:00:00Z"
                    ),
                );
                None
            }
        }
    }

    fn paths(&mut self, value: &Value<'_>) -> Vec<PathRule> {
        let mut rules = Vec::new();
        for (written, line) in self.strings(value, "paths") {
            match path_rule(&written, self.home) {
                Ok(rule) => rules.push(rule),
                Err(message) => self.say(line, message),
            }
        }
        rules
    }

    fn hosts(&mut self, value: &Value<'_>) -> Vec<HostRule> {
        let mut rules = Vec::new();
        for (written, line) in self.strings(value, "hosts") {
            match host_rule(&written) {
                Ok(rule) => rules.push(rule),
                Err(message) => self.say(line, message),
            }
        }
        rules
    }

    fn commands(&mut self, value: &Value<'_>) -> Vec<Vec<String>> {
        let mut prefixes = Vec::new();
        for (written, line) in self.strings(value, "commands") {
            match prefix_words(&written) {
                Ok(words) if words.is_empty() => {
                    self.say(line, "a command prefix cannot be empty".to_string());
                }
                Ok(words) => {
                    if let Some(warning) = prefix_warning(&words) {
                        self.warnings.push(problem(self.file, Some(line), warning));
                    }
                    prefixes.push(words);
                }
                Err(message) => self.say(line, format!("command prefix {written:?}: {message}")),
            }
        }
        prefixes
    }
}

/// Reads one `paths` entry: `~` expanded, absolute, a folder (resolved when it exists) or a
/// glob matched against resolved paths.
pub fn path_rule(written: &str, home: &Path) -> Result<PathRule, String> {
    let expanded = if written == "~" {
        home.to_path_buf()
    } else if let Some(rest) = written.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(written)
    };
    if !expanded.is_absolute() {
        return Err(format!(
            "path {written:?} must be absolute or start with ~/"
        ));
    }
    let text = expanded.to_string_lossy().into_owned();
    if text.contains(['*', '?', '[', '{']) {
        let glob = GlobBuilder::new(&text)
            .literal_separator(true)
            .build()
            .map_err(|e| format!("path {written:?} is not a valid glob: {e}"))?;
        return Ok(PathRule {
            written: written.to_string(),
            kind: PathKind::Glob(glob.compile_matcher()),
        });
    }
    let folder = resolve(&expanded);
    Ok(PathRule {
        written: written.to_string(),
        kind: PathKind::Folder(folder),
    })
}

/// Reads one `hosts` entry.
pub fn host_rule(written: &str) -> Result<HostRule, String> {
    let lower = written.trim().to_ascii_lowercase();
    let (host, port) = if let Some(v6) = lower.strip_prefix('[') {
        let (host, after) = v6
            .split_once(']')
            .ok_or_else(|| format!("host {written:?} has an unclosed ["))?;
        (host.to_string(), after.strip_prefix(':'))
    } else if lower.matches(':').count() > 1 {
        (lower.clone(), None) // a bare IPv6 address
    } else {
        match lower.split_once(':') {
            Some((host, port)) => (host.to_string(), Some(port)),
            None => (lower.clone(), None),
        }
    };
    let port = match port {
        None => 443,
        Some(text) => text
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or_else(|| format!("host {written:?} has an invalid port"))?,
    };
    let host = host.trim_end_matches('.').to_string();
    let (wildcard, host) = match host.strip_prefix("*.") {
        Some(domain) => (true, domain.to_string()),
        None => (false, host),
    };
    let valid = !host.is_empty()
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':' | '_'));
    if !valid {
        return Err(format!(
            "host {written:?} must be a host name, an IP address, or *. and a domain"
        ));
    }
    Ok(HostRule {
        written: written.to_string(),
        host,
        wildcard,
        port,
    })
}

/// `path` with symbolic links and `..` resolved as far as it exists, and the rest (which does
/// not exist yet) cleaned lexically.
pub fn resolve(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                push_lexically(&mut out, Path::new(part));
            }
            return out;
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => {
                // Nothing of it exists (or it ends in `..`): clean it lexically.
                let mut out = PathBuf::from("/");
                push_lexically(&mut out, path);
                return out;
            }
        }
    }
}

fn push_lexically(out: &mut PathBuf, part: &Path) {
    for component in part.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
}

fn problem(file: &Path, line: Option<usize>, message: String) -> Problem {
    Problem {
        file: file.to_path_buf(),
        line,
        message,
    }
}
