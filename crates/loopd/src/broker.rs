//! [`BrokerPort`]: the [`crate::tools::ToolPort`] that sends every call to `brokerd` over its
//! agent socket. It lives in the `toolport` crate, which `mcp` uses too, and is re-exported here
//! unchanged; loopd turns on its `owner-words` feature, so that `loopd chat` alone gives the
//! broker the owner's own words.

pub use toolport::{BrokerPort, PortError, RECONNECT_FOR, resume_of};
