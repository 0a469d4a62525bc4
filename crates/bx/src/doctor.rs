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
                // A reason's later lines (the commands that fix it) under its first.
                let why = why.replace('\n', &format!("\n         {:width$}  ", ""));
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
    boxes_of(
        sandbox::FileWalls::detect(),
        landlock,
        sandbox::box_cgroup().is_ok(),
    )
}

/// What a box made of `walls`, Landlock at `landlock` and a cgroup or none is, and what
/// follows for `shell`.
fn boxes_of(walls: sandbox::FileWalls, landlock: sandbox::Enforcement, cgroup: bool) -> String {
    match walls {
        sandbox::FileWalls::Bubblewrap if cgroup => {
            format!("bubblewrap, Landlock {landlock}, seccomp, rlimits and a cgroup")
        }
        sandbox::FileWalls::Bubblewrap => format!(
            "bubblewrap, Landlock {landlock}, seccomp and rlimits; {}",
            sandbox::WITHOUT_CGROUP
        ),
        sandbox::FileWalls::LandlockOnly
            if landlock != sandbox::Enforcement::NotEnforced && !cgroup =>
        {
            "none: without bubblewrap only a cgroup holds a box's processes together, and there is none (see cgroup above); shell and the file tools fail until one is delegated".to_string()
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

#[cfg(test)]
mod tests {
    use sandbox::{Enforcement, FileWalls};

    use super::boxes_of;

    #[test]
    fn each_kind_of_box_says_what_it_is_and_what_follows_for_shell() {
        let full = boxes_of(FileWalls::Bubblewrap, Enforcement::Full, true);
        assert_eq!(
            full,
            "bubblewrap, Landlock fully enforced, seccomp, rlimits and a cgroup"
        );
        let no_cgroup = boxes_of(FileWalls::Bubblewrap, Enforcement::Full, false);
        assert!(
            no_cgroup.starts_with("bubblewrap, Landlock fully enforced, seccomp and rlimits; no cgroup: no limit on the number of its processes or on their memory together"),
            "{no_cgroup}"
        );
        assert!(no_cgroup.contains("killed whole through its PID namespace"));
        let nothing_holds = boxes_of(FileWalls::LandlockOnly, Enforcement::Full, false);
        assert!(nothing_holds.starts_with("none: without bubblewrap only a cgroup"));
        let landlock = boxes_of(FileWalls::LandlockOnly, Enforcement::Full, true);
        assert!(
            landlock.starts_with("no bubblewrap: Landlock fully enforced"),
            "{landlock}"
        );
        assert!(landlock.ends_with("shell stays out of the demo and the coding preset"));
        let none = boxes_of(FileWalls::LandlockOnly, Enforcement::NotEnforced, true);
        assert!(
            none.starts_with("none: neither bubblewrap nor Landlock"),
            "{none}"
        );
        assert!(none.contains("[sandbox] file_walls = false"), "{none}");
    }
}
