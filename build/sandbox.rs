//! The build script of `sandbox`: `sandbox-launcher` linked statically where it can be.

mod static_launcher;

fn main() {
    static_launcher::link_statically("sandbox-launcher");
}
