//! The worker's two ways to serve: one request from a file in the box ([`serve`]), or one
//! request per line on standard input for a session's warm box ([`serve_warm`], on
//! [`serve_lines`], which the broker's fetcher uses too).

use std::io::{BufRead, Read, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::answer::{Outcome, answer, file_outcome};
use tools::search::WarmIndex;

use crate::files::{REQUEST, Request, run, run_with};

/// Runs the request at [`REQUEST`] (in the box; in a box without bubblewrap, the same name in
/// its scratch folder, `TMPDIR`) and prints its outcome as one JSON object.
pub fn serve() -> Result<(), String> {
    let path = match std::env::var_os("TMPDIR") {
        Some(dir) => Path::new(&dir).join(
            Path::new(REQUEST)
                .strip_prefix("/tmp")
                .unwrap_or(Path::new(REQUEST)),
        ),
        None => PathBuf::from(REQUEST),
    };
    let shown = path.display();
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let request: Request =
        serde_json::from_str(&text).map_err(|e| format!("{shown} is not a request: {e}"))?;
    // Flushed here: `brokerd-files` starts without std's runtime, whose exit would flush it.
    let mut output = std::io::stdout().lock();
    writeln!(output, "{}", answer(file_outcome(run(&request))))
        .and_then(|()| output.flush())
        .map_err(|e| format!("cannot write the answer: {e}"))
}

/// The most bytes of one request line a warm worker reads (a `write_file` of the largest frame,
/// escaped, fits).
pub const MAX_REQUEST: u64 = 64 << 20;

/// The warm worker (`brokerd-files box-file --warm`): reads one request per line on standard
/// input and prints one answer line for each, until standard input ends. Its walkers keep a
/// [`WarmIndex`] of the trees they walk across the calls (see `tools::search::WarmIndex`).
pub fn serve_warm() -> Result<(), String> {
    let mut index = WarmIndex::new();
    serve_lines(|line| match serde_json::from_slice::<Request>(line) {
        Ok(request) => answer(file_outcome(run_with(&request, Some(&mut index)))),
        Err(e) => answer(Outcome::Failed(format!(
            "the warm worker got a request it cannot read: {e}"
        ))),
    })
}

/// A warm worker's loop (the file tools', the fetcher's): non-dumpable first, then one request
/// line at a time from standard input (at most [`MAX_REQUEST`] bytes), `handle`'s answer
/// printed on one line for each, until standard input ends.
pub fn serve_lines(mut handle: impl FnMut(&[u8]) -> Value) -> Result<(), String> {
    // A worker lives across a session's calls: no other process may read its memory.
    sandbox::make_non_dumpable()
        .map_err(|e| format!("cannot make the worker non-dumpable: {e}"))?;
    let mut input = std::io::stdin().lock();
    let mut output = std::io::stdout().lock();
    loop {
        let mut line = Vec::new();
        let read = input
            .by_ref()
            .take(MAX_REQUEST)
            .read_until(b'\n', &mut line)
            .map_err(|e| format!("cannot read a request: {e}"))?;
        if read == 0 {
            return Ok(());
        }
        if line.last() != Some(&b'\n') {
            return Err(format!(
                "a request ended without a newline or passed {MAX_REQUEST} bytes"
            ));
        }
        let answered = handle(&line);
        writeln!(output, "{answered}")
            .and_then(|()| output.flush())
            .map_err(|e| format!("cannot write an answer: {e}"))?;
    }
}
