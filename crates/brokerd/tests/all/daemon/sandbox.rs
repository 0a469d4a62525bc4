//! `shell` through the daemon runs in the box: the grant's folder read-write, nothing else of
//! the machine's files, boxmaker's own folders masked even under a grant on their parent, and
//! the header naming the walls; `[sandbox] file_walls = false` is the explicit way out.

use std::fs;

use testkit::{AgentClient, BrokerProcess};

use super::{FAST, content};

const SHELL_IN_WORK: &str = r#"
[[grant]]
id = "cat-work"
tool = "shell"
commands = ["cat", "touch"]
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"
"#;

fn shell(broker: &BrokerProcess, id: u64, command: &str) -> (serde_json::Value, String) {
    shell_in(
        &mut AgentClient::open(&broker.socket(), None),
        broker,
        id,
        command,
    )
}

/// A `shell` call of `client`'s session in the work folder: its header and its body.
fn shell_in(
    client: &mut AgentClient,
    broker: &BrokerProcess,
    id: u64,
    command: &str,
) -> (serde_json::Value, String) {
    let args = serde_json::json!({ "command": command, "cwd": broker.work }).to_string();
    let response = client.call(id, "shell", &args).unwrap();
    let text = content(&response).to_string();
    let (header, body) = text.split_once('\n').unwrap();
    (serde_json::from_str(header).unwrap(), body.to_string())
}

#[test]
fn a_shell_call_runs_in_the_box_and_sees_only_its_grants_folder() {
    let broker = BrokerProcess::start(SHELL_IN_WORK, FAST);
    fs::write(broker.work.join("a.txt"), "inside\n").unwrap();
    let (header, body) = shell(&broker, 1, "cat a.txt && touch made");
    assert_eq!(header["exit_code"], 0, "{body}");
    assert_eq!(header["containment"], "bubblewrap");
    assert!(
        super::walls(&broker).as_str().starts_with("bubblewrap:"),
        "{header}"
    );
    assert!(
        super::walls(&broker)
            .as_str()
            .contains("Landlock fully enforced over the same paths"),
        "{header}"
    );
    assert_eq!(body, "inside\n");
    assert!(broker.work.join("made").exists());
    // A file beside the granted folder: unsandboxed, `cat` would print it.
    let beside = broker.work.parent().unwrap().join("beside.txt");
    fs::write(&beside, "outside the grant\n").unwrap();
    let (header, body) = shell(&broker, 2, &format!("cat {}", beside.display()));
    assert_eq!(header["exit_code"], 1, "{body}");
    assert!(body.contains("No such file or directory"), "{body}");
    assert!(!body.contains("outside the grant"), "{body}");
    // The grants file is never even tried: the decision refuses a script that names it.
    let grants = broker.config.join("grants/grants.toml");
    let mut client = AgentClient::open(&broker.socket(), None);
    let args =
        serde_json::json!({ "command": format!("cat {}", grants.display()), "cwd": broker.work });
    let response = client.call(3, "shell", &args.to_string()).unwrap();
    assert_eq!(
        response,
        proto::ToolResponse::Denied {
            reason: proto::DenyReason::ProtectedPath
        }
    );
}

/// The detail of the owner's `answered` event for `call_id`, from a watch opened before it.
fn watched_detail(watcher: &mut testkit::OwnerClient, call_id: u64) -> String {
    loop {
        match watcher.next_event() {
            Some(proto::OwnerEvent::Answered {
                call_id: id,
                detail,
                ..
            }) if id.0 == call_id => return detail,
            Some(_) => {}
            None => panic!("the watch ended before call {call_id} was answered"),
        }
    }
}

#[test]
fn a_boxed_results_walls_sentence_reaches_the_owners_watch_and_audit_but_the_model_gets_a_token() {
    for (config, token) in [
        (FAST.to_string(), "box"),
        (format!("{FAST}[sandbox]\nfile_walls = false\n"), "none"),
    ] {
        let broker = BrokerProcess::start(SHELL_IN_WORK, &config);
        fs::write(broker.work.join("a.txt"), "hi\n").unwrap();
        let mut watcher = testkit::OwnerClient::open(&broker.owner_socket());
        proto::write_frame(&mut watcher.stream, &proto::OwnerRequest::Watch {}).unwrap();
        let mut client = AgentClient::open(&broker.socket(), None);
        let args = serde_json::json!({ "command": "cat a.txt", "cwd": broker.work }).to_string();
        let response = client.call(1, "shell", &args).unwrap();
        let text = content(&response).to_string();
        let (line, body) = text.split_once('\n').unwrap();
        let header: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(body, "hi\n");
        // The model's header: a token, not the owner's sentence.
        assert_eq!(header["sandbox"], token, "{line}");
        assert!(line.len() < 300, "{} bytes: {line}", line.len());
        let sentence = super::walls(&broker);
        assert!(sentence.len() > 100, "{sentence}");
        assert!(!text.contains(&sentence), "{text}");
        if token == "box" {
            assert!(sentence.starts_with("bubblewrap:"), "{sentence}");
        } else {
            assert!(
                sentence.starts_with("none: [sandbox] file_walls = false"),
                "{sentence}"
            );
        }
        // The owner's watch and audit record keep it whole.
        assert_eq!(
            watched_detail(&mut watcher, 1),
            format!("sandbox: {sentence}")
        );
        let log = fs::read_to_string(broker.state.join(proto::dirs::AUDIT_FILE)).unwrap();
        assert!(
            log.contains(&serde_json::to_string(&format!("sandbox: {sentence}")).unwrap()),
            "{log}"
        );
    }
}

#[test]
fn without_file_walls_the_header_says_so_and_the_command_sees_the_machine() {
    let config = format!("{FAST}[sandbox]\nfile_walls = false\n");
    let broker = BrokerProcess::start(SHELL_IN_WORK, &config);
    let (header, body) = shell(&broker, 1, "cat /etc/hostname");
    assert_eq!(header["exit_code"], 0, "{body}");
    assert_ne!(header["containment"], "bubblewrap");
    assert!(
        super::walls(&broker)
            .as_str()
            .starts_with("none: [sandbox] file_walls = false"),
        "{header}"
    );
}

#[test]
fn boxmakers_folders_are_masked_under_a_shell_grant_on_their_parent() {
    let grants = r#"
[[grant]]
id = "cat-parent"
tool = "shell"
commands = ["cat", "ls"]
paths = ["{work}/.."]
untrusted = false
on_untrusted = "allow"
"#;
    let broker = BrokerProcess::start(grants, FAST);
    let parent = broker.work.parent().unwrap().to_path_buf();
    fs::write(parent.join("note.txt"), "granted\n").unwrap();
    // A link the agent could have made with an earlier command: the decision sees a path in
    // the grant, the box sees what the link names.
    std::os::unix::fs::symlink("config/grants/grants.toml", parent.join("link")).unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let call = |client: &mut AgentClient, id: u64, command: &str| {
        let args = serde_json::json!({ "command": command, "cwd": parent }).to_string();
        client.call(id, "shell", &args).unwrap()
    };
    // The decision resolves the link and refuses the script before any box is built.
    assert_eq!(
        call(&mut client, 1, "cat note.txt link"),
        proto::ToolResponse::Denied {
            reason: proto::DenyReason::ProtectedPath
        }
    );
    // A script that names no protected place still finds the folders masked in the box.
    let response = call(&mut client, 2, "cat note.txt && ls -R");
    let text = content(&response).to_string();
    let (header, body) = text.split_once('\n').unwrap();
    let header: serde_json::Value = serde_json::from_str(header).unwrap();
    assert_eq!(header["containment"], "bubblewrap", "{text}");
    assert!(body.starts_with("granted\n"), "{body}");
    assert!(body.contains("work"), "{body}");
    assert!(!body.contains("grants.toml"), "{body}");
}

#[test]
fn a_shell_grant_on_the_folder_holding_the_state_folder_runs_with_every_protected_folder_masked() {
    // The memory folder is a protected folder inside the state folder, itself protected: the
    // box masks the outer one only (masking the inner one inside the outer's read-only tmpfs
    // failed every command with bubblewrap's "Can't mkdir …: Read-only file system").
    let grants = r#"
[[grant]]
id = "ls-parent"
tool = "shell"
commands = ["ls", "cat"]
paths = ["{work}/.."]
untrusted = false
on_untrusted = "allow"
"#;
    let broker = BrokerProcess::start(grants, FAST);
    let memory = broker.state.join("memory");
    fs::create_dir_all(&memory).unwrap();
    fs::write(memory.join("secret"), "memory\n").unwrap();
    let parent = broker.work.parent().unwrap().to_path_buf();
    fs::write(parent.join("note.txt"), "granted\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = serde_json::json!({ "command": "cat note.txt && ls", "cwd": parent });
    let response = client.call(1, "shell", &args.to_string()).unwrap();
    let text = content(&response).to_string();
    let (header, body) = text.split_once('\n').unwrap();
    let header: serde_json::Value = serde_json::from_str(header).unwrap();
    assert_eq!(header["exit_code"], 0, "{text}");
    assert!(body.starts_with("granted\n"), "{body}");
    assert!(body.contains("state"), "{body}");
}

#[test]
fn read_file_and_write_file_run_in_brokerds_worker_in_a_box() {
    let broker = BrokerProcess::start(super::WORK, FAST);
    fs::write(broker.work.join("a.txt"), "hello\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let read = client
        .call(
            1,
            "read_file",
            &super::path_args(&broker.work.join("a.txt")),
        )
        .unwrap();
    let text = content(&read).to_string();
    let (header, body) = text.split_once('\n').unwrap();
    let header: serde_json::Value = serde_json::from_str(header).unwrap();
    assert_eq!(body, "hello\n");
    assert!(
        super::walls(&broker)
            .as_str()
            .starts_with("bubblewrap: brokerd's worker"),
        "{header}"
    );
    let args = serde_json::json!({
        "path": broker.work.join("b.txt"),
        "content": "written in a box\n",
    })
    .to_string();
    let wrote = client.call(2, "write_file", &args).unwrap();
    let text = content(&wrote).to_string();
    assert!(text.contains("\"sandbox\":\"box\""), "{text}");
    assert!(
        super::walls(&broker).starts_with("bubblewrap: brokerd's worker"),
        "{text}"
    );
    assert_eq!(
        fs::read_to_string(broker.work.join("b.txt")).unwrap(),
        "written in a box\n"
    );
}

#[test]
fn without_bubblewrap_a_shell_call_runs_in_a_box_of_landlock_alone_and_says_so() {
    let config = format!("{FAST}[sandbox]\nbubblewrap = false\n");
    let broker = BrokerProcess::start(SHELL_IN_WORK, &config);
    fs::write(broker.work.join("a.txt"), "inside\n").unwrap();
    let (header, body) = shell(&broker, 1, "cat a.txt && touch made");
    assert_eq!(header["exit_code"], 0, "{body}");
    assert_eq!(header["containment"], "cgroup");
    assert!(
        super::walls(&broker)
            .as_str()
            .starts_with("landlock only (no bubblewrap): Landlock fully enforced"),
        "{header}"
    );
    assert_eq!(body, "inside\n");
    assert!(broker.work.join("made").exists());
    // A file beside the granted folder (not one of boxmaker's, which the guard rail refuses
    // before any box exists): Landlock refuses it.
    let beside = broker.work.parent().unwrap().join("beside.txt");
    fs::write(&beside, "outside the grant\n").unwrap();
    let (header, body) = shell(&broker, 2, &format!("cat {}", beside.display()));
    assert_eq!(header["exit_code"], 1, "{body}");
    assert!(body.contains("Permission denied"), "{body}");
    assert!(!body.contains("outside the grant"), "{body}");
    // `bx status` shows what the running broker enforces.
    let mut owner = testkit::OwnerClient::open(&broker.owner_socket());
    let status = match owner.send(&proto::OwnerRequest::Status {}) {
        Some(proto::OwnerReply::Status { status }) => status,
        other => panic!("{other:?}"),
    };
    assert!(
        status.walls.iter().any(|w| w
            .starts_with("shell: landlock only (no bubblewrap): Landlock fully enforced")),
        "{:?}",
        status.walls
    );
}

#[test]
fn without_bubblewrap_read_file_runs_in_brokerds_worker_under_landlock() {
    let config = format!("{FAST}[sandbox]\nbubblewrap = false\n");
    let broker = BrokerProcess::start(super::WORK, &config);
    fs::write(broker.work.join("a.txt"), "hello\n").unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let read = client
        .call(
            1,
            "read_file",
            &super::path_args(&broker.work.join("a.txt")),
        )
        .unwrap();
    let text = content(&read).to_string();
    let (header, body) = text.split_once('\n').unwrap();
    let header: serde_json::Value = serde_json::from_str(header).unwrap();
    assert_eq!(body, "hello\n", "{text}");
    assert!(
        super::walls(&broker).as_str().starts_with(
            "landlock only (no bubblewrap): Landlock fully enforced: brokerd's worker"
        ),
        "{header}"
    );
}

#[test]
fn with_the_box_a_redirection_into_the_grants_folder_runs_and_without_it_is_refused() {
    let broker = BrokerProcess::start(SHELL_IN_WORK, FAST);
    fs::write(broker.work.join("a.txt"), "inside\n").unwrap();
    let (header, body) = shell(&broker, 1, "cat a.txt > copy.txt 2>&1");
    assert_eq!(header["exit_code"], 0, "{body}");
    assert_eq!(
        fs::read_to_string(broker.work.join("copy.txt")).unwrap(),
        "inside\n"
    );
    // Into boxmaker's own folders: refused before anything runs.
    let grants = broker.config.join("grants/planted.toml");
    let mut client = AgentClient::open(&broker.socket(), None);
    let args = serde_json::json!({
        "command": format!("cat a.txt > {}", grants.display()),
        "cwd": broker.work,
    })
    .to_string();
    let response = client.call(2, "shell", &args).unwrap();
    assert_eq!(super::denied(&response), proto::DenyReason::ProtectedPath);
    assert!(!grants.exists());
    // Without the box the strict rules stay: no redirection is covered.
    let config = format!("{FAST}[sandbox]\nfile_walls = false\n");
    let unboxed = BrokerProcess::start(SHELL_IN_WORK, &config);
    fs::write(unboxed.work.join("a.txt"), "inside\n").unwrap();
    let mut client = AgentClient::open(&unboxed.socket(), None);
    let args =
        serde_json::json!({ "command": "cat a.txt > copy.txt", "cwd": unboxed.work }).to_string();
    let response = client.call(1, "shell", &args).unwrap();
    assert_eq!(super::denied(&response), proto::DenyReason::NoGrant);
    assert!(!unboxed.work.join("copy.txt").exists());
}

#[test]
fn a_command_cannot_replace_the_brokers_binaries_in_a_folder_its_grant_covers() {
    // The owner's grant covers the folder brokerd is installed in: the box binds brokerd, its
    // launcher and its file worker read-only over themselves, or the next box (or the next
    // broker) would run the command's code.
    let grants = r#"
[[grant]]
id = "work"
tool = "shell"
commands = ["echo", "rm", "mv", "cat", "mkdir"]
paths = ["{work}"]
untrusted = false
on_untrusted = "allow"
"#;
    let broker = BrokerProcess::start_installed_in_work(grants, FAST);
    let bin = broker.work.join("bin");
    let stamp = |name: &str| {
        let meta = fs::metadata(bin.join(name)).unwrap();
        (meta.len(), meta.modified().unwrap())
    };
    let before = [
        stamp("brokerd"),
        stamp("brokerd-launcher"),
        stamp("brokerd-files"),
    ];
    let attempts = [
        ("echo evil > bin/brokerd-launcher", "Read-only file system"),
        ("echo evil > bin/brokerd", "Read-only file system"),
        ("echo evil > bin/brokerd-files", "Read-only file system"),
        ("rm -f bin/brokerd-launcher", "Device or resource busy"),
        (
            "echo evil > bin/evil && mv -f bin/evil bin/brokerd",
            "Device or resource busy",
        ),
        // The folder moved aside and another, with a launcher of the command's, in its place.
        (
            "mv bin moved && mkdir bin && echo evil > bin/brokerd-launcher",
            "Device or resource busy",
        ),
    ];
    for (id, (command, refusal)) in (1..).zip(attempts) {
        let (header, body) = shell(&broker, id, command);
        assert_ne!(header["exit_code"], 0, "{command}: {body}");
        assert!(body.contains(refusal), "{command}: {body}");
    }
    assert_eq!(
        [
            stamp("brokerd"),
            stamp("brokerd-launcher"),
            stamp("brokerd-files")
        ],
        before
    );
    // The rest of the folder is the grant's as before, and the broker still builds boxes.
    let (header, body) = shell(&broker, 9, "echo fine > bin/other && cat bin/other");
    assert_eq!(header["exit_code"], 0, "{body}");
    assert_eq!(body, "fine\n");
}

/// The small binaries installed with brokerd, which its boxes start (the launcher of every box
/// of another program than brokerd, the file tools' worker), ask for no dynamic loader where
/// the C library's static archives are installed, and answer `--build-id` with brokerd's.
#[test]
fn brokerds_small_binaries_are_static_where_the_c_library_archives_are() {
    let build_id = |binary: &std::path::Path| {
        let out = std::process::Command::new(binary)
            .arg("--build-id")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let broker = testkit::binary("brokerd").unwrap();
    let version = std::process::Command::new(&broker)
        .arg("--version")
        .output()
        .unwrap();
    let version = String::from_utf8(version.stdout).unwrap();
    for name in ["brokerd-launcher", "brokerd-files"] {
        let binary = testkit::binary(name).unwrap();
        testkit::linked_statically_where_it_can_be(&binary);
        let id = build_id(&binary);
        assert_eq!(id.trim().len(), 16, "{id}");
        assert!(
            version.contains(&format!("(build {})", id.trim())),
            "{version} {id}"
        );
    }
}

/// A grant on a repository's folder for `git` and an interpreter, whose writes no decision
/// sees; `extra` adds paths to it.
fn repository_grant(extra: &str) -> String {
    format!(
        r#"
[[grant]]
id = "repo"
tool = "shell"
commands = ["git", "/usr/bin/python3 plant.py"]
paths = ["{{work}}"{extra}]
untrusted = false
on_untrusted = "allow"
"#
    )
}

/// Makes `work` a repository with one file and an author, and `plant.py`, which appends its
/// second argument to the file its first names (`hook`: the pre-commit hook, `config`: the
/// repository's configuration, as no decision can see), or moves `.git` aside (`move`).
fn repository(broker: &BrokerProcess) {
    super::git(&broker.work, &["init", "-q", "-b", "main"]);
    super::git(&broker.work, &["config", "user.email", "owner@example.com"]);
    super::git(&broker.work, &["config", "user.name", "Owner"]);
    fs::write(broker.work.join("a.txt"), "a\n").unwrap();
    fs::write(
        broker.work.join("plant.py"),
        "import os, sys\nplaces = {'hook': '.git/hooks/pre-commit', 'config': '.git/config'}\nif sys.argv[1] == 'move':\n    os.rename('.git', 'moved')\nelse:\n    open(places.get(sys.argv[1], sys.argv[1]), 'a').write(sys.argv[2])\nprint('planted')\n",
    )
    .unwrap();
}

#[test]
fn a_command_cannot_change_what_git_runs_but_git_commit_works() {
    // Any program the grant lets run could write a hook or a fsmonitor into `.git`, which the
    // owner's own git would run outside every box: the box keeps the repository's hooks and
    // configuration (and `.git` itself in place) unless a grant names `.git`.
    let broker = BrokerProcess::start(&repository_grant(""), FAST);
    repository(&broker);
    let config_before = fs::read_to_string(broker.work.join(".git/config")).unwrap();
    let attempts = [
        (
            "/usr/bin/python3 plant.py hook 'echo pwned'",
            "Read-only file system",
        ),
        (
            "/usr/bin/python3 plant.py config '[core]\n\tfsmonitor = echo pwned\n'",
            "Read-only file system",
        ),
        ("/usr/bin/python3 plant.py move", "Device or resource busy"),
    ];
    for (id, (command, refusal)) in (1..).zip(attempts) {
        let (header, body) = shell(&broker, id, command);
        assert_ne!(header["exit_code"], 0, "{command}: {body}");
        assert!(body.contains(refusal), "{command}: {body}");
        assert!(!body.contains("planted"), "{command}: {body}");
    }
    assert!(!broker.work.join(".git/hooks/pre-commit").exists());
    assert!(!broker.work.join("moved").exists());
    assert_eq!(
        fs::read_to_string(broker.work.join(".git/config")).unwrap(),
        config_before
    );
    // Objects, refs, the index and HEAD are the repository's as before.
    let (header, body) = shell(
        &broker,
        9,
        "git add a.txt && git commit -q -m first && git log --format=%s",
    );
    assert_eq!(header["exit_code"], 0, "{body}");
    assert_eq!(body, "first\n");
}

#[test]
fn a_repository_made_in_a_warm_box_is_kept_from_the_sessions_next_call() {
    // The session's warm box was built before the repository existed, with nothing of it
    // pinned: the session's next call gets a box that keeps the new repository's hooks.
    let broker = BrokerProcess::start(&repository_grant(""), FAST);
    repository(&broker);
    fs::remove_dir_all(broker.work.join(".git")).unwrap();
    let mut client = AgentClient::open(&broker.socket(), None);
    let mut call = |id: u64, command: &str| {
        let (header, body) = shell_in(&mut client, &broker, id, command);
        (header["exit_code"].clone(), body)
    };
    let (code, body) = call(1, "/usr/bin/python3 plant.py a.txt b");
    assert_eq!(code, 0, "{body}");
    let (code, body) = call(2, "git init -q");
    assert_eq!(code, 0, "{body}");
    assert!(broker.work.join(".git/config").exists());
    let (code, body) = call(3, "/usr/bin/python3 plant.py hook 'echo pwned'");
    assert_ne!(code, 0, "{body}");
    assert!(body.contains("Read-only file system"), "{body}");
    assert!(!broker.work.join(".git/hooks/pre-commit").exists());
}

#[test]
fn a_grant_that_names_dot_git_may_change_its_configuration_in_the_box() {
    // `git config` writes `.git/config`, which the decision sees: covered only by a grant that
    // names `.git`, and then the box leaves the configuration writable.
    let broker = BrokerProcess::start(&repository_grant(", \"{work}/.git\""), FAST);
    repository(&broker);
    let (header, body) = shell(&broker, 1, "git config user.name Agent");
    assert_eq!(header["exit_code"], 0, "{body}");
    let config = fs::read_to_string(broker.work.join(".git/config")).unwrap();
    assert!(config.contains("name = Agent"), "{config}");
    // Without that grant the same call is refused before it runs.
    let narrow = BrokerProcess::start(&repository_grant(""), FAST);
    repository(&narrow);
    let mut client = AgentClient::open(&narrow.socket(), None);
    let args = serde_json::json!({ "command": "git config user.name Agent", "cwd": narrow.work });
    let response = client.call(1, "shell", &args.to_string()).unwrap();
    assert!(
        matches!(response, proto::ToolResponse::Denied { .. }),
        "{response:?}"
    );
}

#[test]
fn write_file_into_dot_git_reaches_it_in_the_box_when_the_grant_names_it() {
    let grants = r#"
[[grant]]
id = "repo"
tool = "write_file"
paths = ["{work}", "{work}/.git"]
untrusted = false
on_untrusted = "allow"
"#;
    let broker = BrokerProcess::start(grants, FAST);
    repository(&broker);
    let mut client = AgentClient::open(&broker.socket(), None);
    // In one session: the warm box of the first write keeps the hooks, so the second, which
    // its grant lets reach them, must not be given that box.
    for (id, path) in [(1, "b.txt"), (2, ".git/hooks/pre-commit"), (3, "c.txt")] {
        let target = broker.work.join(path);
        let args = serde_json::json!({ "path": target, "content": "exit 0\n" });
        let response = client.call(id, "write_file", &args.to_string()).unwrap();
        assert!(
            matches!(response, proto::ToolResponse::Result { .. }),
            "{path}: {response:?}"
        );
        assert_eq!(fs::read_to_string(&target).unwrap(), "exit 0\n", "{path}");
    }
}

#[test]
fn without_bubblewrap_git_in_the_box_still_adds_and_commits() {
    // Landlock grants a folder whole: keeping `.git/hooks` there would leave the project's top
    // folder without new files, so the git places are kept only where bubblewrap binds them.
    let config = format!("{FAST}[sandbox]\nbubblewrap = false\n");
    let broker = BrokerProcess::start(&repository_grant(""), &config);
    repository(&broker);
    let (header, body) = shell(
        &broker,
        1,
        "/usr/bin/python3 plant.py b.txt b && git add b.txt && git commit -q -m second && git log --format=%s",
    );
    assert_eq!(header["exit_code"], 0, "{body}");
    assert!(
        super::walls(&broker).as_str().starts_with("landlock only"),
        "{header}"
    );
    assert_eq!(body, "planted\nsecond\n");
}
