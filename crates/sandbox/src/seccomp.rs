//! The box's seccomp deny-list, compiled here in the parent (crate `seccompiler`) and handed to
//! bubblewrap (`--add-seccomp-fd`), which installs it in the command's process just before
//! `exec`, after building the box (whose own setup needs `mount` and friends).
//!
//! Two programs: the deny-list answering `EPERM`, and `clone3` answering `ENOSYS` (its flags
//! are behind a pointer seccomp cannot read, and libcs fall back to `clone`, whose flags it can).
//!
//! Sockets are an allow-list: `socket` and `socketpair` answer `EPERM` for every family but
//! `AF_UNIX` (vsock, for one, is not network-namespaced: on a virtual machine it reaches the
//! host's services). A box with a network (its relay to the broker's proxy, see `net`) may
//! also make IPv4 TCP sockets, which its own network namespace and Landlock keep to the relay's
//! port on loopback; no other IPv4 type or protocol.
//!
//! Without bubblewrap ([`crate::FileWalls::LandlockOnly`]) the box has no network namespace and
//! no mount namespace hiding the host's sockets, so the deny-list grows: every way to reach a
//! Unix socket by address (`connect`, `sendto` with an address, `sendmsg` and `sendmmsg`, whose
//! address is behind a pointer seccomp cannot read). Those programs are installed between
//! `fork` and `exec` (see `child`), not by bubblewrap.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::OnceLock;

use rustix::io::write;
use rustix::pipe::{PipeFlags, pipe_with};
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// Calls refused whatever their arguments: other processes' memory, the kernel's attack
/// surface (`bpf`, `io_uring`, keyrings, modules, `kexec`, `perf_event_open`), and every way
/// to change mounts or namespaces.
const DENIED: &[libc::c_long] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_move_mount,
    libc::SYS_open_tree,
    libc::SYS_fsopen,
    libc::SYS_fsmount,
    libc::SYS_fsconfig,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_io_uring_setup,
    libc::SYS_io_uring_enter,
    libc::SYS_io_uring_register,
];

/// The one socket family every box may use.
const ALWAYS_ALLOWED_FAMILY: i32 = libc::AF_UNIX;

/// The bits of `socket`'s type argument that name the type (`SOCK_TYPE_MASK`; the others are
/// `SOCK_NONBLOCK` and `SOCK_CLOEXEC`).
const SOCKET_TYPE_MASK: u64 = 0xf;

/// `clone` flags that make a namespace.
const NAMESPACE_FLAGS: [i32; 8] = [
    libc::CLONE_NEWNS,
    libc::CLONE_NEWUSER,
    libc::CLONE_NEWPID,
    libc::CLONE_NEWNET,
    libc::CLONE_NEWUTS,
    libc::CLONE_NEWIPC,
    libc::CLONE_NEWCGROUP,
    0x80, // CLONE_NEWTIME
];

/// Calls refused whatever their arguments without bubblewrap: every way to reach a Unix socket
/// by its address.
const DENIED_WITHOUT_NAMESPACES: &[libc::c_long] =
    &[libc::SYS_connect, libc::SYS_sendmsg, libc::SYS_sendmmsg];

/// The two programs as pipes holding their bytes, read ends returned (close-on-exec; the box's
/// first process clears the flag on them). With `network` (a box with a relay to its proxy),
/// an IPv4 TCP socket is allowed beside Unix sockets, and no other. Each variant is compiled once per
/// process: the programs depend on nothing else.
pub(crate) fn programs(network: bool) -> io::Result<Vec<OwnedFd>> {
    static BYTES: [OnceLock<Vec<Vec<u8>>>; 2] = [OnceLock::new(), OnceLock::new()];
    let cell = &BYTES[usize::from(network)];
    let programs = match cell.get() {
        Some(programs) => programs,
        None => {
            let made = compiled_with(false, network)?
                .iter()
                .map(bytes_of)
                .collect();
            cell.get_or_init(|| made)
        }
    };
    programs.iter().map(|bytes| in_pipe(bytes)).collect()
}

/// The two programs; `without_namespaces` adds the rules of a box without bubblewrap.
pub(crate) fn compiled(without_namespaces: bool) -> io::Result<Vec<BpfProgram>> {
    compiled_with(without_namespaces, false)
}

/// The rules refusing `socket` (`EPERM` when one matches): every family but `AF_UNIX`, and with
/// `network` (a box whose relay and command reach `127.0.0.1:P` over TCP) but `AF_INET` too, of
/// which every type but `SOCK_STREAM` and every protocol but TCP (0 or `IPPROTO_TCP`; MPTCP and
/// SCTP are not what Landlock's TCP rules restrict) stay refused.
fn socket_rules(network: bool) -> io::Result<Vec<SeccompRule>> {
    if !network {
        return Ok(vec![rule(0, SeccompCmpOp::Ne, ALWAYS_ALLOWED_FAMILY)?]);
    }
    let inet = |arg: u8, op: SeccompCmpOp, value: u64| {
        SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value)
            .map_err(|e| io::Error::other(format!("seccomp: {e}")))
    };
    let family = || inet(0, SeccompCmpOp::Eq, libc::AF_INET as u64);
    let mut rules = vec![
        SeccompRule::new(vec![
            inet(0, SeccompCmpOp::Ne, ALWAYS_ALLOWED_FAMILY as u64)?,
            inet(0, SeccompCmpOp::Ne, libc::AF_INET as u64)?,
        ])
        .map_err(|e| io::Error::other(format!("seccomp: {e}")))?,
    ];
    for kind in (0..=SOCKET_TYPE_MASK).filter(|&k| k != libc::SOCK_STREAM as u64) {
        rules.push(
            SeccompRule::new(vec![
                family()?,
                inet(1, SeccompCmpOp::MaskedEq(SOCKET_TYPE_MASK), kind)?,
            ])
            .map_err(|e| io::Error::other(format!("seccomp: {e}")))?,
        );
    }
    rules.push(
        SeccompRule::new(vec![
            family()?,
            inet(2, SeccompCmpOp::Ne, 0)?,
            inet(2, SeccompCmpOp::Ne, libc::IPPROTO_TCP as u64)?,
        ])
        .map_err(|e| io::Error::other(format!("seccomp: {e}")))?,
    );
    Ok(rules)
}

/// The two programs for a box with or without bubblewrap, with or without a network.
fn compiled_with(without_namespaces: bool, network: bool) -> io::Result<Vec<BpfProgram>> {
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| io::Error::other(format!("seccomp: {e}")))?;
    let mut denied: BTreeMap<i64, Vec<SeccompRule>> =
        DENIED.iter().map(|&call| (call, Vec::new())).collect();
    // A box without bubblewrap never has a network (see `boxed`).
    denied.insert(
        libc::SYS_socket,
        socket_rules(network && !without_namespaces)?,
    );
    // A pair is never a way out, but only Unix sockets need one.
    denied.insert(
        libc::SYS_socketpair,
        vec![rule(0, SeccompCmpOp::Ne, ALWAYS_ALLOWED_FAMILY)?],
    );
    if without_namespaces {
        for &call in DENIED_WITHOUT_NAMESPACES {
            denied.insert(call, Vec::new());
        }
        // sendto with a destination address (its fifth argument); without one it is `send`.
        denied.insert(
            libc::SYS_sendto,
            vec![
                SeccompRule::new(vec![
                    SeccompCondition::new(4, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, 0)
                        .map_err(|e| io::Error::other(format!("seccomp: {e}")))?,
                ])
                .map_err(|e| io::Error::other(format!("seccomp: {e}")))?,
            ],
        );
    }
    denied.insert(
        libc::SYS_clone,
        NAMESPACE_FLAGS
            .iter()
            .map(|&flag| rule(0, SeccompCmpOp::MaskedEq(flag as u64), flag))
            .collect::<io::Result<_>>()?,
    );
    let deny = compile(denied, libc::EPERM, arch)?;
    let clone3 = compile(
        BTreeMap::from([(libc::SYS_clone3, Vec::new())]),
        libc::ENOSYS,
        arch,
    )?;
    Ok(vec![deny, clone3])
}

fn rule(arg: u8, op: SeccompCmpOp, value: i32) -> io::Result<SeccompRule> {
    let condition = SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value as u64)
        .map_err(|e| io::Error::other(format!("seccomp: {e}")))?;
    SeccompRule::new(vec![condition]).map_err(|e| io::Error::other(format!("seccomp: {e}")))
}

fn compile(
    rules: BTreeMap<i64, Vec<SeccompRule>>,
    errno: i32,
    arch: TargetArch,
) -> io::Result<BpfProgram> {
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        arch,
    )
    .map_err(|e| io::Error::other(format!("seccomp: {e}")))?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| io::Error::other(format!("seccomp: {e}")))
}

/// The program's bytes as bubblewrap reads them: `struct sock_filter` in native order.
fn bytes_of(program: &BpfProgram) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(program.len() * 8);
    for insn in program {
        bytes.extend_from_slice(&insn.code.to_ne_bytes());
        bytes.push(insn.jt);
        bytes.push(insn.jf);
        bytes.extend_from_slice(&insn.k.to_ne_bytes());
    }
    bytes
}

/// A pipe holding `bytes`, its write end closed, so bubblewrap reads it to the end.
fn in_pipe(bytes: &[u8]) -> io::Result<OwnedFd> {
    let (read_end, write_end) = pipe_with(PipeFlags::CLOEXEC)?;
    let mut done = 0;
    while done < bytes.len() {
        done += write(&write_end, &bytes[done..])?;
    }
    Ok(read_end)
}
