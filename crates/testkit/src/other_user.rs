//! Running a program of the build as another user (`nobody`, uid 65534), wherever the checkout
//! and its `target/` are.
//!
//! A test that drops to another user must not run its binary where it was built: a checkout
//! under `/root`, or below a `mktemp -d` folder (mode 0700), is a folder that user cannot
//! enter, and `exec` fails with `EACCES` before the test has tested anything. So the binary is
//! copied first into a temporary folder under `/var/tmp` that every user can enter and read
//! (mode 0755, the copy 0755), and run from there, in that folder.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The uid and gid of `nobody`, the other user of the tests.
pub const NOBODY: u32 = 65534;

/// A copy of a program that any user can run, in a temporary folder removed with it.
#[derive(Debug)]
pub struct RunnableCopy {
    folder: tempfile::TempDir,
    program: PathBuf,
}

impl RunnableCopy {
    /// Copies `program` (a binary of the build, or the running test itself:
    /// `std::env::current_exe()`) into a fresh folder every user can enter (see
    /// [`crate::temp_dir`]), keeping its file name. Panics with a sentence when it cannot.
    pub fn of(program: &Path) -> RunnableCopy {
        let folder = crate::temp_dir();
        let open = |path: &Path, mode: u32| {
            if let Err(error) =
                std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
            {
                panic!("cannot make {} mode {mode:o}: {error}", path.display());
            }
        };
        open(folder.path(), 0o755);
        let name = program.file_name().unwrap_or(program.as_os_str());
        let copy = folder.path().join(name);
        copy_out_of_process(program, &copy);
        open(&copy, 0o755);
        RunnableCopy {
            folder,
            program: copy,
        }
    }

    /// The copy of the running test binary.
    pub fn of_this_test() -> RunnableCopy {
        match std::env::current_exe() {
            Ok(exe) => RunnableCopy::of(&exe),
            Err(error) => panic!("cannot find the running test's binary: {error}"),
        }
    }

    /// The copy's path.
    pub fn path(&self) -> &Path {
        &self.program
    }

    /// The folder that holds the copy (readable and enterable by every user).
    pub fn folder(&self) -> &Path {
        self.folder.path()
    }

    /// A command running the copy as `uid` (its group the same number, no supplementary
    /// group), in the copy's folder, so that no folder of the checkout is on its way.
    pub fn command_as(&self, uid: u32) -> Command {
        let mut command = Command::new(&self.program);
        command.current_dir(self.folder.path()).uid(uid).gid(uid);
        command
    }
}

/// Copies the program `from` to `to` with `cp`, not in this process: a thread of the test that
/// forks while the copy is open for writing here would hold it open until its child's `exec`,
/// and running the copy then fails with ETXTBSY ("Text file busy"). Panics with a sentence.
pub(crate) fn copy_out_of_process(from: &Path, to: &Path) {
    let copied = Command::new("cp").arg("--").arg(from).arg(to).status();
    if !copied.as_ref().is_ok_and(|s| s.success()) {
        panic!(
            "cannot copy {} to {}: {copied:?}",
            from.display(),
            to.display()
        );
    }
}
