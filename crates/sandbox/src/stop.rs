//! Stopping a box from another thread: [`Stopper`] holds the write end of a pipe whose read
//! end [`crate::ContainedChild::finish`] polls beside the command's output, so the thread that
//! reads the box (and knows whether it has been reaped) is the one that kills it, and no
//! process id is ever signalled after it could have been reused.

use std::io;
use std::os::fd::OwnedFd;

use rustix::pipe::{PipeFlags, pipe_with};

/// Kills a running box when told to, or when dropped (a background job's handle): what it
/// does is what the box's deadline does, every process of the command killed at once.
#[derive(Debug)]
pub struct Stopper(OwnedFd);

impl Stopper {
    /// Asks the reading thread to kill the box; returns at once. Asking twice, or after the
    /// box has ended, does nothing more.
    pub fn stop(&self) {
        // A full pipe already holds a request; a closed read end means the box is gone.
        let _ = rustix::io::write(&self.0, &[1]);
    }
}

/// A stop pipe: the end [`crate::ContainedChild`] polls, and the [`Stopper`].
pub(crate) fn pipe() -> io::Result<(OwnedFd, Stopper)> {
    let (read, write) =
        pipe_with(PipeFlags::CLOEXEC | PipeFlags::NONBLOCK).map_err(io::Error::from)?;
    Ok((read, Stopper(write)))
}
