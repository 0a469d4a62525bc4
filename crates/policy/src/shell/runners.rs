//! Programs that run other programs: the one list behind the loader's warnings, the deny
//! matching (which looks inside them) and the write targets (which look for writers inside them).

/// The last `/`-separated part of a command word: `/usr/bin/git` is `git`.
pub(super) fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

/// Shells, by program name: what they run is a script.
pub(super) const SHELL_NAMES: &[&str] = &[
    "sh",
    "bash",
    "dash",
    "zsh",
    "ksh",
    "mksh",
    "yash",
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

/// Programs that take the command they run from their input or add arguments of their own to it
/// (`xargs rm`, `find -exec rm {} ;`), so the command's full words are never in the script.
pub(super) const ARGUMENT_ADDERS: &[&str] = &["xargs", "parallel", "find", "fd", "fdfind"];

/// Whether a program by this name runs other programs.
pub(super) fn runs_other_programs(name: &str) -> bool {
    runner_reason(name).is_some()
}

/// How a program named `name` runs other programs, if it does.
pub(super) fn runner_reason(name: &str) -> Option<&'static str> {
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
        "sqlite3" => Some("`.shell`, `.system`"),
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
