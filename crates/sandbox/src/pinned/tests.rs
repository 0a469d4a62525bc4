use std::fs;
use std::os::unix::fs::symlink;
use std::path::PathBuf;

use super::{PinError, Pinned};

fn base() -> (tempfile::TempDir, PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let base = root.path().canonicalize().unwrap();
    (root, base)
}

#[test]
fn the_folders_between_the_innermost_writable_path_and_each_file_come_outermost_first_once() {
    let (_root, base) = base();
    let bin = base.join("proj/target/release");
    fs::create_dir_all(&bin).unwrap();
    for name in ["brokerd", "brokerd-launcher"] {
        fs::write(bin.join(name), "x").unwrap();
    }
    fs::write(base.join("loose"), "x").unwrap();
    let pinned = [
        bin.join("brokerd"),
        bin.join("brokerd-launcher"),
        base.join("loose"),
        base.join("missing"),
    ];
    let writable = [base.clone(), base.join("proj")];
    assert_eq!(
        Pinned::under(&pinned, &writable).unwrap(),
        Pinned {
            folders: vec![base.join("proj/target"), bin.clone()],
            files: vec![
                base.join("loose"),
                bin.join("brokerd"),
                bin.join("brokerd-launcher"),
            ],
        }
    );
    // Outside every read-write path: nothing to do (a read-only bind keeps it already).
    let elsewhere: [PathBuf; 1] = [base.join("proj/src")];
    assert_eq!(
        Pinned::under(&pinned, &elsewhere).unwrap(),
        Pinned::default()
    );
}

#[test]
fn a_plain_file_or_folder_is_kept_as_spelled_and_a_place_inside_a_kept_folder_with_it() {
    let (_root, base) = base();
    let home = base.join("home");
    fs::create_dir_all(home.join(".ssh")).unwrap();
    fs::write(home.join(".ssh/authorized_keys"), "").unwrap();
    fs::write(home.join(".gitconfig"), "").unwrap();
    let pinned = [
        home.join(".gitconfig"),
        home.join(".ssh"),
        home.join(".ssh/authorized_keys"),
    ];
    assert_eq!(
        Pinned::under(&pinned, std::slice::from_ref(&home)).unwrap(),
        Pinned {
            folders: vec![],
            files: vec![home.join(".gitconfig"), home.join(".ssh")],
        }
    );
}

#[test]
fn a_place_that_is_a_link_in_a_writable_folder_refuses_the_box_wherever_its_target_is() {
    let (_root, base) = base();
    let home = base.join("home");
    let outside = base.join("outside");
    fs::create_dir_all(home.join("dotfiles")).unwrap();
    fs::create_dir_all(&outside).unwrap();
    fs::write(home.join("dotfiles/gitconfig"), "").unwrap();
    fs::write(outside.join("gitconfig"), "").unwrap();
    for target in [
        home.join("dotfiles/gitconfig"),
        outside.join("gitconfig"),
        base.join("nowhere"),
    ] {
        let _ = fs::remove_file(home.join(".gitconfig"));
        symlink(&target, home.join(".gitconfig")).unwrap();
        let refused = Pinned::under(&[home.join(".gitconfig")], std::slice::from_ref(&home));
        assert_eq!(
            refused,
            Err(PinError::Link {
                place: home.join(".gitconfig"),
                link: home.join(".gitconfig"),
                root: home.clone(),
            }),
            "target {}",
            target.display()
        );
        let sentence = refused.unwrap_err().to_string();
        assert!(sentence.contains("grant folders below"), "{sentence}");
    }
}

#[test]
fn a_link_on_the_way_to_a_place_refuses_the_box() {
    let (_root, base) = base();
    let home = base.join("home");
    fs::create_dir_all(home.join("dotfiles/config/git")).unwrap();
    symlink(home.join("dotfiles/config"), home.join(".config")).unwrap();
    let app = base.join("app");
    fs::create_dir_all(app.join(".git")).unwrap();
    fs::create_dir_all(app.join("githooks")).unwrap();
    symlink("../githooks", app.join(".git/hooks")).unwrap();
    assert_eq!(
        Pinned::under(&[home.join(".config/git")], std::slice::from_ref(&home)),
        Err(PinError::Link {
            place: home.join(".config/git"),
            link: home.join(".config"),
            root: home.clone(),
        })
    );
    assert_eq!(
        Pinned::under(&[app.join(".git/hooks")], std::slice::from_ref(&app)),
        Err(PinError::Link {
            place: app.join(".git/hooks"),
            link: app.join(".git/hooks"),
            root: app.clone(),
        })
    );
    // Not below a writable path: read-only already, nothing to refuse.
    assert_eq!(
        Pinned::under(&[app.join(".git/hooks")], &[app.join("src")]),
        Ok(Pinned::default())
    );
}

#[test]
fn what_a_link_inside_a_kept_folder_names_is_kept_where_a_writable_path_holds_it() {
    let (_root, base) = base();
    let app = base.join("app");
    fs::create_dir_all(app.join(".git/hooks")).unwrap();
    fs::create_dir_all(app.join("scripts")).unwrap();
    fs::write(app.join("scripts/pre-commit"), "").unwrap();
    symlink(
        "../../scripts/pre-commit",
        app.join(".git/hooks/pre-commit"),
    )
    .unwrap();
    symlink("/etc/hostname", app.join(".git/hooks/post-commit")).unwrap();
    assert_eq!(
        Pinned::under(&[app.join(".git/hooks")], std::slice::from_ref(&app)).unwrap(),
        Pinned {
            folders: vec![app.join(".git"), app.join("scripts")],
            files: vec![app.join(".git/hooks"), app.join("scripts/pre-commit")],
        }
    );
}
