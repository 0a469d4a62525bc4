//! Writing one frame to a client of either socket within the idle timeout: the leaf the
//! connection loops and the memory owner's stream share.

use std::time::Duration;

use proto::encode_frame;
use tokio::io::AsyncWriteExt;
use tokio::net::unix::OwnedWriteHalf;

/// Why a connection ended early (for the log).
pub type Closed = String;

/// Writes `frame` to `writer`, or says why it could not within `idle`.
pub async fn write<T: serde::Serialize>(
    writer: &mut OwnedWriteHalf,
    frame: &T,
    idle: Duration,
) -> Result<(), Closed> {
    let bytes = encode_frame(frame).map_err(|e| e.to_string())?;
    tokio::time::timeout(idle, writer.write_all(&bytes))
        .await
        .map_err(|_| "the client did not read its answer within the idle timeout".to_string())?
        .map_err(|e| e.to_string())
}
