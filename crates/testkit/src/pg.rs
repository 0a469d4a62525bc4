//! A PostgreSQL server of a test's own: Debian's `postgresql` binaries, a cluster made with
//! `initdb` in a temporary folder, started with `pg_ctl` on a Unix socket in that folder and no
//! TCP port, stopped and removed with the value.
//!
//! `initdb` refuses to run as root, and tests run as root in CI: then the cluster belongs to
//! the `postgres` user Debian's package makes, the folder (under `/var/tmp`, so that a `0700`
//! checkout does not matter) is that user's, and every PostgreSQL program runs through
//! `runuser -u postgres`. A test run as another user runs them as itself.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The role every test cluster has, with `trust` on its socket.
pub const USER: &str = "postgres";

/// A running (or stopped) PostgreSQL cluster of one test.
#[derive(Debug)]
pub struct PgServer {
    folder: tempfile::TempDir,
    bin: PathBuf,
    owner: Option<String>,
}

/// The newest `/usr/lib/postgresql/N/bin` that has `initdb`.
fn bin_folder() -> PathBuf {
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "no PostgreSQL server under /usr/lib/postgresql: install Debian's postgresql (.ci/run does)"
        ),
    }
}

/// The uid and gid of `name` in `/etc/passwd`.
fn user_ids(name: &str) -> Option<(u32, u32)> {
    let passwd = std::fs::read_to_string("/etc/passwd").ok()?;
    passwd.lines().find_map(|line| {
        let fields: Vec<&str> = line.split(':').collect();
        if fields.first() == Some(&name) && fields.len() > 3 {
            Some((fields[2].parse().ok()?, fields[3].parse().ok()?))
        } else {
            None
        }
    })
}

impl PgServer {
    /// Makes a cluster and starts it. Panics with a sentence when it cannot.
    pub fn start() -> PgServer {
        let bin = bin_folder();
        let folder = crate::temp_dir();
        let owner = if rustix::process::geteuid().is_root() {
            let Some((uid, gid)) = user_ids("postgres") else {
                panic!("tests run as root and there is no postgres user to own a cluster");
            };
            let chown = |path: &Path| {
                if let Err(error) = std::os::unix::fs::chown(path, Some(uid), Some(gid)) {
                    panic!("cannot give {} to postgres: {error}", path.display());
                }
            };
            chown(folder.path());
            Some("postgres".to_string())
        } else {
            None
        };
        let server = PgServer { folder, bin, owner };
        server.run(
            "initdb",
            &[
                "-D",
                &server.data().display().to_string(),
                "-U",
                USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
        );
        server.restart();
        server
    }

    fn data(&self) -> PathBuf {
        self.folder.path().join("data")
    }

    /// The folder of the server's Unix socket.
    pub fn socket_folder(&self) -> &Path {
        self.folder.path()
    }

    /// A URL of the `postgres` database with the socket folder as a percent-encoded host.
    pub fn url(&self) -> String {
        let host: String = self
            .socket_folder()
            .display()
            .to_string()
            .replace('%', "%25")
            .replace('/', "%2F");
        format!("postgres://{USER}@{host}/postgres")
    }

    /// A URL of database `name` with the socket folder as `?host=`.
    pub fn url_of(&self, name: &str) -> String {
        format!(
            "postgresql://{USER}@/{name}?host={}",
            self.socket_folder().display()
        )
    }

    /// Makes database `name`.
    pub fn create_database(&self, name: &str) {
        self.run(
            "createdb",
            &[
                "-h",
                &self.socket_folder().display().to_string(),
                "-U",
                USER,
                name,
            ],
        );
    }

    /// Stops the server (fast shutdown: connected clients are cut off).
    pub fn stop(&self) {
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().display().to_string(),
                "-m",
                "fast",
                "-w",
                "stop",
            ],
        );
    }

    /// Starts the server again (after [`PgServer::stop`]), waiting until it takes connections.
    pub fn restart(&self) {
        let options = format!(
            "-c listen_addresses='' -k {} -c fsync=off",
            self.socket_folder().display()
        );
        self.run(
            "pg_ctl",
            &[
                "-D",
                &self.data().display().to_string(),
                "-l",
                &self.folder.path().join("log").display().to_string(),
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
    }

    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let mut command = match &self.owner {
            Some(owner) => {
                let mut command = Command::new("runuser");
                command.args(["-u", owner, "--"]).arg(&path);
                command
            }
            None => Command::new(&path),
        };
        command.args(args).current_dir(self.folder.path());
        match command.output() {
            Ok(output) if output.status.success() => {}
            Ok(output) => panic!(
                "{program} {args:?} failed ({}): {}{}; the server's log: {}",
                output.status,
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr),
                std::fs::read_to_string(self.folder.path().join("log")).unwrap_or_default()
            ),
            Err(error) => panic!("cannot run {}: {error}", path.display()),
        }
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let path = self.bin.join("pg_ctl");
        let data = self.data();
        let mut command = match &self.owner {
            Some(owner) => {
                let mut command = Command::new("runuser");
                command.args(["-u", owner, "--"]).arg(&path);
                command
            }
            None => Command::new(&path),
        };
        let _ = command
            .arg("-D")
            .arg(&data)
            .args(["-m", "immediate", "-w", "stop"])
            .current_dir(self.folder.path())
            .output();
    }
}
