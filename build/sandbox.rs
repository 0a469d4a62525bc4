//! The build script of `sandbox`: `sandbox-launcher` and the examples (`box_bench`, whose
//! binary is a box's worker, as `brokerd-files` is) linked statically where they can be.

mod static_launcher;

use static_launcher::Linked;

fn main() {
    static_launcher::link_statically(&[Linked::Bin("sandbox-launcher"), Linked::Examples]);
}
