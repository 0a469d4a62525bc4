//! The box without bubblewrap ([`crate::FileWalls::LandlockOnly`]), for a machine without
//! bubblewrap or user namespaces: the launcher is the broker's child, joins the cgroup, takes
//! the rlimits, drops every capability and installs the wider seccomp programs (no socket but
//! `AF_UNIX`, no `connect`) between `fork` and `exec`, then applies Landlock over the policy's
//! paths, with a scratch folder of its own as `TMPDIR` and the protected folders left out of
//! the rules (their siblings granted instead of their parent). No mount, PID or network
//! namespace: so no network either, whatever the policy asks.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::cgroup::PooledCgroup;
use crate::child::Want;
use crate::contain::{ContainOptions, ContainedChild, spawn_once};
use crate::harden::Hardening;
use crate::parts::{BoxParts, Scratch};
use crate::policy::{BoxError, Policy, resolve, system_paths};
use crate::rules::Rules;
use crate::spec::CommandSpec;

/// The devices a box without bubblewrap may open (bubblewrap's `--dev` offers the same).
const DEVICES: [&str; 6] = [
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// The box without bubblewrap: the launcher, hardened, in the cgroup, under the rlimits and the
/// wider seccomp filter, applies Landlock over the policy's paths and a scratch folder.
pub(crate) fn spawn_landlocked(
    spec: &CommandSpec,
    policy: &Policy,
    timeout: Duration,
    stdin: bool,
) -> Result<ContainedChild, BoxError> {
    let launcher = policy.launcher.as_ref().ok_or(BoxError::NoFileWalls(
        "the box names no launcher to apply Landlock",
    ))?;
    let expect = crate::landlock_enforcement();
    if expect == crate::Enforcement::NotEnforced {
        return Err(BoxError::NoFileWalls(
            "neither bubblewrap (or user namespaces) nor Landlock is available",
        ));
    }
    let scratch = Scratch::make().map_err(BoxError::Launch)?;
    for (dest, bytes) in &policy.files {
        let path = match dest.strip_prefix("/tmp") {
            Ok(rest) => scratch.path().join(rest),
            Err(_) => dest.clone(),
        };
        std::fs::write(&path, bytes).map_err(BoxError::Launch)?;
    }
    let mut read = system_paths();
    read.push(PathBuf::from("/proc"));
    let mut write: Vec<PathBuf> = DEVICES
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.exists())
        .collect();
    write.push(scratch.path().to_path_buf());
    let masked: Vec<PathBuf> = policy
        .masked
        .iter()
        .filter_map(|m| std::fs::canonicalize(m).ok())
        .collect();
    for path in policy.read_only.iter().chain(std::iter::once(launcher)) {
        read.extend(around_masked(&resolve(path)?, &masked));
    }
    let writable = policy
        .read_write
        .iter()
        .map(|path| resolve(path))
        .collect::<Result<Vec<_>, _>>()?;
    // A pinned file is readable where its read-write path is, and left out of what is
    // writable there (as a masked path is left out of both).
    let pinned = crate::pinned::Pinned::under(&policy.pinned, &writable)?.files;
    let kept: Vec<PathBuf> = masked.iter().chain(&pinned).cloned().collect();
    for resolved in writable {
        if pinned.iter().any(|p| p.starts_with(&resolved)) {
            read.extend(around_masked(&resolved, &masked));
            write.extend(around_masked(&resolved, &kept));
        } else {
            write.extend(around_masked(&resolved, &masked));
        }
    }
    let rules = Rules {
        read,
        write,
        expect: Some(expect),
        relay: None,
        own: None,
    };
    let mut env = spec.env.clone();
    env.retain(|(name, _)| name != "TMPDIR");
    env.push((
        "TMPDIR".into(),
        scratch.path().to_path_buf().into_os_string(),
    ));
    let outer = CommandSpec {
        program: resolve(launcher)?,
        args: rules.to_args(&spec.program, &spec.args),
        env,
        cwd: spec.cwd.clone(),
    };
    let seccomp = crate::seccomp::compiled(true).map_err(BoxError::Seccomp)?;
    let cgroup = PooledCgroup::take(
        policy.limits.processes,
        policy.limits.memory,
        policy.launcher.as_deref(),
        true,
    )
    .map_err(BoxError::Cgroup)?;
    let options = ContainOptions {
        timeout,
        containment: crate::Containment::Cgroup,
    };
    let hardening = Hardening::new().map_err(BoxError::Launch)?;
    spawn_once(
        &outer,
        &options,
        hardening,
        Want::Launcher,
        Some(BoxParts {
            limits: policy.limits,
            cgroup,
            inherit: Vec::new(),
            seccomp,
            scratch: Some(scratch),
            stdin,
        }),
    )
    .map_err(|e| BoxError::Launch(e.into_error()))
}

/// `path` itself when no masked path lies below it; otherwise what is beside the masked paths:
/// each entry of `path` but those leading to a masked path, which are split the same way.
/// (Landlock grants a right beneath a folder, so a folder holding a masked path cannot be
/// granted itself.)
fn around_masked(path: &Path, masked: &[PathBuf]) -> Vec<PathBuf> {
    if masked.iter().any(|m| path.starts_with(m)) {
        return Vec::new();
    }
    if !masked.iter().any(|m| m.starts_with(path)) {
        return vec![path.to_path_buf()];
    }
    let Ok(entries) = std::fs::read_dir(path) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in entries.flatten() {
        out.extend(around_masked(&entry.path(), masked));
    }
    out.sort();
    out
}
