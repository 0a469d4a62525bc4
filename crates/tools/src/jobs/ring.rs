//! A job's output: one bounded ring of the newest bytes, standard output and standard error
//! interleaved in the order they were read, with absolute offsets so a reader knows what it
//! missed.

use std::collections::VecDeque;

/// The newest `cap` bytes a job wrote, and how many it wrote in all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ring {
    bytes: VecDeque<u8>,
    cap: usize,
    total: u64,
}

/// What one read of the ring gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Read {
    /// The bytes, oldest first.
    pub bytes: Vec<u8>,
    /// Bytes written after the reader's offset that the ring no longer holds (pushed out by
    /// newer ones before this read).
    pub dropped: u64,
    /// The reader's offset after this read.
    pub next: u64,
    /// Bytes the ring holds past what this read returned (for the next read).
    pub unread: u64,
}

impl Ring {
    /// An empty ring that keeps at most `cap` bytes (at least one).
    pub fn new(cap: usize) -> Ring {
        Ring {
            bytes: VecDeque::new(),
            cap: cap.max(1),
            total: 0,
        }
    }

    /// Appends `bytes`, pushing out the oldest when full.
    pub fn push(&mut self, mut bytes: &[u8]) {
        self.total = self.total.saturating_add(bytes.len() as u64);
        if bytes.len() >= self.cap {
            // Invariant: the length is at least `cap`, so the start is in range.
            bytes = &bytes[bytes.len() - self.cap..];
            self.bytes.clear();
        }
        let overflow = (self.bytes.len() + bytes.len()).saturating_sub(self.cap);
        self.bytes.drain(..overflow.min(self.bytes.len()));
        self.bytes.extend(bytes);
    }

    /// Bytes written in all.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The absolute offset of the oldest byte held.
    fn start(&self) -> u64 {
        self.total - self.bytes.len() as u64
    }

    /// At most `max` bytes from absolute offset `from` (or from the oldest byte held, when
    /// `from` was pushed out: the gap is `dropped`).
    pub fn read_from(&self, from: u64, max: usize) -> Read {
        let start = self.start();
        let from = from.min(self.total);
        let dropped = start.saturating_sub(from);
        let first = from.max(start);
        let skip = usize::try_from(first - start).unwrap_or(usize::MAX);
        let bytes: Vec<u8> = self.bytes.iter().skip(skip).take(max).copied().collect();
        let next = first + bytes.len() as u64;
        Read {
            unread: self.total - next,
            bytes,
            dropped,
            next,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ring_keeps_the_newest_bytes_and_counts_what_a_reader_missed() {
        let mut ring = Ring::new(4);
        ring.push(b"ab");
        let first = ring.read_from(0, 10);
        assert_eq!(
            (first.bytes.as_slice(), first.dropped, first.next),
            (&b"ab"[..], 0, 2)
        );
        ring.push(b"cdefg");
        let second = ring.read_from(first.next, 10);
        assert_eq!(second.bytes, b"defg");
        assert_eq!(second.dropped, 1, "c was pushed out before it was read");
        assert_eq!((second.next, ring.total()), (7, 7));
        ring.push(b"hijklmnop");
        let third = ring.read_from(second.next, 2);
        assert_eq!(third.bytes, b"mn");
        assert_eq!((third.dropped, third.unread), (5, 2));
        let fourth = ring.read_from(third.next, 2);
        assert_eq!(
            (fourth.bytes.as_slice(), fourth.dropped, fourth.unread),
            (&b"op"[..], 0, 0)
        );
    }
}
