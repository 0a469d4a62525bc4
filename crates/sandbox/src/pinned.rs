//! The files a box may read and run but never change ([`crate::Policy::pinned`]), where a
//! read-write path holds them: what bubblewrap binds to keep them so, and what a box without
//! it leaves out of Landlock's write rules.

use std::path::{Path, PathBuf};

/// A policy's pinned files that lie in a read-write path, and the folders between each and
/// that path. Each folder is bound onto itself (still read-write) before the file is bound
/// read-only: a mount point cannot be renamed or removed, so the box cannot move a pinned
/// file's folder aside and put one of its own in its place, which a read-only file alone
/// would allow.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Pinned {
    /// Outermost first, each once.
    pub(crate) folders: Vec<PathBuf>,
    /// Each once.
    pub(crate) files: Vec<PathBuf>,
}

impl Pinned {
    /// The pinned files of `pinned` in one of `writable` (resolved read-write paths).
    pub(crate) fn under(pinned: &[PathBuf], writable: &[PathBuf]) -> Pinned {
        let mut out = Pinned::default();
        for file in pinned {
            let Ok(file) = std::fs::canonicalize(file) else {
                continue;
            };
            // The innermost read-write path holding it: a bind's root is a mount point already.
            let Some(root) = writable
                .iter()
                .filter(|rw| file.starts_with(rw) && file != **rw)
                .max_by_key(|rw| rw.as_os_str().len())
            else {
                continue;
            };
            let mut between: Vec<PathBuf> = file
                .ancestors()
                .skip(1)
                .take_while(|folder| folder != root)
                .map(Path::to_path_buf)
                .collect();
            between.reverse();
            for folder in between {
                if !out.folders.contains(&folder) {
                    out.folders.push(folder);
                }
            }
            if !out.files.contains(&file) {
                out.files.push(file);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::Pinned;
    use std::path::PathBuf;

    #[test]
    fn the_folders_between_the_innermost_writable_path_and_each_file_come_outermost_first_once() {
        let root = tempfile::tempdir().unwrap();
        let base = root.path().canonicalize().unwrap();
        let bin = base.join("proj/target/release");
        std::fs::create_dir_all(&bin).unwrap();
        for name in ["brokerd", "brokerd-launcher"] {
            std::fs::write(bin.join(name), "x").unwrap();
        }
        std::fs::write(base.join("loose"), "x").unwrap();
        let pinned = [
            bin.join("brokerd"),
            bin.join("brokerd-launcher"),
            base.join("loose"),
            base.join("missing"),
        ];
        let writable = [base.clone(), base.join("proj")];
        assert_eq!(
            Pinned::under(&pinned, &writable),
            Pinned {
                folders: vec![base.join("proj/target"), bin.clone()],
                files: vec![
                    bin.join("brokerd"),
                    bin.join("brokerd-launcher"),
                    base.join("loose")
                ],
            }
        );
        // Outside every read-write path: nothing to do (a read-only bind keeps it already).
        let elsewhere: [PathBuf; 1] = [base.join("proj/src")];
        assert_eq!(Pinned::under(&pinned, &elsewhere), Pinned::default());
    }
}
