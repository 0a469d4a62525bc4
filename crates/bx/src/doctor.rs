//! `bx doctor`: what this machine offers the box, probed with no broker running, each missing
//! wall with what it means, and the `[sandbox] read_only` line for the toolchains found.

use std::path::Path;

use crate::Exit;

/// Prints each wall and exits 1 when one is missing.
pub fn doctor() -> Exit {
    let launcher = std::env::current_exe().ok();
    let probes = sandbox::probe_machine_with(launcher.as_deref());
    let width = probes.iter().map(|p| p.wall.len()).max().unwrap_or(0);
    let mut missing = 0;
    for probe in &probes {
        match &probe.found {
            Ok(found) => println!("ok       {:width$}  {found}", probe.wall),
            Err(why) => {
                missing += 1;
                println!("MISSING  {:width$}  {why}", probe.wall);
                println!("         {:width$}  without it: {}", "", probe.without);
            }
        }
    }
    println!("boxes: {}", boxes_line(launcher.is_some()));
    if let Some(home) = std::env::var_os("HOME") {
        let found = sandbox::toolchains(Path::new(&home));
        if found.is_empty() {
            println!(
                "toolchains: none found under {}",
                Path::new(&home).display()
            );
        } else {
            let list: Vec<String> = found
                .iter()
                .map(|p| format!("{:?}", p.display().to_string()))
                .collect();
            println!("toolchains: for commands like `cargo test`, add to brokerd.toml:");
            println!("[sandbox]\nread_only = [{}]", list.join(", "));
        }
    }
    if missing == 0 {
        Exit::Done
    } else {
        Exit::Failed
    }
}

/// What a box is made of on this machine, and what follows for `shell`.
fn boxes_line(launcher: bool) -> String {
    let landlock = if launcher {
        sandbox::landlock_enforcement()
    } else {
        sandbox::Enforcement::NotEnforced
    };
    match sandbox::FileWalls::detect() {
        sandbox::FileWalls::Bubblewrap => {
            format!("bubblewrap, Landlock {landlock}, seccomp, rlimits and a cgroup")
        }
        sandbox::FileWalls::LandlockOnly if landlock != sandbox::Enforcement::NotEnforced => {
            format!(
                "no bubblewrap: Landlock {landlock}, seccomp (no socket but AF_UNIX, no connect), rlimits and a cgroup alone; shell stays out of the demo and the coding preset"
            )
        }
        sandbox::FileWalls::LandlockOnly => {
            "none: neither bubblewrap nor Landlock; shell and the file tools refuse to run unless brokerd.toml says [sandbox] file_walls = false".to_string()
        }
    }
}
