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
//! When not to use it: this is containment of processes, not confinement of what they touch.
//! A contained command still sees the whole file system and network of the broker, with the
//! broker's user id (without capabilities); the box with granted paths, network and limits
//! (bubblewrap, Landlock, seccomp, cgroup) is still to come here. Do not use it for a process
//! that must keep capabilities or gain privileges through `exec` (setuid programs).
//!
//! This crate knows no tool names: callers hand it a program, arguments, an environment and a
//! folder.

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod child;
mod contain;
mod harden;
mod mounts;
mod reap;
mod record;

pub use contain::{
    CommandSpec, ContainOptions, ContainedChild, Containment, Ended, Exit, spawn_contained,
};
pub use harden::{Hardening, make_non_dumpable};
