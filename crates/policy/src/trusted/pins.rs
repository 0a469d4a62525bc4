//! What every box keeps of the trusted places under its read-write folders.

use std::path::{Path, PathBuf};

use super::{Anchor, Kind, PLACES, TrustedPlaces};
use crate::git;

/// The trusted places a box of some read-write folders must end as they began.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoxPins {
    /// Places that exist, as spelled (never their targets alone: where a place is a symbolic
    /// link whose target lies in a read-write folder too, both are listed). The box keeps
    /// each unchanged, or refuses to start where it cannot.
    pub kept: Vec<PathBuf>,
    /// Repositories' `hooks` folders to make (empty, as `git init` does) before the box
    /// starts, so that the box cannot make them; listed in `kept` too.
    pub hooks: Vec<PathBuf>,
    /// Places that do not exist: a box cannot keep what is not there, so the caller records
    /// them before the run and moves aside any that appeared once the box has ended.
    pub missing: Vec<PathBuf>,
}

impl TrustedPlaces {
    /// What a box whose read-write folders are `read_write` (resolved) must keep: the owner's
    /// places a read-write folder holds, and the workspace places at the top of each
    /// read-write folder, of the repository holding it and of each repository up to two levels
    /// below it (for `.git`: its `config`,
    /// `config.worktree`, `hooks` and `info/attributes`, or a `.git` file or link). Not a
    /// place that a read-write folder names itself (the folder is the place or lies in it):
    /// that grant may write there.
    ///
    /// A `.git` that does not exist is not watched: what a box makes into a repository, it
    /// can also give hooks (the next box keeps them).
    pub fn box_pins(&self, read_write: &[PathBuf]) -> BoxPins {
        let mut pins = Pins {
            read_write,
            out: BoxPins::default(),
        };
        for (place, _) in self.owner_places() {
            pins.consider(&place);
        }
        for top in tops(read_write) {
            for row in PLACES.iter().filter(|r| r.anchor == Anchor::Workspace) {
                if row.kind == Kind::GitDir {
                    pins.git(&top.join(row.path));
                } else if !row.path.contains('*') {
                    pins.consider(&top.join(row.path));
                }
            }
        }
        let out = &mut pins.out;
        for list in [&mut out.kept, &mut out.hooks, &mut out.missing] {
            list.sort();
            list.dedup();
        }
        pins.out
    }
}

/// How deep below a read-write folder repositories are looked for, and how many entries are
/// read at most for each read-write folder.
const REPOSITORY_DEPTH: usize = 2;
const REPOSITORY_ENTRIES: usize = 4096;

/// Each read-write folder, the top of the repository holding it where a read-write folder
/// holds that top, and the repositories below it (to [`REPOSITORY_DEPTH`] levels, what
/// [`REPOSITORY_ENTRIES`] entries show): where a workspace's settings live.
fn tops(read_write: &[PathBuf]) -> Vec<PathBuf> {
    let mut tops = read_write.to_vec();
    let add = |top: PathBuf, tops: &mut Vec<PathBuf>| {
        if !tops.contains(&top) {
            tops.push(top);
        }
    };
    for folder in read_write {
        let git_dir = git::repository_git_dir(folder);
        if let Some(top) = git_dir.parent()
            && read_write.iter().any(|rw| top.starts_with(rw))
        {
            add(top.to_path_buf(), &mut tops);
        }
        let mut read = 0usize;
        let mut level = vec![folder.clone()];
        for _ in 0..REPOSITORY_DEPTH {
            let mut next = Vec::new();
            for dir in &level {
                let Ok(entries) = std::fs::read_dir(dir) else {
                    continue;
                };
                for entry in entries.flatten() {
                    read += 1;
                    if read > REPOSITORY_ENTRIES {
                        break;
                    }
                    if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                        continue;
                    }
                    let path = entry.path();
                    if path.join(".git").symlink_metadata().is_ok() {
                        add(path.clone(), &mut tops);
                    }
                    next.push(path);
                }
            }
            level = next;
        }
    }
    tops
}

struct Pins<'a> {
    read_write: &'a [PathBuf],
    out: BoxPins,
}

impl Pins<'_> {
    /// Whether a read-write folder is `place` or lies in it (or in what it names).
    fn named(&self, place: &Path) -> bool {
        let real = std::fs::canonicalize(place).ok();
        self.read_write
            .iter()
            .any(|rw| rw.starts_with(place) || real.as_ref().is_some_and(|r| rw.starts_with(r)))
    }

    /// Whether a read-write folder holds `place` (below its top).
    fn inside(&self, place: &Path) -> bool {
        self.read_write
            .iter()
            .any(|rw| place.starts_with(rw) && place != rw)
    }

    /// `place` kept, or watched while missing, when a read-write folder holds it; and what it
    /// names, when a read-write folder holds that.
    fn consider(&mut self, place: &Path) {
        if self.named(place) {
            return;
        }
        let exists = place.symlink_metadata().is_ok();
        if self.inside(place) {
            if exists {
                self.out.kept.push(place.to_path_buf());
            } else {
                self.out.missing.push(place.to_path_buf());
            }
        }
        if exists
            && let Ok(real) = std::fs::canonicalize(place)
            && real != place
            && self.inside(&real)
        {
            self.out.kept.push(real);
        }
    }

    /// A repository's `.git` at a read-write folder's top.
    fn git(&mut self, dot_git: &Path) {
        if !self.inside(dot_git) || self.named(dot_git) {
            return;
        }
        let Ok(meta) = dot_git.symlink_metadata() else {
            return;
        };
        if !meta.is_dir() {
            // A worktree's or submodule's pointer to its git directory, or a link.
            self.consider(dot_git);
            return;
        }
        if !git::is_repository(dot_git) {
            // A `.git` folder git would not take for a repository is none yet (as no `.git`).
            return;
        }
        for name in git::KEPT_IN_GIT_DIR {
            self.consider(&dot_git.join(name));
        }
        let hooks = dot_git.join("hooks");
        if !self.named(&hooks) {
            if hooks.symlink_metadata().is_err() {
                self.out.missing.retain(|m| m != &hooks);
                self.out.kept.push(hooks.clone());
            }
            self.out.hooks.push(hooks);
        }
    }
}
