//! `git_clone` over https from the testkit's TLS server serving a bare repository by git's
//! "dumb" HTTP protocol: the checked address reached, a box without a network, refused URLs
//! and addresses, and the size limit.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use nettools::git::{CloneError, CloneOptions, git_clone};
use nettools::web::{FetchError, FetchOptions};
use testkit::tls_server::{TestCa, TlsResponse, TlsServer};
use tools::git::{GitCloneArgs, GitContainment, GitError};

/// Runs plain git (the owner's own, not a tool's) in `dir`, and panics if it fails.
fn git(dir: &Path, args: &[&str]) -> String {
    let output = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// A repository at `dir` with one commit of `a.txt` ("one\n").
fn repository(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    git(dir, &["config", "user.email", "test@example.com"]);
    git(dir, &["config", "user.name", "Test"]);
    std::fs::write(dir.join("a.txt"), "one\n").unwrap();
    git(dir, &["add", "a.txt"]);
    git(dir, &["commit", "-q", "-m", "first"]);
}

/// A resolved temporary folder.
fn temp() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().canonicalize().unwrap();
    (dir, path)
}

/// A bare repository of `files` (name, bytes) served on `server` under `/repo.git/` by git's
/// dumb HTTP protocol: every file of the bare repository as a route.
fn serve_bare(server: &TlsServer, work: &Path, files: &[(&str, Vec<u8>)]) {
    let source = work.join("source");
    repository(&source);
    for (name, bytes) in files {
        std::fs::write(source.join(name), bytes).unwrap();
        git(&source, &["add", name]);
    }
    git(&source, &["commit", "-q", "-m", "files"]);
    let bare = work.join("repo.git");
    git(
        work,
        &[
            "clone",
            "-q",
            "--bare",
            &source.display().to_string(),
            &bare.display().to_string(),
        ],
    );
    git(&bare, &["repack", "-a", "-d", "-q"]);
    git(&bare, &["update-server-info"]);
    server.route_folder("/repo.git", &bare);
    server.route(
        "/repo.git/info/refs?service=git-upload-pack",
        TlsResponse::ok("text/plain", std::fs::read(bare.join("info/refs")).unwrap()),
    );
}

/// Clone options trusting `ca`, resolving `git.test` to loopback, which the grant names.
fn clone_options(ca: &TestCa, port: u16) -> CloneOptions {
    let fetch = FetchOptions::new(move |host: &str, p: u16| host == "git.test" && p == port)
        .with_explicit_hosts(["git.test"])
        .with_resolver(|_: &str| Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]))
        .with_root_certificate(ca.cert_pem().into_bytes())
        .with_timeout(Duration::from_secs(60));
    CloneOptions::new(fetch)
}

#[test]
fn git_clone_over_https_reaches_the_checked_address_git_itself_cannot_resolve() {
    let (_keep, work) = temp();
    let ca = TestCa::new("boxmaker git test CA");
    let server = TlsServer::start(&ca.issue(&["git.test"])).unwrap();
    serve_bare(
        &server,
        &work,
        &[("readme.md", b"hello from the server\n".to_vec())],
    );
    let destination = work.join("clone");
    let args = GitCloneArgs {
        url: server.url("git.test", "/repo.git"),
        path: destination.display().to_string(),
    };
    let result = git_clone(&args, &clone_options(&ca, server.port())).unwrap();
    assert!(result.cloned(), "{result:?}");
    assert_eq!(result.address, "127.0.0.1");
    assert_eq!(
        std::fs::read_to_string(destination.join("readme.md")).unwrap(),
        "hello from the server\n"
    );
    assert!(result.bytes > 0);
    // Every request went to the pinned server; git.test resolves nowhere else.
    assert!(
        server
            .requests()
            .iter()
            .all(|r| r.host.as_deref().is_some_and(|h| h.starts_with("git.test")))
    );
    // A second clone into the same, now full, folder is refused before any request.
    let before = server.connections();
    let error = git_clone(&args, &clone_options(&ca, server.port())).unwrap_err();
    assert!(
        matches!(error, CloneError::Git(GitError::Destination(_))),
        "{error}"
    );
    assert_eq!(server.connections(), before);
}

#[test]
fn a_clone_in_a_box_without_a_network_reaches_nothing_and_leaves_nothing() {
    let (_keep, work) = temp();
    let ca = TestCa::new("boxmaker git test CA");
    let server = TlsServer::start(&ca.issue(&["git.test"])).unwrap();
    serve_bare(&server, &work, &[("readme.md", b"hello\n".to_vec())]);
    let destination = work.join("clone");
    let args = GitCloneArgs {
        url: server.url("git.test", "/repo.git"),
        path: destination.display().to_string(),
    };
    let mut options = clone_options(&ca, server.port());
    // Unpinned in a box: the box's network (the caller's proxy) is its only way to the host.
    options.walls = GitContainment::Boxed(Box::new(sandbox::Policy {
        read_write: vec![work.clone()],
        ..sandbox::Policy::default()
    }));
    let result = git_clone(&args, &options).unwrap();
    assert!(!result.cloned(), "{result:?}");
    assert_eq!(result.containment.as_str(), "bubblewrap");
    assert!(result.output.contains("git.test"), "{}", result.output);
    assert!(!destination.exists());
    assert_eq!(server.connections(), 0);
}

#[test]
fn a_file_url_an_ssh_url_and_a_private_address_are_refused() {
    let (_keep, work) = temp();
    let ca = TestCa::new("boxmaker git test CA");
    let options = clone_options(&ca, 443);
    let clone = |url: &str, options: &CloneOptions| {
        git_clone(
            &GitCloneArgs {
                url: url.to_string(),
                path: work.join("dest").display().to_string(),
            },
            options,
        )
    };
    let source = work.join("local");
    repository(&source);
    let error = clone(&format!("file://{}", source.display()), &options).unwrap_err();
    assert!(error.to_string().contains("https"), "{error}");
    let error = clone("git@github.com:rust-lang/rust.git", &options).unwrap_err();
    assert_eq!(error.to_string(), tools::git::SSH_NOT_SUPPORTED);
    // A host the grant does not name explicitly may not resolve to loopback.
    let fetch = FetchOptions::new(|_: &str, _: u16| true)
        .with_resolver(|_: &str| Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]));
    let error = clone("https://inside.test/repo.git", &CloneOptions::new(fetch)).unwrap_err();
    assert!(
        matches!(error, CloneError::Host(FetchError::UnsafeAddress { .. })),
        "{error}"
    );
    assert!(!work.join("dest").exists());
}

#[test]
fn a_clone_larger_than_its_limit_is_stopped_and_leaves_nothing() {
    let (_keep, work) = temp();
    let ca = TestCa::new("boxmaker git test CA");
    let server = TlsServer::start(&ca.issue(&["git.test"])).unwrap();
    // 48 MiB that do not compress: more than git fetches within one of the watch's periods.
    let mut noise = Vec::with_capacity(48 << 20);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while noise.len() < 48 << 20 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        noise.extend_from_slice(&x.to_le_bytes());
    }
    serve_bare(&server, &work, &[("noise.bin", noise)]);
    let destination = work.join("clone");
    std::fs::create_dir(&destination).unwrap();
    let mut options = clone_options(&ca, server.port());
    options.max_bytes = 1 << 20;
    let result = git_clone(
        &GitCloneArgs {
            url: server.url("git.test", "/repo.git"),
            path: destination.display().to_string(),
        },
        &options,
    )
    .unwrap();
    assert!(result.too_large, "{result:?}");
    assert!(!result.cloned());
    // Stopped while it fetched, not measured after it finished: git's box was killed before
    // git exited (a clone that finished has exit code 0).
    assert_eq!(result.exit_code, None, "{result:?}");
    // The empty folder it was given is left empty.
    assert!(destination.is_dir());
    assert_eq!(std::fs::read_dir(&destination).unwrap().count(), 0);
}
