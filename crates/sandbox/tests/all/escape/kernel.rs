//! Attempts on the kernel's surface, refused by the box's seccomp filter (with bubblewrap's
//! namespaces and dropped capabilities beneath it).

use super::scene;

/// A Perl one-liner making one system call: prints `made <result>` when it succeeds.
pub(super) fn syscall(setup: &str, call: &str) -> String {
    format!(
        "perl -e '{setup} my $r = syscall({call}); die \"refused: $!\\n\" if $r < 0; print \"made $r\\n\"'"
    )
}

pub(super) const EPERM: &str = "refused: Operation not permitted";

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

#[test]
fn perf_event_open_is_refused() {
    // perf_event_open({PERF_TYPE_SOFTWARE, size 128, PERF_COUNT_SW_CPU_CLOCK}, self, any CPU)
    let setup = "my $a = pack(\"LLQ\", 1, 128, 0) . (\"\\0\" x 112);";
    scene().attempt(&syscall(setup, "298, $a, 0, -1, -1, 0"), "made", EPERM);
}

#[test]
fn process_vm_readv_of_a_sibling_is_refused() {
    // A forked sibling holds the same string at the same address; reading it back through
    // process_vm_readv(sibling, {out, 22}, 1, {string, 22}, 1, 0) prints it.
    let script = r#"perl -e '
        my $secret = "sibling-memory-5e11ff"; my $out = "x" x 22;
        my $pid = fork; if (!$pid) { sleep 30; exit 0 }
        my $local = pack("QQ", unpack("Q", pack("p", $out)), 22);
        my $remote = pack("QQ", unpack("Q", pack("p", $secret)), 22);
        my $r = syscall(310, $pid, $local, 1, $remote, 1, 0);
        kill 9, $pid; waitpid $pid, 0;
        die "refused: $!\n" if $r < 0; print "made $out\n"'"#;
    scene().attempt(script, "made sibling-memory-5e11ff", EPERM);
}

#[test]
fn loading_a_module_from_a_descriptor_is_refused() {
    // finit_module(-1, "", 0): on the host the call reaches the kernel, which finds no file
    // behind the descriptor (or, built without modules like this one, answers ENOSYS); in the
    // box seccomp refuses it first.
    let s = scene();
    let script = syscall("my $e = \"\";", "313, -1, $e, 0");
    reaches_the_kernel(&s, &script, "refused: Bad file descriptor");
    s.refused_in_box(&script, &[], "made", EPERM);
}

#[test]
fn loading_a_module_from_memory_is_refused() {
    // init_module(NULL, 0, ""): on the host the kernel finds no ELF header in zero bytes (or
    // has no modules at all).
    let s = scene();
    let script = syscall("my $e = \"\";", "175, 0, 0, $e");
    reaches_the_kernel(&s, &script, "refused: Exec format error");
    s.refused_in_box(&script, &[], "made", EPERM);
}

/// Unsandboxed, the call meets the kernel's own answer: `answer`, or `ENOSYS` from a kernel
/// built without module support; never seccomp's `EPERM`.
fn reaches_the_kernel(s: &super::Scene, script: &str, answer: &str) {
    let host = s.host(script, &[]);
    assert!(
        host.stderr.contains(answer) || host.stderr.contains("refused: Function not implemented"),
        "{}",
        host.stderr
    );
    assert!(!host.stderr.contains(EPERM), "{}", host.stderr);
}
