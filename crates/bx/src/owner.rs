//! A blocking client of the broker's owner socket.

use std::io::ErrorKind;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};

use proto::{OwnerReply, OwnerRequest, PROTOCOL_VERSION, read_frame, write_frame};

/// Why the owner socket could not be used.
#[derive(Debug, thiserror::Error)]
pub enum OwnerError {
    /// Nothing listens on the socket (exit status 3).
    #[error("{}", proto::rendezvous::no_broker(.0, "--runtime-dir DIR"))]
    NoBroker(PathBuf),
    /// The connection failed or the broker answered something unexpected.
    #[error("the broker at {socket}: {message}")]
    Broken {
        /// The socket.
        socket: PathBuf,
        /// What happened.
        message: String,
    },
}

/// A connection to `owner.sock`, after `owner_hello`.
pub struct Owner {
    stream: UnixStream,
    socket: PathBuf,
}

impl Owner {
    /// Connects and says hello.
    pub fn connect(socket: &Path) -> Result<Owner, OwnerError> {
        let stream = UnixStream::connect(socket).map_err(|e| match e.kind() {
            ErrorKind::NotFound | ErrorKind::ConnectionRefused => {
                OwnerError::NoBroker(socket.to_path_buf())
            }
            _ => OwnerError::Broken {
                socket: socket.to_path_buf(),
                message: format!("cannot connect: {e}"),
            },
        })?;
        let mut owner = Owner {
            stream,
            socket: socket.to_path_buf(),
        };
        match owner.request(&OwnerRequest::OwnerHello {
            version: PROTOCOL_VERSION,
        })? {
            OwnerReply::OwnerWelcome { .. } => Ok(owner),
            other => Err(owner.unexpected(&other)),
        }
    }

    /// Sends `request` and reads its reply. A broker that refused the connection (its cap of
    /// open connections) wrote its error and closed without reading: when the request cannot
    /// be written, that error is still read and returned.
    pub fn request(&mut self, request: &OwnerRequest) -> Result<OwnerReply, OwnerError> {
        match write_frame(&mut self.stream, request) {
            Ok(()) => self.next(),
            Err(e) => match read_frame::<OwnerReply, _>(&mut self.stream) {
                Ok(Some(reply @ OwnerReply::Error { .. })) => Ok(reply),
                _ => Err(self.broken(e.to_string())),
            },
        }
    }

    /// Reads the next frame (a watch stream's next event).
    pub fn next(&mut self) -> Result<OwnerReply, OwnerError> {
        match read_frame::<OwnerReply, _>(&mut self.stream) {
            Ok(Some(reply)) => Ok(reply),
            Ok(None) => Err(self.broken("the broker closed the connection".to_string())),
            Err(e) => Err(self.broken(e.to_string())),
        }
    }

    /// Sends `request` without reading a reply (`watch`).
    pub fn send(&mut self, request: &OwnerRequest) -> Result<(), OwnerError> {
        write_frame(&mut self.stream, request).map_err(|e| self.broken(e.to_string()))
    }

    /// A second handle on the connection, so another thread can shut it and end a `next`
    /// that waits (the console's live stream, when its page closes).
    pub fn try_clone_stream(&self) -> Result<UnixStream, OwnerError> {
        self.stream
            .try_clone()
            .map_err(|e| self.broken(e.to_string()))
    }

    /// The error for a reply that does not belong.
    pub fn unexpected(&self, reply: &OwnerReply) -> OwnerError {
        match reply {
            OwnerReply::Error { message, .. } => self.broken(message.clone()),
            other => self.broken(format!("unexpected reply {other:?}")),
        }
    }

    fn broken(&self, message: String) -> OwnerError {
        OwnerError::Broken {
            socket: self.socket.clone(),
            message,
        }
    }
}
