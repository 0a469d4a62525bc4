//! The warden: one small process per process that builds boxes, started with the first box's
//! cgroup, that kills what is left in that process's box cgroups and removes them the moment the
//! process is gone, however it went (`kill -9` included).
//!
//! Why: bubblewrap sets its own parent-death signal only after it forks, so a broker killed in
//! that window leaves a box running under the host's init; a command that outlives the broker
//! would otherwise live on until the next broker start swept its cgroup. Every box process is
//! in its box's cgroup before its first `exec`, so killing the cgroups reaches all of them.
//!
//! How: the warden is the box launcher binary (whose `main` starts with
//! [`crate::launch_if_asked`]) run with [`WARDEN`] and the builder's pid, in a process group of
//! its own; it reads its standard input, the read end of a pipe whose only write end the
//! builder holds (close-on-exec, so no box inherits it), until the end of file, which comes
//! when the builder exits.

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, Once};

/// The launcher's first argument that makes it the warden of the pid that follows.
pub const WARDEN: &str = "--boxmaker-cgroup-warden";

static STARTED: Once = Once::new();

/// The warden, kept (with its standard input, the pipe's write end) as long as this process.
static WARDEN_CHILD: Mutex<Option<Child>> = Mutex::new(None);

/// Starts this process's warden through `launcher`, once; without a launcher there is none
/// (the next builder's sweep then removes what a killed one left).
pub(crate) fn ensure(launcher: Option<&Path>) {
    let Some(launcher) = launcher else { return };
    STARTED.call_once(|| {
        use std::os::unix::process::CommandExt;
        let started = Command::new(launcher)
            .arg(WARDEN)
            .arg(std::process::id().to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .process_group(0)
            .spawn();
        match started {
            Ok(child) => {
                if let Ok(mut held) = WARDEN_CHILD.lock() {
                    *held = Some(child);
                }
            }
            Err(error) => tracing::warn!(
                launcher = %launcher.display(),
                %error,
                "no cgroup warden; boxes left by a killed broker are removed at the next start"
            ),
        }
    });
}

/// The warden's whole life, for [`crate::launch_if_asked`]: waits for the end of its standard
/// input, then removes the cgroups of the pid in `args`. Returns the exit status.
pub(crate) fn run(args: &[std::ffi::OsString]) -> i32 {
    let Some(pid) = args
        .first()
        .and_then(|a| a.to_str())
        .and_then(|a| a.parse::<u32>().ok())
    else {
        crate::rules::say(&format!("boxmaker warden: usage: {WARDEN} PID"));
        return 2;
    };
    let mut sink = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut sink) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        }
    }
    super::remove_all_of(pid);
    0
}
