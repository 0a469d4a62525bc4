//! What this machine offers the box, probed with no broker running (`bx doctor`): each wall,
//! what was found, and what its absence means.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::boxed::spawn_boxed;
use crate::machine::{find_bwrap, landlock_abi, user_namespaces};
use crate::policy::{FileWalls, Policy};
use crate::rules::landlock_enforcement;
use crate::spec::{CommandSpec, Exit};

/// One wall of the box as this machine has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The wall's name.
    pub wall: &'static str,
    /// What was found (`Ok`), or what is missing (`Err`).
    pub found: Result<String, String>,
    /// What its absence means for the owner.
    pub without: &'static str,
}

/// Probes every wall: bubblewrap and its version, user namespaces, seccomp, Landlock's ABI, the
/// cgroup controllers, and a real box running `/bin/true` (without the Landlock layer: see
/// [`probe_machine_with`]).
pub fn probe_machine() -> Vec<Probe> {
    probe_machine_with(None)
}

/// [`probe_machine`], the real box launched through `launcher` (a binary whose `main` starts
/// with [`crate::launch_if_asked`]), so that it has the Landlock layer too; and, when bubblewrap
/// or user namespaces are missing, a box of Landlock alone.
pub fn probe_machine_with(launcher: Option<&Path>) -> Vec<Probe> {
    let walls = FileWalls::detect();
    vec![
        Probe {
            wall: "bubblewrap",
            found: bubblewrap(),
            without: "no mount, PID or network namespace: boxes are Landlock, seccomp (no socket but AF_UNIX, no connect), rlimits and the cgroup alone, and shell stays out of the demo and the coding preset",
        },
        Probe {
            wall: "user namespaces",
            found: user_namespaces(),
            without: "bubblewrap cannot build a box: boxes are Landlock, seccomp, rlimits and the cgroup alone",
        },
        Probe {
            wall: "seccomp",
            found: seccomp(),
            without: "ptrace, mount, keyctl, bpf, io_uring and every socket but AF_UNIX are refused only by the box's namespaces and dropped capabilities",
        },
        Probe {
            wall: "cgroup",
            found: crate::cgroup::box_cgroup(),
            without: "boxes with bubblewrap are built without one: no limit on the number of their processes or on their memory together (each process keeps its rlimits), killed whole through their PID namespace; boxes without bubblewrap are not built",
        },
        Probe {
            wall: "landlock",
            found: landlock(),
            without: "with bubblewrap, its mounts alone keep a box to its paths; without bubblewrap too, no box can be built (shell and the file tools refuse to run unless brokerd.toml says [sandbox] file_walls = false)",
        },
        Probe {
            wall: "a box",
            found: a_box(launcher, walls),
            without: "shell calls fail with the error shown",
        },
    ]
}

/// The toolchain folders found under `home` (for `[sandbox] read_only`).
pub fn toolchains(home: &Path) -> Vec<PathBuf> {
    [
        ".cargo",
        ".rustup",
        ".pyenv",
        ".nvm",
        ".local/share/pnpm",
        "go",
    ]
    .iter()
    .map(|name| home.join(name))
    .chain([PathBuf::from("/usr/local/go"), PathBuf::from("/opt/node")])
    .filter(|p| p.is_dir())
    .collect()
}

fn bubblewrap() -> Result<String, String> {
    let path = find_bwrap().ok_or("not installed (Debian: apt-get install bubblewrap)")?;
    let out = Command::new(&path)
        .arg("--version")
        .output()
        .map_err(|e| format!("{} does not run: {e}", path.display()))?;
    let version = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(format!("{version} ({})", path.display()))
}

fn seccomp() -> Result<String, String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("/proc/self/status: {e}"))?;
    if status
        .lines()
        .any(|l| l.starts_with("Seccomp_filters:") || l.starts_with("Seccomp:"))
    {
        Ok("filters supported".to_string())
    } else {
        Err("the kernel reports no seccomp".to_string())
    }
}

fn landlock() -> Result<String, String> {
    match landlock_abi() {
        Ok(abi) => Ok(format!(
            "ABI {abi}: {} in every box",
            landlock_enforcement()
        )),
        Err(e) => Err(format!("not available: {e}")),
    }
}

fn a_box(launcher: Option<&Path>, walls: FileWalls) -> Result<String, String> {
    let spec = CommandSpec {
        program: "/bin/true".into(),
        args: Vec::new(),
        env: Vec::new(),
        cwd: "/tmp".into(),
    };
    let policy = Policy {
        launcher: launcher.map(Path::to_path_buf),
        file_walls: walls,
        ..Policy::default()
    };
    let child = spawn_boxed(&spec, &policy, Duration::from_secs(10)).map_err(|e| e.to_string())?;
    let ended = child
        .finish(&mut |_| {}, &mut |_| {})
        .map_err(|e| e.to_string())?;
    match ended.exit {
        Some(Exit::Code(0)) => Ok(format!(
            "{}, Landlock {}, seccomp, rlimits and {} ran /bin/true",
            match walls {
                FileWalls::Bubblewrap => "bubblewrap",
                FileWalls::LandlockOnly => "without bubblewrap",
            },
            policy.landlock(),
            if crate::cgroup::box_cgroup().is_ok() {
                "a cgroup"
            } else {
                "no cgroup"
            }
        )),
        other => Err(format!("/bin/true in a box ended with {other:?}")),
    }
}
