//! boxmaker's sandbox: runs a command (later, a worker) in a Linux box built from a policy.
//!
//! What exists so far is the part every command needs whatever the policy:
//! - [`make_non_dumpable`]: a process holding a secret calls it at start, so that no process
//!   of the same user without `CAP_SYS_PTRACE` reads its memory or `/proc/PID/environ`;
//! - [`Hardening`]: every capability dropped (bounding, ambient, permitted, effective,
//!   inheritable) and `no_new_privs` set, applied between `fork` and `exec`;
//! - [`spawn_contained`]: one command as the only child of a minimal init that is PID 1 of new
//!   PID and mount namespaces (its own `/proc`; inside a new user namespace for an owner who is
//!   not root), so that ending that init ends every descendant, `setsid` and double forks
//!   included; where the kernel refuses namespaces, a child subreaper that kills every
//!   descendant it adopts. [`ContainedChild::finish`] collects the output and gives up at the
//!   deadline even when something still holds the pipes.
//!
//! - [`spawn_boxed`]: one command in a box built from a [`Policy`] (see `boxed`): bubblewrap
//!   with every namespace its own (no network, no nested user namespace), a minimal read-only
//!   system, only the policy's paths bound, protected folders masked, a size-limited private
//!   `/tmp`, its own `/proc`, `--cap-drop ALL`, a clean environment, the root read-only; around
//!   it rlimits, `no_new_privs`, every inherited descriptor closed, and a cgroup for processes
//!   and memory, killed whole when the command ends or at its deadline (or when it writes more
//!   than its output limit); inside it, through the policy's launcher ([`launch_if_asked`]),
//!   Landlock over the same paths, with TCP refused and abstract sockets and signals scoped.
//!   [`FileWalls::LandlockOnly`] is the box where bubblewrap or user namespaces are missing:
//!   Landlock, a wider seccomp filter, rlimits, no capability and the cgroup alone. A policy's
//!   [`Network`] gives a bubblewrap box its one way out (see `net`): a relay on `127.0.0.1:P`
//!   to the caller's proxy socket, the one port Landlock lets the command connect to.
//!
//! - [`spawn_warm`]: the same box with its command kept up as a worker that answers one line
//!   for each request line ([`WarmBox::exchange`]), so the box is built once for many requests.
//! - [`spawn_served`]: the same box with its command kept up and its three pipes handed to the
//!   caller, who speaks the command's own protocol (a downstream MCP server's JSON-RPC).
//! - [`spawn_command_worker`]: the same box with a worker that forks each command it is sent
//!   ([`WarmBox::run_command`]), each kept from the worker and ended whole before the next.
//!
//! When not to use it: [`spawn_contained`] is containment of processes, not confinement of
//! what they touch: a contained command sees the whole file system and network of the broker.
//! [`spawn_boxed`] needs bubblewrap and root or user namespaces (or, without them, a launcher
//! and Landlock), and its cgroup needs root or a cgroup delegated to its owner ([`box_cgroup`];
//! without one a bubblewrap box is still built, see [`WITHOUT_CGROUP`]). [`probe_machine`] says what
//! this machine offers (`bx doctor`). Do not use either for a process that must keep
//! capabilities or gain privileges through `exec` (setuid programs).
//!
//! - [`unseen_link`]: why a program may not start in a box: a link on its way (a venv's
//!   `bin/python`) whose target is outside every folder the box sees, to name in the error.
//!
//! - [`secret`]: files holding a secret (a bearer token, a resume token), refused when other
//!   users may read or write them and created 0600 without a moment at a wider mode; here
//!   because every program that reads one (brokerd, `bx`, `bx mcp`) already links this crate,
//!   and `proto` does no I/O.
//!
//! This crate knows no tool names: callers hand it a program, arguments, an environment and a
//! folder.

// A library says what it has to say through its callers (a returned text, an error) or
// `tracing`; only binaries, tests, benches and examples write to standard output or error.
#![deny(clippy::print_stdout, clippy::print_stderr)]
#![deny(unsafe_code)]
#![warn(missing_docs)]

mod boxed;
mod cgroup;
mod child;
mod commands;
mod contain;
mod harden;
mod landlocked;
mod launcher;
mod limits;
mod links;
mod machine;
mod mounts;
mod net;
mod parts;
mod pinned;
mod pipes;
mod policy;
mod probe;
mod reap;
mod record;
mod rules;
mod seccomp;
pub mod secret;
mod served;
mod spawn;
mod spec;
mod stop;
mod warm;
mod wire;

pub use boxed::{bwrap_args, bwrap_command, spawn_boxed};
pub use cgroup::{WITHOUT_CGROUP, box_cgroup};
pub use commands::{command_worker_missing, spawn_command_worker};
pub use contain::{ContainOptions, ContainedChild, Containment, spawn_contained};
pub use harden::{Hardening, make_non_dumpable};
pub use launcher::{build_id_if_asked, launch_if_asked, launcher_main, launcher_main_serving};
pub use limits::Limits;
pub use links::{UnseenLink, unseen_link};
pub use machine::find_bwrap;
pub use net::{DEFAULT_PORT, Network, PROXY_IN_BOX};
pub use pinned::{PinError, pinned_mounts};
pub use policy::{BoxError, FileWalls, MAX_FILES, NETWORK_NEEDS_BUBBLEWRAP, Policy};
pub use probe::{Probe, probe_machine, probe_machine_with, toolchains};
pub use rules::{Enforcement, LAUNCH, LAUNCH_FAILED, landlock_enforcement};
pub use served::{ServedBox, spawn_served};
pub use spec::{CommandSpec, Ended, Exit};
pub use stop::Stopper;
pub use warm::{Sent, WORKER_GRACE, WarmBox, WarmError, spawn_warm};
