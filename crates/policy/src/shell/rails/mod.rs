//! The guard rails on a `shell` script, which hold whatever a grant says (the decision checks
//! them right after the protected paths, in seed 003's order):
//!
//! 1. [`catastrophic`]: a command that could destroy the machine or the owner's files, read on
//!    the parsed script (control flow, functions, redirections and nested `sh -c` scripts
//!    included), through wrappers (`env`, `sudo`, `nohup`, `time`, `nice`, `timeout`, `xargs`,
//!    `find -exec`, …) and pipelines;
//! 2. [`backgrounded`]: a command sent to the background with `&` in the call's own script;
//! 3. [`path_words`]: every literal word and redirection target, so that the decision can
//!    refuse any that names a place inside boxmaker's protected folders.
//!
//! **What is catastrophic** (each answer names what was found):
//!
//! - a recursive `rm` (`-r`, `-R`, `-rf`, `-fr`, `-r -f`, `--recursive`) of the root folder, a
//!   folder directly under it (`/usr`, `/home`, …), the home folder (`~`, `~user`, `$HOME`,
//!   `${HOME}`, quoted or not) or a folder holding it, a granted folder's base or a folder
//!   holding it; `*` (or `.*`) counts as its folder, so `rm -rf *` is refused where `cwd` is
//!   one of those, and a glob with other characters counts only in `/` or the home folder
//!   (`rm -rf /u*`); `..` and `.` are taken lexically from `cwd`;
//! - `rm --no-preserve-root`, whatever else it says;
//! - a recursive `rm` whose operands are not all literal words: a substitution (`$DIR`,
//!   `$(…)`), `{}`, or operands another program adds (`xargs rm -r`, `find -exec rm -r {} ;`);
//!   a command name that is itself a substitution (`$RM -rf /`) is read as `rm`;
//! - `find … -delete` from the root, the home folder, a folder directly under the root or a
//!   folder holding one of them, whatever its tests; from a granted folder's base (or a folder
//!   holding one) without a test that narrows what it deletes (`-name`, `-path`, `-newer`,
//!   `-mtime`, `-size`, …); from a starting point that is not literal;
//! - `mkfs*`, `mke2fs`, `mkswap`, `wipefs`, `blkdiscard`; `dd of=/dev/…`, `tee` or `shred` of
//!   a device, and a redirection that writes to one (`> /dev/sda`), where a device is any
//!   `/dev/…` path but `/dev/null`, `/dev/zero`, `/dev/full`, `/dev/random`, `/dev/urandom`,
//!   `/dev/tty`, `/dev/std{in,out,err}`, `/dev/fd/…`, `/dev/pts/…`, `/dev/shm/…`;
//! - `chmod`, `chown` or `chgrp` with `-R` of the root, a folder directly under it, or the home
//!   folder or a folder holding it;
//! - `shutdown`, `reboot`, `halt`, `poweroff`, `systemctl poweroff|reboot|halt|kexec`,
//!   `init 0|6`, `telinit 0|6`;
//! - a fork bomb under any name: a function that calls itself (directly or through other
//!   functions of the script) in a script where some function's call is piped, sent to the
//!   background or made twice (`:(){ :|:& };:`, `f(){ f | f & }; f`).
//!
//! Wrappers are read the way deny grants read them: after `env`, `sudo`, `nohup`, `time`,
//! `nice`, `timeout`, `xargs`, … every later word may be where the command it runs starts, and
//! any later word holding a blank is read as a script too (`watch 'rm -rf /'`, `su -c '…'`); a
//! shell's arguments that are not options are read as scripts (`sh -c`, `bash -lc`, nested up
//! to [`MAX_SHELL_DEPTH`](super::MAX_SHELL_DEPTH) deep).
//!
//! A script the rails cannot read (brush cannot parse it, or it holds what makes brush hang:
//! `<<`, `((`, deep nesting) is left to coverage, whose own screen refuses at least as much.

mod read;
mod walk;
mod words;

use std::path::{Component, Path, PathBuf};

use read::{Word, word};
use walk::{Flat, flatten};
pub use words::{path_words, script_words};

use super::MAX_SHELL_DEPTH;
use super::runners::{SHELL_NAMES, basename};
use super::show::show;

/// Where a script runs, as the catastrophic rail needs it.
#[derive(Debug, Clone, Copy)]
pub struct Place<'a> {
    /// The folder the script runs in (resolved).
    pub cwd: &'a Path,
    /// The owner's home folder (resolved), when known.
    pub home: Option<&'a Path>,
    /// The bases of the folders the `shell` grants name (resolved).
    pub granted: &'a [PathBuf],
}

/// What a catastrophic script does, for the owner and the audit log (one sentence naming the
/// command), or None when the rail finds nothing.
pub fn catastrophic(script: &str, place: &Place<'_>) -> Option<String> {
    script_at(script, place, 0)
}

/// Whether the script itself (not a nested `sh -c` script) sends a command to the background
/// with `&` (`&&`, `&>` and `>&` do not).
pub fn backgrounded(script: &str) -> bool {
    read::tokens(script).is_some_and(|tokens| {
        tokens
            .iter()
            .any(|t| matches!(t, brush_parser::Token::Operator(op, _) if op == "&"))
    })
}

fn script_at(script: &str, place: &Place<'_>, depth: usize) -> Option<String> {
    if depth > MAX_SHELL_DEPTH {
        return None;
    }
    let program = read::parse(script)?;
    let flat = flatten(&program);
    if let Some(found) = fork_bomb(&flat) {
        return Some(found);
    }
    for (writes, raw) in &flat.redirects {
        let target = word(raw);
        if *writes && target.literal && is_device(&target.text) {
            return Some(format!(
                "a redirection writes to the device {}",
                show(&target.text)
            ));
        }
    }
    let rail = Rail { place, depth };
    flat.commands.iter().find_map(|command| {
        let words: Vec<Word> = command.iter().map(|raw| word(raw)).collect();
        rail.command(&words, false)
    })
}

/// Programs that run the command given in their arguments.
const WRAPPERS: &[&str] = &[
    "env",
    "sudo",
    "doas",
    "nohup",
    "time",
    "nice",
    "ionice",
    "timeout",
    "command",
    "builtin",
    "exec",
    "xargs",
    "parallel",
    "setsid",
    "stdbuf",
    "chrt",
    "taskset",
    "flock",
    "chroot",
    "unshare",
    "nsenter",
    "runuser",
    "su",
    "setpriv",
    "strace",
    "ltrace",
    "watch",
    "script",
    "systemd-run",
    "firejail",
    "busybox",
    "pkexec",
    "run0",
    "capsh",
    "entr",
    "caffeinate",
];

/// Wrappers that add arguments of their own to the command they run.
const ADDERS: &[&str] = &["xargs", "parallel"];

/// Tests of `find` that narrow what `-delete` removes.
const NARROWING: &[&str] = &[
    "-name",
    "-iname",
    "-path",
    "-ipath",
    "-wholename",
    "-iwholename",
    "-regex",
    "-iregex",
    "-lname",
    "-ilname",
    "-newer",
    "-anewer",
    "-cnewer",
    "-newermt",
    "-mtime",
    "-mmin",
    "-atime",
    "-amin",
    "-ctime",
    "-cmin",
    "-size",
    "-empty",
    "-inum",
    "-samefile",
    "-links",
    "-perm",
    "-user",
    "-group",
    "-uid",
    "-gid",
    "-nouser",
    "-nogroup",
    "-used",
];

/// How far a command's damage reaches, which decides which folders are too wide for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// Deleting everything below: the root, system folders, the home folder, granted bases
    /// and every folder holding one.
    Delete,
    /// Changing the whole machine's or home's files (permissions, a filtered delete): the
    /// root, system folders, the home folder and folders holding it.
    System,
}

struct Rail<'p, 'a> {
    place: &'p Place<'a>,
    depth: usize,
}

impl Rail<'_, '_> {
    /// A command, through the wrappers in front of it; `adds` when a program before it adds
    /// arguments of its own.
    fn command(&self, words: &[Word], adds: bool) -> Option<String> {
        let first = words.first()?;
        let name = basename(&first.text);
        if !WRAPPERS.contains(&name) {
            return self.direct(words, adds);
        }
        let mut adds = adds || ADDERS.contains(&name);
        for start in 1..words.len() {
            let here = &words[start..];
            if here[0].text.contains([' ', '\t', '\n'])
                && let Some(found) = script_at(&here[0].text, self.place, self.depth + 1)
            {
                return Some(found);
            }
            let name = basename(&here[0].text);
            if WRAPPERS.contains(&name) {
                adds |= ADDERS.contains(&name);
                continue;
            }
            if let Some(found) = self.direct(here, adds) {
                return Some(found);
            }
        }
        None
    }

    /// A command that is not a wrapper.
    fn direct(&self, words: &[Word], adds: bool) -> Option<String> {
        let first = words.first()?;
        let name = basename(&first.text);
        let args = &words[1..];
        if SHELL_NAMES.contains(&name) {
            return args
                .iter()
                .filter(|w| !w.text.starts_with('-'))
                .find_map(|w| script_at(&w.text, self.place, self.depth + 1));
        }
        if !first.literal {
            // `$RM -rf /`: the program is only known when it runs.
            return self.rm(args, adds);
        }
        match name {
            "rm" => self.rm(args, adds),
            "find" => self.find(args, adds),
            "dd" => args.iter().find_map(|w| {
                let target = w.text.strip_prefix("of=")?;
                (w.literal && is_device(target))
                    .then(|| format!("`dd` writes to the device {}", show(target)))
            }),
            "tee" | "shred" => args.iter().find_map(|w| {
                (w.literal && is_device(&w.text))
                    .then(|| format!("`{name}` writes to the device {}", show(&w.text)))
            }),
            "mke2fs" | "mkswap" | "wipefs" | "blkdiscard" => {
                Some(format!("`{name}` makes or wipes a file system"))
            }
            _ if name.starts_with("mkfs") => Some(format!("`{name}` makes a file system")),
            "chmod" | "chown" | "chgrp" => self.change_mode(name, args),
            "shutdown" | "reboot" | "halt" | "poweroff" => {
                Some(format!("`{name}` stops the machine"))
            }
            "systemctl" => args
                .iter()
                .find(|w| matches!(w.text.as_str(), "poweroff" | "reboot" | "halt" | "kexec"))
                .map(|w| format!("`systemctl {}` stops the machine", w.text)),
            "init" | "telinit" => args
                .iter()
                .find(|w| matches!(w.text.as_str(), "0" | "6"))
                .map(|w| format!("`{name} {}` stops the machine", w.text)),
            _ => None,
        }
    }

    fn rm(&self, args: &[Word], adds: bool) -> Option<String> {
        let mut recursive = false;
        let mut maybe_recursive = false;
        let mut operands = Vec::new();
        let mut options = true;
        for w in args {
            if options && !w.literal {
                maybe_recursive = true;
            }
            if options && w.literal && w.text == "--" {
                options = false;
            } else if options && w.literal && w.text.starts_with("--") {
                let long = &w.text[2..];
                if long.len() >= 3 && "no-preserve-root".starts_with(long) {
                    return Some("`rm --no-preserve-root` asks to delete the root folder".into());
                }
                recursive |= long.len() >= 3 && "recursive".starts_with(long);
            } else if options && w.literal && w.text.len() > 1 && w.text.starts_with('-') {
                recursive |= w.text.contains(['r', 'R']);
            } else {
                operands.push(w);
            }
        }
        if recursive && adds {
            return Some(
                "a recursive `rm` whose operands another program adds (`xargs`, `find -exec`)"
                    .into(),
            );
        }
        for operand in &operands {
            if recursive && (!operand.literal || operand.text.contains("{}")) {
                return Some(format!(
                    "a recursive `rm` of `{}`, a word whose value is only known when it runs",
                    show(&operand.text)
                ));
            }
            if (recursive || maybe_recursive)
                && let Some(what) = self.too_wide(operand, Reach::Delete)
            {
                return Some(format!("a recursive `rm` of {what}"));
            }
        }
        None
    }

    fn find(&self, args: &[Word], adds: bool) -> Option<String> {
        let mut i = 0;
        // Options before the starting points.
        while let Some(w) = args.get(i) {
            match w.text.as_str() {
                "-H" | "-L" | "-P" => i += 1,
                "-D" => i += 2,
                t if t.starts_with("-O") => i += 1,
                _ => break,
            }
        }
        let mut starts = Vec::new();
        while let Some(w) = args.get(i) {
            if w.text.starts_with('-') || matches!(w.text.as_str(), "(" | "!" | ",") {
                break;
            }
            starts.push(w);
            i += 1;
        }
        let expression = &args[i.min(args.len())..];
        // The commands of `-exec` and the like run with the paths `find` adds.
        let mut j = 0;
        while let Some(w) = expression.get(j) {
            j += 1;
            if matches!(w.text.as_str(), "-exec" | "-execdir" | "-ok" | "-okdir") {
                let end = expression[j..]
                    .iter()
                    .position(|w| w.text == ";" || w.text == "+")
                    .map_or(expression.len(), |p| j + p);
                if let Some(found) = self.command(&expression[j..end], true) {
                    return Some(found);
                }
                j = end;
            }
        }
        if !expression.iter().any(|w| w.text == "-delete") {
            return None;
        }
        let narrowed = expression
            .iter()
            .any(|w| NARROWING.contains(&w.text.as_str()));
        if adds && !narrowed {
            return Some("`find -delete` from starting points another program adds".into());
        }
        let dot = word(".");
        let starts = if starts.is_empty() {
            vec![&dot]
        } else {
            starts
        };
        for start in starts {
            if !start.literal {
                return Some(format!(
                    "`find -delete` from `{}`, a word whose value is only known when it runs",
                    show(&start.text)
                ));
            }
            let reach = if narrowed {
                Reach::System
            } else {
                Reach::Delete
            };
            if let Some(what) = self.too_wide(start, reach) {
                return Some(format!("`find -delete` from {what}"));
            }
        }
        None
    }

    fn change_mode(&self, name: &str, args: &[Word]) -> Option<String> {
        let recursive = args.iter().any(|w| {
            w.literal
                && (w.text == "--recursive"
                    || (w.text.starts_with('-')
                        && !w.text.starts_with("--")
                        && w.text.contains('R')))
        });
        if !recursive {
            return None;
        }
        args.iter()
            .filter(|w| !w.text.starts_with('-'))
            .find_map(|w| self.too_wide(w, Reach::System))
            .map(|what| format!("a recursive `{name}` of {what}"))
    }

    /// Whether the operand `w` names a folder too wide for `reach`, described.
    fn too_wide(&self, w: &Word, reach: Reach) -> Option<String> {
        let text = if w.glob { &w.before_glob } else { &w.text };
        // A glob stands for the folder it lists when its component is only stars (`*`, `.*`),
        // and for some entries of it otherwise.
        let (folder, whole) = if w.glob {
            let rest = &w.text[text.rfind('/').map_or(0, |s| s + 1)..];
            let folder = text.rfind('/').map_or("", |s| &text[..=s]);
            (
                folder.to_owned(),
                matches!(rest, "*" | ".*" | "**" | "*/" | ".*/"),
            )
        } else {
            (text.clone(), true)
        };
        let shown = show(&w.text);
        let path = if w.home {
            let after = folder.trim_start_matches('~');
            let (user, rest) = after.split_once('/').unwrap_or((after, ""));
            if !user.is_empty() {
                return (rest.trim_matches('/').is_empty())
                    .then(|| format!("`{shown}`, another user's home folder"));
            }
            match self.place.home {
                Some(home) => home.join(rest),
                None => {
                    return rest
                        .trim_matches('/')
                        .is_empty()
                        .then(|| format!("`{shown}`, the home folder"));
                }
            }
        } else {
            self.place
                .cwd
                .join(if folder.is_empty() { "." } else { &folder })
        };
        let path = lexical(&path);
        let root = Path::new("/");
        let in_root = path == root;
        let home = self.place.home.map(lexical);
        let at_home = home.as_deref() == Some(path.as_path());
        if !whole {
            // Some entries of the folder: too wide only in `/` and the home folder.
            return (in_root || at_home).then(|| {
                format!(
                    "`{shown}`, entries of {}",
                    if in_root {
                        "the root folder"
                    } else {
                        "the home folder"
                    }
                )
            });
        }
        if in_root {
            return Some(format!("`{shown}`, the root folder"));
        }
        if path.parent() == Some(root) {
            return Some(format!("`{shown}`, the system folder {}", path.display()));
        }
        if let Some(home) = &home
            && home.starts_with(&path)
        {
            return Some(if at_home {
                format!("`{shown}`, the home folder")
            } else {
                format!("`{shown}`, a folder that holds the home folder")
            });
        }
        if reach == Reach::Delete
            && let Some(base) = self
                .place
                .granted
                .iter()
                .map(|b| lexical(b))
                .find(|b| b.starts_with(&path))
        {
            return Some(if base == path {
                format!("`{shown}`, the granted folder {}", base.display())
            } else {
                format!(
                    "`{shown}`, a folder that holds the granted folder {}",
                    base.display()
                )
            });
        }
        None
    }
}

/// `path` with `.` and `..` taken lexically (never above `/`).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Whether `text` names a device a write could destroy: any `/dev/…` path but the harmless ones.
fn is_device(text: &str) -> bool {
    let Some(rest) = text.strip_prefix("/dev/") else {
        return false;
    };
    let rest = rest.trim_end_matches('/');
    !(matches!(
        rest,
        "null" | "zero" | "full" | "random" | "urandom" | "tty" | "stdin" | "stdout" | "stderr"
    ) || ["fd/", "pts/", "shm/"].iter().any(|p| rest.starts_with(p))
        || rest.is_empty())
}

/// A function that calls itself (directly or through the script's other functions), in a
/// script where a function's call is piped, sent to the background or made twice.
fn fork_bomb(flat: &Flat) -> Option<String> {
    let functions = &flat.functions;
    let multiplies = functions.iter().any(|f| {
        f.calls.iter().any(|(_, multiplied)| *multiplied)
            || f.calls
                .iter()
                .filter(|(name, _)| functions.iter().any(|g| &g.name == name))
                .count()
                > 1
    });
    if !multiplies {
        return None;
    }
    for f in functions {
        // Functions reachable from f's body.
        let mut seen: Vec<&str> = Vec::new();
        let mut todo: Vec<&str> = f.calls.iter().map(|(n, _)| n.as_str()).collect();
        while let Some(name) = todo.pop() {
            if name == f.name {
                return Some(format!(
                    "a fork bomb: the function `{}` starts copies of itself",
                    show(&f.name)
                ));
            }
            if seen.contains(&name) {
                continue;
            }
            seen.push(name);
            for g in functions.iter().filter(|g| g.name == name) {
                todo.extend(g.calls.iter().map(|(n, _)| n.as_str()));
            }
        }
    }
    None
}
