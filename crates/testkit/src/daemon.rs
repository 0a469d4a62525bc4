//! A real `brokerd` process on temporary folders, and a raw client of its agent socket, for
//! end-to-end tests.

use std::io::Read;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use proto::{
    AgentFrame, ApprovalId, BrokerFrame, OwnerEvent, OwnerReply, OwnerRequest, PROTOCOL_VERSION,
    PendingView, Resume, SessionId, ToolRequest, ToolResponse, read_frame, write_frame,
};

/// A `brokerd serve` child on its own temporary config, state and runtime folders (and a
/// `work` folder for tests to grant). Killed when dropped.
pub struct BrokerProcess {
    child: Option<Child>,
    /// The temporary root holding every folder.
    pub root: tempfile::TempDir,
    /// The config folder (`brokerd.toml`, `grants/`).
    pub config: PathBuf,
    /// The state folder.
    pub state: PathBuf,
    /// The runtime folder.
    pub runtime: PathBuf,
    /// A folder for the tests' files.
    pub work: PathBuf,
    log: PathBuf,
    starts: usize,
    verbose: bool,
    env: Vec<(String, String)>,
    /// The binary started instead of the build's own (see [`BrokerProcess::start_installed_in_work`]).
    binary: Option<PathBuf>,
    /// A command the broker is started under (see [`BrokerProcess::start_under`]).
    wrapper: Vec<String>,
    /// The user it runs as, when not the test's (see [`BrokerProcess::start_as`]).
    uid: Option<u32>,
    /// Started with no folder flags (see [`BrokerProcess::start_from_home`]).
    from_home: bool,
}

impl BrokerProcess {
    /// Starts a broker with `grants` (TOML, `{work}` replaced by the work folder) and
    /// `config` (`brokerd.toml`).
    pub fn start(grants: &str, config: &str) -> BrokerProcess {
        BrokerProcess::start_with_env(grants, config, &[])
    }

    /// [`BrokerProcess::start`] with `env` set in the broker's environment at every start
    /// (e.g. `BOXMAKER_EXTRA_ROOTS`, the test CA that `http_fetch` and `git_clone` trust).
    pub fn start_with_env(grants: &str, config: &str, env: &[(&str, &str)]) -> BrokerProcess {
        let mut broker = BrokerProcess::prepared(grants, config, env);
        broker.spawn();
        broker
    }

    /// [`BrokerProcess::start`] with a grants folder of several files: each `(name, TOML)`
    /// written as `grants/<name>`, `{work}` replaced by the work folder (no `grants.toml`
    /// unless named).
    pub fn start_with_grant_files(files: &[(String, String)], config: &str) -> BrokerProcess {
        let mut broker = BrokerProcess::prepared("", config, &[]);
        must(std::fs::remove_file(
            broker.config.join("grants").join("grants.toml"),
        ));
        for (name, text) in files {
            broker.write_grants(name, text);
        }
        broker.spawn();
        broker
    }

    /// [`BrokerProcess::start`] as an owner starts it from a shell: no folder flags, `HOME` the
    /// folder `home` of its root and `XDG_RUNTIME_DIR` its folder `xdg` (no `BOXMAKER_*_DIR`,
    /// `XDG_CONFIG_HOME` or `XDG_STATE_HOME`), so it serves the default folders:
    /// `home/.config/boxmaker`, `home/.local/state/boxmaker` and `xdg/boxmaker`.
    pub fn start_from_home(grants: &str, config: &str) -> BrokerProcess {
        let mut broker = BrokerProcess::prepared_with(grants, config, &[], true);
        broker.spawn();
        broker
    }

    /// The `HOME` of a broker from [`BrokerProcess::start_from_home`].
    pub fn home(&self) -> PathBuf {
        self.root_path().join("home")
    }

    /// The `XDG_RUNTIME_DIR` of a broker from [`BrokerProcess::start_from_home`].
    pub fn xdg_runtime_dir(&self) -> PathBuf {
        self.root_path().join("xdg")
    }

    fn root_path(&self) -> PathBuf {
        self.work
            .parent()
            .map_or_else(|| self.root.path().to_path_buf(), Path::to_path_buf)
    }

    /// Its folders and files, `grants` and `config` written; not started.
    fn prepared(grants: &str, config: &str, env: &[(&str, &str)]) -> BrokerProcess {
        BrokerProcess::prepared_with(grants, config, env, false)
    }

    /// [`BrokerProcess::prepared`], its folders the defaults under `home` and `xdg` when
    /// `from_home`.
    fn prepared_with(
        grants: &str,
        config: &str,
        env: &[(&str, &str)],
        from_home: bool,
    ) -> BrokerProcess {
        let root = crate::temp_dir();
        let base = match root.path().canonicalize() {
            Ok(base) => base,
            Err(e) => panic!("cannot resolve the temporary folder: {e}"),
        };
        let (config_dir, state, runtime) = if from_home {
            let home = base.join("home");
            (
                home.join(".config/boxmaker"),
                home.join(".local/state/boxmaker"),
                base.join("xdg/boxmaker"),
            )
        } else {
            (base.join("config"), base.join("state"), base.join("rt"))
        };
        let broker = BrokerProcess {
            child: None,
            config: config_dir,
            state,
            runtime,
            from_home,
            work: base.join("work"),
            log: base.join("brokerd.log"),
            root,
            starts: 0,
            verbose: false,
            env: env
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            binary: None,
            wrapper: Vec::new(),
            uid: None,
        };
        must(std::fs::create_dir_all(broker.config.join("grants")));
        must(std::fs::create_dir_all(&broker.work));
        // `{work}` in the configuration too (a `[[diagnostics]]` workspace).
        let config = config.replace("{work}", &broker.work.display().to_string());
        must(std::fs::write(broker.config.join("brokerd.toml"), config));
        broker.write_grants("grants.toml", grants);
        broker
    }

    /// [`BrokerProcess::start`] from copies of brokerd's binaries in `work/bin`: the
    /// broker of an owner whose grant covers the folder brokerd is installed in.
    pub fn start_installed_in_work(grants: &str, config: &str) -> BrokerProcess {
        let mut broker = BrokerProcess::prepared(grants, config, &[]);
        let bin = broker.work.join("bin");
        must(std::fs::create_dir_all(&bin));
        let built = built_broker();
        for name in BROKER_BINARIES {
            crate::other_user::copy_out_of_process(&built.with_file_name(name), &bin.join(name));
        }
        broker.binary = Some(bin.join("brokerd"));
        broker.spawn();
        broker
    }

    /// [`BrokerProcess::start`] under `wrapper`, a command that runs the rest of its arguments
    /// (e.g. `["prlimit", "--nofile=1024:4096", "--"]`), at every start.
    pub fn start_under(grants: &str, config: &str, wrapper: &[&str]) -> BrokerProcess {
        let mut broker = BrokerProcess::prepared(grants, config, &[]);
        broker.wrapper = wrapper.iter().map(|w| w.to_string()).collect();
        broker.spawn();
        broker
    }

    /// [`BrokerProcess::start`] as another user, `uid` (its group the same number): the broker
    /// of an owner who is not root. Its folders are given to that user, and brokerd's binaries
    /// copied into `bin` beside them (so it runs wherever the checkout is, see
    /// [`crate::RunnableCopy`]); talk to it with [`AgentClient::connect_as`].
    pub fn start_as(uid: u32, grants: &str, config: &str) -> BrokerProcess {
        let mut broker = BrokerProcess::prepared(grants, config, &[]);
        let root = broker.root.path().to_path_buf();
        for path in [
            &root,
            &broker.config,
            &broker.config.join("grants"),
            &broker.work,
        ] {
            must(std::os::unix::fs::chown(path, Some(uid), Some(uid)));
        }
        for entry in must(std::fs::read_dir(broker.config.join("grants"))) {
            must(std::os::unix::fs::chown(
                must(entry).path(),
                Some(uid),
                Some(uid),
            ));
        }
        must(std::os::unix::fs::chown(
            broker.config.join("brokerd.toml"),
            Some(uid),
            Some(uid),
        ));
        let bin = root.join("bin");
        must(std::fs::create_dir(&bin));
        let built = built_broker();
        for name in BROKER_BINARIES {
            crate::other_user::copy_out_of_process(&built.with_file_name(name), &bin.join(name));
        }
        broker.binary = Some(bin.join("brokerd"));
        broker.uid = Some(uid);
        broker.spawn();
        broker
    }

    /// [`BrokerProcess::start`] with debug logging (every audit batch is logged).
    pub fn start_verbose(grants: &str, config: &str) -> BrokerProcess {
        let mut broker = BrokerProcess::start(grants, config);
        broker.verbose = true;
        broker.restart();
        broker
    }

    /// Writes (or replaces) a grants file, `{work}` replaced by the work folder.
    pub fn write_grants(&self, name: &str, grants: &str) {
        let text = grants.replace("{work}", &self.work.display().to_string());
        must(std::fs::write(self.config.join("grants").join(name), text));
    }

    /// The broker process's peak resident memory (`VmHWM`), in KiB.
    pub fn peak_kib(&self) -> u64 {
        let pid = self
            .pid()
            .unwrap_or_else(|| panic!("the broker is not running"));
        let status = must(std::fs::read_to_string(format!("/proc/{pid}/status")));
        status
            .lines()
            .find_map(|line| line.strip_prefix("VmHWM:"))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no VmHWM in /proc/{pid}/status"))
    }

    /// The agent socket.
    pub fn socket(&self) -> PathBuf {
        self.runtime.join("agent.sock")
    }

    /// The owner socket.
    pub fn owner_socket(&self) -> PathBuf {
        self.runtime.join("owner.sock")
    }

    /// The broker's log so far (standard error, every start).
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits until the log holds `needle` `times` times in all; false after `timeout`.
    pub fn wait_for_log(&self, needle: &str, times: usize, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if self.log().matches(needle).count() >= times {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Waits until the broker has closed, as idle, every agent connection that said hello so
    /// far (`connection_idle_ms`); false after `timeout`. The broker must log at debug level
    /// ([`BrokerProcess::start_verbose`]).
    pub fn wait_until_every_hello_closed_as_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            let log = self.log();
            let hellos =
                log.matches("session opened").count() + log.matches("session resumed").count();
            let closed = log
                .matches("server: connection closed reason=the connection was idle")
                .count();
            if hellos > 0 && closed >= hellos {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// Starts the process (again) and waits for its socket.
    pub fn spawn(&mut self) {
        let binary = match &self.binary {
            Some(binary) => binary.clone(),
            None => built_broker(),
        };
        let log = must(
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&self.log),
        );
        let _ = std::fs::remove_file(self.socket());
        let mut command = match self.wrapper.split_first() {
            Some((program, args)) => {
                let mut command = Command::new(program);
                command.args(args).arg(binary);
                command
            }
            None => Command::new(binary),
        };
        if let Some(uid) = self.uid {
            use std::os::unix::process::CommandExt;
            command.uid(uid).gid(uid).current_dir(self.root.path());
        }
        command.arg("serve");
        if self.from_home {
            command
                .env("HOME", self.home())
                .env("XDG_RUNTIME_DIR", self.xdg_runtime_dir());
            for variable in [
                "BOXMAKER_CONFIG_DIR",
                "BOXMAKER_STATE_DIR",
                "BOXMAKER_RUNTIME_DIR",
                "XDG_CONFIG_HOME",
                "XDG_STATE_HOME",
            ] {
                command.env_remove(variable);
            }
        } else {
            command
                .arg("--config-dir")
                .arg(&self.config)
                .arg("--state-dir")
                .arg(&self.state)
                .arg("--runtime-dir")
                .arg(&self.runtime)
                .env("HOME", self.root.path());
        }
        let child = must(
            command
                .env("BOXMAKER_LOG", if self.verbose { "debug" } else { "info" })
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(log)
                .spawn(),
        );
        self.child = Some(child);
        self.starts += 1;
        if !self.wait_for_log("brokerd is serving", self.starts, Duration::from_secs(20)) {
            panic!("brokerd did not start:\n{}", self.log());
        }
    }

    /// `kill -9` and wait.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills and starts again on the same folders.
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }

    /// The child's pid.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for BrokerProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

fn must<T, E: std::fmt::Display>(result: Result<T, E>) -> T {
    match result {
        Ok(value) => value,
        Err(e) => panic!("test set-up failed: {e}"),
    }
}

/// A raw client of the agent socket: frames in, frames out.
pub struct AgentClient {
    /// The connection.
    pub stream: UnixStream,
    /// The session this connection serves, after `hello`.
    pub session: Option<Resume>,
}

impl AgentClient {
    /// Connects to `socket`.
    pub fn connect(socket: &Path) -> AgentClient {
        let stream = must(UnixStream::connect(socket));
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        AgentClient {
            stream,
            session: None,
        }
    }

    /// Connects to `socket` as the user `uid` (its effective uid and gid, in a thread of its
    /// own: Linux keeps credentials per thread, so the test's other threads stay as they are),
    /// which is who the broker's peer check sees: the client of a broker started with
    /// [`BrokerProcess::start_as`].
    pub fn connect_as(uid: u32, socket: &Path) -> AgentClient {
        use rustix::process::{Gid, Uid};
        use rustix::thread::{set_thread_res_gid, set_thread_res_uid};
        let socket = socket.to_path_buf();
        let connected = std::thread::spawn(move || {
            set_thread_res_gid(None, Gid::from_raw(uid), None)?;
            set_thread_res_uid(None, Uid::from_raw(uid), None)?;
            UnixStream::connect(&socket)
        })
        .join();
        let stream = match connected {
            Ok(stream) => must(stream),
            Err(_) => panic!("the thread connecting as uid {uid} panicked"),
        };
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        AgentClient {
            stream,
            session: None,
        }
    }

    /// [`AgentClient::open`] as the user `uid` (see [`AgentClient::connect_as`]).
    pub fn open_as(uid: u32, socket: &Path, resume: Option<Resume>) -> AgentClient {
        AgentClient::connect_as(uid, socket).hello(resume)
    }

    /// Connects and opens (or resumes) a session; panics unless welcomed.
    pub fn open(socket: &Path, resume: Option<Resume>) -> AgentClient {
        AgentClient::connect(socket).hello(resume)
    }

    /// Opens (or resumes) a session on this connection; panics unless welcomed.
    fn hello(self, resume: Option<Resume>) -> AgentClient {
        let mut client = self;
        match client.send(&AgentFrame::Hello {
            version: PROTOCOL_VERSION,
            client: None,
            resume,
        }) {
            Some(BrokerFrame::Welcome {
                session,
                resume_token,
                ..
            }) => {
                client.session = Some(Resume {
                    session,
                    token: resume_token,
                })
            }
            other => panic!("hello was answered with {other:?}"),
        }
        client
    }

    /// The session id.
    pub fn session_id(&self) -> SessionId {
        match &self.session {
            Some(resume) => resume.session.clone(),
            None => SessionId(String::new()),
        }
    }

    /// Sends a frame and reads one back (`None` when the broker closed).
    pub fn send(&mut self, frame: &AgentFrame) -> Option<BrokerFrame> {
        if write_frame(&mut self.stream, frame).is_err() {
            return None;
        }
        self.receive()
    }

    /// Reads one frame (`None` when the broker closed or the read failed).
    pub fn receive(&mut self) -> Option<BrokerFrame> {
        read_frame(&mut self.stream).ok().flatten()
    }

    /// Calls `tool` with `arguments` as call `call_id` of this session: the final response,
    /// or the frame that came instead.
    pub fn call(
        &mut self,
        call_id: u64,
        tool: &str,
        arguments: &str,
    ) -> Result<ToolResponse, Option<BrokerFrame>> {
        let request = ToolRequest {
            session: self.session_id().to_string(),
            call_id,
            tool: tool.to_string(),
            arguments: arguments.to_string(),
        };
        match self.send(&AgentFrame::Call { request }) {
            Some(BrokerFrame::Response { response, .. }) => Ok(response),
            other => Err(other),
        }
    }

    /// Sends call `call_id` without reading the answer.
    pub fn start_call(&mut self, call_id: u64, tool: &str, arguments: &str) {
        let request = ToolRequest {
            session: self.session_id().to_string(),
            call_id,
            tool: tool.to_string(),
            arguments: arguments.to_string(),
        };
        must(write_frame(&mut self.stream, &AgentFrame::Call { request }));
    }

    /// Reads responses until a final one: the `PendingApproval`s seen on the way (their
    /// approval ids) and the final response (or the frame that came instead).
    pub fn finish_call(&mut self) -> (Vec<u64>, Result<ToolResponse, Option<BrokerFrame>>) {
        let mut pending = Vec::new();
        loop {
            match self.receive() {
                Some(BrokerFrame::Response {
                    response: ToolResponse::PendingApproval { approval, .. },
                    ..
                }) => pending.push(approval),
                Some(BrokerFrame::Response { response, .. }) => return (pending, Ok(response)),
                other => return (pending, Err(other)),
            }
        }
    }

    /// Sends a call and waits until it is pending: its approval id (panics otherwise).
    pub fn call_pending(&mut self, call_id: u64, tool: &str, arguments: &str) -> u64 {
        self.start_call(call_id, tool, arguments);
        match self.receive() {
            Some(BrokerFrame::Response {
                response: ToolResponse::PendingApproval { approval, .. },
                ..
            }) => approval,
            other => panic!("call {call_id} did not wait for the owner: {other:?}"),
        }
    }

    /// Whether the broker has closed the connection (reads end).
    pub fn is_closed(&mut self) -> bool {
        let mut byte = [0u8; 1];
        matches!(self.stream.read(&mut byte), Ok(0) | Err(_))
    }
}

/// A raw client of the owner socket, after `owner_hello`.
pub struct OwnerClient {
    /// The connection.
    pub stream: UnixStream,
}

impl OwnerClient {
    /// Connects to `socket` and says hello; panics unless welcomed.
    pub fn open(socket: &Path) -> OwnerClient {
        let stream = must(UnixStream::connect(socket));
        let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
        let mut client = OwnerClient { stream };
        match client.send(&OwnerRequest::OwnerHello {
            version: PROTOCOL_VERSION,
        }) {
            Some(OwnerReply::OwnerWelcome { .. }) => client,
            other => panic!("owner_hello was answered with {other:?}"),
        }
    }

    /// Sends a request and reads one reply (`None` when the broker closed).
    pub fn send(&mut self, request: &OwnerRequest) -> Option<OwnerReply> {
        if write_frame(&mut self.stream, request).is_err() {
            return None;
        }
        self.receive()
    }

    /// Reads one reply.
    pub fn receive(&mut self) -> Option<OwnerReply> {
        read_frame(&mut self.stream).ok().flatten()
    }

    /// The pending approvals.
    pub fn pending(&mut self) -> Vec<PendingView> {
        match self.send(&OwnerRequest::ListPending {}) {
            Some(OwnerReply::Pending { pending }) => pending,
            other => panic!("list_pending was answered with {other:?}"),
        }
    }

    /// Waits (polling) until an approval is pending; panics after 20 s.
    pub fn wait_pending(&mut self) -> PendingView {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Some(first) = self.pending().into_iter().next() {
                return first;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        panic!("no approval became pending within 20 s")
    }

    /// Approves `approval` (once, or for the session): the reply.
    pub fn approve(&mut self, approval: ApprovalId, for_session: bool) -> Option<OwnerReply> {
        self.send(&OwnerRequest::Approve {
            approval,
            for_session,
        })
    }

    /// Starts a watch stream on this connection and returns its next event.
    pub fn next_event(&mut self) -> Option<OwnerEvent> {
        match self.receive() {
            Some(OwnerReply::Event { event }) => Some(event),
            _ => None,
        }
    }
}

/// brokerd's binaries, installed side by side: the broker, the launcher of its boxes, the file
/// tools' worker and the fetcher (the broker uses the other two only when they are of its own build).
const BROKER_BINARIES: [&str; 4] = [
    "brokerd",
    "brokerd-launcher",
    "brokerd-files",
    "brokerd-fetch",
];

/// The built `brokerd`, with the binaries beside it built from the same tree.
fn built_broker() -> PathBuf {
    let built = |name: &str| match crate::binary(name) {
        Ok(built) => built,
        Err(e) => panic!("{e}"),
    };
    let [broker, beside @ ..] = BROKER_BINARIES;
    for name in beside {
        built(name);
    }
    built(broker)
}
