//! The build script of `worker`: its build id (the workspace's, as brokerd's, which brokerd
//! compares), and `brokerd-launcher` and `brokerd-files` linked statically where they can be.

mod build_id;
mod static_launcher;

use static_launcher::Linked;

fn main() {
    build_id::main();
    static_launcher::link_statically(&[
        Linked::Bin("brokerd-launcher"),
        Linked::Bin("brokerd-files"),
    ]);
}
