//! The memory tools' argument shapes and limits (`memory`, `recall`, `ask_memory`): the
//! `tools` crate's (`tools::args::memory`), re-exported here.

pub use tools::args::memory::*;
