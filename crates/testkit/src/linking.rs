//! How a built binary is linked: for the tests that the boxes' launchers are static where the
//! C library's static archives are installed (`build/static_launcher.rs`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The ELF program header type of the dynamic loader's path.
const PT_INTERP: u32 = 3;

/// Whether the ELF executable at `path` asks for no dynamic loader (static, or static PIE);
/// an error names what is not a 64-bit little-endian ELF file.
pub fn linked_statically(path: &Path) -> Result<bool, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bad = || format!("{} is not a 64-bit little-endian ELF file", path.display());
    if bytes.get(..6) != Some(b"\x7fELF\x02\x01".as_slice()) {
        return Err(bad());
    }
    let number = |at: usize, size: usize| -> Result<u64, String> {
        let field = bytes.get(at..at + size).ok_or_else(bad)?;
        Ok(field
            .iter()
            .rev()
            .fold(0u64, |value, &byte| (value << 8) | u64::from(byte)))
    };
    let offset = usize::try_from(number(0x20, 8)?).map_err(|_| bad())?;
    let (size, count) = (number(0x36, 2)? as usize, number(0x38, 2)? as usize);
    for index in 0..count {
        if number(offset + index * size, 4)? == u64::from(PT_INTERP) {
            return Ok(false);
        }
    }
    Ok(true)
}

/// Whether the binary at `path` is linked statically, panicking when it is not although the C
/// library's static archive is installed (`build/static_launcher.rs` links it so there).
pub fn linked_statically_where_it_can_be(path: &Path) -> bool {
    let statically = match linked_statically(path) {
        Ok(statically) => statically,
        Err(e) => panic!("{e}"),
    };
    if let Some(archive) = c_library_archive() {
        assert!(
            statically,
            "{} is installed, yet {} needs the dynamic loader",
            archive.display(),
            path.display()
        );
    }
    statically
}

/// Where the C compiler finds the C library's static archive, when it is installed.
fn c_library_archive() -> Option<PathBuf> {
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(compiler)
        .arg("-print-file-name=libc.a")
        .output()
        .ok()?;
    let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    (path.is_absolute() && path.is_file()).then_some(path)
}
