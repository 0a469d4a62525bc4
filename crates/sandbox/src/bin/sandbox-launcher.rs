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

/// The process's entry, called by the C library with the arguments, which std reads itself.
// SAFETY: the binary's only `main` symbol, with the C signature the C library calls.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[unsafe(no_mangle)]
extern "C" fn main(
    _argc: std::ffi::c_int,
    _argv: *const *const std::ffi::c_char,
) -> std::ffi::c_int {
    sandbox::launcher_main()
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(u8::try_from(sandbox::launcher_main()).unwrap_or(1))
}
