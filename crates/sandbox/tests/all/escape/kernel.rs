//! Attempts on the kernel's surface, refused by the box's seccomp filter (with bubblewrap's
//! namespaces and dropped capabilities beneath it).

use super::scene;

/// A Perl one-liner making one system call: prints `made <result>` when it succeeds.
fn syscall(setup: &str, call: &str) -> String {
    format!(
        "perl -e '{setup} my $r = syscall({call}); die \"refused: $!\\n\" if $r < 0; print \"made $r\\n\"'"
    )
}

const EPERM: &str = "refused: Operation not permitted";

#[test]
fn keyctl_is_refused() {
    // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING, 0)
    scene().attempt(&syscall("", "250, 0, -3, 0"), "made", EPERM);
}

#[test]
fn io_uring_is_refused() {
    // io_uring_setup(1, &params)
    scene().attempt(
        &syscall("my $p = \"\\0\" x 120;", "425, 1, $p"),
        "made",
        EPERM,
    );
}

#[test]
fn bpf_is_refused() {
    // bpf(BPF_MAP_CREATE, {array, 4-byte keys and values, 1 entry}, 72)
    let setup = "my $a = pack(\"LLLL\", 2, 4, 4, 1) . (\"\\0\" x 56);";
    scene().attempt(&syscall(setup, "321, 0, $a, 72"), "made", EPERM);
}

#[test]
fn ptrace_of_a_sibling_is_refused() {
    // PTRACE_ATTACH to a `sleep` started by the same shell; the sleep is killed either way.
    let script = format!(
        "sleep 30 & victim=$!; {} \"$victim\"; status=$?; kill -9 $victim; exit $status",
        syscall("", "101, 16, $ARGV[0] + 0, 0, 0")
    );
    scene().attempt(&script, "made", EPERM);
}

#[test]
fn a_raw_packet_socket_is_refused() {
    let script = "perl -e 'socket(my $s, 17, 3, 0) or die \"refused: $!\\n\"; print \"made\\n\"'";
    scene().attempt(script, "made", EPERM);
}

#[test]
fn a_netlink_socket_is_refused() {
    scene().attempt("ip -o link show lo", "lo:", "Operation not permitted");
}

#[test]
fn a_new_network_namespace_cannot_be_made() {
    scene().attempt(
        "unshare -n true && echo made",
        "made",
        "unshare failed: Operation not permitted",
    );
}

#[test]
fn a_new_mount_namespace_cannot_be_made() {
    scene().attempt(
        "unshare -m true && echo made",
        "made",
        "unshare failed: Operation not permitted",
    );
}
