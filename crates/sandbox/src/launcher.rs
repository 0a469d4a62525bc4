//! The box's inner layer: a launcher that runs as the box's first program, after bubblewrap has
//! built the mounts (Landlock forbids mounting, so it cannot come earlier), restricts itself
//! with Landlock over the same paths as the binds, and then `exec`s the command.
//!
//! The launcher is the caller's own binary: its `main` starts with [`launch_if_asked`], and
//! the caller names that binary in [`crate::Policy::launcher`]. The parent decides the rules
//! (every path resolved, read or read-write, the enforcement it expects) and passes them on the
//! launcher's command line; the launcher creates the ruleset inside the box, where only the
//! bound paths exist, and restricts itself. Landlock's rules attach to inodes, so a rule on a
//! bound folder is a rule on the host's folder.
//!
//! The ruleset handles every file-system right of ABI 6, TCP `bind` and `connect` (no port is
//! allowed, but for a box with a network the one port of its relay, which the launcher starts
//! before it restricts itself: see `net`) and scopes abstract Unix sockets and signals to the
//! box. Where
//! bubblewrap is missing ([`crate::FileWalls::LandlockOnly`]) the seccomp programs are
//! installed between `fork` and `exec` of the launcher instead of by bubblewrap.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use landlock::{
    Access, AccessFs, AccessNet, NetPort, PathBeneath, PathFd, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetStatus, Scope,
};

use crate::rules::{Enforcement, LAUNCH, LAUNCH_FAILED, Rules, WANTED, say};

/// When this process was started as a box's launcher (its first argument is [`LAUNCH`]):
/// applies the rules its arguments name and `exec`s the command; on failure it says why on
/// standard error and exits with [`LAUNCH_FAILED`]. When the command is this very binary (a
/// worker in the box, as `brokerd box-file` is), it is not `exec`ed again: this returns the
/// command's arguments (its program first), restricted as the command would be, for `main` to
/// go on with instead of its own; when that command is a command worker
/// ([`crate::spawn_command_worker`]), the worker runs here and the process exits with it.
/// Started as the cgroup warden of a process that builds boxes
/// (`--boxmaker-cgroup-warden PID`), it does the warden's work and exits. Otherwise (not a
/// launcher) it returns `None` at once.
///
/// A binary named in [`crate::Policy::launcher`] calls this first thing in `main`, before it
/// starts threads or reads its own arguments.
pub fn launch_if_asked() -> Option<Vec<OsString>> {
    let args: Vec<OsString> = std::env::args_os().collect();
    // The binary's name, then the argument that says what this process is to be, then its own.
    let [_, first, rest @ ..] = args.as_slice() else {
        return None;
    };
    if first == crate::cgroup::warden::WARDEN {
        std::process::exit(crate::cgroup::warden::run(rest));
    }
    if first == crate::net::RELAY {
        std::process::exit(crate::net::run_relay(rest));
    }
    if first != LAUNCH {
        return None;
    }
    match launch(rest) {
        Ok(command) if command.get(1).is_some_and(|a| a == crate::commands::SERVE) => {
            std::process::exit(crate::commands::serve())
        }
        Ok(command) => Some(command),
        Err(error) => {
            say(&format!("boxmaker box: {error}"));
            std::process::exit(LAUNCH_FAILED);
        }
    }
}

/// The `main` of a binary that is only a box's launcher (`sandbox-launcher`,
/// `brokerd-launcher`): a caller whose own binary is large names such a binary in
/// [`crate::Policy::launcher`] for the boxes whose command is another program, since a box
/// pays for starting its launcher (measured: 0.25 ms for a small launcher, 2.2 ms for brokerd's
/// own binary, most of it its relocations). Run by a box only. Returns the exit code.
///
/// Such a binary starts without std's runtime (`#![no_main]`, a C `main` calling this, made by
/// [`launcher_entry!`]: measured 0.18 ms less a start), so this does the two things of that
/// start-up the launcher relies on: `SIGPIPE` ignored (a relay or a command worker writing to a
/// closed pipe gets an error, not death; std's `Command` puts the default back for what it
/// starts, so the command gets the default), and a panic caught (it cannot unwind out of a C
/// `main`) and ended with std's exit code for one, 101.
pub fn launcher_main() -> i32 {
    launcher_main_serving(|_| None)
}

/// The process entry of a binary that is only a box's launcher (or a launcher and a worker):
/// `launcher_entry!(run)` where `run` returns the exit code, in a binary that declares
/// `#![cfg_attr(all(target_os = "linux", target_env = "gnu"), no_main)]` and allows
/// `unsafe_code` for the C `main` symbol this defines. With glibc that symbol is the entry,
/// without std's runtime start-up (see [`launcher_main`]; std still reads the arguments, which
/// glibc hands it at load); elsewhere (musl does not) `run` is called from std's `main`.
#[macro_export]
macro_rules! launcher_entry {
    ($run:path) => {
        /// The process's entry, called by the C library with the arguments, which std reads
        /// itself.
        // SAFETY: the binary's only `main` symbol, with the C signature the C library calls.
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        #[unsafe(no_mangle)]
        extern "C" fn main(
            _argc: ::std::ffi::c_int,
            _argv: *const *const ::std::ffi::c_char,
        ) -> ::std::ffi::c_int {
            $run()
        }

        #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
        fn main() -> ::std::process::ExitCode {
            ::std::process::ExitCode::from(u8::try_from($run()).unwrap_or(1))
        }
    };
}

/// [`launcher_main`] for a small binary that is also a box's worker (`brokerd-files`): when a
/// box asks it to run itself, `serve` gets the command's arguments (its own name first) and
/// returns the exit code, or `None` for arguments it does not serve.
pub fn launcher_main_serving(serve: impl FnOnce(&[OsString]) -> Option<i32>) -> i32 {
    ignore_sigpipe();
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| launcher_body(serve))).unwrap_or(101)
}

fn launcher_body(serve: impl FnOnce(&[OsString]) -> Option<i32>) -> i32 {
    let name = std::env::args_os()
        .next()
        .map(|a| a.to_string_lossy().into_owned())
        .unwrap_or_default();
    if let Some(command) = launch_if_asked() {
        if let Some(code) = serve(&command) {
            return code;
        }
        say(&format!(
            "{name}: a box asked it to run itself with arguments it does not serve"
        ));
        return 2;
    }
    say(&format!(
        "{name}: run by a box only (its first argument is {LAUNCH})"
    ));
    2
}

/// For a launcher binary installed beside its caller (`brokerd-launcher`, `brokerd-files`):
/// when the first argument is `--build-id`, prints `id`, the build it belongs to (its caller
/// uses it only when that is its own build), and gives the exit code; otherwise `None`.
pub fn build_id_if_asked(id: &str) -> Option<i32> {
    use std::io::Write;
    if std::env::args_os().nth(1).is_none_or(|a| a != "--build-id") {
        return None;
    }
    let mut out = std::io::stdout().lock();
    let printed = writeln!(out, "{id}").and_then(|()| out.flush());
    Some(if printed.is_ok() { 0 } else { 1 })
}

/// Gives this process its binary's name (as `ps` shows it), which running it through
/// `/proc/self/fd/N` turned into `N`; best effort.
fn name_after_binary() {
    let Ok(exe) = std::fs::read_link("/proc/self/exe") else {
        return;
    };
    let Some(name) = exe.file_name() else { return };
    // The kernel keeps 15 bytes of it.
    let bytes: Vec<u8> = name.as_encoded_bytes().iter().copied().take(15).collect();
    if let Ok(name) = std::ffi::CString::new(bytes) {
        let _ = rustix::thread::set_name(&name);
    }
}

/// Sets close-on-exec on descriptor `fd` of this process.
#[allow(unsafe_code)]
fn close_on_exec(fd: i32) -> std::io::Result<()> {
    // SAFETY: `fcntl(F_SETFD)` takes and returns numbers; a descriptor that is not open is
    // `EBADF`, reported.
    if unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) } == -1 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// Closes descriptor `fd`, which the parent passed by number and nothing here owns.
#[allow(unsafe_code)]
fn close_fd(fd: i32) {
    // SAFETY: no object of this process owns `fd` (it came by number on the command line, and
    // only `close_on_exec` and a path through `/proc/self/fd` used it), so nothing uses it
    // after this.
    unsafe {
        libc::close(fd);
    }
}

/// `SIGPIPE` ignored, as std's runtime start-up leaves it.
#[allow(unsafe_code)]
fn ignore_sigpipe() {
    // SAFETY: sets one signal's disposition to a constant; no handler runs, nothing is shared.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN);
    }
}

/// Applies the rules; `exec`s the command, or returns it when it is this binary itself.
fn launch(args: &[OsString]) -> Result<Vec<OsString>, String> {
    let (mut rules, command) = Rules::parse(args)?;
    if let Some(fd) = rules.own {
        // Neither the relay nor the command inherits the launcher's binary; the rule reaches
        // it through the descriptor, since no path in the box names it.
        close_on_exec(fd).map_err(|e| format!("--own-fd {fd}: {e}"))?;
        rules
            .read
            .push(PathBuf::from(format!("/proc/self/fd/{fd}")));
        name_after_binary();
    }
    if let Some(port) = rules.relay {
        crate::net::start_relay(port)?;
    }
    let status = restrict(&rules)?;
    let got = match status {
        RulesetStatus::FullyEnforced => Enforcement::Full,
        RulesetStatus::PartiallyEnforced => Enforcement::Partial,
        RulesetStatus::NotEnforced => Enforcement::NotEnforced,
    };
    if let Some(expect) = rules.expect
        && got < expect
    {
        return Err(format!(
            "Landlock is {got} here, the box was built for {expect}"
        ));
    }
    let (program, args) = command
        .split_first()
        .ok_or_else(|| "no command".to_string())?;
    // Measured: one `exec` of a large binary less for each in-process tool's box.
    if is_this_binary(Path::new(program)) {
        // A worker goes on in this process, which never `exec`s: its binary's descriptor is
        // of no more use (the rule holds its own).
        if let Some(fd) = rules.own {
            close_fd(fd);
        }
        return Ok(command);
    }
    let error = std::process::Command::new(program).args(args).exec();
    Err(format!("cannot run {}: {error}", program.to_string_lossy()))
}

/// Whether `program` is the running binary (the same file).
fn is_this_binary(program: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(exe), Ok(other)) = (
        std::fs::metadata("/proc/self/exe"),
        std::fs::metadata(program),
    ) else {
        return false;
    };
    (exe.dev(), exe.ino()) == (other.dev(), other.ino())
}

/// Creates the ruleset and restricts this process with it.
fn restrict(rules: &Rules) -> Result<RulesetStatus, String> {
    let failed = |e: landlock::RulesetError| format!("Landlock: {e}");
    let mut ruleset = Ruleset::default()
        .handle_access(AccessFs::from_all(WANTED))
        .map_err(failed)?
        .handle_access(AccessNet::from_all(WANTED))
        .map_err(failed)?
        .scope(Scope::from_all(WANTED))
        .map_err(failed)?
        .create()
        .map_err(failed)?;
    for (paths, access) in [
        (&rules.read, AccessFs::from_read(WANTED)),
        (&rules.write, AccessFs::from_all(WANTED)),
    ] {
        for path in paths {
            let fd = PathFd::new(path)
                .map_err(|e| format!("Landlock cannot open {}: {e}", path.display()))?;
            // Rights that make sense only on folders are refused on a file's rule.
            let is_dir = rustix::fs::fstat(&fd)
                .is_ok_and(|st| rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir());
            let access = if is_dir {
                access
            } else {
                access & AccessFs::from_file(WANTED)
            };
            ruleset = ruleset
                .add_rule(PathBeneath::new(fd, access))
                .map_err(failed)?;
        }
    }
    if let Some(port) = rules.relay {
        ruleset = ruleset
            .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
            .map_err(failed)?;
    }
    Ok(ruleset.restrict_self().map_err(failed)?.ruleset)
}
