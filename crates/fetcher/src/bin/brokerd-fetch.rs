//! `brokerd-fetch`: `http_fetch`'s worker in a box, built and installed beside brokerd, which
//! runs it as `brokerd-fetch box-fetch [--warm]` where brokerd itself would run `brokerd
//! box-fetch`: started by the box's launcher (a box with a network keeps the small launcher,
//! which also runs its relay), or as its own launcher, as brokerd can be. It holds the fetch and
//! the page's conversion, not the daemon.
//! `--build-id` prints the build it belongs to: brokerd uses it only when that is its own.

use std::ffi::OsString;
use std::process::ExitCode;

/// The page's conversion makes many small allocations, as in brokerd.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let args: Vec<OsString> = std::env::args_os().collect();
    let code = sandbox::build_id_if_asked(env!("BOXMAKER_BUILD_ID"))
        .or_else(|| serve(&args))
        .unwrap_or_else(|| sandbox::launcher_main_serving(serve));
    ExitCode::from(u8::try_from(code).unwrap_or(1))
}

/// The fetcher asked for (`box-fetch`, `box-fetch --warm`, after the program's name), or `None`
/// for anything else.
fn serve(command: &[OsString]) -> Option<i32> {
    let warm = match command.get(1..)? {
        [mode] if mode == "box-fetch" => false,
        [mode, flag] if mode == "box-fetch" && flag == "--warm" => true,
        _ => return None,
    };
    let ended = if warm {
        fetcher::serve_warm()
    } else {
        fetcher::serve()
    };
    Some(match ended {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("brokerd-fetch box-fetch: {e}");
            1
        }
    })
}
