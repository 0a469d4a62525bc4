//! Shared fixtures for loopd's integration tests: a scripted server, a session in a temporary
//! folder, ports with fixed answers, and an event recorder.
#![allow(dead_code)]

pub mod raw;

use std::sync::Mutex;
use std::time::Duration;

use loopd::llama::{LlamaClient, LlamaConfig};
use loopd::script::Script;
use loopd::session::{Session, SessionIds};
use loopd::tools::{Pending, Registry, ToolPort};
use loopd::turn::{Limits, Runtime, TurnError, TurnEvent, run_turn};
use proto::{ToolRequest, ToolResponse};
use testkit::ScriptServer;

/// A port that reports each pending approval given, then answers with `response`.
pub struct FixedPort {
    pub pending: Vec<Pending>,
    pub response: ToolResponse,
    pub calls: Mutex<Vec<ToolRequest>>,
}

impl FixedPort {
    pub fn new(response: ToolResponse) -> FixedPort {
        FixedPort {
            pending: Vec::new(),
            response,
            calls: Mutex::new(Vec::new()),
        }
    }

    pub fn calls(&self) -> Vec<ToolRequest> {
        self.calls.lock().unwrap().clone()
    }
}

impl ToolPort for FixedPort {
    fn call(&self, request: &ToolRequest, on_pending: &mut dyn FnMut(&Pending)) -> ToolResponse {
        self.calls.lock().unwrap().push(request.clone());
        for pending in &self.pending {
            on_pending(pending);
        }
        self.response.clone()
    }
}

/// A scripted server, a client for it, and a fresh session in a temporary folder.
pub struct Fixture {
    pub server: ScriptServer,
    pub client: LlamaClient,
    pub session: Session,
    pub registry: Registry,
    pub limits: Limits,
    pub dir: tempfile::TempDir,
}

impl Fixture {
    pub fn new(script: &str) -> Fixture {
        Fixture::with(script, |_| {})
    }

    pub fn with(script: &str, configure: impl FnOnce(&mut LlamaConfig)) -> Fixture {
        let script = Script::parse(script, &Default::default()).unwrap();
        let server = ScriptServer::start(script).unwrap();
        let mut config = LlamaConfig {
            base_url: server.base_url(),
            timeout: Duration::from_secs(10),
            ..LlamaConfig::default()
        };
        configure(&mut config);
        let client = LlamaClient::new(config);
        let dir = testkit::temp_dir();
        let registry = Registry::demo();
        let ids = SessionIds {
            id: "test-session".into(),
            resume_token: None,
        };
        let session =
            Session::create(dir.path(), ids, "You are a test.", &registry.core_schemas()).unwrap();
        Fixture {
            server,
            client,
            session,
            registry,
            limits: Limits::default(),
            dir,
        }
    }

    /// Runs one turn through `port`, returning the answer and every event but text deltas.
    pub fn turn(
        &mut self,
        port: &dyn ToolPort,
        user: &str,
    ) -> (Result<String, TurnError>, Vec<TurnEvent>) {
        let rt = Runtime {
            model: &self.client,
            port,
            registry: &self.registry,
            limits: self.limits.clone(),
            children: None,
        };
        let mut events = Vec::new();
        let result = run_turn(&rt, &mut self.session, user, &mut |event| {
            if !matches!(event, TurnEvent::TextDelta { .. }) {
                events.push(event.clone());
            }
        });
        (result, events)
    }
}

/// The `content` of every tool message in the last request the server received.
pub fn tool_messages(server: &ScriptServer) -> Vec<String> {
    server.last_contents("tool")
}
