//! Warnings for granted prefixes that run other programs or can never cover anything.

use super::builtins::refused_builtin_name;
use super::screen::{CONTROL_KEYWORDS, OTHER_KEYWORDS};
use super::show::{render_words, show};

/// A warning for a granted prefix whose first word runs other programs (env, xargs, find, git,
/// sudo, shells, interpreters, build tools, …), or that can never cover anything; None when the
/// prefix looks narrow.
pub fn prefix_warning(prefix: &[String]) -> Option<String> {
    let Some(first) = prefix.first() else {
        return Some("the prefix is empty, so it covers no command".to_owned());
    };
    let name = first.rsplit('/').next().unwrap_or(first);
    let shown = show(&render_words(prefix));
    if refused_builtin_name(first) {
        return Some(format!(
            "`{first}` is never covered: the checker refuses it whatever the grants say"
        ));
    }
    if CONTROL_KEYWORDS.contains(&first.as_str()) || OTHER_KEYWORDS.contains(&first.as_str()) {
        return Some(format!(
            "`{first}` is a shell keyword, so a command never starts with it and `{shown}` covers nothing"
        ));
    }
    if name == "git" {
        return git_warning(prefix, &shown);
    }
    if name == "sed" || name == "gsed" {
        if prefix.iter().any(|w| w == "--sandbox") {
            return None;
        }
        return Some(format!(
            "`{shown}` can run other programs (GNU sed's `e` command and `s///e` flag) and write files (`w`); add `--sandbox` to the prefix to forbid them"
        ));
    }
    runner_reason(name).map(|how| {
        format!("`{shown}` can run other programs ({how}), so this grant covers whatever they run")
    })
}

/// git subcommands that run no other program (no hooks, pagers off without a terminal).
const GIT_QUIET: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "branch",
    "tag",
    "add",
    "rm",
    "mv",
    "restore",
    "reset",
    "stash",
    "blame",
    "shortlog",
    "describe",
    "rev-parse",
    "rev-list",
    "ls-files",
    "ls-tree",
    "cat-file",
    "diff-tree",
    "diff-files",
    "diff-index",
    "for-each-ref",
    "show-ref",
    "reflog",
    "init",
    "version",
    "--version",
    "count-objects",
    "fsck",
    "notes",
    "range-diff",
    "format-patch",
    "apply",
    "check-ignore",
    "check-attr",
    "whatchanged",
    "name-rev",
    "merge-base",
    "symbolic-ref",
];

fn git_warning(prefix: &[String], shown: &str) -> Option<String> {
    match prefix.get(1) {
        None => Some(format!(
            "`{shown}` can run other programs (`git -c` settings, aliases, hooks, `--upload-pack`, `rebase --exec`, …), so this grant covers whatever they run; grant subcommands such as `git status`"
        )),
        Some(sub) if sub.starts_with('-') => Some(format!(
            "`{shown}` starts with a global git option; with `-c`, `--exec-path` or `--config-env` git runs whatever the setting names"
        )),
        Some(sub) if GIT_QUIET.contains(&sub.as_str()) => None,
        Some(sub) => Some(format!(
            "`{shown}` can run other programs (hooks, aliases, or options such as `--exec`, `--upload-pack`, `-x`), so this grant covers whatever git `{sub}` runs"
        )),
    }
}

/// How a program named `name` runs other programs, if it does.
fn runner_reason(name: &str) -> Option<&'static str> {
    const WRAPPERS: &[&str] = &[
        "env",
        "xargs",
        "sudo",
        "doas",
        "su",
        "pkexec",
        "run0",
        "runuser",
        "setpriv",
        "capsh",
        "nice",
        "ionice",
        "nohup",
        "timeout",
        "watch",
        "time",
        "strace",
        "ltrace",
        "gdb",
        "lldb",
        "valgrind",
        "perf",
        "chroot",
        "unshare",
        "nsenter",
        "setsid",
        "stdbuf",
        "taskset",
        "chrt",
        "flock",
        "script",
        "expect",
        "parallel",
        "entr",
        "systemd-run",
        "at",
        "batch",
        "crontab",
        "tmux",
        "screen",
        "firejail",
        "bwrap",
        "flatpak",
        "nix",
        "nix-shell",
        "command",
        "builtin",
        "docker",
        "podman",
        "kubectl",
        "xdg-open",
        "open",
    ];
    const SHELL_NAMES: &[&str] = &[
        "sh",
        "bash",
        "dash",
        "zsh",
        "ksh",
        "mksh",
        "fish",
        "csh",
        "tcsh",
        "busybox",
        "nu",
        "elvish",
        "xonsh",
        "pwsh",
        "powershell",
    ];
    const INTERPRETER_PREFIXES: &[&str] = &[
        "python",
        "pypy",
        "perl",
        "ruby",
        "node",
        "php",
        "lua",
        "tclsh",
        "wish",
        "rscript",
        "julia",
        "java",
        "jshell",
        "deno",
        "bun",
        "osascript",
        "guile",
        "racket",
        "sbcl",
        "runghc",
        "tsx",
        "ts-node",
        "awk",
        "gawk",
        "mawk",
        "nawk",
    ];
    const BUILD_TOOLS: &[&str] = &[
        "make", "gmake", "cmake", "ninja", "meson", "just", "rake", "gradle", "gradlew", "mvn",
        "ant", "bazel", "cargo", "go", "npm", "npx", "yarn", "pnpm", "pip", "pip3", "pipx", "uv",
        "poetry", "bundle", "gem", "mix", "dotnet",
    ];
    let lower = name.to_ascii_lowercase();
    if WRAPPERS.contains(&name) {
        return Some("it runs the command given in its arguments");
    }
    if SHELL_NAMES.contains(&name) {
        return Some("a shell runs any command");
    }
    if INTERPRETER_PREFIXES.iter().any(|p| lower.starts_with(p)) {
        return Some("an interpreter runs any code it is given");
    }
    if BUILD_TOOLS.contains(&name) {
        return Some("it runs build scripts, tests, tasks or plugins from the project");
    }
    match name {
        "find" => Some("`-exec`, `-execdir`, `-ok`"),
        "fd" | "fdfind" => Some("`-x`, `--exec`, `--exec-batch`"),
        "rg" => Some("`--pre`"),
        "sort" => Some("`--compress-program`"),
        "tar" => Some("`--to-command`, `-I`, `--use-compress-program`, `--checkpoint-action=exec`"),
        "zip" => Some("`-TT`, `--unzip-command`"),
        "rsync" => Some("`-e`, `--rsh`, `--rsync-path`"),
        "ssh" | "scp" | "sftp" => Some("remote commands, `ProxyCommand`, `-S`"),
        "vi" | "vim" | "nvim" | "view" | "emacs" | "ed" | "ex" | "less" | "more" | "man" => {
            Some("shell escapes such as `!cmd` and pager or filter settings")
        }
        "apt" | "apt-get" | "dpkg" => Some("hooks set with `-o`"),
        _ => None,
    }
}
