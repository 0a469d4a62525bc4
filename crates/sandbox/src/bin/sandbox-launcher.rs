//! `sandbox-launcher`: a box's launcher on its own, for callers whose binary cannot start with
//! `sandbox::launch_if_asked` (the sandbox crate's own tests name it in `Policy::launcher`).
//! Run by a box only: its first argument is `--boxmaker-box-launch`.

fn main() -> std::process::ExitCode {
    if sandbox::launch_if_asked().is_some() {
        eprintln!("sandbox-launcher: a box asked it to run itself, which it does not do");
        return std::process::ExitCode::from(2);
    }
    eprintln!(
        "sandbox-launcher: run by a box only (its first argument is {})",
        sandbox::LAUNCH
    );
    std::process::ExitCode::from(2)
}
