//! brokerd, boxmaker's broker, as a library: it parses every tool call, decides it against the
//! owner's grants, and (next issues) runs it in a sandbox and records it.

pub mod policy;
