//! `policy::paths::resolve` walks a path as the kernel does: on existing paths it gives what
//! `realpath` gives, through relative and absolute links, chains of links, links to links with
//! `..`, and `..` after a link (taken from the link's target, not from the text); the parts that
//! do not exist yet are appended as written.

use std::os::unix::fs::symlink;
use std::path::Path;

use policy::paths::{ResolveError, resolve};

fn tree() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("real/inner/deep")).unwrap();
    std::fs::write(root.join("real/inner/file.txt"), "x").unwrap();
    symlink("real/inner", root.join("rel")).unwrap();
    symlink(root.join("real"), root.join("abs")).unwrap();
    symlink("rel", root.join("chain")).unwrap();
    symlink("../real/inner/deep", root.join("real/up")).unwrap();
    symlink("nowhere", root.join("dangling")).unwrap();
    (dir, root)
}

#[test]
fn resolve_agrees_with_realpath_on_every_existing_path() {
    let (_keep, root) = tree();
    for path in [
        "real/inner/file.txt",
        "rel/file.txt",
        "abs/inner/deep",
        "chain/deep",
        "chain/../inner/file.txt",
        "real/up",
        "real/up/../file.txt",
        "rel/deep/../../inner/./file.txt",
        "abs/../chain/file.txt",
    ] {
        let path = root.join(path);
        assert_eq!(
            resolve(&path).unwrap(),
            std::fs::canonicalize(&path).unwrap(),
            "{}",
            path.display()
        );
    }
}

#[test]
fn parts_that_do_not_exist_are_appended_and_what_cannot_be_decided_is_an_error() {
    let (_keep, root) = tree();
    assert_eq!(
        resolve(&root.join("chain/new/file.txt")).unwrap(),
        root.join("real/inner/new/file.txt")
    );
    assert!(matches!(
        resolve(&root.join("new/../x")),
        Err(ResolveError::DotDotAfterMissing(_))
    ));
    assert!(matches!(
        resolve(&root.join("dangling/x")),
        Err(ResolveError::DanglingLink(_))
    ));
    assert!(matches!(
        resolve(Path::new("relative/path")),
        Err(ResolveError::NotAbsolute(_))
    ));
}
