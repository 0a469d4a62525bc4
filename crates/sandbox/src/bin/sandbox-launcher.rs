//! `sandbox-launcher`: a box's launcher on its own, for callers whose binary cannot start with
//! `sandbox::launch_if_asked` (the sandbox crate's own tests name it in `Policy::launcher`).
//! Run by a box only: its first argument is `--boxmaker-box-launch`.
//!
//! With glibc it starts without std's runtime start-up, which a box would pay for and the
//! launcher does not need (see `sandbox::launcher_main`); std still reads the arguments, which
//! glibc hands it at load. Elsewhere (musl does not) it has std's `main`.
#![cfg_attr(all(target_os = "linux", target_env = "gnu"), no_main)]
// The C `main` symbol is the one thing here that needs it.
#![allow(unsafe_code)]

sandbox::launcher_entry!(sandbox::launcher_main);
