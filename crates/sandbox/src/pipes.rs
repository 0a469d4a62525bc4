//! Reading the pipes of a contained command: its output streams, its status records, and the
//! supervisor's first report.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::io::{Errno, read};

/// Reads what one stream has; `false` at its end or on an error.
pub(crate) fn pump<S: AsFd>(
    stream: &mut Option<S>,
    buf: &mut [u8],
    sink: &mut dyn FnMut(&[u8]),
) -> bool {
    let Some(fd) = stream else { return false };
    loop {
        match read(fd.as_fd(), &mut *buf) {
            Ok(0) => return false,
            Ok(n) => {
                // Invariant: read(2) returns at most the buffer's length, so this slice
                // cannot panic.
                sink(&buf[..n]);
                return true;
            }
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return true,
            Err(_) => return false,
        }
    }
}

/// Appends what the status pipe has to `records`; `false` at its end.
pub(crate) fn read_available(fd: &OwnedFd, records: &mut Vec<u8>) -> bool {
    let mut buf = [0u8; 256];
    loop {
        match read(fd, &mut buf) {
            Ok(0) => return false,
            Ok(n) => {
                // Invariant: read(2) returns at most the buffer's length.
                records.extend_from_slice(&buf[..n]);
                if n < buf.len() {
                    return true;
                }
            }
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => return true,
            Err(_) => return false,
        }
    }
}

pub(crate) fn read_exact(fd: &OwnedFd, out: &mut [u8]) -> io::Result<()> {
    let mut filled = 0;
    while filled < out.len() {
        // Invariant: the loop runs only while `filled` is below the length.
        match read(fd, &mut out[filled..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => filled += n,
            Err(Errno::INTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}
