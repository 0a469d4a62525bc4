//! A model server on loopback that keeps each request and refuses it (HTTP 400 with an error
//! body), for tests that read what a real client sends its model: the tools it offers. It
//! answers every API the same way, so any client's provider setting can point at it.

use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use serde_json::Value;
use tiny_http::{Header, Response, Server};

/// One request received: its path and its body as JSON (`Null` when the body is not JSON).
#[derive(Clone, Debug)]
pub struct Recorded {
    /// The request's path and query, e.g. `/v1/messages?beta=true`.
    pub path: String,
    /// The body, parsed.
    pub body: Value,
}

/// The running server; stopped when dropped.
pub struct RequestRecorder {
    server: Arc<Server>,
    port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
    thread: Option<JoinHandle<()>>,
}

/// The body of every answer: an error in the shape OpenAI's and Anthropic's APIs both use, for
/// a request a client does not retry.
const REFUSAL: &str = r#"{"type":"error","error":{"type":"invalid_request_error","message":"recorded by the test's model server"}}"#;

impl RequestRecorder {
    /// Starts the server on 127.0.0.1 with a free port.
    pub fn start() -> std::io::Result<RequestRecorder> {
        let server = Server::http("127.0.0.1:0").map_err(std::io::Error::other)?;
        let port = server
            .server_addr()
            .to_ip()
            .map(|addr| addr.port())
            .ok_or_else(|| std::io::Error::other("the server has no IP address"))?;
        let server = Arc::new(server);
        let requests = Arc::new(Mutex::new(Vec::new()));
        let thread = {
            let server = Arc::clone(&server);
            let requests = Arc::clone(&requests);
            std::thread::spawn(move || serve(&server, &requests))
        };
        Ok(RequestRecorder {
            server,
            port,
            requests,
            thread: Some(thread),
        })
    }

    /// `http://127.0.0.1:PORT`, without a path.
    pub fn origin(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request received so far, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for RequestRecorder {
    fn drop(&mut self) {
        self.server.unblock();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn serve(server: &Server, requests: &Arc<Mutex<Vec<Recorded>>>) {
    while let Ok(mut request) = server.recv() {
        let mut body = String::new();
        let _ = request.as_reader().read_to_string(&mut body);
        // Kept before the answer: a client that has its answer finds its request here.
        requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Recorded {
                path: request.url().to_string(),
                body: serde_json::from_str(&body).unwrap_or(Value::Null),
            });
        let mut response = Response::from_string(REFUSAL).with_status_code(400);
        if let Ok(header) = Header::from_bytes("Content-Type", "application/json") {
            response = response.with_header(header);
        }
        let _ = request.respond(response);
    }
}
