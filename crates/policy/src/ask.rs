//! `ask`, a question for the owner: its argument shape and limits are the `tools` crate's
//! (`nettools::args::ask`), re-exported here.

pub use nettools::args::ask::*;
