//! `read_file` on a granted folder's descriptor: the whole file or a window of lines, with a
//! cap in bytes, the file's line count, and binary files named rather than shown.

use std::fs::File;
use std::io::{BufRead, BufReader};

use rustix::fs::{Mode, OFlags};

use super::write::PrefixHash;
use super::{
    BINARY_PROBE, EDIT_LIMIT, FileError, GrantedDir, ReadFileArgs, ReadFileResult, absolute,
    io_error, kind_of,
};

/// Reads the text file at `args.path`, below `dir`: from line `args.offset` (1 when absent), at
/// most `args.limit` lines (all when absent), and at most `cap` bytes of them.
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
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let first = reader.fill_buf().map_err(|e| io_error(&args.path, e))?;
    // Cannot panic: the end is at most the length.
    let probe = &first[..BINARY_PROBE.min(first.len())];
    let mut hash = PrefixHash::new(EDIT_LIMIT + 1);
    if probe.contains(&0) {
        // Not shown, but hashed all the same: read before write holds for a binary file too.
        loop {
            let block = reader.fill_buf().map_err(|e| io_error(&args.path, e))?;
            if block.is_empty() || !hash.wants_more() {
                break;
            }
            hash.update(block);
            let len = block.len();
            reader.consume(len);
        }
        return Ok(ReadFileResult {
            path: args.path.clone(),
            content: format!(
                "{} is a binary file of {} bytes; not shown",
                args.path,
                meta.len()
            ),
            size: meta.len(),
            truncated: false,
            total_lines: 0,
            start_line: None,
            end_line: None,
            binary: true,
            sha256: hash.finish(),
        });
    }
    let window = Window::of(args);
    let scan =
        scan_lines(&mut reader, &window, cap, &mut hash).map_err(|e| io_error(&args.path, e))?;
    let content = if scan.truncated {
        lossy_head(&scan.kept)
    } else {
        String::from_utf8_lossy(&scan.kept).into_owned()
    };
    Ok(ReadFileResult {
        path: args.path.clone(),
        content,
        size: meta.len(),
        truncated: scan.truncated,
        total_lines: scan.total_lines,
        start_line: window.asked.then_some(window.first),
        end_line: scan.end_line,
        binary: false,
        sha256: hash.finish(),
    })
}

/// The lines a call asked for: `first..end`, counted from 1.
struct Window {
    first: u64,
    end: u64,
    asked: bool,
}

impl Window {
    fn of(args: &ReadFileArgs) -> Window {
        let first = args.offset.unwrap_or(1).max(1);
        let end = args.limit.map_or(u64::MAX, |n| first.saturating_add(n));
        Window {
            first,
            end,
            asked: args.offset.is_some() || args.limit.is_some(),
        }
    }

    fn holds(&self, line: u64) -> bool {
        line >= self.first && line < self.end
    }
}

/// What one pass over the file kept and counted.
struct Scan {
    kept: Vec<u8>,
    truncated: bool,
    total_lines: u64,
    /// The last line of the window kept whole.
    end_line: Option<u64>,
}

/// One pass over the file: keeps the bytes of the window's lines up to `cap` (one byte more
/// tells a cut), counts every line, and feeds every byte to `hash`.
fn scan_lines(
    reader: &mut impl BufRead,
    window: &Window,
    cap: usize,
    hash: &mut PrefixHash,
) -> std::io::Result<Scan> {
    let mut kept = Vec::new();
    let mut truncated = false;
    let mut line: u64 = 1;
    let mut last = None;
    // The last line of the window some of whose bytes were kept.
    let mut started = None;
    loop {
        let block = reader.fill_buf()?;
        if block.is_empty() {
            break;
        }
        let len = block.len();
        hash.update(block);
        last = block.last().copied();
        let mut from = 0;
        while from < len {
            // Invariant: the loop runs only while `from` is below the block's length.
            let rest = &block[from..];
            let (segment, step, newline) = match memchr::memchr(b'\n', rest) {
                // Invariant: `at` is the position of a byte of `rest`.
                Some(at) => (&rest[..=at], at + 1, true),
                None => (rest, rest.len(), false),
            };
            if !truncated && window.holds(line) {
                started = Some(line);
                let room = (cap + 1).saturating_sub(kept.len());
                // Cannot panic: the end is at most the length.
                kept.extend_from_slice(&segment[..room.min(segment.len())]);
                if kept.len() > cap {
                    kept.truncate(cap);
                    truncated = true;
                }
            }
            if newline {
                line += 1;
            }
            from += step;
        }
        reader.consume(len);
    }
    let total_lines = match last {
        None => 0,
        Some(b'\n') => line - 1,
        Some(_) => line,
    };
    // A cut line is not whole: the one before it is the last whole line.
    let end_line = match started {
        Some(line) if truncated => line.checked_sub(1).filter(|&l| l >= window.first),
        started => started,
    };
    Ok(Scan {
        kept,
        truncated,
        total_lines,
        end_line,
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
    // Invariant: `end` is the length or a position `bytes.get(at..)` found inside it.
    String::from_utf8_lossy(&bytes[..end]).into_owned()
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
