//! What the broker and a box's command worker say to each other over the box's standard input
//! and output: frames of a one-byte tag, a little-endian `u32` length and that many bytes. The
//! broker sends one [`Request`] frame a command; the worker answers with output frames as the
//! command writes and one end frame (or a failure frame) when it is over.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::PathBuf;
use std::time::Duration;

use crate::spec::{CommandSpec, Ended, Exit};

/// Bytes before a frame's payload: its tag and its length.
pub(crate) const HEADER: usize = 5;

/// The largest request a worker takes (a command line and its environment).
pub(crate) const MAX_REQUEST: usize = 8 << 20;

/// The largest frame a worker sends (one read of the command's output, or the end).
pub(crate) const MAX_ANSWER: usize = 1 << 20;

/// A command to run: the broker's [`Tag::Request`] frame.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// The command.
    pub(crate) spec: CommandSpec,
    /// The longest it may run; then every process of it is killed.
    pub(crate) timeout: Duration,
    /// The CPU seconds of each of its processes (`RLIMIT_CPU`).
    pub(crate) cpu_seconds: u64,
    /// Bytes of output it may write in all; past them it is killed.
    pub(crate) output_bytes: u64,
}

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tag {
    /// A command to run (broker to worker).
    Request = b'R' as isize,
    /// Bytes the command wrote to its standard output.
    Stdout = b'O' as isize,
    /// Bytes the command wrote to its standard error.
    Stderr = b'E' as isize,
    /// The command is over and every process of it is gone: how it ended.
    End = b'X' as isize,
    /// The worker cannot go on (a sentence); it ends after this frame.
    Failed = b'F' as isize,
}

impl Tag {
    fn of(byte: u8) -> Option<Tag> {
        [
            Tag::Request,
            Tag::Stdout,
            Tag::Stderr,
            Tag::End,
            Tag::Failed,
        ]
        .into_iter()
        .find(|tag| *tag as u8 == byte)
    }
}

/// One frame's bytes.
pub(crate) fn frame(tag: Tag, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.push(tag as u8);
    out.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_le_bytes(),
    );
    out.extend_from_slice(payload);
    out
}

/// The tag and payload length in a frame's first [`HEADER`] bytes.
pub(crate) fn header(bytes: &[u8; HEADER]) -> Result<(Tag, usize), String> {
    let [tag, a, b, c, d] = *bytes;
    let tag = Tag::of(tag).ok_or_else(|| format!("unknown frame tag {tag:#04x}"))?;
    let len = usize::try_from(u32::from_le_bytes([a, b, c, d])).unwrap_or(usize::MAX);
    Ok((tag, len))
}

/// Takes the first whole frame off the front of `buf`, if it holds one.
pub(crate) fn take_frame(buf: &mut Vec<u8>, max: usize) -> Result<Option<(Tag, Vec<u8>)>, String> {
    let Some(head) = buf.first_chunk::<HEADER>() else {
        return Ok(None);
    };
    let (tag, len) = header(head)?;
    if len > max {
        return Err(format!("a frame of {len} bytes passes the limit of {max}"));
    }
    let Some(payload) = buf.get(HEADER..HEADER + len) else {
        return Ok(None);
    };
    let payload = payload.to_vec();
    buf.drain(..HEADER + len);
    Ok(Some((tag, payload)))
}

impl Request {
    /// The request's frame.
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut w = Writer(Vec::new());
        w.bytes(self.spec.program.as_os_str().as_bytes());
        w.bytes(self.spec.cwd.as_os_str().as_bytes());
        w.number(u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX));
        w.number(self.cpu_seconds);
        w.number(self.output_bytes);
        w.number(self.spec.args.len() as u64);
        for arg in &self.spec.args {
            w.bytes(arg.as_bytes());
        }
        w.number(self.spec.env.len() as u64);
        for (name, value) in &self.spec.env {
            w.bytes(name.as_bytes());
            w.bytes(value.as_bytes());
        }
        frame(Tag::Request, &w.0)
    }

    /// Reads a request frame's payload.
    pub(crate) fn decode(payload: &[u8]) -> Result<Request, String> {
        let mut r = Reader(payload);
        let program = PathBuf::from(OsString::from_vec(r.bytes()?));
        let cwd = PathBuf::from(OsString::from_vec(r.bytes()?));
        let timeout = Duration::from_millis(r.number()?);
        let cpu_seconds = r.number()?;
        let output_bytes = r.number()?;
        let mut args = Vec::new();
        for _ in 0..r.count()? {
            args.push(OsString::from_vec(r.bytes()?));
        }
        let mut env = Vec::new();
        for _ in 0..r.count()? {
            env.push((
                OsString::from_vec(r.bytes()?),
                OsString::from_vec(r.bytes()?),
            ));
        }
        if !r.0.is_empty() {
            return Err("a request has bytes after its last field".to_string());
        }
        Ok(Request {
            spec: CommandSpec {
                program,
                args,
                env,
                cwd,
            },
            timeout,
            cpu_seconds,
            output_bytes,
        })
    }
}

/// The end frame's payload: how the command ended.
pub(crate) fn encode_end(ended: &Ended) -> Vec<u8> {
    let (kind, value) = match ended.exit {
        None => (0u8, 0i32),
        Some(Exit::Code(code)) => (1, code),
        Some(Exit::Signal(signal)) => (2, signal),
    };
    let mut out = vec![kind];
    out.extend_from_slice(&value.to_le_bytes());
    out.push(u8::from(ended.timed_out));
    out.push(u8::from(ended.output_exceeded));
    out
}

/// Reads the end frame's payload.
pub(crate) fn decode_end(payload: &[u8]) -> Result<Ended, String> {
    let [kind, a, b, c, d, timed_out, output_exceeded] = *payload else {
        return Err(format!(
            "an end frame holds 7 bytes, this one {}",
            payload.len()
        ));
    };
    let value = i32::from_le_bytes([a, b, c, d]);
    let exit = match kind {
        0 => None,
        1 => Some(Exit::Code(value)),
        2 => Some(Exit::Signal(value)),
        other => return Err(format!("an end frame names exit kind {other}")),
    };
    Ok(Ended {
        exit,
        timed_out: timed_out != 0,
        output_exceeded: output_exceeded != 0,
        stopped: false,
    })
}

/// Writes a request's fields.
struct Writer(Vec<u8>);

impl Writer {
    fn number(&mut self, n: u64) {
        self.0.extend_from_slice(&n.to_le_bytes());
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.number(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
    }
}

/// Reads a request's fields, every length checked against what is left.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn number(&mut self) -> Result<u64, String> {
        let Some((head, rest)) = self.0.split_first_chunk::<8>() else {
            return Err("a request ends inside a number".to_string());
        };
        self.0 = rest;
        Ok(u64::from_le_bytes(*head))
    }

    /// A count of items, each at least 8 bytes long, so no count passes what is left.
    fn count(&mut self) -> Result<usize, String> {
        let n = usize::try_from(self.number()?).unwrap_or(usize::MAX);
        if n > self.0.len() / 8 {
            return Err(format!("a request names {n} items it does not hold"));
        }
        Ok(n)
    }

    fn bytes(&mut self) -> Result<Vec<u8>, String> {
        let len = usize::try_from(self.number()?).unwrap_or(usize::MAX);
        if len > self.0.len() {
            return Err(format!(
                "a request names a field of {len} bytes, {} are left",
                self.0.len()
            ));
        }
        let (field, rest) = self.0.split_at(len);
        self.0 = rest;
        Ok(field.to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request() -> Request {
        Request {
            spec: CommandSpec {
                program: "/bin/bash".into(),
                args: vec!["-c".into(), OsString::from_vec(b"echo \xff\n".to_vec())],
                env: vec![("PATH".into(), "/usr/bin".into()), ("E".into(), "".into())],
                cwd: "/work/a b".into(),
            },
            timeout: Duration::from_millis(1500),
            cpu_seconds: 7,
            output_bytes: 1 << 20,
        }
    }

    #[test]
    fn a_request_survives_its_frame_byte_for_byte() {
        let mut buf = request().encode();
        let (tag, payload) = take_frame(&mut buf, MAX_REQUEST).unwrap().unwrap();
        assert_eq!(tag, Tag::Request);
        assert!(buf.is_empty());
        assert_eq!(Request::decode(&payload).unwrap(), request());
    }

    #[test]
    fn every_cut_of_a_request_is_an_error_not_a_panic() {
        let mut buf = request().encode();
        let (_, payload) = take_frame(&mut buf, MAX_REQUEST).unwrap().unwrap();
        for len in 0..payload.len() {
            assert!(Request::decode(&payload[..len]).is_err(), "cut at {len}");
        }
        let mut longer = payload.clone();
        longer.push(0);
        assert_eq!(
            Request::decode(&longer).unwrap_err(),
            "a request has bytes after its last field"
        );
    }

    #[test]
    fn a_huge_count_or_length_is_refused_before_anything_is_allocated() {
        let mut payload = Vec::new();
        payload.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(Request::decode(&payload).unwrap_err().contains("field of"));
        let mut buf = frame(Tag::Stdout, &[0; 16]);
        assert!(
            take_frame(&mut buf, 8)
                .unwrap_err()
                .contains("passes the limit")
        );
        let mut unknown = vec![b'?', 0, 0, 0, 0];
        assert_eq!(
            take_frame(&mut unknown, 8).unwrap_err(),
            "unknown frame tag 0x3f"
        );
    }

    #[test]
    fn a_frame_is_taken_only_when_whole() {
        let whole = frame(Tag::Stderr, b"abc");
        let mut buf = whole[..6].to_vec();
        assert_eq!(take_frame(&mut buf, 8).unwrap(), None);
        buf.extend_from_slice(&whole[6..]);
        buf.extend_from_slice(&frame(Tag::Stdout, b"d"));
        assert_eq!(
            take_frame(&mut buf, 8).unwrap(),
            Some((Tag::Stderr, b"abc".to_vec()))
        );
        assert_eq!(
            take_frame(&mut buf, 8).unwrap(),
            Some((Tag::Stdout, b"d".to_vec()))
        );
    }

    #[test]
    fn the_end_survives_its_frame() {
        for ended in [
            Ended {
                exit: Some(Exit::Code(3)),
                timed_out: false,
                output_exceeded: true,
                stopped: false,
            },
            Ended {
                exit: Some(Exit::Signal(9)),
                timed_out: true,
                output_exceeded: false,
                stopped: false,
            },
            Ended {
                exit: None,
                timed_out: false,
                output_exceeded: false,
                stopped: false,
            },
        ] {
            assert_eq!(decode_end(&encode_end(&ended)).unwrap(), ended);
        }
        assert!(decode_end(&[9, 0, 0, 0, 0, 0, 0]).is_err());
        assert!(decode_end(&[1]).is_err());
    }
}
