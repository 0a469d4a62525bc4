//! boxmaker's decision on a tool call, as a library without sockets or state: the call's
//! arguments parsed strictly ([`args`], [`consult`], [`ask`], [`memory`]), the owner's grant files ([`grants`]), and
//! the decision itself ([`decide`]) with what it needs to read a `shell` script ([`shell`]) and
//! to know which writes change what git and the other programs outside the box run ([`git`],
//! [`trusted`]), and where a call's values came from ([`provenance`]).
//!
//! It reads grant files and resolves paths (file metadata and symbolic links); nothing else
//! touches the machine. `brokerd` runs what is decided here; `bx grants check`, the MCP front and
//! anyone who embeds the decision link this crate alone.

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]

pub mod args;
pub mod ask;
pub mod consult;
pub mod decide;
pub mod downstream;
pub mod git;
pub mod grants;
pub mod hosts;
pub mod memory;
pub mod paths;
pub mod provenance;
pub mod shell;
pub mod trusted;
