//! Why a program may not start in a box: a symbolic link on its way (or on its script's
//! interpreter's way) whose target the box does not see, as a venv's `bin/python` pointing at
//! an interpreter outside the folders bound. Used to explain a failure, never to decide one:
//! what the box sees is read from the policy's paths, without building the box.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

use crate::policy::{ETC, Policy, SYSTEM};

/// The most links followed on one way (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// The most bytes of a program read for its `#!` line.
const SHEBANG_BYTES: u64 = 256;

/// The folders every bubblewrap box has beside the system: its own `/proc` and `/dev`.
const OWN: [&str; 2] = ["/proc", "/dev"];

/// A symbolic link met on the way to a program, whose target a box does not see.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnseenLink {
    /// The link, as the program's path (or its interpreter's) reaches it.
    pub link: PathBuf,
    /// Where it points, made absolute.
    pub target: PathBuf,
}

impl UnseenLink {
    /// The folder to bind read-only so the box sees the target: the installation above a
    /// `bin/` folder (where an interpreter keeps its libraries beside), else the target's
    /// folder.
    pub fn folder(&self) -> PathBuf {
        let parent = self.target.parent().unwrap_or(Path::new("/"));
        match (parent.file_name(), parent.parent()) {
            (Some(name), Some(above)) if name == "bin" && above != Path::new("/") => {
                above.to_path_buf()
            }
            _ => parent.to_path_buf(),
        }
    }
}

impl Policy {
    /// Whether a bubblewrap box of this policy sees `path` (absolute, read without following
    /// links): under a system folder, one of the `/etc` entries, `/proc`, `/dev`, or a path it
    /// binds (as written or as the folder it resolves to), and under no masked path.
    pub fn sees(&self, path: &Path) -> bool {
        let path = lexical(path);
        let fixed = SYSTEM.iter().chain(ETC.iter()).chain(OWN.iter());
        let bound = fixed
            .map(PathBuf::from)
            .chain(self.read_only.iter().cloned())
            .chain(self.read_write.iter().cloned())
            .any(|root| under(&path, &root));
        bound && !self.masked.iter().any(|masked| under(&path, masked))
    }
}

/// Whether `path` is `root` or below it, as written or as `root` resolves.
fn under(path: &Path, root: &Path) -> bool {
    path.starts_with(root) || root.canonicalize().is_ok_and(|real| path.starts_with(real))
}

/// The first link on the way to `program`, or to the interpreter its `#!` line names, whose
/// target a box of `policy` does not see; `None` when every link leads somewhere it sees (or
/// the way cannot be read: then this explains nothing).
pub fn unseen_link(policy: &Policy, program: &Path) -> Option<UnseenLink> {
    if let Some(found) = first_unseen(policy, program) {
        return Some(found);
    }
    let interpreter = interpreter(program)?;
    first_unseen(policy, &interpreter)
}

/// The interpreter an executable script names on its `#!` line, when it is an absolute path.
fn interpreter(program: &Path) -> Option<PathBuf> {
    let mut head = Vec::new();
    std::fs::File::open(program)
        .ok()?
        .take(SHEBANG_BYTES)
        .read_to_end(&mut head)
        .ok()?;
    let line = head.strip_prefix(b"#!")?;
    let line = line.split(|b| *b == b'\n').next()?;
    let word = line
        .split(|b| b.is_ascii_whitespace())
        .find(|w| !w.is_empty())?;
    let path = PathBuf::from(std::ffi::OsStr::from_bytes(word));
    path.is_absolute().then_some(path)
}

/// Walks `path` component by component, following each link, and returns the first one whose
/// target `policy`'s box does not see.
fn first_unseen(policy: &Policy, path: &Path) -> Option<UnseenLink> {
    let mut rest: VecDeque<OsString> = parts(path);
    let mut at = PathBuf::from("/");
    let mut links = 0;
    while let Some(part) = rest.pop_front() {
        if part == ".." {
            at.pop();
            continue;
        }
        let next = at.join(&part);
        let is_link = std::fs::symlink_metadata(&next).is_ok_and(|m| m.file_type().is_symlink());
        if !is_link {
            at = next;
            continue;
        }
        links += 1;
        if links > MAX_LINKS {
            return None;
        }
        let target = std::fs::read_link(&next).ok()?;
        let absolute = lexical(&at.join(&target));
        if !policy.sees(&absolute) {
            return Some(UnseenLink {
                link: next,
                target: absolute,
            });
        }
        if target.is_absolute() {
            at = PathBuf::from("/");
        }
        let mut followed = parts(&target);
        followed.extend(rest);
        rest = followed;
    }
    None
}

/// The parts of `path` to walk: names and `..`, without the root or `.`.
fn parts(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            _ => None,
        })
        .collect()
}

/// `path` with `.` and `..` resolved as written (a `..` above the root stays at the root).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in parts(path) {
        if part == ".." {
            out.pop();
        } else {
            out.push(part);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::path::{Path, PathBuf};

    use super::{UnseenLink, unseen_link};
    use crate::Policy;

    fn policy(read_only: &[&Path]) -> Policy {
        Policy {
            read_only: read_only.iter().map(|p| p.to_path_buf()).collect(),
            ..Policy::default()
        }
    }

    #[test]
    fn a_link_out_of_the_boxs_folders_is_named_with_its_target_and_the_folder_to_add() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let (venv, python) = (root.join("venv"), root.join("python"));
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::fs::create_dir_all(python.join("bin")).unwrap();
        std::fs::write(python.join("bin/python3.12"), "").unwrap();
        // venv/bin/python -> python3 -> ../../python/bin/python3.12, as venvs link.
        symlink("python3", venv.join("bin/python")).unwrap();
        symlink("../../python/bin/python3.12", venv.join("bin/python3")).unwrap();
        std::fs::write(
            venv.join("bin/server"),
            format!("#!{}/bin/python\nimport server\n", venv.display()),
        )
        .unwrap();
        let target = python.join("bin/python3.12");
        let unseen = UnseenLink {
            link: venv.join("bin/python3"),
            target: target.clone(),
        };
        let boxed = policy(&[&venv]);
        assert_eq!(
            unseen_link(&boxed, &venv.join("bin/python")),
            Some(unseen.clone())
        );
        // A script reaches it through its #! line.
        assert_eq!(
            unseen_link(&boxed, &venv.join("bin/server")),
            Some(unseen.clone())
        );
        assert_eq!(unseen.folder(), python);
        // With the interpreter's folder bound, every link leads somewhere the box sees.
        assert_eq!(
            unseen_link(&policy(&[&venv, &python]), &venv.join("bin/python")),
            None
        );
        // A masked folder is not seen even under a bound one.
        let masked = Policy {
            masked: vec![python.clone()],
            ..policy(&[&root])
        };
        assert_eq!(unseen_link(&masked, &venv.join("bin/python")), Some(unseen));
    }

    #[test]
    fn links_into_the_system_and_programs_without_links_explain_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        symlink("/usr/bin/env", root.join("env")).unwrap();
        std::fs::write(root.join("plain"), "#!/usr/bin/env python3\n").unwrap();
        let boxed = policy(&[&root]);
        assert_eq!(unseen_link(&boxed, &root.join("env")), None);
        assert_eq!(unseen_link(&boxed, &root.join("plain")), None);
        assert_eq!(unseen_link(&boxed, Path::new("/nonexistent/x")), None);
        assert!(boxed.sees(&root.join("a/../plain")));
        assert!(!boxed.sees(&PathBuf::from("/home/someone")));
        assert!(boxed.sees(Path::new("/usr/lib/x")));
    }
}
