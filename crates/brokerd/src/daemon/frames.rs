//! Frames read from either socket (a 4-byte big-endian length, then that many bytes of JSON),
//! through one buffer per connection: a small frame costs one `recv`, not one for the first
//! byte, one for the rest of the length and one for the body.

use std::time::Duration;

use proto::{ErrorCode, MAX_FRAME};
use tokio::io::AsyncReadExt;
use tokio::net::unix::OwnedReadHalf;

use super::sessions::Refusal;

/// How many bytes one `recv` may bring: a frame this size or smaller (most are) is read in one.
const CHUNK: usize = 64 * 1024;

/// The length's bytes before each frame.
const LENGTH: usize = 4;

/// A connection's incoming frames.
pub(super) struct FrameReader {
    half: OwnedReadHalf,
    buffer: Vec<u8>,
    /// The unread bytes are `buffer[start..end]`.
    start: usize,
    end: usize,
}

fn bad(message: String) -> Refusal {
    Refusal::new(ErrorCode::BadFrame, message)
}

fn silent(_: tokio::time::error::Elapsed) -> Refusal {
    bad("silent in the middle of a frame".into())
}

fn cut(error: std::io::Error) -> Refusal {
    bad(format!("the connection ended inside a frame: {error}"))
}

impl FrameReader {
    /// Reads frames from `half`.
    pub(super) fn new(half: OwnedReadHalf) -> FrameReader {
        FrameReader {
            half,
            buffer: vec![0; CHUNK],
            start: 0,
            end: 0,
        }
    }

    /// Reads one frame: `None` at a clean end. Waiting for a frame to start has no limit
    /// (except for the first, `hello`); once it has started, the rest must come within `idle`.
    pub(super) async fn next<T: serde::de::DeserializeOwned>(
        &mut self,
        idle: Duration,
        first: bool,
    ) -> Result<Option<T>, Refusal> {
        let begun = if first {
            tokio::time::timeout(idle, self.begun())
                .await
                .map_err(|_| bad("no hello within the idle timeout".into()))?
        } else {
            self.begun().await
        };
        match begun {
            Ok(true) => self.rest(idle).await.map(Some),
            Ok(false) => Ok(None),
            Err(e) => Err(bad(format!("cannot read: {e}"))),
        }
    }

    /// Waits until a frame has begun (`true`) or the connection has ended (`false`). Nothing
    /// is lost when the wait is given up (it only ever adds whole reads to the buffer).
    pub(super) async fn begun(&mut self) -> std::io::Result<bool> {
        if self.start < self.end {
            return Ok(true);
        }
        Ok(self.fill().await? > 0)
    }

    /// Reads the frame that has begun whole, the rest within `idle`.
    pub(super) async fn rest<T: serde::de::DeserializeOwned>(
        &mut self,
        idle: Duration,
    ) -> Result<T, Refusal> {
        tokio::time::timeout(idle, self.hold(LENGTH))
            .await
            .map_err(silent)?
            .map_err(cut)?;
        let mut length = [0u8; LENGTH];
        length.copy_from_slice(&self.buffer[self.start..self.start + LENGTH]);
        self.start += LENGTH;
        let size = u32::from_be_bytes(length) as usize;
        if size > MAX_FRAME {
            return Err(bad(format!(
                "a frame of {size} bytes is larger than the limit of {MAX_FRAME} bytes"
            )));
        }
        let parsed = if size <= self.buffer.len() {
            tokio::time::timeout(idle, self.hold(size))
                .await
                .map_err(silent)?
                .map_err(cut)?;
            let body = &self.buffer[self.start..self.start + size];
            self.start += size;
            serde_json::from_slice(body)
        } else {
            // Larger than the buffer: the buffered start, then the rest straight from the socket.
            let mut body = vec![0u8; size];
            let have = self.end - self.start;
            body[..have].copy_from_slice(&self.buffer[self.start..self.end]);
            self.start = self.end;
            tokio::time::timeout(idle, self.half.read_exact(&mut body[have..]))
                .await
                .map_err(silent)?
                .map_err(cut)?;
            serde_json::from_slice(&body)
        };
        parsed.map_err(|e| {
            bad(format!(
                "the frame is not a frame of this socket ({}): {e}",
                std::any::type_name::<T>()
                    .rsplit("::")
                    .next()
                    .unwrap_or("frame")
            ))
        })
    }

    /// Reads until at least `count` bytes (at most the buffer's size) are unread.
    async fn hold(&mut self, count: usize) -> std::io::Result<()> {
        while self.end - self.start < count {
            if self.start + count > self.buffer.len() {
                self.buffer.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
            }
            if self.fill().await? == 0 {
                let closed = "the peer closed its end before the frame's last byte";
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    closed,
                ));
            }
        }
        Ok(())
    }

    /// One read into the buffer's free end: how many bytes it brought (0 at the end).
    async fn fill(&mut self) -> std::io::Result<usize> {
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        } else if self.end == self.buffer.len() {
            self.buffer.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let read = self.half.read(&mut self.buffer[self.end..]).await?;
        self.end += read;
        Ok(read)
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use tokio::io::AsyncWriteExt;
    use tokio::net::UnixStream;

    use super::{CHUNK, FrameReader};

    fn frame(value: &serde_json::Value) -> Vec<u8> {
        proto::encode_frame(value).unwrap_or_default()
    }

    #[tokio::test]
    async fn frames_sent_together_split_or_larger_than_the_buffer_come_out_whole() {
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let (read, _write) = ours.into_split();
        let mut frames = FrameReader::new(read);
        let idle = Duration::from_secs(5);
        let big = serde_json::json!({ "text": "x".repeat(3 * CHUNK) });
        let mut bytes = frame(&serde_json::json!({ "n": 1 }));
        bytes.extend(frame(&serde_json::json!({ "n": 2 })));
        bytes.extend(frame(&big));
        bytes.extend(frame(&serde_json::json!({ "n": 3 })));
        let writer = tokio::spawn(async move {
            // In pieces that cut lengths and bodies anywhere.
            for piece in bytes.chunks(7_777) {
                theirs.write_all(piece).await.unwrap();
                tokio::task::yield_now().await;
            }
            theirs
        });
        for expected in [
            serde_json::json!({ "n": 1 }),
            serde_json::json!({ "n": 2 }),
            big,
            serde_json::json!({ "n": 3 }),
        ] {
            let got: Option<serde_json::Value> = frames.next(idle, false).await.unwrap();
            assert_eq!(got, Some(expected));
        }
        drop(writer.await.unwrap());
        let end: Option<serde_json::Value> = frames.next(idle, false).await.unwrap();
        assert_eq!(end, None, "a clean end between frames");
    }

    #[tokio::test]
    async fn a_frame_cut_short_or_too_large_is_refused_with_its_reason() {
        let idle = Duration::from_secs(5);
        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let mut frames = FrameReader::new(ours.into_split().0);
        let whole = frame(&serde_json::json!({ "n": 1 }));
        theirs.write_all(&whole[..whole.len() - 2]).await.unwrap();
        drop(theirs);
        let cut = frames.next::<serde_json::Value>(idle, false).await;
        let message = cut.err().map(|r| r.message).unwrap_or_default();
        assert!(
            message.starts_with("the connection ended inside a frame"),
            "{message}"
        );

        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let mut frames = FrameReader::new(ours.into_split().0);
        let size = (proto::MAX_FRAME as u32 + 1).to_be_bytes();
        theirs.write_all(&size).await.unwrap();
        let large = frames.next::<serde_json::Value>(idle, false).await;
        let message = large.err().map(|r| r.message).unwrap_or_default();
        assert!(message.contains("larger than the limit"), "{message}");

        let (ours, mut theirs) = UnixStream::pair().unwrap();
        let mut frames = FrameReader::new(ours.into_split().0);
        theirs.write_all(&whole[..3]).await.unwrap();
        let silent = frames
            .next::<serde_json::Value>(Duration::from_millis(50), false)
            .await;
        let message = silent.err().map(|r| r.message).unwrap_or_default();
        assert_eq!(message, "silent in the middle of a frame");
    }
}
