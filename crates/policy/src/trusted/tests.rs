use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use super::*;

/// A home folder in a temporary folder, resolved.
fn home() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap().join("home");
    fs::create_dir_all(&home).unwrap();
    (dir, home)
}

fn place(places: &TrustedPlaces, path: &Path) -> Option<PathBuf> {
    places
        .place_of(Some(path), &resolve(path).unwrap())
        .map(|r| r.place)
}

#[test]
fn every_row_of_the_table_is_a_relative_path_with_what_reads_it() {
    for row in PLACES {
        assert!(
            !row.path.is_empty() && !row.path.starts_with('/'),
            "{row:?}"
        );
        assert!(
            !row.path.split('/').any(|c| c.is_empty() || c == ".."),
            "{row:?}"
        );
        assert!(!row.read_by.is_empty(), "{row:?}");
    }
    let named: Vec<&str> = PLACES.iter().map(|r| r.path).collect();
    for floor in [
        ".git",
        ".gitconfig",
        "git",
        ".bashrc",
        ".bash_profile",
        ".profile",
        ".zshrc",
        ".zshenv",
        "fish",
        ".ssh",
        ".envrc",
        ".codex",
        ".claude.json",
        ".claude",
        "goose",
        "opencode",
        ".cursor",
        ".gemini",
        ".mcp.json",
        ".vscode/settings.json",
        ".vscode/tasks.json",
        ".idea",
        ".local/bin",
        ".cargo/config.toml",
        ".local/lib/python3*/site-packages",
        "systemd/user",
        "autostart",
        ".pre-commit-config.yaml",
    ] {
        assert!(named.contains(&floor), "{floor} is missing from the table");
    }
}

#[test]
fn a_write_anywhere_in_an_owners_place_or_a_workspace_place_reaches_that_place() {
    let (_dir, home) = home();
    let xdg = home.join("xdg");
    let places = TrustedPlaces::new(&home, Some(&xdg));
    let cases = [
        (home.join(".gitconfig"), home.join(".gitconfig")),
        (home.join(".config/git/config"), home.join(".config/git")),
        (xdg.join("git/ignore"), xdg.join("git")),
        (home.join(".bashrc"), home.join(".bashrc")),
        (home.join(".ssh/authorized_keys"), home.join(".ssh")),
        (home.join(".local/bin/ls"), home.join(".local/bin")),
        (
            home.join(".local/lib/python3.12/site-packages/evil.pth"),
            home.join(".local/lib/python3.12/site-packages"),
        ),
        (
            home.join(".config/systemd/user/x.service"),
            home.join(".config/systemd/user"),
        ),
        (home.join(".claude/settings.json"), home.join(".claude")),
        (home.join(".claude.json"), home.join(".claude.json")),
        (
            home.join("src/app/.claude/settings.json"),
            home.join("src/app/.claude"),
        ),
        (
            home.join("src/app/.vscode/tasks.json"),
            home.join("src/app/.vscode/tasks.json"),
        ),
        (home.join("src/app/.envrc"), home.join("src/app/.envrc")),
        (
            home.join("src/app/.git/info/attributes"),
            home.join("src/app/.git"),
        ),
        (
            home.join("src/app/.cargo/config.toml"),
            home.join("src/app/.cargo/config.toml"),
        ),
    ];
    for (path, expected) in cases {
        assert_eq!(place(&places, &path), Some(expected), "{}", path.display());
    }
    for ordinary in [
        home.join("src/app/main.rs"),
        home.join(".bashrc.d-notes"),
        home.join("src/app/.vscode/notes.md"),
        home.join(".config/gitk"),
        home.join(".local/share/x"),
    ] {
        assert_eq!(place(&places, &ordinary), None, "{}", ordinary.display());
    }
    // Without a home, the workspace rows still hold.
    let none = TrustedPlaces::default();
    assert_eq!(place(&none, &home.join(".bashrc")), None);
    assert_eq!(
        place(&none, &home.join("w/.mcp.json")),
        Some(home.join("w/.mcp.json"))
    );
}

#[test]
fn a_place_that_is_a_link_is_reached_as_spelled_and_through_its_target() {
    let (_dir, home) = home();
    let dotfiles = home.join("dotfiles");
    fs::create_dir_all(dotfiles.join("config/git")).unwrap();
    fs::write(dotfiles.join("gitconfig"), "[user]\n").unwrap();
    symlink(dotfiles.join("gitconfig"), home.join(".gitconfig")).unwrap();
    // A link on the way: `~/.config` itself.
    symlink(dotfiles.join("config"), home.join(".config")).unwrap();
    fs::create_dir_all(home.join("w")).unwrap();
    symlink(dotfiles.join("vscode"), home.join("w/.vscode")).unwrap();
    fs::create_dir_all(dotfiles.join("vscode")).unwrap();
    let places = TrustedPlaces::new(&home, None);
    // As spelled: the place is what a grant must name, resolved.
    assert_eq!(
        place(&places, &home.join(".gitconfig")),
        Some(dotfiles.join("gitconfig"))
    );
    assert_eq!(
        place(&places, &home.join(".config/git/config")),
        Some(dotfiles.join("config/git"))
    );
    assert_eq!(
        place(&places, &home.join("w/.vscode/settings.json")),
        Some(dotfiles.join("vscode/settings.json"))
    );
    // Through the target, spelled without the place.
    assert_eq!(
        place(&places, &dotfiles.join("gitconfig")),
        Some(dotfiles.join("gitconfig"))
    );
    assert_eq!(
        place(&places, &dotfiles.join("config/git/config")),
        Some(dotfiles.join("config/git"))
    );
    assert_eq!(place(&places, &dotfiles.join("notes")), None);
}

fn repository(dir: &Path) {
    for name in ["objects", "refs"] {
        fs::create_dir_all(dir.join(".git").join(name)).unwrap();
    }
    fs::write(dir.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    fs::write(dir.join(".git/config"), "[core]\n").unwrap();
}

#[test]
fn a_box_keeps_the_places_under_its_folders_unless_a_folder_names_one() {
    let (_dir, home) = home();
    let app = home.join("src/app");
    repository(&app);
    fs::create_dir_all(app.join(".claude")).unwrap();
    fs::create_dir_all(app.join(".vscode")).unwrap();
    fs::write(app.join(".vscode/tasks.json"), "{}").unwrap();
    let partial = home.join("src/partial");
    fs::create_dir_all(partial.join(".git")).unwrap();
    fs::write(partial.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
    let worktree = home.join("src/tree");
    fs::create_dir_all(&worktree).unwrap();
    fs::write(worktree.join(".git"), "gitdir: /elsewhere\n").unwrap();
    fs::write(home.join(".gitconfig"), "[user]\n").unwrap();
    fs::write(home.join(".bashrc"), "").unwrap();
    fs::create_dir_all(home.join(".ssh")).unwrap();
    let places = TrustedPlaces::new(&home, None);

    let pins = places.box_pins(&[app.clone(), worktree.clone(), partial.clone()]);
    assert_eq!(
        pins.kept,
        vec![
            app.join(".claude"),
            app.join(".git/config"),
            app.join(".git/hooks"),
            app.join(".vscode/tasks.json"),
            worktree.join(".git"),
        ],
        "the owner's places lie in no read-write folder"
    );
    assert_eq!(pins.hooks, vec![app.join(".git/hooks")]);
    for missing in [
        app.join(".envrc"),
        app.join(".mcp.json"),
        app.join(".vscode/settings.json"),
        app.join(".git/info/attributes"),
        partial.join(".claude"),
    ] {
        assert!(pins.missing.contains(&missing), "{}", missing.display());
    }
    assert!(!pins.missing.contains(&partial.join(".git")));

    let pins = places.box_pins(std::slice::from_ref(&home));
    assert_eq!(
        pins.kept,
        vec![
            home.join(".bashrc"),
            home.join(".gitconfig"),
            home.join(".ssh"),
            app.join(".claude"),
            app.join(".git/config"),
            app.join(".git/hooks"),
            app.join(".vscode/tasks.json"),
            worktree.join(".git"),
        ],
        "the home's own places, and the repositories two levels below it"
    );
    assert!(pins.missing.contains(&home.join(".profile")));
    assert!(pins.missing.contains(&home.join(".config/git")));

    let pins = places.box_pins(&[app.clone(), app.join(".git"), app.join(".claude")]);
    assert_eq!(
        pins.kept,
        vec![app.join(".vscode/tasks.json")],
        "a grant naming .git or .claude may write there"
    );
    let pins = places.box_pins(&[home.clone(), home.join(".gitconfig")]);
    assert!(!pins.kept.contains(&home.join(".gitconfig")));
}

#[test]
fn a_box_keeps_a_place_that_is_a_link_as_spelled_and_its_target_inside_its_folders() {
    let (_dir, home) = home();
    let dotfiles = home.join("dotfiles");
    fs::create_dir_all(&dotfiles).unwrap();
    fs::write(dotfiles.join("gitconfig"), "[user]\n").unwrap();
    symlink(dotfiles.join("gitconfig"), home.join(".gitconfig")).unwrap();
    symlink("/nonexistent/bashrc", home.join(".bashrc")).unwrap();
    let places = TrustedPlaces::new(&home, None);
    // The grant holds the link and its target: both kept.
    let pins = places.box_pins(std::slice::from_ref(&home));
    assert!(pins.kept.contains(&home.join(".gitconfig")), "{pins:?}");
    assert!(pins.kept.contains(&dotfiles.join("gitconfig")), "{pins:?}");
    // A dangling link is a place too (never dropped).
    assert!(pins.kept.contains(&home.join(".bashrc")), "{pins:?}");
    // The grant holds the target alone: the target is kept.
    let pins = places.box_pins(std::slice::from_ref(&dotfiles));
    assert_eq!(pins.kept, vec![dotfiles.join("gitconfig")]);
    // A link named itself by the grant: neither.
    let pins = places.box_pins(&[home.clone(), dotfiles.join("gitconfig")]);
    assert!(!pins.kept.contains(&home.join(".gitconfig")), "{pins:?}");
    assert!(!pins.kept.contains(&dotfiles.join("gitconfig")), "{pins:?}");
}

#[test]
fn the_top_of_the_repository_holding_a_folder_is_kept_when_a_folder_holds_it() {
    let (_dir, home) = home();
    let app = home.join("app");
    repository(&app);
    fs::create_dir_all(app.join("src")).unwrap();
    fs::write(app.join(".envrc"), "").unwrap();
    let places = TrustedPlaces::new(&home, None);
    // Only `src` read-write: the repository's top is outside it, read-only already.
    assert_eq!(
        places.box_pins(&[app.join("src")]).kept,
        Vec::<PathBuf>::new()
    );
    // The repository's top read-write through another folder.
    let pins = places.box_pins(&[app.join("src"), home.clone()]);
    assert!(pins.kept.contains(&app.join(".envrc")), "{pins:?}");
    assert!(pins.kept.contains(&app.join(".git/config")), "{pins:?}");
}
