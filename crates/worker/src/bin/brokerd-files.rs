//! `brokerd-files`: the file tools' worker in a box (`read_file`, `write_file`, `edit_file` and
//! the walkers `list_files`, `glob` and `grep`), built and installed beside brokerd, which runs
//! it as `brokerd-files box-file [--warm]` where brokerd itself would run `brokerd box-file`.
//! It is its own box's launcher, as brokerd is: the launcher's Landlock layer, then the worker,
//! in one process. A fresh box pays for starting its worker, and this binary, small (the file
//! tools, no daemon) and linked statically where it can be (`build/static_launcher.rs`), starts
//! in a fraction of brokerd's time; with glibc, without std's runtime start-up (see
//! `sandbox::launcher_main`).
//! `--build-id` prints the build it belongs to: brokerd uses it only when that is its own.
#![cfg_attr(all(target_os = "linux", target_env = "gnu"), no_main)]
// The C `main` symbol is the one thing here that needs it.
#![allow(unsafe_code)]

use std::ffi::OsString;

/// The walkers' many small allocations, as in brokerd.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

sandbox::launcher_entry!(run);

/// `--build-id`, or the launcher going on as the worker.
fn run() -> i32 {
    sandbox::build_id_if_asked(env!("BOXMAKER_BUILD_ID"))
        .unwrap_or_else(|| sandbox::launcher_main_serving(serve))
}

/// The worker a box asked for (`box-file`, `box-file --warm`), or `None` for anything else.
fn serve(command: &[OsString]) -> Option<i32> {
    let warm = match command.get(1..)? {
        [mode] if mode == "box-file" => false,
        [mode, flag] if mode == "box-file" && flag == "--warm" => true,
        _ => return None,
    };
    let ended = if warm {
        worker::serve_warm()
    } else {
        worker::serve()
    };
    Some(match ended {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("brokerd-files box-file: {e}");
            1
        }
    })
}
