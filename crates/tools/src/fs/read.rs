//! `read_file` on a granted folder's descriptor.

use std::fs::File;
use std::io::Read;

use rustix::fs::{Mode, OFlags};

use super::{FileError, GrantedDir, ReadFileArgs, ReadFileResult, absolute, io_error, kind_of};

/// Reads the text file at `args.path`, below `dir`, at most `cap` bytes of it.
pub fn read_file(
    dir: &GrantedDir,
    args: &ReadFileArgs,
    cap: usize,
) -> Result<ReadFileResult, FileError> {
    let path = absolute(&args.path)?;
    let relative = dir.relative(&path)?;
    // O_NONBLOCK: opening a FIFO must not hang; the type is checked on the open descriptor, so
    // nothing can be swapped in between.
    let fd = dir.open_beneath(
        relative,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY,
        Mode::empty(),
        &args.path,
    )?;
    let file = File::from(fd);
    let meta = file.metadata().map_err(|e| io_error(&args.path, e))?;
    if !meta.is_file() {
        return Err(FileError::NotAFile {
            path: args.path.clone(),
            kind: kind_of(&meta),
        });
    }
    let mut bytes = Vec::with_capacity(cap.min(meta.len() as usize).saturating_add(1));
    file.take(cap as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(&args.path, e))?;
    let truncated = bytes.len() > cap;
    bytes.truncate(cap);
    let content = if truncated {
        lossy_head(&bytes)
    } else {
        String::from_utf8_lossy(&bytes).into_owned()
    };
    Ok(ReadFileResult {
        path: args.path.clone(),
        content,
        size: meta.len(),
        truncated,
    })
}

/// `bytes` as text where a sequence cut at the end by the cap is dropped, not replaced.
pub(crate) fn lossy_head(bytes: &[u8]) -> String {
    // The last character starts at the last byte that is not a continuation byte (10xxxxxx),
    // among the last four.
    let floor = bytes.len().saturating_sub(4);
    let start = (floor..bytes.len())
        .rev()
        .find(|&at| bytes.get(at).is_some_and(|b| b & 0xC0 != 0x80));
    let end = match start.and_then(|at| bytes.get(at..).map(|tail| (at, tail))) {
        Some((at, tail)) => match std::str::from_utf8(tail) {
            Err(error) if error.error_len().is_none() => at,
            _ => bytes.len(),
        },
        None => bytes.len(),
    };
    String::from_utf8_lossy(bytes.get(..end).unwrap_or(bytes)).into_owned()
}

#[cfg(test)]
mod tests {
    use super::lossy_head;

    #[test]
    fn a_sequence_cut_by_the_cap_is_dropped_and_an_invalid_one_inside_is_replaced() {
        assert_eq!(
            lossy_head("aé".as_bytes().get(..2).unwrap_or_default()),
            "a"
        );
        assert_eq!(lossy_head(&[b'a', 0xFF, b'b']), "a\u{FFFD}b");
        assert_eq!(
            lossy_head("日本".as_bytes().get(..4).unwrap_or_default()),
            "日"
        );
        assert_eq!(lossy_head("😀".as_bytes().get(..3).unwrap_or_default()), "");
        assert_eq!(lossy_head(b""), "");
    }
}
