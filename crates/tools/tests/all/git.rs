//! The git tools on repositories made here with the real `git`: the repository guessed from
//! the folder asked for, never one above the granted folder, a booby-trapped repository whose
//! configured programs never run (and do run under plain git), `git_diff`'s filters, and
//! `git_clone` over https from the testkit's TLS server serving a bare repository by git's
//! "dumb" HTTP protocol.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use testkit::tls_server::{TestCa, TlsResponse, TlsServer};
use tools::git::{
    CloneOptions, GitCloneArgs, GitContainment, GitDiffArgs, GitError, GitOptions, GitStatusArgs,
    git_clone, git_diff, git_status,
};
use tools::web::{FetchError, FetchOptions};

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

fn status(path: &Path, root: &Path) -> Result<tools::git::GitResult, GitError> {
    git_status(
        &GitStatusArgs {
            path: path.display().to_string(),
        },
        &GitOptions::new(root),
    )
}

#[test]
fn git_status_finds_the_repository_from_a_folder_inside_it_and_merges_its_output() {
    let (_keep, root) = temp();
    repository(&root);
    std::fs::create_dir_all(root.join("src/deep")).unwrap();
    std::fs::write(root.join("src/new.rs"), "fn main() {}\n").unwrap();
    std::fs::write(root.join("a.txt"), "two\n").unwrap();
    let result = status(&root.join("src/deep"), &root).unwrap();
    assert_eq!(result.repository, root.display().to_string());
    assert_eq!(result.exit_code, Some(0), "{}", result.output);
    assert!(
        result.output.contains("On branch main"),
        "{}",
        result.output
    );
    assert!(
        result.output.contains("modified:   a.txt"),
        "{}",
        result.output
    );
    assert!(result.output.contains("src/"), "{}", result.output);
    assert_eq!(result.containment, tools::shell::Containment::PidNamespace);
}

#[test]
fn the_one_repository_below_the_folder_asked_for_is_used_and_several_are_named() {
    let (_keep, root) = temp();
    repository(&root.join("app"));
    std::fs::create_dir_all(root.join("notes")).unwrap();
    let result = status(&root, &root).unwrap();
    assert_eq!(result.repository, root.join("app").display().to_string());
    assert!(
        result.output.contains("nothing to commit"),
        "{}",
        result.output
    );
    repository(&root.join("lib"));
    let error = status(&root, &root).unwrap_err();
    assert!(matches!(error, GitError::Several { .. }), "{error}");
    assert!(error.to_string().contains("app, lib"), "{error}");
}

#[test]
fn a_repository_above_the_granted_folder_is_not_used() {
    let (_keep, top) = temp();
    repository(&top);
    let granted = top.join("granted");
    std::fs::create_dir_all(granted.join("inner")).unwrap();
    // Plain git finds the repository above; the tool, held to the granted folder, does not.
    assert!(
        git(&granted.join("inner"), &["rev-parse", "--show-toplevel"])
            .contains(&*top.to_string_lossy())
    );
    let error = status(&granted.join("inner"), &granted).unwrap_err();
    assert!(matches!(error, GitError::NoRepository { .. }), "{error}");
    let error = status(&top, &granted).unwrap_err();
    assert!(matches!(error, GitError::OutsideGrant { .. }), "{error}");
}

#[test]
fn a_work_tree_whose_git_folder_is_outside_the_granted_folder_is_refused() {
    let (_keep, top) = temp();
    let granted = top.join("granted");
    std::fs::create_dir_all(&granted).unwrap();
    let outside = top.join("outside.git");
    git(
        &top,
        &[
            "init",
            "-q",
            "--separate-git-dir",
            &outside.display().to_string(),
            &granted.display().to_string(),
        ],
    );
    assert!(granted.join(".git").is_file());
    let error = status(&granted, &granted).unwrap_err();
    assert!(
        matches!(
            error,
            GitError::RepositoryOutside {
                what: "git folder",
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn git_diff_shows_unstaged_or_staged_changes_limited_to_its_paths() {
    let (_keep, root) = temp();
    repository(&root);
    std::fs::write(root.join("b.txt"), "bee\n").unwrap();
    git(&root, &["add", "b.txt"]);
    git(&root, &["commit", "-q", "-m", "b"]);
    std::fs::write(root.join("a.txt"), "one\nmore\n").unwrap();
    std::fs::write(root.join("b.txt"), "bee\nsting\n").unwrap();
    let diff = |staged: Option<bool>, paths: Option<Vec<String>>| {
        git_diff(
            &GitDiffArgs {
                path: root.display().to_string(),
                staged,
                paths,
            },
            &GitOptions::new(&root),
        )
    };
    let all = diff(None, None).unwrap();
    assert!(
        all.output.contains("+more") && all.output.contains("+sting"),
        "{}",
        all.output
    );
    let only_b = diff(None, Some(vec!["b.txt".into()])).unwrap();
    assert!(only_b.output.contains("+sting"), "{}", only_b.output);
    assert!(!only_b.output.contains("+more"), "{}", only_b.output);
    assert!(diff(Some(true), None).unwrap().output.is_empty());
    git(&root, &["add", "a.txt"]);
    let staged = diff(Some(true), None).unwrap();
    assert!(
        staged.output.contains("+more") && !staged.output.contains("+sting"),
        "{}",
        staged.output
    );
    for bad in ["--output=/tmp/x", "/etc/passwd", "../up", ":(attr:x)a", ""] {
        let error = diff(None, Some(vec![bad.into()])).unwrap_err();
        assert!(matches!(error, GitError::BadFilter(_)), "{bad}: {error}");
    }
}

/// A repository whose configuration names a pager, an fsmonitor, a hook, an external diff, a
/// textconv and a filter driver, each a script that leaves a marker in `marks` when it runs.
fn booby_trapped(root: &Path, marks: &Path) {
    repository(root);
    std::fs::create_dir_all(marks).unwrap();
    let script = |name: &str, body: &str| -> String {
        let path = marks.join(format!("{name}.sh"));
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\ntouch '{}'\n{body}\n",
                marks.join(name).display()
            ),
        )
        .unwrap();
        Command::new("chmod")
            .arg("755")
            .arg(&path)
            .status()
            .unwrap();
        path.display().to_string()
    };
    let config = [
        ("core.pager", script("pager", "cat")),
        ("core.fsmonitor", script("fsmonitor", "exit 1")),
        ("diff.external", script("external", "exit 0")),
        ("diff.conv.textconv", script("textconv", "cat \"$1\"")),
        ("filter.trap.clean", script("filter", "cat")),
    ];
    for (key, value) in &config {
        git(root, &["config", key, value]);
    }
    let hook = root.join(".git/hooks/post-index-change");
    std::fs::write(
        &hook,
        format!("#!/bin/sh\ntouch '{}'\n", marks.join("hook").display()),
    )
    .unwrap();
    Command::new("chmod")
        .arg("755")
        .arg(&hook)
        .status()
        .unwrap();
    std::fs::write(
        root.join(".git/info/attributes"),
        "*.txt diff=conv filter=trap\n",
    )
    .unwrap();
    // A change whose stat differs from the index (git must read the file to compare).
    std::thread::sleep(Duration::from_millis(1100));
    std::fs::write(root.join("a.txt"), "one\nchanged\n").unwrap();
}

const TRAPS: [&str; 6] = [
    "pager",
    "fsmonitor",
    "hook",
    "external",
    "textconv",
    "filter",
];

fn fired(marks: &Path) -> Vec<&'static str> {
    TRAPS
        .into_iter()
        .filter(|t| marks.join(t).exists())
        .collect()
}

#[test]
fn a_booby_trapped_repository_runs_none_of_its_programs_but_plain_git_runs_them_all() {
    let (_keep, top) = temp();
    let (root, marks) = (top.join("repo"), top.join("marks"));
    booby_trapped(&root, &marks);
    let options = GitOptions::new(&root);
    let path = root.display().to_string();
    let status = git_status(&GitStatusArgs { path: path.clone() }, &options).unwrap();
    assert!(
        status.output.contains("modified:   a.txt"),
        "{}",
        status.output
    );
    for staged in [None, Some(true)] {
        let diff = git_diff(
            &GitDiffArgs {
                path: path.clone(),
                staged,
                paths: None,
            },
            &options,
        )
        .unwrap();
        assert_eq!(diff.exit_code, Some(0), "{}", diff.output);
        if staged.is_none() {
            assert!(diff.output.contains("+changed"), "{}", diff.output);
        }
    }
    assert_eq!(
        fired(&marks),
        Vec::<&str>::new(),
        "a trap ran under the tools"
    );
    // The same repository under plain git runs every one of them, so the test can fail.
    git(&root, &["status"]);
    git(&root, &["diff"]);
    git(&root, &["diff", "--no-ext-diff"]);
    let pager = Command::new("script")
        .args(["-qec", "git log", "/dev/null"])
        .current_dir(&root)
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .unwrap();
    assert!(pager.status.success());
    assert_eq!(
        fired(&marks),
        TRAPS.to_vec(),
        "plain git did not run every trap"
    );
}

#[test]
fn git_status_runs_in_a_box_holding_only_the_granted_folder() {
    let (_keep, root) = temp();
    repository(&root);
    std::fs::write(root.join("a.txt"), "two\n").unwrap();
    let mut options = GitOptions::new(&root);
    options.walls = GitContainment::Boxed(Box::new(sandbox::Policy {
        read_only: vec![root.clone()],
        ..sandbox::Policy::default()
    }));
    let result = git_status(
        &GitStatusArgs {
            path: root.display().to_string(),
        },
        &options,
    )
    .unwrap();
    assert_eq!(result.exit_code, Some(0), "{}", result.output);
    assert!(
        result.output.contains("modified:   a.txt"),
        "{}",
        result.output
    );
    assert_eq!(result.containment, tools::shell::Containment::Bubblewrap);
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
    assert!(matches!(error, GitError::Destination(_)), "{error}");
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
        matches!(error, GitError::Host(FetchError::UnsafeAddress { .. })),
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
