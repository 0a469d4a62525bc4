//! The small binaries installed beside brokerd (the launcher of its boxes, the file tools'
//! worker, the fetcher), used only when they are of brokerd's own build.

use std::path::{Path, PathBuf};

/// The name of the small launcher installed beside brokerd.
pub const LAUNCHER: &str = "brokerd-launcher";

/// The name of the file tools' worker installed beside brokerd.
pub const FILE_WORKER: &str = "brokerd-files";

/// The name of `http_fetch`'s worker installed beside brokerd (the `fetcher` crate's).
pub const FETCH_WORKER: &str = "brokerd-fetch";

/// The binary `name` ([`LAUNCHER`], [`FILE_WORKER`], [`FETCH_WORKER`]) for the boxes of a broker whose binary is
/// `exe`: the one in the same folder when it answers `--build-id` with this broker's own build
/// (a box pays for starting it: measured 0.25 ms for the launcher against 2.2 ms for brokerd),
/// else `exe` itself, which does the same work.
pub fn beside(exe: &Path, name: &str) -> PathBuf {
    let beside = exe.with_file_name(name);
    let build = std::process::Command::new(&beside)
        .arg("--build-id")
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    match build {
        Ok(out)
            if out.status.success()
                && out.stdout.trim_ascii() == env!("BOXMAKER_BUILD_ID").as_bytes() =>
        {
            beside
        }
        Ok(_) => {
            tracing::warn!(
                binary = %beside.display(),
                "this binary beside brokerd is of another build; its boxes start brokerd itself instead (slower by about 2 ms each); rebuild both"
            );
            exe.to_path_buf()
        }
        Err(_) => exe.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::{FETCH_WORKER, FILE_WORKER, LAUNCHER, beside};

    /// Writes an executable script named `name` in `dir` that prints `id`.
    fn printing(dir: &std::path::Path, name: &str, id: &str) {
        let path = dir.join(name);
        std::fs::write(&path, format!("#!/bin/sh\necho {id}\n")).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn only_a_binary_of_this_very_build_is_used_else_brokerd_itself() {
        for name in [LAUNCHER, FILE_WORKER, FETCH_WORKER] {
            let dir = tempfile::tempdir().unwrap();
            let exe = dir.path().join("brokerd");
            assert_eq!(beside(&exe, name), exe, "no {name} beside");
            printing(dir.path(), name, "0123456789abcdef");
            assert_eq!(beside(&exe, name), exe, "a {name} of another build");
            printing(dir.path(), name, env!("BOXMAKER_BUILD_ID"));
            // A script just written can be busy for a moment (ETXTBSY) while another test's
            // fork still holds its descriptor: a few tries.
            let found = (0..20).find_map(|_| {
                let found = beside(&exe, name);
                (found != exe).then_some(found).or_else(|| {
                    std::thread::sleep(std::time::Duration::from_millis(20));
                    None
                })
            });
            assert_eq!(found, Some(dir.path().join(name)));
        }
    }
}
