//! The broker's view of a call: which tool (`ToolName`) and its arguments, parsed strictly
//! (`ToolArgs`). Parsing is step 3 of the decision; the shapes and the parse are the `tools`
//! crate's (`nettools::args`, beside each tool's own argument struct), re-exported here at the
//! path the seeds name (`brokerd::args` re-exports this).

pub use nettools::args::{
    ArgsError, CallReach, MAX_PATH_BYTES, TEXT_ARGUMENT_CAP, ToolArgs, ToolName, consult_question,
    parse,
};
