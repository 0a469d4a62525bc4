//! Where a script writes files, for the decision to check each place against the grant until the
//! sandbox enforces paths: the operands of known writers, the values of write options (of any
//! program: `--output`, `-o`; of each writer: [`super::writers`]), `git config` writes, and the
//! folders `cd`, `git -C`, `tar -C` and the like move to (the relative paths after them are
//! reported under each folder the script may be in).

use super::found::{Found, GitConfigScope, Value, fixed, part, unknown, word_value};
use super::gitwrites::git_writes;
use super::runners::{ARGUMENT_ADDERS, SHELL_NAMES, basename, runs_other_programs};
use super::sed::sed_writes;
use super::show::show;
use super::words::{Literal, looks_like_assignment};
use super::writers::{NO_OUTPUT_O, Special, Writer, generic_long, long_matches, writer};
use super::{Dialect, NotCovered};

/// A place a script may write.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum WriteTarget {
    /// A path as the command will see it: relative to the call's folder unless absolute; a
    /// leading `~` is left as written (the shell expands it to the home folder).
    Path(String),
    /// A covered `git config` that writes: which configuration file.
    GitConfig {
        /// The file: the repository's, the user's, the system's, or one named by `--file`.
        scope: GitConfigScope,
    },
}

/// The most folders a script's `cd`s and a command's `-C`s may combine into.
const MAX_BASES: usize = 32;

/// How deeply programs that run other programs are looked into (`env nice timeout 5 cp …`).
const MAX_WRAPPERS: usize = 4;

/// The write targets of one walk.
pub(super) struct Writes {
    pub(super) targets: Vec<WriteTarget>,
    /// Folders the script may be in after its `cd`s, relative to the call's folder (`""` is the
    /// call's folder itself).
    bases: Vec<String>,
}

/// Where one command's scripts for shells go (text and dialect).
pub(super) type Queue<'a> = dyn FnMut(String, Dialect) + 'a;

impl Writes {
    pub(super) fn new() -> Self {
        Self {
            targets: Vec::new(),
            bases: vec![String::new()],
        }
    }

    /// Records what one simple command writes; scripts of shells it runs inside a wrapper
    /// (`env sh -c '…'`) are queued.
    pub(super) fn command(
        &mut self,
        words: &[Literal],
        queue: &mut Queue<'_>,
    ) -> Result<(), NotCovered> {
        let Some(first) = words.first() else {
            return Ok(());
        };
        let name = basename(&first.text);
        if name == "cd" || name == "pushd" {
            return self.change_dir(&words[1..], name == "pushd");
        }
        let mut found = Found::default();
        scan(words, &mut found, queue, 0)?;
        self.place(found)
    }

    /// The file a redirection names, placed under the script's folders like a command's write.
    pub(super) fn redirect(&mut self, file: &Literal) -> Result<(), NotCovered> {
        // The box's own `/dev/null` (bubblewrap's `--dev`), nothing of the grant's.
        if file.text == "/dev/null" {
            return Ok(());
        }
        self.place(Found {
            paths: vec![word_value(file)],
            ..Found::default()
        })
    }

    /// `cd DIR` or `pushd DIR`: later relative paths may be under DIR too.
    fn change_dir(&mut self, args: &[Literal], pushd: bool) -> Result<(), NotCovered> {
        let mut operand = None;
        let mut options_done = false;
        for word in args {
            let text = word.text.as_str();
            if !options_done && text == "--" {
                options_done = true;
            } else if options_done || !text.starts_with('-') || text == "-" {
                operand = Some(word);
                break;
            }
        }
        let dir = match operand {
            // OLDPWD is a folder the script was already in (the broker passes none); `pushd +N`
            // and a bare `pushd` go back to one.
            Some(word) if word.text == "-" => return Ok(()),
            Some(word) if pushd && (word.text.starts_with('+') || word.text.starts_with('-')) => {
                return Ok(());
            }
            Some(word) => word_value(word),
            None if pushd => return Ok(()),
            None => fixed("~"),
        };
        let mut bases = self.bases.clone();
        extend_bases(&mut bases, &dir)?;
        self.bases = bases;
        Ok(())
    }

    /// Places one command's paths under every folder the script and the command may be in.
    fn place(&mut self, found: Found) -> Result<(), NotCovered> {
        let mut bases = self.bases.clone();
        for dir in &found.chdirs {
            extend_bases(&mut bases, dir)?;
        }
        for value in found.paths.iter().chain(&found.chdirs) {
            for path in placed(value, &bases) {
                push_unique(&mut self.targets, WriteTarget::Path(path));
            }
        }
        for scope in found.configs {
            let scopes = match scope {
                GitConfigScope::File(file) => {
                    let value = Value {
                        text: file,
                        expands: false,
                    };
                    placed(&value, &bases)
                        .into_iter()
                        .map(GitConfigScope::File)
                        .collect()
                }
                other => vec![other],
            };
            for scope in scopes {
                push_unique(&mut self.targets, WriteTarget::GitConfig { scope });
            }
        }
        Ok(())
    }
}

fn push_unique<T: PartialEq>(list: &mut Vec<T>, item: T) {
    if !list.contains(&item) {
        list.push(item);
    }
}

/// Adds DIR under every base to `bases`.
fn extend_bases(bases: &mut Vec<String>, dir: &Value) -> Result<(), NotCovered> {
    for path in placed(dir, bases) {
        push_unique(bases, path);
    }
    if bases.len() > MAX_BASES {
        return Err(NotCovered::UnknownWrite(
            "the script changes folders more often than the checker follows".into(),
        ));
    }
    Ok(())
}

/// The forms a value may take once the shell is done with it: a leading `~` stays as written
/// when the shell expands it (a whole word `~` or `~/…`); anywhere else bash may or may not
/// expand it, so the literal relative form is reported too; `~+` and `~-` are folders the script
/// was in.
fn forms(value: &Value) -> Vec<String> {
    let text = value.text.as_str();
    if text.is_empty() || text == "-" {
        return Vec::new();
    }
    if let Some(rest) = text.strip_prefix("~+").or_else(|| text.strip_prefix("~-"))
        && (rest.is_empty() || rest.starts_with('/'))
    {
        return vec![format!(".{rest}"), format!("./{text}")];
    }
    if text.starts_with('~') {
        if value.expands && (text == "~" || text.starts_with("~/")) {
            return vec![text.to_owned()];
        }
        return vec![text.to_owned(), format!("./{text}")];
    }
    vec![text.to_owned()]
}

/// A value's forms under each base folder (absolute and `~` forms as they are).
fn placed(value: &Value, bases: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    for form in forms(value) {
        if form.starts_with('/') || form.starts_with('~') {
            push_unique(&mut out, form);
            continue;
        }
        for base in bases {
            let path = if base.is_empty() {
                form.clone()
            } else if base.ends_with('/') {
                format!("{base}{form}")
            } else {
                format!("{base}/{form}")
            };
            push_unique(&mut out, path);
        }
    }
    out
}

/// Reads one command (the program and its arguments): its row, generic write options, its own
/// code, and the commands it runs.
fn scan(
    words: &[Literal],
    found: &mut Found,
    queue: &mut Queue<'_>,
    depth: usize,
) -> Result<(), NotCovered> {
    let Some((first, args)) = words.split_first() else {
        return Ok(());
    };
    let name = basename(&first.text);
    let row = writer(name);
    scan_options(name, row, args, found);
    if let Some(row) = row {
        special(name, row, args, found, queue, depth)?;
        for path in row.always {
            found.paths.push(fixed(path));
        }
    }
    if runs_other_programs(name) && !SHELL_NAMES.contains(&name) && name != "find" {
        if matches!(name, "env" | "sudo" | "doas") {
            refuse_moving_variables(name, args)?;
        }
        inner_commands(name, words, found, queue, depth)?;
    }
    Ok(())
}

/// A wrapper's command (`env cp a b`, `timeout 5 tee f`, `nice sh -c '…'`): every later word that
/// names a writer or a shell is read as the start of the command it runs.
fn inner_commands(
    name: &str,
    words: &[Literal],
    found: &mut Found,
    queue: &mut Queue<'_>,
    depth: usize,
) -> Result<(), NotCovered> {
    if depth >= MAX_WRAPPERS {
        return Err(unknown(format!(
            "`{name}` runs programs through more wrappers than the checker follows"
        )));
    }
    let mut start = 1;
    while start < words.len() {
        let word = &words[start];
        let inner = basename(&word.text);
        if SHELL_NAMES.contains(&inner) {
            shell_inner(name, &words[start..], queue)?;
            // The shell's `-c` and script were read.
            start += 3;
            continue;
        }
        // A command line in one word (`env -S 'rm x'`, `watch 'rm x'`, `flock f -c 'rm x'`).
        if word.text.contains(char::is_whitespace)
            && let Some(program) = word.text.split_whitespace().next()
            && is_written_command(basename(program))
        {
            return Err(unknown(format!(
                "`{name}` runs the command line `{}`, which the checker does not read",
                show(&word.text)
            )));
        }
        if writer(inner).is_some() {
            if ARGUMENT_ADDERS.contains(&name) {
                return Err(unknown(format!(
                    "`{name} {inner}` writes paths that `{name}` adds, which the checker cannot see"
                )));
            }
            scan(&words[start..], found, queue, depth + 1)?;
        }
        start += 1;
    }
    Ok(())
}

/// Variables a wrapper may set (`env LANG=C sort …`): none of them moves where a program writes.
const PLAIN_VARIABLES: &[&str] = &[
    "LANG", "LANGUAGE", "TZ", "TERM", "NO_COLOR", "COLUMNS", "LINES",
];

/// A wrapper that sets variables for the command it runs (`env GIT_DIR=… git init`,
/// `sudo HOME=… …`): `HOME`, `TMPDIR`,
/// `GIT_*`, `XDG_*` and the like move where the command it runs writes, so only locale and
/// terminal settings pass.
fn refuse_moving_variables(name: &str, args: &[Literal]) -> Result<(), NotCovered> {
    for word in args {
        if !looks_like_assignment(&word.text) {
            continue;
        }
        let variable = word.text.split('=').next().unwrap_or_default();
        if PLAIN_VARIABLES.contains(&variable) || variable.starts_with("LC_") {
            continue;
        }
        return Err(unknown(format!(
            "`{name}` sets `{}`, which can move where the command it runs writes",
            show(variable)
        )));
    }
    Ok(())
}

/// Whether a program by this name is read here for writes (a writer, git, a shell).
fn is_written_command(name: &str) -> bool {
    writer(name).is_some() || SHELL_NAMES.contains(&name) || runs_other_programs(name)
}

/// A shell run by a wrapper: `SHELL -c SCRIPT` is queued (for sh, dash and bash), anything else
/// reads a script the checker cannot see.
fn shell_inner(wrapper: &str, words: &[Literal], queue: &mut Queue<'_>) -> Result<(), NotCovered> {
    let shell = basename(&words[0].text);
    let dialect = match shell {
        "sh" | "dash" => Some(Dialect::Posix),
        "bash" => Some(Dialect::Bash),
        _ => None,
    };
    match (dialect, words.get(1), words.get(2)) {
        (Some(dialect), Some(flag), Some(script)) if flag.text == "-c" => {
            queue(script.text.clone(), dialect);
            Ok(())
        }
        _ => Err(unknown(format!(
            "`{wrapper}` runs `{shell}` on a script the checker cannot see"
        ))),
    }
}

/// The row's options and operands, and the write options of any program.
fn scan_options(name: &str, row: Option<&Writer>, args: &[Literal], found: &mut Found) {
    let empty = Writer::EMPTY;
    let row = row.unwrap_or(&empty);
    let generic_o = !NO_OUTPUT_O.contains(&name) && !matches!(name, "openssl" | "javac");
    let mut i = 0;
    let mut options_done = false;
    let take_next = |i: &mut usize| -> Option<Value> {
        let next = args.get(*i).map(word_value);
        *i += 1;
        next
    };
    while let Some(word) = args.get(i) {
        let text = word.text.as_str();
        i += 1;
        if options_done || text == "-" || !text.starts_with('-') {
            if row.operands {
                found.paths.push(word_value(word));
            }
            for key in row.keys {
                if let Some(value) = text
                    .strip_prefix(key)
                    .and_then(|rest| rest.strip_prefix('='))
                {
                    found.paths.push(part(value));
                }
            }
            continue;
        }
        if text == "--" {
            options_done = true;
            continue;
        }
        if row.words.contains(&text) {
            found.paths.extend(take_next(&mut i));
            continue;
        }
        if let Some(long) = text.strip_prefix("--") {
            let (option, attached) = match long.split_once('=') {
                Some((option, value)) => (option, Some(part(value))),
                None => (long, None),
            };
            let writes = generic_long(option) || long_matches(option, row.long);
            let chdir = long_matches(option, row.chdir_long);
            if writes || chdir {
                let value = match attached {
                    Some(value) => Some(value),
                    None => take_next(&mut i),
                };
                if let Some(value) = value {
                    if chdir {
                        found.chdirs.push(value);
                    } else {
                        found.paths.push(value);
                    }
                }
            }
            continue;
        }
        for (at, letter) in text.char_indices().skip(1) {
            let writes = row.short.contains(letter) || (generic_o && letter == 'o');
            let chdir = row.chdir_short.contains(letter);
            if !(writes || chdir) {
                continue;
            }
            let rest = &text[at + letter.len_utf8()..];
            let value = if rest.is_empty() {
                take_next(&mut i)
            } else {
                Some(part(rest))
            };
            if let Some(value) = value {
                if chdir {
                    found.chdirs.push(value);
                } else {
                    found.paths.push(value);
                }
            }
            break;
        }
    }
}

/// The programs read by their own code.
fn special(
    name: &str,
    row: &Writer,
    args: &[Literal],
    found: &mut Found,
    queue: &mut Queue<'_>,
    depth: usize,
) -> Result<(), NotCovered> {
    match row.special {
        Special::None => Ok(()),
        Special::Git => git_writes(args, found),
        Special::Tar => super::archives::tar_writes(args, &mut |path, expands, chdir| {
            let value = Value {
                text: path,
                expands,
            };
            if chdir {
                found.chdirs.push(value);
            } else {
                found.paths.push(value);
            }
        }),
        Special::Sed => {
            let paths = sed_writes(args).map_err(unknown)?;
            found.paths.extend(paths.into_iter().map(|text| Value {
                text,
                expands: false,
            }));
            Ok(())
        }
        Special::Find => find_writes(args, found, queue, depth),
        Special::Curl => {
            if super::archives::curl_names_files(args) {
                found.paths.push(fixed("."));
            }
            if args
                .iter()
                .any(|a| a.text == "-K" || a.text.starts_with("--conf"))
            {
                return Err(unknown(format!(
                    "`{name}` reads options from a file the checker cannot see"
                )));
            }
            Ok(())
        }
        Special::Cargo => {
            // `cargo new PATH`, `cargo init PATH` create a package there.
            let mut positionals = args
                .iter()
                .filter(|w| !w.text.starts_with('-') && !w.text.starts_with('+'));
            if positionals
                .next()
                .is_some_and(|sub| sub.text == "new" || sub.text == "init")
            {
                found.paths.extend(positionals.map(word_value));
            }
            Ok(())
        }
        Special::Unzip | Special::Cpio => {
            super::archives::refuse_unsafe_extraction(name, args).map_err(unknown)
        }
    }
}

/// `find`: `-delete` and `-exec`-like actions write under the starting points; `-fprint` and
/// `-fls` write their file; the commands of `-exec` are read as commands.
fn find_writes(
    args: &[Literal],
    found: &mut Found,
    queue: &mut Queue<'_>,
    depth: usize,
) -> Result<(), NotCovered> {
    let mut i = 0;
    while let Some(word) = args.get(i) {
        match word.text.as_str() {
            "-H" | "-L" | "-P" => i += 1,
            "-D" => i += 2,
            t if t.starts_with("-O") => i += 1,
            _ => break,
        }
    }
    let mut starts: Vec<Value> = Vec::new();
    while let Some(word) = args.get(i) {
        let t = word.text.as_str();
        if t.starts_with('-') || matches!(t, "(" | ")" | "!" | ",") {
            break;
        }
        starts.push(word_value(word));
        i += 1;
    }
    if starts.is_empty() {
        starts.push(fixed("."));
    }
    let mut writes_under_starts = false;
    while let Some(word) = args.get(i) {
        i += 1;
        match word.text.as_str() {
            "-delete" => writes_under_starts = true,
            "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                if let Some(file) = args.get(i) {
                    found.paths.push(word_value(file));
                }
                i += 1;
            }
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                writes_under_starts = true;
                let end = args[i..]
                    .iter()
                    .position(|w| w.text == ";" || w.text == "+")
                    .map_or(args.len(), |p| i + p);
                let command = &args[i..end];
                if let Some(first) = command.first() {
                    let inner = basename(&first.text);
                    if SHELL_NAMES.contains(&inner) {
                        shell_inner("find", command, queue)?;
                    } else if depth < MAX_WRAPPERS {
                        scan(command, found, queue, depth + 1)?;
                    }
                }
                i = end + 1;
            }
            _ => {}
        }
    }
    if writes_under_starts {
        found.paths.append(&mut starts);
    }
    Ok(())
}
