//! The one table of programs that write files, and of the options through which any program
//! may: what [`super::write_targets`] reports, row by row.
//!
//! Long options are matched by any prefix of their name (GNU getopt and git accept unambiguous
//! abbreviations: `sort --out=F` is `--output=F`). A value written in the next word is taken
//! from it. Reading a path as a write only costs a refusal, so rows err on reporting more.

/// How a program writes files.
#[derive(Debug)]
pub(super) struct Writer {
    /// Program names (the last part of the command word).
    pub(super) names: &'static [&'static str],
    /// Every operand (a word that is not an option or an option's value) is a target.
    pub(super) operands: bool,
    /// Short options whose value (attached, or the next word) is a target.
    pub(super) short: &'static str,
    /// Long options whose value is a target.
    pub(super) long: &'static [&'static str],
    /// Short options that name the folder the program works in (a target, and the base of its
    /// relative paths).
    pub(super) chdir_short: &'static str,
    /// Long options that name the folder the program works in.
    pub(super) chdir_long: &'static [&'static str],
    /// Single-dash long options (`-out FILE`, `-fprint FILE`) whose next word is a target.
    pub(super) words: &'static [&'static str],
    /// `key=PATH` operands whose path is a target (`dd of=…`).
    pub(super) keys: &'static [&'static str],
    /// Paths written whatever the words say (`.` for programs that write into the current
    /// folder by default: downloads, extractions, patches).
    pub(super) always: &'static [&'static str],
    /// Handled by its own code besides this row.
    pub(super) special: Special,
    /// What the loader's warning says about a prefix for this program; None when operands are
    /// all it writes (they are visible in every call).
    pub(super) note: Option<&'static str>,
}

/// Programs read by their own code (besides their row).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Special {
    None,
    Git,
    Tar,
    Sed,
    Find,
    Curl,
    Unzip,
    Cpio,
    Cargo,
}

impl Writer {
    /// The row of a program that is not in the table: only the options of any program apply.
    pub(super) const EMPTY: Writer = row(&[]);
}

const fn row(names: &'static [&'static str]) -> Writer {
    Writer {
        names,
        operands: false,
        short: "",
        long: &[],
        chdir_short: "",
        chdir_long: &[],
        words: &[],
        keys: &[],
        always: &[],
        special: Special::None,
        note: None,
    }
}

const fn operands(names: &'static [&'static str]) -> Writer {
    Writer {
        operands: true,
        ..row(names)
    }
}

/// Long options any program may write through: a name that is a prefix of one of these, or
/// starts with one of [`GENERIC_STEMS`], has its value reported.
pub(super) const GENERIC_LONG: &[&str] = &[
    "output",
    "output-file",
    "output-dir",
    "output-directory",
    "output-document",
    "out",
    "outfile",
    "out-file",
    "outdir",
    "out-dir",
    "log-file",
    "logfile",
    "target-directory",
    "target-dir",
    "directory-prefix",
    "backup-dir",
    "temp-dir",
    "tmpdir",
    "separate-git-dir",
    "cookie-jar",
    "save-cookies",
    "dump-header",
    "write-batch",
    "only-write-batch",
    "partial-dir",
    "artifact-dir",
    "export-marks",
    "object-dir",
    "cache-dir",
    "pid-file",
    "pidfile",
    "destdir",
    "destination",
    "install-dir",
    "prefix",
    "root",
];

/// Beginnings of long option names that name a written path, whatever follows.
pub(super) const GENERIC_STEMS: &[&str] = &[
    "output", "out-", "outfile", "outdir", "log-file", "logfile", "dump-", "save-", "write-",
    "backup-", "cookie-",
];

/// Programs whose `-o` is not an output file (every other program's `-o` value is reported).
pub(super) const NO_OUTPUT_O: &[&str] = &[
    "ls",
    "dir",
    "vdir",
    "grep",
    "egrep",
    "fgrep",
    "zgrep",
    "rg",
    "ag",
    "ack",
    "ps",
    "pgrep",
    "pkill",
    "find",
    "ssh",
    "mount",
    "apt",
    "apt-get",
    "apt-cache",
    "dpkg",
    "lsblk",
    "df",
    "journalctl",
    "uname",
    "stat",
    "id",
    "file",
];

/// The table: one row per program (or family).
pub(super) const WRITERS: &[Writer] = &[
    Writer {
        short: "t",
        long: &["target-directory", "suffix"],
        note: Some("writes the files named in its arguments and by `-t`/`--target-directory`"),
        ..operands(&["cp", "mv", "install", "ln"])
    },
    operands(&[
        "touch",
        "mkdir",
        "rmdir",
        "rm",
        "unlink",
        "link",
        "truncate",
        "shred",
        "mkfifo",
        "mknod",
        "chmod",
        "chown",
        "chgrp",
        "chattr",
        "setfacl",
        "chcon",
        "tee",
        "sponge",
        "fallocate",
        "rename",
        "prename",
        "file-rename",
        "mmv",
        "uniq",
        "xxd",
        "split",
        "ar",
        "zip",
        "gzip",
        "gunzip",
        "bzip2",
        "bunzip2",
        "xz",
        "unxz",
        "lzma",
        "unlzma",
        "zstd",
        "unzstd",
        "lz4",
        "pigz",
        "pbzip2",
        "compress",
        "uncompress",
        "brotli",
        "lzop",
        "rar",
        "unrar",
        "objcopy",
        "strip",
        "ranlib",
        "sqlite3",
        "script",
        "flock",
        "yq",
        "vi",
        "vim",
        "nvim",
        "nano",
        "emacs",
        "ed",
        "ex",
        "convert",
        "magick",
        "ffmpeg",
        "dpkg-deb",
        "scp",
    ]),
    Writer {
        short: "T",
        ..operands(&["rsync"])
    },
    Writer {
        short: "p",
        long: &["tmpdir"],
        ..operands(&["mktemp"])
    },
    Writer {
        short: "f",
        long: &["prefix"],
        always: &["."],
        ..operands(&["csplit"])
    },
    Writer {
        short: "o",
        always: &["."],
        note: Some("extracts into the current folder and writes where `-o` says"),
        ..operands(&["7z", "7za", "7zr"])
    },
    Writer {
        short: "orB",
        long: &["reject-file", "prefix"],
        chdir_short: "d",
        chdir_long: &["directory"],
        always: &["."],
        note: Some("changes the files its patch names, under the current folder or `-d`"),
        ..operands(&["patch"])
    },
    Writer {
        keys: &["of"],
        note: Some("writes the file named by `of=`"),
        ..row(&["dd"])
    },
    Writer {
        short: "T",
        long: &["temporary-directory"],
        note: Some("writes the file named by `-o`/`--output`"),
        ..row(&["sort", "shuf"])
    },
    Writer {
        short: "f",
        always: &["~/.ssh"],
        note: Some("writes keys to `-f` or to ~/.ssh"),
        ..row(&["ssh-keygen"])
    },
    Writer {
        words: &[
            "-out",
            "-keyout",
            "-certout",
            "-sigout",
            "-writerand",
            "-CAserial",
        ],
        note: Some("writes the files named by `-out`, `-keyout` and similar options"),
        ..row(&["openssl"])
    },
    Writer {
        long: &["homedir"],
        note: Some("writes the file named by `-o`/`--output`, and its keyring"),
        ..row(&["gpg", "gpg2"])
    },
    Writer {
        words: &["-MF", "-dumpdir", "-aux-info"],
        note: Some("writes the file named by `-o` and dependency files"),
        ..row(&[
            "gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "as", "rustc",
        ])
    },
    Writer {
        words: &["-d", "-s", "-h"],
        note: Some("writes classes and sources into the folders of `-d`, `-s` and `-h`"),
        ..row(&["javac"])
    },
    Writer {
        short: "w",
        note: Some("writes captures to `-w`"),
        ..row(&["tcpdump"])
    },
    Writer {
        short: "ES",
        ..row(&["ssh"])
    },
    Writer {
        long: &["log-file", "LOG-FILE"],
        short: "oO",
        note: Some("writes a log file named by `-o`/`-O`"),
        ..row(&["less"])
    },
    Writer {
        always: &["nohup.out"],
        ..row(&["nohup"])
    },
    Writer {
        chdir_short: "C",
        chdir_long: &["chdir"],
        ..row(&["env"])
    },
    Writer {
        chdir_short: "D",
        chdir_long: &["chdir"],
        ..row(&["sudo"])
    },
    Writer {
        short: "O",
        chdir_short: "P",
        long: &[
            "output-document",
            "output-file",
            "append-output",
            "save-cookies",
            "warc-file",
            "rejected-log",
            "hsts-file",
        ],
        chdir_long: &["directory-prefix"],
        words: &[],
        always: &["."],
        note: Some("downloads into the current folder, `-P`, or `-O`"),
        ..row(&["wget"])
    },
    Writer {
        short: "d",
        long: &["dir", "out", "log"],
        always: &["."],
        note: Some("downloads into the current folder or `-d`"),
        ..row(&["aria2c"])
    },
    Writer {
        short: "Dc",
        long: &[
            "output",
            "dump-header",
            "cookie-jar",
            "trace",
            "trace-ascii",
            "stderr",
            "etag-save",
            "hsts",
            "alt-svc",
            "libcurl",
        ],
        chdir_long: &["output-dir"],
        special: Special::Curl,
        note: Some("writes where `-o`, `-O`, `--output-dir`, `-D` or `-c` say"),
        ..row(&["curl"])
    },
    Writer {
        special: Special::Git,
        ..row(&["git"])
    },
    Writer {
        chdir_short: "C",
        special: Special::Cargo,
        ..row(&["cargo"])
    },
    Writer {
        special: Special::Tar,
        note: Some("writes its archive (`-f`), extracts into the current folder or `-C`"),
        ..row(&["tar", "gtar", "bsdtar"])
    },
    Writer {
        special: Special::Sed,
        ..row(&["sed", "gsed"])
    },
    Writer {
        special: Special::Find,
        note: Some("deletes with `-delete` and writes with `-fprint`, `-fls`"),
        ..row(&["find"])
    },
    Writer {
        chdir_short: "d",
        always: &["."],
        special: Special::Unzip,
        note: Some("extracts into the current folder or `-d`"),
        ..row(&["unzip"])
    },
    Writer {
        short: "FO",
        long: &["file"],
        chdir_short: "D",
        chdir_long: &["directory"],
        always: &["."],
        special: Special::Cpio,
        note: Some("extracts into the current folder, with absolute names unless told otherwise"),
        ..operands(&["cpio"])
    },
];

/// The row for a program named `name`, if it has one.
pub(super) fn writer(name: &str) -> Option<&'static Writer> {
    WRITERS.iter().find(|w| w.names.contains(&name))
}

/// Whether the long option `name` (without `--`) may be one of `known`: `name` is a prefix of
/// one of them (an abbreviation, or the option itself).
pub(super) fn long_matches(name: &str, known: &[&str]) -> bool {
    !name.is_empty() && known.iter().any(|k| k.starts_with(name))
}

/// Whether any program's long option `name` names a written path.
pub(super) fn generic_long(name: &str) -> bool {
    long_matches(name, GENERIC_LONG) || GENERIC_STEMS.iter().any(|stem| name.starts_with(stem))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_program_has_one_row() {
        let mut seen = std::collections::HashSet::new();
        for row in WRITERS {
            for name in row.names {
                assert!(seen.insert(*name), "{name} has two rows");
            }
        }
    }

    #[test]
    fn long_options_match_by_any_abbreviation() {
        assert!(generic_long("output"));
        assert!(generic_long("out"));
        assert!(generic_long("o"));
        assert!(generic_long("output-indicator-new"));
        assert!(generic_long("target-directory"));
        assert!(generic_long("separate-git-dir"));
        assert!(!generic_long("oneline"));
        assert!(!generic_long("stat"));
        assert!(!generic_long(""));
    }
}
