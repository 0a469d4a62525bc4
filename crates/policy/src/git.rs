//! Writes that change what `git` runs: a repository's `.git` folder (hooks, `config`,
//! `config.worktree`), a folder that looks like a bare repository, and the owner's global git
//! configuration. `git` runs programs named in those files (`core.fsmonitor`, filters,
//! `diff.external`, aliases), so a write there needs a grant whose `paths` name the place
//! itself; a broad folder or a `**` glob is not enough.

use std::path::{Path, PathBuf};

/// The names a git directory holds at its top; a folder holding two of them (counting the file
/// being written) is treated as a git directory.
const GIT_DIR_MARKERS: &[&str] = &["HEAD", "config", "objects", "refs"];

/// The git-controlled place that a write to `resolved` changes, if any: the `.git` component on
/// its way, the global git configuration file or folder that holds it, or the folder above it
/// that looks like a bare repository. `global` lists the owner's global configuration files
/// and folders (`~/.gitconfig`, `$XDG_CONFIG_HOME/git`).
pub fn git_root(resolved: &Path, global: &[PathBuf]) -> Option<PathBuf> {
    let mut walked = PathBuf::new();
    for component in resolved.components() {
        walked.push(component);
        if component
            .as_os_str()
            .to_str()
            .is_some_and(|name| name.eq_ignore_ascii_case(".git"))
        {
            return Some(walked);
        }
    }
    if let Some(config) = global.iter().find(|g| resolved.starts_with(g)) {
        return Some(config.clone());
    }
    resolved
        .ancestors()
        .skip(1)
        .find(|dir| looks_like_git_dir(dir, resolved))
        .map(Path::to_path_buf)
}

/// The `.git` folder of the repository that holds `dir` (the nearest `.git` above it), or
/// `dir/.git` when there is none: where `git config` without a scope writes.
pub fn repository_git_dir(dir: &Path) -> PathBuf {
    dir.ancestors()
        .map(|d| d.join(".git"))
        .find(|candidate| candidate.symlink_metadata().is_ok())
        .unwrap_or_else(|| dir.join(".git"))
}

/// The owner's global git configuration places for `home`: `~/.gitconfig`,
/// `~/.config/git` and, when set, `$XDG_CONFIG_HOME/git`.
pub fn global_configs(home: &Path, xdg_config_home: Option<&Path>) -> Vec<PathBuf> {
    let mut places = vec![home.join(".gitconfig"), home.join(".config/git")];
    if let Some(xdg) = xdg_config_home.filter(|x| x.is_absolute()) {
        places.push(xdg.join("git"));
    }
    places
}

/// What a box whose read-write folders are `read_write` must keep unchanged so that nothing in
/// it changes what `git` runs: any program a grant lets run there could write these, which
/// no decision sees. The owner's global configuration places (`global`) a read-write folder
/// holds, and for each read-write folder's own repository its `.git` file (a worktree's or a
/// submodule's pointer to its git directory), or its `.git` folder's `config`,
/// `config.worktree` and `hooks`. Not a repository whose `.git` a read-write folder names
/// itself, nor a global place one names: that grant may write there (see [`git_root`]).
///
/// Lists what exists, and `hooks` whether it exists or not (the caller makes it, as `git init`
/// does, so that the box cannot). Objects, refs, the index and `HEAD` stay writable: `git
/// commit` in the box works as before. A `.git` folder without `HEAD`, `objects` and `refs`
/// is not a repository to git, and is left as a folder without one is (see the caller's
/// notes: what a box makes into a repository, it can also give hooks).
pub fn box_pins(read_write: &[PathBuf], global: &[PathBuf]) -> Vec<PathBuf> {
    let named = |place: &Path| read_write.iter().any(|rw| rw.starts_with(place));
    let mut pins: Vec<PathBuf> = global
        .iter()
        .filter(|place| read_write.iter().any(|rw| place.starts_with(rw)) && !named(place))
        .filter(|place| place.symlink_metadata().is_ok())
        .cloned()
        .collect();
    for folder in read_write {
        let dot_git = folder.join(".git");
        let Ok(meta) = dot_git.symlink_metadata() else {
            continue;
        };
        if named(&dot_git) {
            continue;
        }
        if !meta.is_dir() {
            pins.push(dot_git);
            continue;
        }
        // A `.git` folder git would not take for a repository is none yet (as no `.git`).
        if !["HEAD", "objects", "refs"]
            .iter()
            .all(|name| dot_git.join(name).symlink_metadata().is_ok())
        {
            continue;
        }
        for name in ["config", "config.worktree"] {
            let file = dot_git.join(name);
            if file.symlink_metadata().is_ok() {
                pins.push(file);
            }
        }
        pins.push(dot_git.join("hooks"));
    }
    pins.sort();
    pins.dedup();
    pins
}

fn looks_like_git_dir(dir: &Path, target: &Path) -> bool {
    let writes_here = target.parent() == Some(dir);
    let present = GIT_DIR_MARKERS
        .iter()
        .filter(|name| {
            dir.join(name).symlink_metadata().is_ok()
                || (writes_here && target.file_name().is_some_and(|n| n == **name))
        })
        .count();
    present >= 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dot_git_component_anywhere_is_the_root() {
        let root = git_root(Path::new("/w/app/.git/hooks/pre-commit"), &[]);
        assert_eq!(root, Some(PathBuf::from("/w/app/.git")));
        let root = git_root(Path::new("/w/app/.GIT/config"), &[]);
        assert_eq!(root, Some(PathBuf::from("/w/app/.GIT")));
        assert_eq!(
            git_root(Path::new("/w/app/.git"), &[]),
            Some(PathBuf::from("/w/app/.git"))
        );
        assert_eq!(git_root(Path::new("/w/app/src/main.rs"), &[]), None);
        assert_eq!(git_root(Path::new("/w/app/.gitignore"), &[]), None);
    }

    #[test]
    fn a_global_config_is_its_own_root() {
        let global = global_configs(Path::new("/home/o"), None);
        assert_eq!(
            git_root(Path::new("/home/o/.gitconfig"), &global),
            Some(PathBuf::from("/home/o/.gitconfig"))
        );
        assert_eq!(
            git_root(Path::new("/home/o/.config/git/config"), &global),
            Some(PathBuf::from("/home/o/.config/git"))
        );
    }

    #[test]
    fn a_box_keeps_what_changes_what_git_runs_unless_a_folder_names_it() {
        let dir = tempfile::tempdir().unwrap();
        let home = dir.path().to_path_buf();
        let app = home.join("src/app");
        for name in ["objects", "refs"] {
            std::fs::create_dir_all(app.join(".git").join(name)).unwrap();
        }
        std::fs::write(app.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(app.join(".git/config"), "[core]\n").unwrap();
        let partial = home.join("src/partial");
        std::fs::create_dir_all(partial.join(".git")).unwrap();
        std::fs::write(partial.join(".git/HEAD"), "ref: refs/heads/main\n").unwrap();
        let worktree = home.join("src/tree");
        std::fs::create_dir_all(&worktree).unwrap();
        std::fs::write(worktree.join(".git"), "gitdir: /elsewhere\n").unwrap();
        std::fs::write(home.join(".gitconfig"), "[user]\n").unwrap();
        let global = global_configs(&home, None);
        assert_eq!(
            box_pins(&[app.clone(), worktree.clone(), partial], &global),
            vec![
                app.join(".git/config"),
                app.join(".git/hooks"),
                worktree.join(".git")
            ],
            "the global configuration lies in no read-write folder"
        );
        assert_eq!(
            box_pins(std::slice::from_ref(&home), &global),
            vec![home.join(".gitconfig")],
            "a folder's own repository only"
        );
        assert_eq!(
            box_pins(&[home.clone(), app.clone()], &global),
            vec![
                home.join(".gitconfig"),
                app.join(".git/config"),
                app.join(".git/hooks")
            ]
        );
        assert_eq!(
            box_pins(&[app.clone(), app.join(".git")], &global),
            Vec::<PathBuf>::new(),
            "a grant naming .git may write there"
        );
        assert_eq!(
            box_pins(&[home.clone(), home.join(".gitconfig")], &global),
            Vec::<PathBuf>::new()
        );
    }

    #[test]
    fn a_folder_that_looks_like_a_bare_repository_is_a_root() {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("planted");
        std::fs::create_dir_all(bare.join("objects")).unwrap();
        assert_eq!(git_root(&bare.join("notes.txt"), &[]), None);
        assert_eq!(git_root(&bare.join("config"), &[]), Some(bare.clone()));
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(git_root(&bare.join("notes.txt"), &[]), Some(bare.clone()));
        assert_eq!(
            git_root(&bare.join("hooks/post-update"), &[]),
            Some(bare.clone())
        );
    }
}
