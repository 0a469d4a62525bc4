//! What this machine offers a box, asked of the kernel and the file system: bubblewrap, user
//! namespaces, Landlock's ABI. The bottom of the crate: the box's policy, its launcher and
//! `bx doctor`'s probe all ask here, and this module asks nothing of them.

// landlock_create_ruleset(2) has no wrapper in rustix or libc: the kernel is asked for its
// Landlock ABI version with a raw system call that takes no pointer it dereferences (NULL,
// size 0, LANDLOCK_CREATE_RULESET_VERSION). This is the one `unsafe` of this module.
#![allow(unsafe_code)]

use std::path::PathBuf;

/// Where bubblewrap is looked for, in order.
pub(crate) const BWRAP_PATHS: [&str; 2] = ["/usr/bin/bwrap", "/usr/local/bin/bwrap"];

/// The bubblewrap binary, when installed.
pub fn find_bwrap() -> Option<PathBuf> {
    BWRAP_PATHS.iter().map(PathBuf::from).find(|p| p.is_file())
}

/// Whether user namespaces are allowed here: how many, or why none.
pub(crate) fn user_namespaces() -> Result<String, String> {
    let max = std::fs::read_to_string("/proc/sys/user/max_user_namespaces")
        .map_err(|e| format!("/proc/sys/user/max_user_namespaces: {e}"))?;
    match max.trim().parse::<u64>() {
        Ok(0) => Err("user.max_user_namespaces is 0".to_string()),
        Ok(n) => Ok(format!("up to {n}")),
        Err(_) => Err(format!("user.max_user_namespaces holds {:?}", max.trim())),
    }
}

/// The kernel's Landlock ABI version.
pub(crate) fn landlock_abi() -> std::io::Result<i64> {
    const LANDLOCK_CREATE_RULESET_VERSION: libc::c_ulong = 1;
    // SAFETY: a NULL attribute pointer with size 0 and the VERSION flag: the kernel reads no
    // memory of this process and returns the ABI version or an error.
    let abi = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if abi > 0 {
        Ok(abi)
    } else {
        Err(std::io::Error::last_os_error())
    }
}
