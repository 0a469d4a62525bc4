//! The subreaper's sweep: kill every process the calling process has adopted, and the ones it
//! adopts while doing so, until it has no child left. Runs between `fork` and `exec`, so it
//! allocates nothing: `/proc` is read with rustix's `RawDir` into a buffer on the stack.
//!
//! `/proc/PID/task/TID/children` would be simpler but needs `CONFIG_PROC_CHILDREN`, which
//! kernels (this one included) may lack; every `/proc/N/stat` names its parent everywhere.

use std::ffi::CStr;
use std::mem::MaybeUninit;

use rustix::fd::{AsFd, OwnedFd};
use rustix::fs::{Mode, OFlags, RawDir, open, openat};
use rustix::io::Errno;
use rustix::process::{Pid, Signal, WaitOptions, getpid, kill_process, wait};

/// Kills every descendant of the calling process and reaps them all; returns when
/// `waitpid(-1)` says there is no child left. The caller is a child subreaper, so whatever a
/// dying child leaves behind (a `setsid` or double-forked grandchild) becomes its child and is
/// killed on the next sweep.
pub(crate) fn kill_all_descendants() {
    let me = getpid();
    loop {
        kill_children_of(me);
        match wait(WaitOptions::empty()) {
            Ok(_) | Err(Errno::INTR) => continue,
            // ECHILD: nothing left to wait for. Anything else: nothing more can be done.
            Err(_) => return,
        }
    }
}

/// Sends `SIGKILL` to every process whose parent is `parent`, as `/proc` lists them now.
fn kill_children_of(parent: Pid) {
    let Ok(proc_dir) = open(
        c"/proc",
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    ) else {
        return;
    };
    let mut buf = [MaybeUninit::<u8>::uninit(); 4096];
    let mut dir = RawDir::new(&proc_dir, &mut buf);
    while let Some(entry) = dir.next() {
        let Ok(entry) = entry else { break };
        let Some(pid) = parse_pid(entry.file_name().to_bytes()) else {
            continue;
        };
        if parent_of(&proc_dir, pid) == Some(parent.as_raw_nonzero().get())
            && let Some(child) = Pid::from_raw(pid)
        {
            let _ = kill_process(child, Signal::KILL);
        }
    }
}

/// The parent process id in `/proc/<pid>/stat`.
fn parent_of(proc_dir: &OwnedFd, pid: i32) -> Option<i32> {
    let mut path = [0u8; 32];
    let path = stat_path(pid, &mut path)?;
    let file = openat(
        proc_dir.as_fd(),
        path,
        OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut stat = [0u8; 1024];
    let mut len = 0;
    while len < stat.len() {
        match rustix::io::read(&file, stat.get_mut(len..)?) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(Errno::INTR) => continue,
            Err(_) => return None,
        }
    }
    parse_parent(stat.get(..len)?)
}

/// `"<pid>/stat\0"` written into `buf`.
fn stat_path(pid: i32, buf: &mut [u8; 32]) -> Option<&CStr> {
    let mut digits = [0u8; 12];
    let mut n = u32::try_from(pid).ok()?;
    let mut start = digits.len();
    loop {
        start -= 1;
        *digits.get_mut(start)? = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let digits = digits.get(start..)?;
    let suffix = b"/stat\0";
    let len = digits.len() + suffix.len();
    buf.get_mut(..digits.len())?.copy_from_slice(digits);
    buf.get_mut(digits.len()..len)?.copy_from_slice(suffix);
    CStr::from_bytes_with_nul(buf.get(..len)?).ok()
}

/// A directory name of `/proc` that is a process id.
fn parse_pid(name: &[u8]) -> Option<i32> {
    if name.is_empty() || name.len() > 10 || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    name.iter().try_fold(0i32, |n, d| {
        n.checked_mul(10)?.checked_add(i32::from(d - b'0'))
    })
}

/// The fourth field of a `stat` line: after the command name in parentheses (which may itself
/// hold spaces and parentheses, hence the last `)`), the state, then the parent's id.
fn parse_parent(stat: &[u8]) -> Option<i32> {
    let close = stat.iter().rposition(|&b| b == b')')?;
    let mut fields = stat
        .get(close + 1..)?
        .split(|&b| b == b' ')
        .filter(|f| !f.is_empty());
    let _state = fields.next()?;
    parse_pid(fields.next()?)
}

#[cfg(test)]
mod tests {
    use super::{parse_parent, parse_pid, stat_path};

    #[test]
    fn the_parent_is_read_after_the_last_parenthesis() {
        assert_eq!(parse_parent(b"42 (sh) S 7 42 42 0 -1"), Some(7));
        assert_eq!(parse_parent(b"42 (a) b) (c) R 1234 1 1"), Some(1234));
        assert_eq!(parse_parent(b"42 (x"), None);
    }

    #[test]
    fn only_numbers_are_process_ids() {
        assert_eq!(parse_pid(b"123"), Some(123));
        assert_eq!(parse_pid(b"self"), None);
        assert_eq!(parse_pid(b""), None);
        assert_eq!(parse_pid(b"99999999999"), None);
    }

    #[test]
    fn the_stat_path_is_built_on_the_stack() {
        let mut buf = [0u8; 32];
        assert_eq!(stat_path(4194304, &mut buf).unwrap(), c"4194304/stat");
        assert_eq!(stat_path(0, &mut buf).unwrap(), c"0/stat");
        assert!(stat_path(-1, &mut buf).is_none());
    }
}
