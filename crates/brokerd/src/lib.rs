//! brokerd, boxmaker's broker, as a library: it parses every tool call ([`args`]), reads the
//! owner's grants ([`grants`]), decides each call ([`policy`]), runs decided file calls on
//! the granted folder's descriptor ([`files`]), and runs `consult` ([`consult`]). The daemon around it (sessions, ledger, audit log, socket, sandbox) is the
//! next step.

pub mod args;
pub mod consult;
pub mod daemon;
pub mod files;
pub mod grants;
pub mod policy;

/// The version `--version` prints, which `bx demo` compares between the binaries it runs.
pub const BUILD_VERSION: &str = env!("CARGO_PKG_VERSION");
