//! The build script of `fetcher`: its build id (the workspace's, as brokerd's, which brokerd
//! compares before it runs `brokerd-fetch` beside it).

mod build_id;

fn main() {
    build_id::main();
}
