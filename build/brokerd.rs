//! The build script of `brokerd`: its build id (as `bx`, `loopd` and `worker`, whose
//! `brokerd-files` and `brokerd-launcher` brokerd uses only when their id is its own).

mod build_id;

fn main() {
    build_id::main();
}
