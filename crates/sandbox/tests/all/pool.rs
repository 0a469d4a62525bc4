//! A box's cgroup is pooled and taken again by a later box of the same process: its limits are
//! that box's own, whatever the box before it left behind, and never more. Boxes run back to back here, more
//! of them than the pool keeps, so later ones meet cgroups that earlier ones used (on a machine
//! whose init reaps slowly, still charged with an earlier box's init).

use std::time::Duration;

use sandbox::{CommandSpec, Exit, FileWalls, Limits, Policy, spawn_boxed};

/// Runs `script` in a box of `walls` with these limits; its exit code and standard output.
fn boxed(script: &str, walls: FileWalls, processes: u64, memory: u64) -> (Option<i32>, String) {
    let work = tempfile::tempdir_in("/var/tmp").unwrap();
    let spec = CommandSpec {
        program: "/bin/sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        cwd: work.path().to_path_buf(),
    };
    let policy = Policy {
        read_write: vec![work.path().to_path_buf()],
        limits: Limits {
            processes,
            memory,
            ..Limits::default()
        },
        launcher: Some(crate::escape::launcher()),
        file_walls: walls,
        ..Policy::default()
    };
    let child = spawn_boxed(&spec, &policy, Duration::from_secs(30)).unwrap();
    let mut out = Vec::new();
    let ended = child
        .finish(&mut |b| out.extend_from_slice(b), &mut |_| {})
        .unwrap();
    let code = match ended.exit {
        Some(Exit::Code(code)) => Some(code),
        _ => None,
    };
    (code, String::from_utf8_lossy(&out).into_owned())
}

/// Forks sleeping children until a fork fails and prints how many it made; the children are
/// left for the box's end to kill.
const COUNT_FORKS: &str = "exec perl -e 'my $n = 0; while (1) { my $p = fork; last if !defined $p; if (!$p) { sleep 30; exit 0 } $n++ } print \"$n\\n\"'";

/// Box after box of `walls` with a limit of 32 processes, each forks as many children as it
/// can: always a number in `made`.
fn forks_box_after_box(walls: FileWalls, made: std::ops::RangeInclusive<u64>) {
    for _ in 0..12 {
        let (code, out) = boxed(COUNT_FORKS, walls, 32, 256 << 20);
        assert_eq!(code, Some(0), "{out}");
        let forked: u64 = out.trim().parse().unwrap();
        assert!(
            made.contains(&forked),
            "{forked} children under a limit of 32"
        );
    }
}

#[test]
fn a_bubblewrap_box_in_a_reused_cgroup_never_passes_its_process_limit() {
    // In the cgroup: bubblewrap, its init and perl (the launcher's `exec`), so 29 children of
    // 32. A reused cgroup may still be charged with earlier boxes' unreaped inits, at most an
    // eighth of the limit (4), which the box then cannot use; never more than its limit.
    forks_box_after_box(FileWalls::Bubblewrap, 25..=29);
}

#[test]
fn a_box_without_bubblewrap_in_a_reused_cgroup_never_passes_its_process_limit() {
    // In the cgroup: perl (the launcher's `exec`) alone, so 31 children of 32. Its killed
    // children wait for the host's init to reap them, and its cgroup waits in the pool until
    // at most 4 are left.
    forks_box_after_box(FileWalls::LandlockOnly, 27..=31);
}

#[test]
fn a_reused_cgroup_takes_each_boxs_memory_limit_raised_or_lowered() {
    // Perl may hold the string twice while it builds it: 400 MiB at most.
    let allocate = "exec perl -e 'my $x = \"a\" x (200 << 20); print \"allocated\\n\"'";
    for _ in 0..6 {
        let (code, out) = boxed(allocate, FileWalls::Bubblewrap, 64, 1 << 30);
        assert_eq!((code, out.as_str()), (Some(0), "allocated\n"));
        let (code, out) = boxed(allocate, FileWalls::Bubblewrap, 64, 128 << 20);
        assert_ne!(code, Some(0), "200 MiB allocated under a limit of 128 MiB");
        assert_eq!(out, "");
    }
}
