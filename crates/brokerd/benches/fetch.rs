//! What `http_fetch`'s box costs: a small page from testkit's TLS server on loopback, fetched
//! through a broker over the agent socket (decided, audited with its fsync, rendered) with the
//! fetch in the session's warm fetcher behind its proxy (the default), in a fresh box per call
//! (`[sandbox] warm_idle_ms = 0`), and in the broker's process (`[sandbox] file_walls =
//! false`); beside them the fetch alone, `nettools::web::http_fetch` in this process, the floor.
//! Calls interleaved, median and p99.
//!
//! `cargo build --release -p brokerd -p worker && cargo bench -p brokerd --bench fetch [-- CALLS]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use proto::ToolResponse;
use testkit::tls_server::{TestCa, TlsResponse, TlsServer};
use testkit::{AgentClient, BrokerProcess};

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

fn main() {
    let calls: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(200);
    let ca = TestCa::new("boxmaker fetch bench CA");
    let server = TlsServer::start(&ca.issue(&["page.test"])).unwrap();
    server.route(
        "/page",
        TlsResponse::ok(
            "text/html",
            "<html><body><h1>A page</h1><p>Some text to convert.</p></body></html>",
        ),
    );
    let port = server.port();
    let roots = tempfile::tempdir().unwrap();
    let ca_file = roots.path().join("ca.pem");
    std::fs::write(&ca_file, ca.cert_pem()).unwrap();
    let grants = format!(
        "[[grant]]\nid = \"web\"\ntool = \"http_fetch\"\nhosts = [\"page.test:{port}\"]\nclass = \"public\"\non_untrusted = \"allow\"\n"
    );
    let env = [
        ("BOXMAKER_TEST_RESOLVE", "page.test=127.0.0.1"),
        ("BOXMAKER_EXTRA_ROOTS", ca_file.to_str().unwrap()),
    ];
    let warm = BrokerProcess::start_with_env(&grants, "idle_timeout_ms = 60000\n", &env);
    let fresh = BrokerProcess::start_with_env(
        &grants,
        "idle_timeout_ms = 60000\n[sandbox]\nwarm_idle_ms = 0\n",
        &env,
    );
    let unboxed = BrokerProcess::start_with_env(
        &grants,
        "idle_timeout_ms = 60000\n[sandbox]\nfile_walls = false\n",
        &env,
    );
    let url = server.url("page.test", "/page");
    let args = serde_json::json!({ "url": url }).to_string();
    let mut clients = [
        AgentClient::open(&warm.socket(), None),
        AgentClient::open(&fresh.socket(), None),
        AgentClient::open(&unboxed.socket(), None),
    ];
    let fetch_args = nettools::web::HttpFetchArgs::new(&url);
    let options = nettools::web::FetchOptions::with_verdicts(|_: &str, _: u16| {
        nettools::web::HostVerdict::NamedItself
    })
    .with_resolver(testkit_resolver())
    .with_root_certificate(ca.cert_pem());
    let mut times: [Vec<Duration>; 4] = Default::default();
    for id in 1..=(calls + 10) as u64 {
        for (which, client) in clients.iter_mut().enumerate() {
            let start = Instant::now();
            let answer = client.call(id, "http_fetch", &args).unwrap();
            let took = start.elapsed();
            assert!(matches!(answer, ToolResponse::Result { .. }), "{answer:?}");
            if id > 10 {
                times[which].push(took);
            }
        }
        let start = Instant::now();
        let fetched = nettools::web::http_fetch(&fetch_args, &options).unwrap();
        let took = start.elapsed();
        assert_eq!(fetched.status, 200);
        if id > 10 {
            times[3].push(took);
        }
    }
    for t in &mut times {
        t.sort();
    }
    let floor = percentile(&times[3], 0.5);
    println!("http_fetch of a small page on loopback, {calls} calls each, interleaved:");
    for (label, t) in [
        (
            "through the broker, the session's warm fetcher (default)",
            &times[0],
        ),
        (
            "through the broker, a fresh box a call (warm_idle_ms = 0)",
            &times[1],
        ),
        (
            "through the broker, in its process (file_walls = false)",
            &times[2],
        ),
        ("the fetch alone, in this process", &times[3]),
    ] {
        let median = percentile(t, 0.5);
        println!(
            "  {label:58} median {median:?}, p99 {:?} ({:.2}x the fetch alone)",
            percentile(t, 0.99),
            median.as_secs_f64() / floor.as_secs_f64()
        );
    }
}

/// `page.test` on loopback, as the brokers resolve it.
fn testkit_resolver() -> impl nettools::web::Resolve {
    |name: &str| -> std::io::Result<Vec<std::net::IpAddr>> {
        if name == "page.test" {
            Ok(vec![std::net::IpAddr::from([127, 0, 0, 1])])
        } else {
            Err(std::io::Error::other(format!("{name} is not a test name")))
        }
    }
}
