//! Trusted places through the running broker: under a `shell` grant on the owner's home or a
//! workspace, each place a program outside the box reads or runs (`~/.gitconfig`, `.git/hooks`,
//! `~/.bashrc`, `~/.ssh/authorized_keys`, `.claude/settings.json`, `.vscode/tasks.json`, …)
//! ends the call as it began, in every cell of the grid: a plain file or folder (read-only in
//! the box), a symbolic link whose target is inside the grant or outside it, or a link on the
//! way (the box refuses to start, with a sentence naming the link); a place that did not exist
//! and that the box made is moved aside. The write tools are refused such a place unless a
//! grant names it.

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use proto::{DenyReason, ToolResponse};
use testkit::{AgentClient, BrokerProcess};

use super::FAST;

/// Writes at the place its first argument names what its second says, as any program a grant
/// lets run could (no decision sees it): `rm -f` first, then a new file.
const PLANT: &str = "import os, shutil, sys\np = sys.argv[1]\ntry:\n    if os.path.isdir(p) and not os.path.islink(p):\n        shutil.rmtree(p)\n    else:\n        os.remove(p)\nexcept Exception as e:\n    print('remove:', e)\ntry:\n    os.makedirs(os.path.dirname(p), exist_ok=True)\n    open(p, 'w').write(sys.argv[2])\n    print('planted')\nexcept Exception as e:\n    print('write:', e)\n";

/// What makes one cell of the grid in a home folder.
type Prepare = Box<dyn Fn(&Path)>;

const EVIL: &str = "[core]\n\tpager = touch PAGER-RAN\n";

/// A broker whose owner's home is a folder of its own (`home`), with a `shell` grant on
/// `granted` for `rm`, `printf` and the planting script, and write grants on it.
struct Owner {
    broker: BrokerProcess,
    home: PathBuf,
    _dir: tempfile::TempDir,
}

fn owner(prepare: impl FnOnce(&Path), granted: impl Fn(&Path) -> Vec<PathBuf>) -> Owner {
    owner_with(FAST, prepare, granted)
}

/// [`owner`] with `config` as its `brokerd.toml`.
fn owner_with(
    config: &str,
    prepare: impl FnOnce(&Path),
    granted: impl Fn(&Path) -> Vec<PathBuf>,
) -> Owner {
    let dir = testkit::temp_dir();
    let home = dir.path().canonicalize().unwrap().join("home");
    fs::create_dir_all(&home).unwrap();
    fs::write(home.join("plant.py"), PLANT).unwrap();
    prepare(&home);
    let paths = granted(&home)
        .iter()
        .map(|p| format!("\"{}\"", p.display()))
        .collect::<Vec<_>>()
        .join(", ");
    let grants = format!(
        r#"
[[grant]]
id = "shell"
tool = "shell"
commands = ["rm", "printf", "/usr/bin/python3 {plant}"]
paths = [{paths}]
untrusted = false
on_untrusted = "allow"

[[grant]]
id = "files"
tool = ["write_file", "edit_file", "read_file"]
paths = [{paths}]
untrusted = false
on_untrusted = "allow"
"#,
        plant = home.join("plant.py").display()
    );
    let home_text = home.display().to_string();
    let broker = BrokerProcess::start_with_env(&grants, config, &[("HOME", &home_text)]);
    Owner {
        broker,
        home,
        _dir: dir,
    }
}

impl Owner {
    fn call(&self, tool: &str, args: serde_json::Value) -> ToolResponse {
        let mut client = AgentClient::open(&self.broker.socket(), None);
        client.call(1, tool, &args.to_string()).unwrap()
    }

    fn shell(&self, command: &str) -> ToolResponse {
        self.call(
            "shell",
            serde_json::json!({ "command": command, "cwd": self.home }),
        )
    }

    fn plant(&self, place: &Path) -> ToolResponse {
        self.plant_in(place, &self.home)
    }

    /// [`Owner::plant`] from `cwd`.
    fn plant_in(&self, place: &Path, cwd: &Path) -> ToolResponse {
        let command = format!(
            "/usr/bin/python3 {} {} '{EVIL}'",
            self.home.join("plant.py").display(),
            place.display()
        );
        self.call(
            "shell",
            serde_json::json!({ "command": command, "cwd": cwd }),
        )
    }
}

/// What a place is: its link target (if a link) and its bytes (if a file), or what a folder
/// holds.
fn state(place: &Path) -> (Option<PathBuf>, Option<Vec<u8>>, Vec<String>) {
    let link = fs::read_link(place).ok();
    let bytes = fs::read(place).ok();
    let mut entries: Vec<String> = fs::read_dir(place)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    entries.sort();
    (link, bytes, entries)
}

fn text(response: &ToolResponse) -> String {
    match response {
        ToolResponse::Result { content, .. } => content.clone(),
        ToolResponse::Failed { message } => message.clone(),
        ToolResponse::Denied { reason } => format!("denied: {reason:?}"),
        other => format!("{other:?}"),
    }
}

/// Whether the box refused to start, naming `link`.
fn refused_naming(response: &ToolResponse, link: &Path) -> bool {
    let said = text(response);
    said.contains("the box was not started")
        && said.contains(&format!("{} is a symbolic link", link.display()))
        && said.contains("grant folders below")
}

#[test]
fn under_a_shell_grant_on_home_the_gitconfig_ends_each_call_as_it_began_in_every_cell() {
    let outside = testkit::temp_dir();
    let outside = outside.path().canonicalize().unwrap();
    fs::write(outside.join("gitconfig"), "[user]\n\tname = Owner\n").unwrap();
    let cells: [(&str, Prepare); 4] = [
        (
            "a plain file",
            Box::new(|home: &Path| fs::write(home.join(".gitconfig"), "[user]\n").unwrap()),
        ),
        (
            "a link whose target is inside the grant",
            Box::new(|home: &Path| {
                fs::create_dir_all(home.join("dotfiles")).unwrap();
                fs::write(home.join("dotfiles/gitconfig"), "[user]\n").unwrap();
                symlink("dotfiles/gitconfig", home.join(".gitconfig")).unwrap();
            }),
        ),
        (
            "a link whose target is outside the grant",
            Box::new({
                let target = outside.join("gitconfig");
                move |home: &Path| symlink(&target, home.join(".gitconfig")).unwrap()
            }),
        ),
        (
            "a link on the way (~/.config)",
            Box::new(|home: &Path| {
                fs::create_dir_all(home.join("dotfiles/config/git")).unwrap();
                fs::write(home.join("dotfiles/config/git/config"), "[user]\n").unwrap();
                symlink("dotfiles/config", home.join(".config")).unwrap();
            }),
        ),
    ];
    for (cell, prepare) in cells {
        let owner = owner(prepare, |home| vec![home.to_path_buf()]);
        let home = &owner.home;
        let places = [home.join(".gitconfig"), home.join(".config/git/config")];
        let before: Vec<_> = places.iter().map(|p| state(p)).collect();
        let target_before = state(&outside.join("gitconfig"));
        // The issue's own command: its redirection is a write the decision sees.
        let literal = owner.shell(&format!(
            "rm -f ~/.gitconfig; printf '{}' > ~/.gitconfig",
            EVIL.replace('\n', "\\n").replace('\t', "\\t")
        ));
        // The same through a program no decision reads.
        let planted: Vec<ToolResponse> = places.iter().map(|p| owner.plant(p)).collect();
        let after: Vec<_> = places.iter().map(|p| state(p)).collect();
        assert_eq!(before, after, "{cell}: {literal:?} {planted:?}");
        assert_eq!(target_before, state(&outside.join("gitconfig")), "{cell}");
        // Refused as a trusted place, or (the link's target outside the grant) as a write
        // no grant covers.
        assert!(
            matches!(
                literal,
                ToolResponse::Denied {
                    reason: DenyReason::TrustedPlace | DenyReason::NoGrant
                }
            ),
            "{cell}: {literal:?}"
        );
        match cell {
            "a plain file" => {
                let said = text(&planted[0]);
                assert!(
                    said.contains("Device or resource busy")
                        || said.contains("Read-only file system"),
                    "{cell}: {said}"
                );
                assert!(!said.contains("planted"), "{cell}: {said}");
                // `~/.config/git` did not exist: what the box made there is moved aside.
                let said = text(&planted[1]);
                assert!(said.contains("moved aside"), "{cell}: {said}");
            }
            "a link on the way (~/.config)" => {
                for response in &planted {
                    assert!(
                        refused_naming(response, &home.join(".config")),
                        "{cell}: {response:?}"
                    );
                }
            }
            _ => {
                for response in &planted {
                    assert!(
                        refused_naming(response, &home.join(".gitconfig")),
                        "{cell}: {response:?}"
                    );
                }
            }
        }
    }
}

/// The exit code in a `shell` result's header.
fn exit_code(response: &ToolResponse) -> Option<i64> {
    let ToolResponse::Result { content, .. } = response else {
        return None;
    };
    let header: serde_json::Value = serde_json::from_str(content.lines().next()?).ok()?;
    header["exit_code"].as_i64()
}

#[test]
fn a_shell_grant_on_a_folder_that_holds_no_link_runs_beside_a_linked_gitconfig() {
    // The narrower grant the refusal names: a folder below home that does not hold the link.
    let owner = owner(
        |home| {
            fs::create_dir_all(home.join("src")).unwrap();
            fs::create_dir_all(home.join("dotfiles")).unwrap();
            fs::write(home.join("dotfiles/gitconfig"), "[user]\n").unwrap();
            symlink("dotfiles/gitconfig", home.join(".gitconfig")).unwrap();
        },
        |home| vec![home.join("src")],
    );
    let args = serde_json::json!({ "command": "printf ok > a.txt", "cwd": owner.home.join("src") });
    let response = owner.call("shell", args);
    assert_eq!(exit_code(&response), Some(0), "{response:?}");
    assert_eq!(
        fs::read_to_string(owner.home.join("src/a.txt")).unwrap(),
        "ok"
    );
}

#[test]
fn a_repositorys_hooks_that_are_a_link_refuse_the_box_and_stay_as_they_were() {
    let owner = owner(
        |home| {
            let app = home.join("app");
            fs::create_dir_all(app.join("githooks")).unwrap();
            super::git(&app, &["init", "-q", "-b", "main"]);
            fs::remove_dir_all(app.join(".git/hooks")).unwrap();
            symlink("../githooks", app.join(".git/hooks")).unwrap();
        },
        |home| vec![home.join("app")],
    );
    let app = owner.home.join("app");
    let before = state(&app.join(".git/hooks"));
    let args = serde_json::json!({
        "command": format!("/usr/bin/python3 {} {} 'echo pwned'", owner.home.join("plant.py").display(), app.join(".git/hooks/pre-commit").display()),
        "cwd": app,
    });
    let response = owner.call("shell", args);
    assert!(
        refused_naming(&response, &app.join(".git/hooks")),
        "{response:?}"
    );
    assert_eq!(before, state(&app.join(".git/hooks")));
    assert!(!app.join("githooks/pre-commit").exists());
}

#[test]
fn a_repositorys_config_or_dot_git_that_is_a_link_refuses_the_box_and_stays_as_it_was() {
    // `.git/config` a link to a file in the grant, and `.git` itself a link to the git
    // directory beside it: neither link can be kept in a writable folder.
    type Link = fn(&Path) -> PathBuf;
    let cells: [(&str, Link); 2] = [
        ("config", |app| {
            fs::rename(app.join(".git/config"), app.join("gitconfig")).unwrap();
            symlink("../gitconfig", app.join(".git/config")).unwrap();
            app.join(".git/config")
        }),
        ("dot_git", |app| {
            fs::rename(app.join(".git"), app.join("repo.git")).unwrap();
            symlink("repo.git", app.join(".git")).unwrap();
            app.join(".git")
        }),
    ];
    for (cell, link) in cells {
        let owner = owner(
            |home| {
                let app = home.join("app");
                fs::create_dir_all(&app).unwrap();
                super::git(&app, &["init", "-q", "-b", "main"]);
                link(&app);
            },
            |home| vec![home.join("app")],
        );
        let app = owner.home.join("app");
        let places = [
            app.join(".git"),
            app.join(".git/config"),
            app.join("gitconfig"),
        ];
        let before: Vec<_> = places.iter().map(|p| state(p)).collect();
        let response = owner.plant_in(&app.join(".git/config"), &app);
        let named = if cell == "config" {
            app.join(".git/config")
        } else {
            app.join(".git")
        };
        assert!(refused_naming(&response, &named), "{cell}: {response:?}");
        let after: Vec<_> = places.iter().map(|p| state(p)).collect();
        assert_eq!(before, after, "{cell}");
    }
}

#[test]
fn other_trusted_places_stay_as_they_were_under_a_shell_grant_on_home() {
    let owner = owner(
        |home| {
            fs::write(home.join(".bashrc"), "# owner's\n").unwrap();
            fs::create_dir_all(home.join(".ssh")).unwrap();
            fs::write(
                home.join(".ssh/authorized_keys"),
                "ssh-ed25519 AAAA owner\n",
            )
            .unwrap();
            // A repository below the granted folder: its settings are kept too.
            fs::create_dir_all(home.join("src/app")).unwrap();
            super::git(&home.join("src/app"), &["init", "-q", "-b", "main"]);
            fs::create_dir_all(home.join("src/app/.claude")).unwrap();
            fs::write(home.join("src/app/.claude/settings.json"), "{}\n").unwrap();
            fs::create_dir_all(home.join("src/app/.vscode")).unwrap();
            fs::write(home.join("src/app/.vscode/tasks.json"), "{}\n").unwrap();
        },
        |home| vec![home.to_path_buf()],
    );
    let home = &owner.home;
    for place in [
        home.join(".bashrc"),
        home.join(".ssh/authorized_keys"),
        home.join("src/app/.claude/settings.json"),
        home.join("src/app/.vscode/tasks.json"),
    ] {
        let before = state(&place);
        let response = owner.plant(&place);
        assert!(
            !text(&response).contains("planted"),
            "{}: {response:?}",
            place.display()
        );
        assert_eq!(before, state(&place), "{}", place.display());
        // The write tools: refused, as the decision sees the place.
        for tool in ["write_file", "edit_file"] {
            let args = match tool {
                "write_file" => serde_json::json!({ "path": place, "content": "x" }),
                _ => {
                    serde_json::json!({ "path": place, "edits": [{"old_str": "{}", "new_str": "x"}] })
                }
            };
            let response = owner.call(tool, args);
            assert!(
                matches!(
                    response,
                    ToolResponse::Denied {
                        reason: DenyReason::TrustedPlace
                    }
                ),
                "{tool} {}: {response:?}",
                place.display()
            );
        }
        assert_eq!(before, state(&place), "{}", place.display());
    }
    // Ordinary work beside them goes on.
    let response = owner.shell("printf ok > notes.txt");
    assert_eq!(exit_code(&response), Some(0), "{response:?}");
}

#[test]
fn a_trusted_place_a_box_made_is_moved_aside_and_the_result_says_so() {
    let owner = owner(|_| {}, |home| vec![home.to_path_buf()]);
    let home = &owner.home;
    for place in [
        home.join(".bashrc"),
        home.join(".envrc"),
        home.join(".vscode/tasks.json"),
        home.join(".config/systemd/user/evil.service"),
    ] {
        let response = owner.plant(&place);
        let said = text(&response);
        assert!(said.contains("planted"), "{said}");
        assert!(said.contains("moved aside"), "{said}");
        assert!(!place.exists(), "{}", place.display());
    }
    let aside = owner.broker.state.join("moved-aside");
    assert!(aside.exists(), "moved into boxmaker's state folder");
}

#[test]
fn a_grant_that_names_a_trusted_place_lets_the_write_tools_change_it() {
    let owner = owner(
        |home| {
            fs::write(home.join(".bashrc"), "# owner's\n").unwrap();
            fs::create_dir_all(home.join("src/app/.vscode")).unwrap();
            fs::write(home.join("src/app/.vscode/tasks.json"), "{}\n").unwrap();
        },
        |home| {
            vec![
                home.to_path_buf(),
                home.join(".bashrc"),
                home.join("src/app/.vscode/tasks.json"),
            ]
        },
    );
    let mut client = AgentClient::open(&owner.broker.socket(), None);
    for (id, place) in (1..).step_by(2).zip([
        owner.home.join(".bashrc"),
        owner.home.join("src/app/.vscode/tasks.json"),
    ]) {
        // Read before write: the session reads the file first.
        let read = serde_json::json!({ "path": place }).to_string();
        let response = client.call(id, "read_file", &read).unwrap();
        assert!(
            matches!(response, ToolResponse::Result { .. }),
            "{response:?}"
        );
        let write = serde_json::json!({ "path": place, "content": "changed\n" }).to_string();
        let response = client.call(id + 1, "write_file", &write).unwrap();
        assert!(
            matches!(response, ToolResponse::Result { .. }),
            "{}: {response:?}",
            place.display()
        );
        assert_eq!(fs::read_to_string(&place).unwrap(), "changed\n");
    }
}

#[test]
fn without_bubblewrap_a_changed_trusted_place_is_put_back_as_it_was() {
    // Landlock grants a folder whole: the box records the small places and puts them back
    // (git still commits there: see sandbox::without_bubblewrap_git_in_the_box_still_adds_and_commits).
    let config = format!("{FAST}[sandbox]\nbubblewrap = false\n");
    let owner = owner_with(
        &config,
        |home| {
            let app = home.join("app");
            fs::create_dir_all(&app).unwrap();
            super::git(&app, &["init", "-q", "-b", "main"]);
            super::git(&app, &["config", "user.email", "o@example.com"]);
            super::git(&app, &["config", "user.name", "Owner"]);
            fs::create_dir_all(home.join("dotfiles")).unwrap();
            fs::write(home.join("dotfiles/gitconfig"), "[user]\n").unwrap();
            symlink("dotfiles/gitconfig", home.join(".gitconfig")).unwrap();
            fs::write(home.join(".bashrc"), "# owner's\n").unwrap();
        },
        |home| vec![home.to_path_buf()],
    );
    let home = &owner.home;
    let places = [
        home.join(".gitconfig"),
        home.join("dotfiles/gitconfig"),
        home.join(".bashrc"),
        home.join("app/.git/config"),
        home.join("app/.git/hooks"),
    ];
    let before: Vec<_> = places.iter().map(|p| state(p)).collect();
    for place in [
        home.join(".gitconfig"),
        home.join(".bashrc"),
        home.join("app/.git/config"),
        home.join("app/.git/hooks/pre-commit"),
    ] {
        let response = owner.plant(&place);
        let said = text(&response);
        assert!(said.contains("planted"), "{said}");
        assert!(said.contains("put back as it was"), "{said}");
        assert!(said.contains("\"sandbox\":\"box\""), "{said}");
        let walls = super::walls(&owner.broker);
        assert!(
            walls.starts_with("landlock only"),
            "a box of Landlock alone: {walls}"
        );
    }
    let after: Vec<_> = places.iter().map(|p| state(p)).collect();
    assert_eq!(before, after);
}
