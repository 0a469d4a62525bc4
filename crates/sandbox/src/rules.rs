//! What the parent tells a box's launcher, and the launcher's side of that agreement: the
//! argument that makes a binary a launcher ([`LAUNCH`]), the exit code of its failure
//! ([`LAUNCH_FAILED`]), the Landlock rules on its command line (`Rules`) and how much of them
//! this kernel enforces ([`Enforcement`]). Below the box that writes them (`boxed`,
//! `landlocked`) and the launcher that reads them (`launcher`).

use std::ffi::OsString;
use std::fmt;
use std::path::PathBuf;

use landlock::ABI;

use crate::machine::landlock_abi;

/// The first argument that makes [`crate::launch_if_asked`] take over the process.
pub const LAUNCH: &str = "--boxmaker-box-launch";

/// The exit code of a launcher that could not apply its rules or start the command.
pub const LAUNCH_FAILED: i32 = 125;

/// The newest Landlock ABI whose rights the box asks for: file-system rights up to
/// `ioctl_dev` (5), TCP bind and connect (4), scoping of abstract sockets and signals (6).
pub(crate) const WANTED: ABI = ABI::V6;

/// How much of the Landlock layer the running kernel enforces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Enforcement {
    /// No Landlock (a kernel without it, or a box without a launcher).
    NotEnforced,
    /// Some of the rights the box asks for (a kernel with an older ABI than 6).
    Partial,
    /// Every right the box asks for.
    Full,
}

impl Enforcement {
    /// `fully enforced`, `partially enforced` or `not enforced`.
    pub fn as_str(self) -> &'static str {
        match self {
            Enforcement::Full => "fully enforced",
            Enforcement::Partial => "partially enforced",
            Enforcement::NotEnforced => "not enforced",
        }
    }

    fn word(self) -> &'static str {
        match self {
            Enforcement::Full => "full",
            Enforcement::Partial => "partial",
            Enforcement::NotEnforced => "none",
        }
    }

    fn from_word(word: &str) -> Option<Enforcement> {
        match word {
            "full" => Some(Enforcement::Full),
            "partial" => Some(Enforcement::Partial),
            "none" => Some(Enforcement::NotEnforced),
            _ => None,
        }
    }
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How much of the Landlock layer this kernel enforces (from its Landlock ABI version, which
/// a running kernel never changes: asked once a process, as every boxed call's header says it).
pub fn landlock_enforcement() -> Enforcement {
    static ENFORCEMENT: std::sync::OnceLock<Enforcement> = std::sync::OnceLock::new();
    *ENFORCEMENT.get_or_init(|| match landlock_abi() {
        Ok(abi) if abi >= WANTED as i64 => Enforcement::Full,
        Ok(abi) if abi > 0 => Enforcement::Partial,
        _ => Enforcement::NotEnforced,
    })
}

/// What the parent tells the launcher.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Rules {
    /// Read and execute beneath these.
    pub(crate) read: Vec<PathBuf>,
    /// Every right beneath these.
    pub(crate) write: Vec<PathBuf>,
    /// The least enforcement the launcher accepts; less is an error, not a weaker box.
    pub(crate) expect: Option<Enforcement>,
    /// The port of the box's relay to its proxy (`crate::net`): started before the launcher
    /// restricts itself, and the one port TCP may connect to.
    pub(crate) relay: Option<u16>,
    /// The descriptor of the launcher's own binary, through which bubblewrap ran it
    /// (`/proc/self/fd/N`): closed on the command's `exec`, and the target of a read rule.
    pub(crate) own: Option<i32>,
}

impl Rules {
    /// The launcher's arguments (after the launcher's path) to run `program` with `args`.
    pub(crate) fn to_args(&self, program: &std::path::Path, args: &[OsString]) -> Vec<OsString> {
        let mut out = vec![OsString::from(LAUNCH)];
        for (flag, paths) in [("--read", &self.read), ("--write", &self.write)] {
            for path in paths {
                out.push(flag.into());
                out.push(path.as_os_str().to_owned());
            }
        }
        if let Some(expect) = self.expect {
            out.push("--expect".into());
            out.push(expect.word().into());
        }
        if let Some(port) = self.relay {
            out.push("--relay".into());
            out.push(port.to_string().into());
        }
        if let Some(fd) = self.own {
            out.push("--own-fd".into());
            out.push(fd.to_string().into());
        }
        out.push("--".into());
        out.push(program.as_os_str().to_owned());
        out.extend(args.iter().cloned());
        out
    }

    /// The rules and the command (program first) in the launcher's arguments.
    pub(crate) fn parse(args: &[OsString]) -> Result<(Rules, Vec<OsString>), String> {
        let mut rules = Rules::default();
        let mut rest = args.iter();
        while let Some(flag) = rest.next() {
            if flag == "--" {
                let command: Vec<OsString> = rest.cloned().collect();
                if command.is_empty() {
                    return Err("no command after --".to_string());
                }
                return Ok((rules, command));
            }
            let value = rest
                .next()
                .ok_or_else(|| format!("{} needs a value", flag.to_string_lossy()))?;
            match flag.to_str() {
                Some("--read") => rules.read.push(PathBuf::from(value)),
                Some("--write") => rules.write.push(PathBuf::from(value)),
                Some("--expect") => {
                    rules.expect = Some(
                        value
                            .to_str()
                            .and_then(Enforcement::from_word)
                            .ok_or_else(|| {
                                format!(
                                    "--expect {} is not full, partial or none",
                                    value.to_string_lossy()
                                )
                            })?,
                    );
                }
                Some("--relay") => {
                    let port = value.to_str().and_then(|v| v.parse::<u16>().ok());
                    rules.relay = Some(port.filter(|p| *p != 0).ok_or_else(|| {
                        format!("--relay {} is not a port", value.to_string_lossy())
                    })?);
                }
                Some("--own-fd") => {
                    let fd = value.to_str().and_then(|v| v.parse::<i32>().ok());
                    rules.own = Some(fd.filter(|fd| *fd > 2).ok_or_else(|| {
                        format!(
                            "--own-fd {} is not a descriptor past the standard three",
                            value.to_string_lossy()
                        )
                    })?);
                }
                _ => return Err(format!("unknown option {}", flag.to_string_lossy())),
            }
        }
        Err("no -- before the command".to_string())
    }
}

/// One line on standard error, or nothing when it is closed: how the programs the launcher's
/// binary runs in a box (the launcher, the command worker, the cgroup warden) say why they
/// failed. They are the bodies of a binary's `main` kept in this library so that every
/// launcher binary has them; a closed standard error must not make them panic.
pub(crate) fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "{line}");
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;
    use std::path::{Path, PathBuf};

    use super::{Enforcement, LAUNCH, Rules};

    #[test]
    fn the_rules_survive_the_launchers_command_line() {
        let rules = Rules {
            read: vec![PathBuf::from("/usr"), PathBuf::from("/etc/passwd")],
            write: vec![PathBuf::from("/work/a b")],
            expect: Some(Enforcement::Full),
            relay: Some(3128),
            own: Some(7),
        };
        let args = rules.to_args(Path::new("/bin/sh"), &["-c".into(), "--read x".into()]);
        assert_eq!(args.first().map(OsString::as_os_str), Some(LAUNCH.as_ref()));
        let (parsed, command) = Rules::parse(&args[1..]).unwrap();
        assert_eq!(parsed, rules);
        assert_eq!(command, ["/bin/sh", "-c", "--read x"]);
    }

    #[test]
    fn a_malformed_command_line_names_what_is_wrong() {
        let parse = |words: &[&str]| {
            let args: Vec<OsString> = words.iter().map(OsString::from).collect();
            Rules::parse(&args).unwrap_err()
        };
        assert_eq!(parse(&["--read"]), "--read needs a value");
        assert_eq!(parse(&["--read", "/usr"]), "no -- before the command");
        assert_eq!(parse(&["--"]), "no command after --");
        assert_eq!(
            parse(&["--bogus", "x", "--", "a"]),
            "unknown option --bogus"
        );
        assert_eq!(
            parse(&["--expect", "most", "--", "a"]),
            "--expect most is not full, partial or none"
        );
        assert_eq!(
            parse(&["--relay", "0", "--", "a"]),
            "--relay 0 is not a port"
        );
        assert_eq!(
            parse(&["--relay", "http", "--", "a"]),
            "--relay http is not a port"
        );
        assert_eq!(
            parse(&["--own-fd", "1", "--", "a"]),
            "--own-fd 1 is not a descriptor past the standard three"
        );
    }

    #[test]
    fn enforcement_levels_are_ordered_weakest_first() {
        assert!(Enforcement::NotEnforced < Enforcement::Partial);
        assert!(Enforcement::Partial < Enforcement::Full);
        assert_eq!(Enforcement::Full.to_string(), "fully enforced");
    }
}
