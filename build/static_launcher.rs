//! Links the small binaries a box starts (`brokerd-launcher`, `brokerd-files`,
//! `sandbox-launcher`) as static PIEs where the C library's static archives are installed
//! (Debian's `libc6-dev`, which building Rust needs anyway; Fedora's `glibc-static`). Every
//! fresh box starts one, and a dynamic one spends much of its start in the dynamic loader
//! (on this project's VM, each loaded library's `cpuid` leaves the VM).
//!
//! Stable Cargo has no per-binary `-C target-feature=+crt-static` (in `RUSTFLAGS` it reaches
//! the proc-macros too, which refuse it), so the link is made static from its arguments:
//! `-static-pie` for the start files and the linker's mode, and a folder of linker scripts
//! ahead of the system's, named as the shared libraries std asks for (`-lgcc_s`, `-lc`, …),
//! each naming the static archive instead: the libraries `-C target-feature=+crt-static`
//! would link. Without those archives (or when building for another machine) the binaries
//! stay dynamic and the build says so.
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

/// What of a crate to link statically.
// Each build script including this module names some of the variants.
#[allow(dead_code)]
pub enum Linked<'a> {
    /// One binary.
    Bin(&'a str),
    /// Every example (a bench whose own binary is a box's worker, as `brokerd-files` is).
    Examples,
}

/// Links `targets` of the crate statically when it can, and says which way it went.
pub fn link_statically(targets: &[Linked]) {
    println!("cargo:rerun-if-env-changed=CC");
    let link = match static_link_folder() {
        Ok(folder) => {
            let folder = format!("-L{}", folder.display());
            for target in targets {
                for arg in ["-static-pie", folder.as_str()] {
                    match target {
                        Linked::Bin(bin) => println!("cargo:rustc-link-arg-bin={bin}={arg}"),
                        Linked::Examples => println!("cargo:rustc-link-arg-examples={arg}"),
                    }
                }
            }
            "static"
        }
        Err(why) => {
            println!(
                "cargo:warning=the binaries boxes start are linked dynamically ({why}): each box \
                 starts them more slowly"
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
            // The scripts name it: a compiler upgrade that moves it makes them anew.
            println!("cargo:rerun-if-changed={}", path.display());
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
