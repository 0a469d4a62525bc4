//! `ask`, a question for the owner: its argument shape and limits are the `tools` crate's
//! (`tools::args::ask`), re-exported here.

pub use tools::args::ask::*;
