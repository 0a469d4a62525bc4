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

/// The socket types each family is tried with: stream, datagram, raw, sequenced packets.
const SOCKET_TYPES: [i32; 4] = [1, 2, 3, 5];

/// Past the kernel's `AF_MAX` (46 in Linux 6.x, `include/linux/socket.h`), so that a family
/// added later is walked too.
const LAST_FAMILY: i32 = 63;

/// A Perl walk over every socket family number and type, through `socket` and `socketpair`:
/// one line each, `socket|pair FAMILY TYPE made|ERRNO`.
pub(crate) fn family_walk() -> String {
    let types = SOCKET_TYPES.map(|t| t.to_string()).join(",");
    format!(
        "perl -e 'for my $f (0..{LAST_FAMILY}) {{ for my $t ({types}) {{ \
         print \"socket $f $t \", (socket(my $s, $f, $t, 0) ? \"made\" : $!+0), \"\\n\"; \
         print \"pair $f $t \", (socketpair(my $a, my $b, $f, $t, 0) ? \"made\" : $!+0), \"\\n\" }} }}'"
    )
}

/// One line of [`family_walk`]'s output: the call, the family, the type, `made` or the errno.
pub(crate) struct Tried {
    pub(crate) call: String,
    pub(crate) family: i32,
    pub(crate) kind: i32,
    pub(crate) answer: String,
}

/// [`family_walk`]'s lines, checked to cover every family and type through both calls.
pub(crate) fn walked(stdout: &str) -> Vec<Tried> {
    let tried: Vec<Tried> = stdout
        .lines()
        .map(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            assert_eq!(words.len(), 4, "{line}");
            Tried {
                call: words[0].to_string(),
                family: words[1].parse().unwrap(),
                kind: words[2].parse().unwrap(),
                answer: words[3].to_string(),
            }
        })
        .collect();
    let expected = (LAST_FAMILY as usize + 1) * SOCKET_TYPES.len() * 2;
    assert_eq!(tried.len(), expected, "{stdout}");
    tried
}

/// The walk in a box: each try `allowed` picks reaches the kernel (anything but `EPERM`, and
/// a Unix stream socket and pair are made), every other one is `EPERM`.
pub(crate) fn only_allowed_families(stdout: &str, allowed: impl Fn(&Tried) -> bool) {
    let mut wrong = Vec::new();
    for tried in walked(stdout) {
        let refused = tried.answer == libc::EPERM.to_string();
        let ok = if allowed(&tried) {
            !refused && (tried.family != libc::AF_UNIX || tried.kind != 1 || tried.answer == "made")
        } else {
            refused
        };
        if !ok {
            wrong.push(format!(
                "{} family {} type {}: {}",
                tried.call, tried.family, tried.kind, tried.answer
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// The walk unsandboxed, as root: no family is refused with `EPERM`, and IPv4, netlink and
/// Unix sockets are made (the walk really makes sockets).
pub(super) fn every_family_reaches_the_kernel_on_the_host(s: &super::Scene) {
    let host = s.host(&family_walk(), &[]);
    assert_eq!(host.code, Some(0), "{}", host.stderr);
    let tried = walked(&host.stdout);
    let eperm = libc::EPERM.to_string();
    assert!(tried.iter().all(|t| t.answer != eperm), "{}", host.stdout);
    for family in [libc::AF_UNIX, libc::AF_INET, libc::AF_NETLINK] {
        assert!(
            tried
                .iter()
                .any(|t| t.family == family && t.call == "socket" && t.answer == "made"),
            "family {family}: {}",
            host.stdout
        );
    }
}

/// Unix sockets alone reach the kernel: `socket` and `socketpair` of every other family answer
/// `EPERM` (vsock included, which no network namespace holds).
pub(super) fn only_unix(tried: &Tried) -> bool {
    tried.family == libc::AF_UNIX
}

#[test]
fn every_socket_family_but_unix_is_refused_in_the_box() {
    let s = scene();
    every_family_reaches_the_kernel_on_the_host(&s);
    let script = family_walk();
    let fresh = s.boxed(&script, &[]);
    assert_eq!(fresh.code, Some(0), "{}", fresh.stderr);
    only_allowed_families(&fresh.stdout, only_unix);
    let warm = s.warm(&script, &[]);
    assert_eq!(warm.code, Some(0), "{}", warm.stderr);
    only_allowed_families(&warm.stdout, only_unix);
}
