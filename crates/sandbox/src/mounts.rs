//! The mounts the namespace's init makes before the command starts: its own `/proc`, and, for
//! a command whose user id is 0, the kernel's knobs read-only. Runs between `fork` and `exec`,
//! so only system calls and `&CStr` literals (no allocation).
//!
//! Why the knobs: dropping every capability does not take away uid 0's owner permission on
//! root-owned files, and the kernel checks many of its knobs by that permission alone
//! (measured here: uid 0 without any capability rewrote `kernel.domainname`; `/sys/fs/cgroup`
//! is writable the same way). So `/proc/sys`, `/proc/sysrq-trigger` and the like, and every
//! mount under `/sys`, are made read-only in the command's mount namespace, as container
//! runtimes do. A command whose user id is not 0 passes only the "other" bits, which are
//! read-only on all of them.

// mount_setattr(2) (recursive read-only for `/sys` and its submounts) has no wrapper in
// rustix; it is one raw system call on a struct that lives on the stack.
#![allow(unsafe_code)]

use std::ffi::CStr;

use rustix::fs::{AtFlags, CWD, StatxAttributes, StatxFlags, statx};
use rustix::io::Errno;
use rustix::mount::{
    MountFlags, MountPropagationFlags, mount, mount_bind, mount_change, mount_remount,
};

/// What container runtimes keep read-only in `/proc` (those that exist here).
const PROC_READ_ONLY: [&CStr; 5] = [
    c"/proc/sys",
    c"/proc/sysrq-trigger",
    c"/proc/irq",
    c"/proc/bus",
    c"/proc/fs",
];

/// `MOUNT_ATTR_RDONLY` of `mount_setattr(2)`.
const MOUNT_ATTR_RDONLY: u64 = 0x1;

/// `struct mount_attr` of `mount_setattr(2)`.
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

/// `/` made `MS_REC | MS_PRIVATE` (so nothing mounted here reaches the broker's namespace),
/// then a fresh `/proc` for the new PID namespace.
pub(crate) fn own_proc() -> Result<(), Errno> {
    mount_change(
        c"/",
        MountPropagationFlags::REC | MountPropagationFlags::PRIVATE,
    )?;
    mount(
        c"proc",
        c"/proc",
        c"proc",
        MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC,
        None,
    )
}

/// The kernel's knobs read-only: the paths of [`PROC_READ_ONLY`] that exist, each bound onto
/// itself and remounted read-only, and `/sys` with every mount below it.
pub(crate) fn kernel_knobs_read_only() -> Result<(), Errno> {
    for path in PROC_READ_ONLY {
        match mount_bind(path, path) {
            Ok(()) => {}
            Err(Errno::NOENT) => continue,
            Err(e) => return Err(e),
        }
        mount_remount(
            path,
            MountFlags::BIND
                | MountFlags::RDONLY
                | MountFlags::NOSUID
                | MountFlags::NODEV
                | MountFlags::NOEXEC,
            c"",
        )?;
    }
    if is_mount_root(c"/sys")? {
        sys_read_only()?;
    }
    Ok(())
}

/// Whether `path` is the root of a mount (so `mount_setattr` on it cannot reach the mount that
/// holds `/` instead). `Ok(false)` when it does not exist.
fn is_mount_root(path: &CStr) -> Result<bool, Errno> {
    match statx(
        CWD,
        path,
        AtFlags::SYMLINK_NOFOLLOW,
        StatxFlags::BASIC_STATS,
    ) {
        Ok(stat)
            if stat
                .stx_attributes_mask
                .contains(StatxAttributes::MOUNT_ROOT) =>
        {
            Ok(stat.stx_attributes.contains(StatxAttributes::MOUNT_ROOT))
        }
        // A kernel without the attribute (before 5.8): another device than `/` is a mount.
        Ok(stat) => {
            let root = statx(CWD, c"/", AtFlags::empty(), StatxFlags::BASIC_STATS)?;
            Ok(
                (stat.stx_dev_major, stat.stx_dev_minor)
                    != (root.stx_dev_major, root.stx_dev_minor),
            )
        }
        Err(Errno::NOENT) => Ok(false),
        Err(e) => Err(e),
    }
}

/// `/sys` and every mount below it (cgroups included) read-only.
fn sys_read_only() -> Result<(), Errno> {
    let attr = MountAttr {
        attr_set: MOUNT_ATTR_RDONLY,
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    // SAFETY: mount_setattr reads `size_of::<MountAttr>()` bytes from `attr`, a `repr(C)`
    // `struct mount_attr` on the stack, and a NUL-terminated path; it writes nothing of ours.
    let result = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c"/sys".as_ptr(),
            libc::AT_RECURSIVE as libc::c_uint,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if result == 0 {
        return Ok(());
    }
    let errno = Errno::from_raw_os_error(
        std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOSYS),
    );
    if errno != Errno::NOSYS {
        return Err(errno);
    }
    // A kernel without mount_setattr (before 5.12): at least `/sys` itself.
    mount_remount(
        c"/sys",
        MountFlags::BIND
            | MountFlags::RDONLY
            | MountFlags::NOSUID
            | MountFlags::NODEV
            | MountFlags::NOEXEC,
        c"",
    )
}
