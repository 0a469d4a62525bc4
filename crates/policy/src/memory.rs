//! The memory tools' argument shapes and limits (`memory`, `recall`, `ask_memory`): the
//! `tools` crate's (`nettools::args::memory`), re-exported here.

pub use nettools::args::memory::*;
