//! Writes that change what `git` runs: a repository's `.git` folder (hooks, `config`,
//! `config.worktree`, `info/attributes`) and a folder that looks like a bare repository (the
//! owner's global git configuration is in [`crate::trusted`]'s table). `git` runs programs named in those files (`core.fsmonitor`, filters,
//! `diff.external`, aliases), so a write there needs a grant whose `paths` name the place
//! itself; a broad folder or a `**` glob is not enough.

use std::path::{Path, PathBuf};

/// The names a git directory holds at its top; a folder holding two of them (counting the file
/// being written) is treated as a git directory.
const GIT_DIR_MARKERS: &[&str] = &["HEAD", "config", "objects", "refs"];

/// The git-controlled place that a write to `resolved` changes, if any: the `.git` component on
/// its way, or the folder above it that looks like a bare repository. (The owner's global
/// configuration is a row of [`crate::trusted::table::PLACES`].)
pub fn git_root(resolved: &Path) -> Option<PathBuf> {
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
    resolved
        .ancestors()
        .skip(1)
        .find(|dir| looks_like_git_dir(dir, resolved))
        .map(Path::to_path_buf)
}

/// What a box keeps of a repository's `.git` folder: what changes what git runs. Objects,
/// refs, the index and `HEAD` stay writable: `git commit` in the box works as before.
pub const KEPT_IN_GIT_DIR: [&str; 4] = ["config", "config.worktree", "hooks", "info/attributes"];

/// Whether the folder `dot_git` is a repository to git (it holds `HEAD`, `objects` and
/// `refs`); a `.git` folder without them is none yet, as no `.git` is.
pub fn is_repository(dot_git: &Path) -> bool {
    ["HEAD", "objects", "refs"]
        .iter()
        .all(|name| dot_git.join(name).symlink_metadata().is_ok())
}

/// The `.git` folder of the repository that holds `dir` (the nearest `.git` above it), or
/// `dir/.git` when there is none: where `git config` without a scope writes.
pub fn repository_git_dir(dir: &Path) -> PathBuf {
    dir.ancestors()
        .map(|d| d.join(".git"))
        .find(|candidate| candidate.symlink_metadata().is_ok())
        .unwrap_or_else(|| dir.join(".git"))
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
        let root = git_root(Path::new("/w/app/.git/hooks/pre-commit"));
        assert_eq!(root, Some(PathBuf::from("/w/app/.git")));
        let root = git_root(Path::new("/w/app/.GIT/config"));
        assert_eq!(root, Some(PathBuf::from("/w/app/.GIT")));
        assert_eq!(
            git_root(Path::new("/w/app/.git")),
            Some(PathBuf::from("/w/app/.git"))
        );
        assert_eq!(git_root(Path::new("/w/app/src/main.rs")), None);
        assert_eq!(git_root(Path::new("/w/app/.gitignore")), None);
    }

    #[test]
    fn a_folder_that_looks_like_a_bare_repository_is_a_root() {
        let dir = tempfile::tempdir().unwrap();
        let bare = dir.path().join("planted");
        std::fs::create_dir_all(bare.join("objects")).unwrap();
        assert_eq!(git_root(&bare.join("notes.txt")), None);
        assert_eq!(git_root(&bare.join("config")), Some(bare.clone()));
        std::fs::write(bare.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        assert_eq!(git_root(&bare.join("notes.txt")), Some(bare.clone()));
        assert_eq!(
            git_root(&bare.join("hooks/post-update")),
            Some(bare.clone())
        );
    }
}
