//! What the runner tells the owner of its walls (`bx status`, the broker's start): a line per
//! tool or group of tools, as this broker's settings and this machine make them.

use super::{
    FETCH_UNBOXED, GIT_UNBOXED, SandboxedRunner, UNBOXED, boxed, clone_boxed, fetch_boxed,
    file_boxed, git_boxed,
};
use crate::daemon::runner::{self, Runner};

impl SandboxedRunner {
    /// The walls of every tool, one line each.
    pub(super) fn wall_lines(&self) -> Vec<String> {
        let mut walls = vec![if self.settings.file_walls && self.warm_commands {
            format!(
                "shell: {}; kept warm per session and grant folders (a command worker in the box forks each command into a Landlock domain of its own that cannot signal, trace or read the worker, and ends every process of it before the next; ended after {} ms unused or at the session's end)",
                boxed(self.file_walls, self.landlock()),
                self.settings.warm_idle_ms
            )
        } else if self.settings.file_walls {
            format!("shell: {}", boxed(self.file_walls, self.landlock()))
        } else {
            format!("shell: {UNBOXED}")
        }];
        if !self.read_only.is_empty() {
            let folders: Vec<String> = self
                .read_only
                .iter()
                .map(|p| p.display().to_string())
                .collect();
            walls.push(format!(
                "shell: read-only in every box: {}",
                folders.join(", ")
            ));
        }
        let walls_on = self.settings.file_walls;
        walls.extend(self.direct.walls().into_iter().filter(|w| {
            !w.starts_with("shell:")
                && !w.starts_with("no sandbox yet")
                && w != runner::GIT_READ_CONTAINED
                && (!walls_on || w != runner::WALKERS)
        }));
        walls.push(if walls_on {
            format!(
                "read_file, write_file, edit_file, list_files, glob, grep: brokerd's own worker in a box holding only the granted folder (read-only to read_file and the walkers), {}; the walkers leave out boxmaker's folders and what deny grants cover: {}",
                if self.warm.enabled() {
                    format!(
                        "kept warm per session, folder and access for the next call (ended after {} ms unused, at the session's end, or when the folder, an ignore file or a protected folder is not the one it was built on)",
                        self.settings.warm_idle_ms
                    )
                } else {
                    "a fresh box per call ([sandbox] warm_idle_ms = 0)".to_string()
                },
                file_boxed(self.file_walls, self.landlock(), false)
            )
        } else {
            "read_file, write_file, edit_file, list_files, glob, grep: in the broker's process ([sandbox] file_walls = false)".to_string()
        });
        walls.push(if walls_on {
            format!(
                "git_status, git_diff: each git in a fresh box: {}",
                git_boxed(self.file_walls, self.landlock())
            )
        } else {
            format!("git_status, git_diff: {GIT_UNBOXED}")
        });
        if walls_on {
            walls.push(match self.file_walls {
                sandbox::FileWalls::Bubblewrap => "shell, bash_bg: no network unless the deciding grant names hosts; then only those, each connection checked by the broker's proxy (CONNECT only; private addresses only for a host the grant names itself; metadata never)".to_string(),
                sandbox::FileWalls::LandlockOnly => "shell, bash_bg: no network; a grant that names hosts fails its calls (granted hosts need bubblewrap's network namespace)".to_string(),
            });
        }
        walls.push(if walls_on {
            "bash_bg: each job in a fresh box of its own, as shell's, until it ends, bash_kill, job_lifetime_ms, its session's end or the broker's stop".to_string()
        } else {
            "bash_bg: its own PID and mount namespaces, without file walls ([sandbox] file_walls = false)".to_string()
        });
        walls.push(if self.fetches_in_box() {
            format!("http_fetch: {}", fetch_boxed(self.landlock()))
        } else {
            format!("http_fetch: {FETCH_UNBOXED}")
        });
        walls.push(
            "consult: in the broker's process (it reaches only the configured consult server)"
                .to_string(),
        );
        if self.clones_in_box() {
            walls.retain(|w| w != runner::GIT_CLONE_WALLS);
            walls.push(format!(
                "git_clone: {}",
                clone_boxed(
                    self.landlock(),
                    "network: only the deciding grant's hosts, through the broker's proxy"
                )
            ));
        }
        walls
    }
}
