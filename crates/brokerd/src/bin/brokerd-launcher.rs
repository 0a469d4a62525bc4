//! `brokerd-launcher`: the launcher of the boxes whose command is another program than brokerd
//! (`shell`, `bash_bg`, git, MCP servers, a box's relay), built and installed with brokerd. A
//! box pays for starting its launcher, and this binary starts in a fraction of brokerd's time.
//! `--build-id` prints the build it belongs to: brokerd uses it only when that is its own.

fn main() -> std::process::ExitCode {
    if std::env::args_os()
        .nth(1)
        .is_some_and(|a| a == "--build-id")
    {
        println!("{}", env!("BOXMAKER_BUILD_ID"));
        return std::process::ExitCode::SUCCESS;
    }
    sandbox::launcher_main()
}
