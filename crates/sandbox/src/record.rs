//! What the processes of a contained command tell the broker through the status pipe: records
//! of a fixed five bytes (a tag and a little-endian `i32`), so that each one is a single atomic
//! `write(2)` built on the stack, with nothing allocated between `fork` and `exec`.

/// Bytes in one record.
pub(crate) const LEN: usize = 5;

/// One thing a process of the box reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Record {
    /// The intermediate entered new namespaces: the command runs under an init that is PID 1.
    Namespaces,
    /// The intermediate fell back to being the command's child subreaper.
    Subreaper,
    /// The command exited with this code.
    Exited(i32),
    /// A signal ended the command.
    Signaled(i32),
    /// The deadline passed; the intermediate killed everything.
    TimedOut,
    /// The broker closed the leash (it ended or dropped the child); everything was killed.
    Cancelled,
    /// Setting up the namespaces failed with this errno after `unshare` succeeded.
    SetupFailed(i32),
}

impl Record {
    /// The record's bytes.
    pub(crate) fn encode(self) -> [u8; LEN] {
        let (tag, value) = match self {
            Record::Namespaces => (b'n', 0),
            Record::Subreaper => (b'r', 0),
            Record::Exited(code) => (b'x', code),
            Record::Signaled(signal) => (b's', signal),
            Record::TimedOut => (b't', 0),
            Record::Cancelled => (b'c', 0),
            Record::SetupFailed(errno) => (b'f', errno),
        };
        let [a, b, c, d] = value.to_le_bytes();
        [tag, a, b, c, d]
    }

    /// The record these bytes hold, if any.
    pub(crate) fn decode(bytes: [u8; LEN]) -> Option<Record> {
        let [tag, a, b, c, d] = bytes;
        let value = i32::from_le_bytes([a, b, c, d]);
        Some(match tag {
            b'n' => Record::Namespaces,
            b'r' => Record::Subreaper,
            b'x' => Record::Exited(value),
            b's' => Record::Signaled(value),
            b't' => Record::TimedOut,
            b'c' => Record::Cancelled,
            b'f' => Record::SetupFailed(value),
            _ => return None,
        })
    }
}

/// Every whole record in `bytes`, in order; unknown tags and a torn tail are skipped.
pub(crate) fn parse_all(bytes: &[u8]) -> Vec<Record> {
    bytes
        .chunks_exact(LEN)
        .filter_map(|chunk| <[u8; LEN]>::try_from(chunk).ok().and_then(Record::decode))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{Record, parse_all};

    #[test]
    fn every_record_survives_its_encoding() {
        let all = [
            Record::Namespaces,
            Record::Subreaper,
            Record::Exited(0),
            Record::Exited(-1),
            Record::Exited(255),
            Record::Signaled(9),
            Record::TimedOut,
            Record::Cancelled,
            Record::SetupFailed(1),
        ];
        let bytes: Vec<u8> = all.iter().flat_map(|r| r.encode()).collect();
        assert_eq!(parse_all(&bytes), all);
    }

    #[test]
    fn a_torn_tail_and_unknown_tags_are_skipped() {
        let mut bytes = Record::Exited(3).encode().to_vec();
        bytes.extend_from_slice(b"?abcd");
        bytes.extend_from_slice(&Record::TimedOut.encode()[..2]);
        assert_eq!(parse_all(&bytes), [Record::Exited(3)]);
    }
}
