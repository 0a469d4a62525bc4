//! The launcher every box starts is linked statically where the C library's static archives
//! are installed (`build/static_launcher.rs`), and the build says truly which way it went.

use std::path::Path;

use crate::escape::launcher;

#[test]
fn the_launcher_is_static_where_the_c_library_archives_are() {
    let launcher = launcher();
    assert_eq!(
        testkit::linked_statically_where_it_can_be(&launcher),
        env!("BOXMAKER_LAUNCHER_LINK") == "static",
        "{} and the build's word disagree",
        launcher.display()
    );
}

#[test]
fn a_dynamic_binary_and_a_file_that_is_not_elf_are_told_apart() {
    assert_eq!(
        testkit::linked_statically(Path::new("/bin/true")),
        Ok(false)
    );
    let error = testkit::linked_statically(Path::new("/etc/hostname")).unwrap_err();
    assert!(
        error.contains("not a 64-bit little-endian ELF file"),
        "{error}"
    );
}
