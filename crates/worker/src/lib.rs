//! boxmaker's programs that run inside a box, apart from the daemon that starts them: the file
//! tools' worker (`brokerd-files box-file [--warm]`: `read_file`, `write_file`, `edit_file` and
//! the walkers `list_files`, `glob` and `grep`) and the launcher of the broker's other boxes
//! (`brokerd-launcher`), with the request and the answer that cross the box's wall.
//!
//! The broker starts the worker in a fresh box (or the session's warm one) that holds only the
//! granted folder (read-only for `read_file` and the walkers, read-write for `write_file` and
//! `edit_file`) with the protected folders masked, hands it the [`Request`] as a file in the
//! box's `/tmp` ([`REQUEST`]) or as one line on standard input (warm), and reads the rendered
//! [`Outcome`] back from its standard output ([`outcome`]). No directory descriptor of the
//! broker enters the box: the worker opens the folder itself, inside, where only what the grant
//! names exists.
//!
//! What the worker must know beyond the arguments comes as data in the request: for a walker,
//! the folders to prune and what the live deny grants cover ([`tools::search::WalkLimits`]);
//! for a write, the content read before write expects ([`tools::fs::Expected`]), compared on
//! the descriptor the write uses.
//!
//! This crate links `proto`, `sandbox` and the file tools only: never the daemon, an async
//! runtime, an HTTP client or SQLite, so a box starts it cheaply and holds only what it uses.

mod answer;
mod files;
mod serve;

pub use answer::{Outcome, SEEN_FIELD, answer, file_outcome, outcome};
pub use files::{FileCall, FileOutcome, FileRunError, REQUEST, Request, run, run_with};
pub use serve::{MAX_REQUEST, serve, serve_lines, serve_warm};
