//! Reading hosts: the host and port of an `https://` URL (a call's) and of a `host[:port]`
//! entry (a grant's), in `tools::web::url`, re-exported here.

pub use tools::web::url::*;
