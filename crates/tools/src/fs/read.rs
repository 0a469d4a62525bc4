//! `read_file` on a granted folder's descriptor: the whole file or a window of lines, with a
//! cap in bytes, the file's line count, and binary files named rather than shown.
//!
//! Bounded on a huge file: the read goes as far as the window it returns and as far as read
//! before write hashes (the first [`EDIT_LIMIT`] + 1 bytes), whichever is further, and no
//! further. The lines are counted in what was read (past the window with one `memchr` count a
//! block, not line by line); when the read stopped before the end, `total_lines` is the lines
//! begun in it, a lower bound, and `total_lines_partial` says so.

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
            total_lines_partial: false,
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
        total_lines_partial: scan.partial,
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

    /// Whether no line from `line` on is in the window.
    fn past(&self, line: u64) -> bool {
        line >= self.end
    }
}

/// What one pass over the file kept and counted.
struct Scan {
    kept: Vec<u8>,
    truncated: bool,
    total_lines: u64,
    /// Whether the scan stopped before the end: `total_lines` is then a lower bound.
    partial: bool,
    /// The last line of the window kept whole.
    end_line: Option<u64>,
}

/// One pass over the file: keeps the bytes of the window's lines up to `cap` (one byte more
/// tells a cut), feeds every byte to `hash`, counts the lines of what it read, and stops once
/// the window is done and `hash` wants no more bytes.
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
    let mut partial = false;
    loop {
        let block = reader.fill_buf()?;
        if block.is_empty() {
            break;
        }
        let len = block.len();
        if truncated || window.past(line) {
            if !hash.wants_more() {
                // Bytes follow (this block): the line `line` exists, whether it began in
                // what was read or begins here.
                partial = true;
                break;
            }
            // Nothing more to keep: only the hash and the count.
            hash.update(block);
            last = block.last().copied();
            line += memchr::memchr_iter(b'\n', block).count() as u64;
            reader.consume(len);
            continue;
        }
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
        _ if partial => line,
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
        partial,
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
    use super::super::write::PrefixHash;
    use super::{Window, lossy_head, scan_lines};
    use std::io::BufReader;

    /// A scan of `text` in blocks of 7 bytes with a hash of at most `limit` bytes.
    fn scan(text: &[u8], first: u64, count: Option<u64>, cap: usize, limit: u64) -> super::Scan {
        let mut reader = BufReader::with_capacity(7, text);
        let window = Window {
            first,
            end: count.map_or(u64::MAX, |n| first + n),
            asked: true,
        };
        let mut hash = PrefixHash::new(limit);
        let scan = scan_lines(&mut reader, &window, cap, &mut hash).unwrap();
        let mut whole = PrefixHash::new(limit);
        whole.update(text);
        assert_eq!(
            hash.finish(),
            whole.finish(),
            "the hash covers its whole prefix"
        );
        scan
    }

    #[test]
    fn a_scan_stops_after_the_window_and_the_hash_and_counts_a_lower_bound() {
        let text: Vec<u8> = (1..=200)
            .flat_map(|n| format!("line {n}\n").into_bytes())
            .chain(*b"tail")
            .collect();
        // Everything hashed: read to the end, counted exactly.
        let whole = scan(&text, 3, Some(2), 1000, u64::MAX);
        assert_eq!((whole.total_lines, whole.partial), (201, false));
        assert_eq!(whole.kept, b"line 3\nline 4\n");
        for limit in [0, 1, 20, 100, 500] {
            let cut = scan(&text, 3, Some(2), 1000, limit);
            assert_eq!(cut.kept, whole.kept, "{limit}");
            assert_eq!(cut.end_line, whole.end_line, "{limit}");
            assert!(cut.partial, "{limit}");
            // The lines begun in what was read: at least the window's, never more than there are.
            assert!(
                (5..=201).contains(&cut.total_lines),
                "{limit}: {}",
                cut.total_lines
            );
        }
        // Cut by the cap: the count goes on as far as the hash goes.
        let capped = scan(&text, 1, None, 10, 100);
        assert!(capped.truncated && capped.partial);
        assert_eq!(capped.kept, b"line 1\nlin");
        assert_eq!(capped.end_line, Some(1));
        assert!(capped.total_lines >= 2 && capped.total_lines <= 201);
        // A hash past the end: exact again.
        let exact = scan(&text, 1, None, 10, 1 << 20);
        assert_eq!((exact.total_lines, exact.partial), (201, false));
    }

    #[test]
    fn a_partial_count_is_shown_as_a_lower_bound() {
        let read = super::ReadFileResult {
            path: "/f".into(),
            content: "a\nb\nc\n".into(),
            size: 1 << 30,
            truncated: true,
            total_lines: 9000,
            total_lines_partial: true,
            start_line: None,
            end_line: Some(3),
            binary: false,
            sha256: String::new(),
        };
        assert_eq!(read.lines().as_deref(), Some("1-3 of at least 9000"));
        assert_eq!(read.next_offset(), Some(4));
    }

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
