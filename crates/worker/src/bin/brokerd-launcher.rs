//! `brokerd-launcher`: the launcher of the boxes whose command is another program than brokerd
//! (`shell`, `bash_bg`, git, MCP servers, a box's relay), built and installed beside brokerd. A
//! box pays for starting its launcher, and this binary starts in a fraction of brokerd's time;
//! with glibc, without std's runtime start-up (see `sandbox::launcher_main`; std still reads the
//! arguments, which glibc hands it at load).
//! `--build-id` prints the build it belongs to: brokerd uses it only when that is its own.
#![cfg_attr(all(target_os = "linux", target_env = "gnu"), no_main)]
// The C `main` symbol is the one thing here that needs it.
#![allow(unsafe_code)]

sandbox::launcher_entry!(run);

/// `--build-id`, or the launcher.
fn run() -> i32 {
    sandbox::build_id_if_asked(env!("BOXMAKER_BUILD_ID")).unwrap_or_else(sandbox::launcher_main)
}
