//! Where this process makes its boxes' cgroups, found once per process: boxmaker's folders
//! under each controller for root; for another owner, folders of that owner's own (a cgroup
//! delegated to it), or none, said in one sentence with what fixes it.
//!
//! - root, cgroup v1 (`/sys/fs/cgroup/pids`, `/sys/fs/cgroup/memory`): `boxmaker` under each;
//!   v2: `/sys/fs/cgroup/boxmaker`.
//! - an owner who is not root, v1: `boxmaker/uid-UID` under each controller, made and given to
//!   the owner once by root (the kernel lets the owner make cgroups in a folder it owns, and
//!   move its own processes into them); [`Missing`] prints the commands.
//! - an owner who is not root, v2: `boxmaker` under the owner's systemd user manager
//!   (`user.slice/user-UID.slice/user@UID.service`, which systemd delegates to the owner with
//!   the `pids` and `memory` controllers), when this process runs beneath it: a process is
//!   moved only by one that may write the `cgroup.procs` of the cgroup holding both places.
//!
//! Where none can be had, a box with bubblewrap is built without one (see
//! [`crate::WITHOUT_CGROUP`]); a box without bubblewrap, which only its cgroup holds together,
//! is not built.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The folder of boxmaker's cgroups under each controller's root.
pub(crate) const PARENT: &str = "boxmaker";

/// Where cgroup controllers are mounted.
const ROOT: &str = "/sys/fs/cgroup";

/// Where a process makes its boxes' cgroups.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Place {
    /// Cgroup v1: the folders under the `pids` and the `memory` controller that hold the
    /// boxes' cgroups (made when missing).
    V1 {
        /// Under `/sys/fs/cgroup/pids`.
        pids: PathBuf,
        /// Under `/sys/fs/cgroup/memory`.
        memory: PathBuf,
    },
    /// Cgroup v2: the folder holding the boxes' cgroups, made when missing, with `pids` and
    /// `memory` enabled for its children.
    V2(PathBuf),
}

impl Place {
    /// The folders holding the boxes' cgroups.
    pub(crate) fn parents(&self) -> Vec<&Path> {
        match self {
            Place::V1 { pids, memory } => vec![pids.as_path(), memory.as_path()],
            Place::V2(parent) => vec![parent.as_path()],
        }
    }

    /// What `bx doctor` and the headers say of it.
    pub(crate) fn describe(&self) -> String {
        match self {
            Place::V1 { pids, memory } => format!(
                "v1 pids and memory, in {} and {}",
                pids.display(),
                memory.display()
            ),
            Place::V2(parent) => format!("v2 pids and memory, in {}", parent.display()),
        }
    }
}

/// Why no cgroup can be had, and what would give one: a sentence, then the commands to run
/// (each on a line of its own, as the owner would type them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missing {
    /// What is missing.
    pub(crate) why: String,
    /// The commands that give the owner its cgroup folders (empty when none would).
    pub(crate) fix: Vec<String>,
}

impl Missing {
    fn new(why: String) -> Missing {
        Missing {
            why,
            fix: Vec::new(),
        }
    }

    /// The sentence, then each command on a line of its own.
    pub(crate) fn text(&self) -> String {
        let mut text = self.why.clone();
        for line in &self.fix {
            text.push_str("\n    ");
            text.push_str(line);
        }
        text
    }
}

/// This process's place, found on first use.
pub(crate) fn place() -> &'static Result<Place, Missing> {
    static PLACE: OnceLock<Result<Place, Missing>> = OnceLock::new();
    PLACE.get_or_init(|| {
        let uid = rustix::process::geteuid().as_raw();
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        find(Path::new(ROOT), uid, &own)
    })
}

/// The place of a process of `uid` whose `/proc/self/cgroup` reads `own`, with controllers
/// mounted under `root`.
pub(crate) fn find(root: &Path, uid: u32, own: &str) -> Result<Place, Missing> {
    let v1 = ["pids", "memory"]
        .iter()
        .all(|c| root.join(c).join("tasks").exists());
    if v1 {
        let (pids, memory) = if uid == 0 {
            (
                root.join("pids").join(PARENT),
                root.join("memory").join(PARENT),
            )
        } else {
            let own = format!("{PARENT}/uid-{uid}");
            (root.join("pids").join(&own), root.join("memory").join(&own))
        };
        return if uid == 0 {
            usable_by_root(&[&pids, &memory]).map(|()| Place::V1 { pids, memory })
        } else {
            delegated_v1(uid, &pids, &memory).map(|()| Place::V1 { pids, memory })
        };
    }
    let controllers = std::fs::read_to_string(root.join("cgroup.controllers")).map_err(|_| {
        Missing::new(format!(
            "neither the v1 pids and memory controllers nor a v2 hierarchy are mounted at {}",
            root.display()
        ))
    })?;
    if !(has_word(&controllers, "pids") && has_word(&controllers, "memory")) {
        return Err(Missing::new(format!(
            "the v2 hierarchy at {} offers only: {}",
            root.display(),
            controllers.trim()
        )));
    }
    if uid == 0 {
        let parent = root.join(PARENT);
        return usable_by_root(&[&parent]).map(|()| Place::V2(parent));
    }
    user_manager(root, uid, own)
}

/// Whether root can make its cgroups at each of `parents`: each exists and is writable, or can
/// be made (its controller's folder is writable).
fn usable_by_root(parents: &[&Path]) -> Result<(), Missing> {
    for parent in parents {
        let at = if parent.exists() {
            *parent
        } else {
            parent.parent().unwrap_or(parent)
        };
        if let Err(e) = rustix::fs::access(at, rustix::fs::Access::WRITE_OK) {
            return Err(Missing::new(format!(
                "cgroups cannot be made in {}: {e} (a read-only /sys/fs/cgroup, as in some containers)",
                at.display()
            )));
        }
    }
    Ok(())
}

/// Whether `uid` owns its v1 folders and may make cgroups in them; otherwise the commands that
/// give them (until the next boot: cgroup folders live in memory).
fn delegated_v1(uid: u32, pids: &Path, memory: &Path) -> Result<(), Missing> {
    let own = |dir: &Path| {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(dir).is_ok_and(|m| m.is_dir() && m.uid() == uid)
            && rustix::fs::access(
                dir,
                rustix::fs::Access::WRITE_OK | rustix::fs::Access::EXEC_OK,
            )
            .is_ok()
    };
    if own(pids) && own(memory) {
        return Ok(());
    }
    let both = format!("{} {}", pids.display(), memory.display());
    Err(Missing {
        why: format!(
            "uid {uid} is not root and has no boxmaker cgroup folders of its own ({}); to give them (once per boot, as root; then restart brokerd):",
            [pids, memory]
                .iter()
                .filter(|d| !own(d))
                .map(|d| format!("{} is missing or not uid {uid}'s", d.display()))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        fix: vec![format!("mkdir -p {both}"), format!("chown {uid}: {both}")],
    })
}

/// The v2 place under `uid`'s systemd user manager, when this process runs beneath it.
fn user_manager(root: &Path, uid: u32, own: &str) -> Result<Place, Missing> {
    use std::os::unix::fs::MetadataExt;
    let relative = format!("user.slice/user-{uid}.slice/user@{uid}.service");
    let manager = root.join(&relative);
    let owned = std::fs::metadata(&manager).is_ok_and(|m| m.is_dir() && m.uid() == uid);
    if !owned {
        return Err(Missing {
            why: format!(
                "uid {uid} is not root and no cgroup is delegated to it: {} is missing or not its own (no systemd user manager runs for it); to start one that outlives logins, as root:",
                manager.display()
            ),
            fix: vec![format!("loginctl enable-linger {uid}")],
        });
    }
    let delegated =
        std::fs::read_to_string(manager.join("cgroup.subtree_control")).unwrap_or_default();
    if !(has_word(&delegated, "pids") && has_word(&delegated, "memory")) {
        return Err(Missing {
            why: format!(
                "{} has only [{}] for its children, not pids and memory; to delegate both to every user manager, as root:",
                manager.display(),
                delegated.trim()
            ),
            fix: vec![
                "mkdir -p /etc/systemd/system/user@.service.d".to_string(),
                "printf '[Service]\\nDelegate=pids memory\\n' > /etc/systemd/system/user@.service.d/boxmaker.conf".to_string(),
                "systemctl daemon-reload".to_string(),
                format!("systemctl restart user@{uid}.service"),
            ],
        });
    }
    // `0::/user.slice/…`: the one line of the unified hierarchy.
    let mine = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_default()
        .trim_start_matches('/');
    if !Path::new(mine).starts_with(&relative) {
        return Err(Missing {
            why: format!(
                "this process runs in the cgroup /{mine}, outside uid {uid}'s user manager ({}), so it cannot move a box's processes there; start it under the user manager, e.g.:",
                manager.display()
            ),
            fix: vec![
                "systemd-run --user --scope --quiet -- <the command that starts brokerd>"
                    .to_string(),
            ],
        });
    }
    Ok(Place::V2(manager.join(PARENT)))
}

/// Whether the space-separated `list` holds `word`.
fn has_word(list: &str, word: &str) -> bool {
    list.split_whitespace().any(|w| w == word)
}

#[cfg(test)]
mod tests {
    use std::fs;
    use std::path::Path;

    use super::{Place, find};

    /// A fake controller root: `files` made under it (folders for names ending in `/`).
    fn root(files: &[(&str, &str)]) -> tempfile::TempDir {
        let dir = tempfile::tempdir_in("/var/tmp").unwrap();
        for (name, content) in files {
            let path = dir.path().join(name);
            if let Some(folder) = name.strip_suffix('/') {
                fs::create_dir_all(dir.path().join(folder)).unwrap();
            } else {
                fs::create_dir_all(path.parent().unwrap()).unwrap();
                fs::write(&path, content).unwrap();
            }
        }
        dir
    }

    const V1: &[(&str, &str)] = &[("pids/tasks", ""), ("memory/tasks", "")];

    #[test]
    fn root_on_v1_uses_boxmaker_under_each_controller() {
        let r = root(V1);
        assert_eq!(
            find(r.path(), 0, ""),
            Ok(Place::V1 {
                pids: r.path().join("pids/boxmaker"),
                memory: r.path().join("memory/boxmaker"),
            })
        );
    }

    #[test]
    fn another_owner_on_v1_without_its_folders_is_told_the_commands_that_make_them() {
        let r = root(V1);
        let missing = find(r.path(), 1000, "").unwrap_err();
        let (pids, memory) = (
            r.path().join("pids/boxmaker/uid-1000"),
            r.path().join("memory/boxmaker/uid-1000"),
        );
        assert!(missing.why.contains("uid 1000 is not root"), "{missing:?}");
        assert_eq!(
            missing.fix,
            [
                format!("mkdir -p {} {}", pids.display(), memory.display()),
                format!("chown 1000: {} {}", pids.display(), memory.display()),
            ]
        );
    }

    /// Another owner than the test's (which runs as root): folders are given to it by `chown`.
    const OWNER: u32 = 4242;

    fn give(path: &Path) {
        std::os::unix::fs::chown(path, Some(OWNER), Some(OWNER)).unwrap();
    }

    #[test]
    fn another_owner_on_v1_with_folders_of_its_own_uses_them() {
        let r = root(V1);
        let pids = r.path().join(format!("pids/boxmaker/uid-{OWNER}"));
        let memory = r.path().join(format!("memory/boxmaker/uid-{OWNER}"));
        fs::create_dir_all(&pids).unwrap();
        fs::create_dir_all(&memory).unwrap();
        give(&pids);
        // One folder of its own is not enough, and the sentence names the other.
        let missing = find(r.path(), OWNER, "").unwrap_err();
        assert!(
            missing.why.contains(&memory.display().to_string()),
            "{missing:?}"
        );
        assert!(
            !missing.why.contains(&pids.display().to_string()),
            "{missing:?}"
        );
        give(&memory);
        assert_eq!(find(r.path(), OWNER, ""), Ok(Place::V1 { pids, memory }));
    }

    #[test]
    fn another_owner_on_v2_uses_its_user_managers_cgroup_when_it_runs_beneath_it() {
        let manager = format!("user.slice/user-{OWNER}.slice/user@{OWNER}.service");
        let r = root(&[
            ("cgroup.controllers", "cpuset cpu io memory pids\n"),
            (
                &format!("{manager}/cgroup.subtree_control"),
                "memory pids\n",
            ),
        ]);
        let inside = format!("0::/{manager}/app.slice/brokerd.scope\n");
        // Not its own yet: no user manager of its.
        let missing = find(r.path(), OWNER, &inside).unwrap_err();
        assert_eq!(missing.fix, [format!("loginctl enable-linger {OWNER}")]);
        give(&r.path().join(&manager));
        assert_eq!(
            find(r.path(), OWNER, &inside),
            Ok(Place::V2(r.path().join(&manager).join("boxmaker")))
        );
        // From a login session's scope, beside the user manager, no process could be moved.
        let outside = format!("0::/user.slice/user-{OWNER}.slice/session-3.scope\n");
        let missing = find(r.path(), OWNER, &outside).unwrap_err();
        assert!(missing.why.contains("outside uid"), "{missing:?}");
        assert!(missing.fix[0].starts_with("systemd-run --user --scope"));
        // A manager without pids and memory delegated says how to delegate them.
        fs::write(
            r.path().join(&manager).join("cgroup.subtree_control"),
            "cpu\n",
        )
        .unwrap();
        let missing = find(r.path(), OWNER, &inside).unwrap_err();
        assert!(
            missing
                .fix
                .iter()
                .any(|l| l.contains("Delegate=pids memory"))
        );
    }

    #[test]
    fn root_on_v2_uses_boxmaker_at_the_top_and_a_v2_without_the_controllers_gives_none() {
        let r = root(&[("cgroup.controllers", "memory pids\n")]);
        assert_eq!(
            find(r.path(), 0, ""),
            Ok(Place::V2(r.path().join("boxmaker")))
        );
        let r = root(&[("cgroup.controllers", "cpu io\n")]);
        assert!(
            find(r.path(), 0, "")
                .unwrap_err()
                .why
                .contains("offers only: cpu io")
        );
        let r = root(&[]);
        assert!(find(r.path(), 0, "").unwrap_err().why.contains("neither"));
    }
}
