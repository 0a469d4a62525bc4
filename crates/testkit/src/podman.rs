//! A Podman image made of this machine's own programs, for the tests and the bench of the
//! broker's optional Podman backend (imported from a local tarball, as its owners do).

use std::path::{Path, PathBuf};
use std::process::Command;

/// An image of some of this machine's programs and their libraries, imported into Podman as
/// `name`; removed when dropped.
pub struct Image {
    podman: PathBuf,
    /// The image's name (`localhost/boxmaker-test-PID:1`).
    pub name: String,
}

impl Image {
    /// Imports an image holding `programs` (found in `/usr/bin` or `/bin`) and their libraries.
    pub fn import(podman: &Path, programs: &[&str]) -> Image {
        let root = crate::temp_dir();
        let rootfs = root.path().join("rootfs");
        for dir in ["tmp", "work", "etc"] {
            std::fs::create_dir_all(rootfs.join(dir)).unwrap_or_else(|e| panic!("{e}"));
        }
        for program in programs {
            let path = which(program);
            copy_in(&rootfs, &path);
            let ldd = Command::new("ldd")
                .arg(&path)
                .output()
                .unwrap_or_else(|e| panic!("{e}"));
            for word in String::from_utf8_lossy(&ldd.stdout).split_whitespace() {
                if word.starts_with('/') {
                    copy_in(&rootfs, Path::new(word));
                }
            }
        }
        let tarball = root.path().join("rootfs.tar");
        let tar = Command::new("tar")
            .arg("-cf")
            .arg(&tarball)
            .arg("-C")
            .arg(&rootfs)
            .arg(".")
            .status()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(tar.success());
        let name = format!("localhost/boxmaker-test-{}:1", std::process::id());
        let _ = Command::new(podman)
            .args(["rmi", "--force", &name])
            .output();
        let imported = Command::new(podman)
            .arg("import")
            .arg(&tarball)
            .arg(&name)
            .output()
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(imported.status.success(), "{imported:?}");
        Image {
            podman: podman.to_path_buf(),
            name,
        }
    }
}

impl Drop for Image {
    fn drop(&mut self) {
        let _ = Command::new(&self.podman)
            .args(["rmi", "--force", &self.name])
            .output();
    }
}

fn which(program: &str) -> PathBuf {
    let found = ["/usr/bin", "/bin"]
        .iter()
        .map(|d| Path::new(d).join(program))
        .find(|p| p.exists());
    match found.map(|p| p.canonicalize()) {
        Some(Ok(path)) => path,
        Some(Err(e)) => panic!("{program}: {e}"),
        None => panic!("{program} is not on this machine"),
    }
}

/// Copies `path` into `rootfs` at the same place, and at the place its links lead to.
fn copy_in(rootfs: &Path, path: &Path) {
    if let Err(e) = try_copy_in(rootfs, path) {
        panic!("cannot copy {} into the image: {e}", path.display());
    }
}

fn try_copy_in(rootfs: &Path, path: &Path) -> std::io::Result<()> {
    let real = path.canonicalize()?;
    for at in [path, real.as_path()] {
        let target = rootfs.join(at.strip_prefix("/").unwrap_or(at));
        if let Some(parent) = target.parent() {
            std::fs::create_dir_all(parent)?;
        }
        if !target.exists() {
            std::fs::copy(&real, &target)?;
        }
    }
    Ok(())
}
