//! The build script of `brokerd`: its build id (as `bx` and `loopd`), and `brokerd-launcher`
//! linked statically where it can be.

mod build_id;
mod static_launcher;

fn main() {
    build_id::main();
    static_launcher::link_statically("brokerd-launcher");
}
