//! Links a box's launcher (`brokerd-launcher`, `sandbox-launcher`) as a static PIE where the C
//! library's static archives are installed (Debian's `libc6-dev`, which building Rust needs
//! anyway; Fedora's `glibc-static`). Every fresh box starts its launcher, and a dynamic one
//! spends most of its start in the dynamic loader: 0.05x of a box against bubblewrap alone
//! in `box_bench`, three interleaved pairs of runs.
//!
//! Stable Cargo has no per-binary `-C target-feature=+crt-static` (in `RUSTFLAGS` it reaches
//! the proc-macros too, which refuse it), so the link is made static from its arguments:
//! `-static-pie` for the start files and the linker's mode, and a folder of linker scripts
//! ahead of the system's, named as the shared libraries std asks for (`-lgcc_s`, `-lc`, …),
//! each naming the static archive instead: the libraries `-C target-feature=+crt-static`
//! would link. Without those archives (or when building for another machine) the launcher
//! stays dynamic and the build says so.
//!
//! Sets `BOXMAKER_LAUNCHER_LINK` (`static` or `dynamic`) for the crate, which its tests check.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The linker scripts: the library std names, and the archives that stand in for it.
const SCRIPTS: &[(&str, &[&str])] = &[
    ("gcc_s", &["libgcc_eh.a", "libgcc.a"]),
    ("c", &["libc.a", "libgcc_eh.a", "libgcc.a"]),
    ("m", &["libm.a"]),
    ("pthread", &["libpthread.a"]),
    ("dl", &["libdl.a"]),
    ("rt", &["librt.a"]),
    ("util", &["libutil.a"]),
];

/// Links the crate's binary `bin` statically when it can, and says which way it went.
pub fn link_statically(bin: &str) {
    println!("cargo:rerun-if-env-changed=CC");
    let link = match static_link_folder() {
        Ok(folder) => {
            println!("cargo:rustc-link-arg-bin={bin}=-static-pie");
            println!("cargo:rustc-link-arg-bin={bin}=-L{}", folder.display());
            "static"
        }
        Err(why) => {
            println!(
                "cargo:warning={bin} is linked dynamically ({why}): each box starts it more \
                 slowly"
            );
            "dynamic"
        }
    };
    println!("cargo:rustc-env=BOXMAKER_LAUNCHER_LINK={link}");
}

/// The folder of linker scripts in `OUT_DIR`, or why there is none.
fn static_link_folder() -> Result<PathBuf, String> {
    let var = |name: &str| std::env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return Err("not a glibc target".into());
    }
    if var("TARGET") != var("HOST") {
        return Err("built for another machine".into());
    }
    if var("CARGO_CFG_TARGET_FEATURE")
        .split(',')
        .any(|f| f == "crt-static")
    {
        return Err("crt-static is already on".into());
    }
    let compiler = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let find = |name: &str| -> Result<PathBuf, String> {
        let out = Command::new(&compiler)
            .arg(format!("-print-file-name={name}"))
            .output()
            .map_err(|e| format!("{compiler}: {e}"))?;
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        // The compiler prints the bare name back when it has no such file.
        if path.is_absolute() && path.is_file() {
            Ok(path)
        } else {
            Err(format!("no {name}"))
        }
    };
    find("rcrt1.o")?;
    let folder = PathBuf::from(var("OUT_DIR")).join("static-launcher");
    std::fs::create_dir_all(&folder).map_err(|e| format!("{}: {e}", folder.display()))?;
    for (library, archives) in SCRIPTS {
        let archives = archives
            .iter()
            .map(|a| find(a).map(|p| format!("\"{}\"", p.display())))
            .collect::<Result<Vec<_>, _>>()?;
        let script = format!("GROUP ( {} )\n", archives.join(" "));
        write(&folder.join(format!("lib{library}.so")), &script)?;
    }
    Ok(folder)
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}
