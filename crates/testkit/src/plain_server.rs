//! A plain HTTP/1.1 server on loopback for tests: every request answered with one fixed body,
//! each request's head kept for the test to read.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::sync::{Arc, Mutex, PoisonError};

/// The server; it runs until the test process ends.
pub struct PlainServer {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl PlainServer {
    /// Listens on a free loopback port and answers every request `200 OK` with `body` as
    /// `content_type`, then closes the connection.
    pub fn start(content_type: &'static str, body: &'static str) -> std::io::Result<PlainServer> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let port = listener.local_addr()?.port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let kept = Arc::clone(&heads);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                let mut head = Vec::new();
                let mut byte = [0u8; 1];
                while !head.ends_with(b"\r\n\r\n") && stream.read(&mut byte).unwrap_or(0) == 1 {
                    head.extend_from_slice(&byte);
                }
                // Kept before the answer: a client that has its answer finds its head here.
                kept.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(String::from_utf8_lossy(&head).into_owned());
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Ok(PlainServer { port, heads })
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The heads of the requests answered so far (request line and headers), in order.
    pub fn heads(&self) -> Vec<String> {
        self.heads
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
