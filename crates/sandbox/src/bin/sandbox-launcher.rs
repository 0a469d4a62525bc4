//! `sandbox-launcher`: a box's launcher on its own, for callers whose binary cannot start with
//! `sandbox::launch_if_asked` (the sandbox crate's own tests name it in `Policy::launcher`).
//! Run by a box only: its first argument is `--boxmaker-box-launch`.

fn main() -> std::process::ExitCode {
    sandbox::launcher_main()
}
