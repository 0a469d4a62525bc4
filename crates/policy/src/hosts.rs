//! Reading hosts: the host and port of an `https://` URL (a call's) and of a `host[:port]`
//! entry (a grant's), in `nettools::web::url`, re-exported here.

pub use nettools::web::url::*;
