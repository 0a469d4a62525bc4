//! `http_fetch` end to end, in the box (bubblewrap: brokerd's fetcher whose only way out is a
//! proxy deciding each hop) and in the broker's process (`[sandbox] bubblewrap = false`): the
//! same answers both ways. A redirect to a host another grant allows is followed; one to a host
//! whose grant asks is refused, not asked; one to a metadata address is refused whatever the
//! grant says; a first hop under an asking grant runs once the owner approves it.

use std::fs;

use proto::{ApprovalId, DenyReason, OwnerReply, ToolResponse};
use testkit::tls_server::{TestCa, TlsResponse, TlsServer};
use testkit::{AgentClient, BrokerProcess, OwnerClient};

use super::{FAST, audit_verify, content, denied, eventually};

struct Web {
    broker: BrokerProcess,
    server: TlsServer,
    _ca: TestCa,
    _roots: tempfile::TempDir,
}

/// A broker with `config`, whose grants let `http_fetch` reach `granted.test` and `meta.test`
/// (grant `fetch`: public, trusted), `other.test` (grant `other`: secret, untrusted) and
/// `*.wild.test` (grant `wild`, through a wildcard only) unasked, and `asking.test` (grant
/// `asking`) when the owner agrees; every name resolves to loopback (`meta.test` to a metadata
/// address).
fn web(config: &str) -> Web {
    let ca = TestCa::new("boxmaker fetch test CA");
    let server =
        TlsServer::start(&ca.issue(&["granted.test", "other.test", "asking.test"])).unwrap();
    let port = server.port();
    server.route(
        "/page",
        TlsResponse::ok(
            "text/html",
            "<html><body><h1>Fetched</h1><p>in a box</p></body></html>",
        ),
    );
    for (route, host) in [
        ("/to-other", "other.test"),
        ("/to-asking", "asking.test"),
        ("/to-meta", "meta.test"),
        ("/to-ungranted", "nowhere.test"),
        ("/to-wild", "a.wild.test"),
    ] {
        server.route(
            route,
            TlsResponse::redirect(302, &format!("https://{host}:{port}/page")),
        );
    }
    let grants = format!(
        r#"
[[grant]]
id = "fetch"
tool = "http_fetch"
hosts = ["granted.test:{port}", "meta.test:{port}"]
class = "public"
untrusted = false
on_untrusted = "allow"

[[grant]]
id = "other"
tool = "http_fetch"
hosts = ["other.test:{port}"]
class = "secret"
on_untrusted = "allow"

[[grant]]
id = "wild"
tool = "http_fetch"
hosts = ["*.wild.test:{port}"]
class = "public"
on_untrusted = "allow"

# Names a.wild.test itself, but has expired: it lets no private address through.
[[grant]]
id = "expired"
tool = "http_fetch"
hosts = ["a.wild.test:{port}"]
expires = "2020-01-01T00:00:00Z"

[[grant]]
id = "asking"
tool = "http_fetch"
hosts = ["asking.test:{port}"]
class = "public"
on_untrusted = "allow"
approval = "ask"
"#
    );
    let roots = tempfile::tempdir().unwrap();
    let ca_file = roots.path().join("ca.pem");
    fs::write(&ca_file, ca.cert_pem()).unwrap();
    let broker = BrokerProcess::start_with_env(
        &grants,
        config,
        &[
            (
                "BOXMAKER_TEST_RESOLVE",
                "granted.test=127.0.0.1,other.test=127.0.0.1,asking.test=127.0.0.1,nowhere.test=127.0.0.1,meta.test=169.254.169.254,a.wild.test=127.0.0.1",
            ),
            ("BOXMAKER_EXTRA_ROOTS", ca_file.to_str().unwrap()),
        ],
    );
    Web {
        broker,
        server,
        _ca: ca,
        _roots: roots,
    }
}

impl Web {
    /// A fetch in a session of its own.
    fn fetch(&self, id: u64, host: &str, path: &str) -> ToolResponse {
        let mut client = AgentClient::open(&self.broker.socket(), None);
        self.fetch_in(&mut client, id, host, path)
    }

    /// A fetch in `client`'s session.
    fn fetch_in(&self, client: &mut AgentClient, id: u64, host: &str, path: &str) -> ToolResponse {
        client
            .call(id, "http_fetch", &url_args(&self.server.url(host, path)))
            .unwrap()
    }

    /// The broker's warm fetchers (`brokerd-fetch box-fetch --warm`) running now.
    fn warm_fetchers(&self) -> usize {
        self.warm_fetcher_programs().len()
    }

    /// The file names of the programs the warm fetchers run.
    fn warm_fetcher_programs(&self) -> Vec<String> {
        super::warm::workers(&self.broker, &[b"box-fetch", b"--warm"])
            .into_iter()
            .filter_map(|pid| fs::read_link(format!("/proc/{pid}/exe")).ok())
            .filter_map(|exe| Some(exe.file_name()?.to_string_lossy().into_owned()))
            .collect()
    }

    /// The proxy sockets left in the runtime folder (none once every box has ended).
    fn sockets(&self) -> usize {
        fs::read_dir(self.broker.runtime.join("proxy")).map_or(0, |d| d.count())
    }
}

fn url_args(url: &str) -> String {
    serde_json::json!({ "url": url }).to_string()
}

fn header(response: &ToolResponse) -> serde_json::Value {
    let text = content(response);
    serde_json::from_str(text.split_once('\n').unwrap().0).unwrap()
}

/// The same calls, the same answers, in the box and in the broker's process; `walls` is how
/// each result's header begins.
fn redirects_are_decided_hop_by_hop(config: &str, begins: &str) {
    let web = web(config);
    let port = web.server.port();
    let fetched = web.fetch(1, "granted.test", "/to-other");
    let head = header(&fetched);
    assert_eq!(head["status"], 200, "{head}");
    assert_eq!(
        head["url"],
        format!("https://other.test:{port}/page"),
        "{head}"
    );
    assert_eq!(
        head["redirects"],
        serde_json::json!([format!("https://other.test:{port}/page")])
    );
    assert!(super::walls(&web.broker).starts_with(begins), "{head}");
    assert!(content(&fetched).contains("# Fetched"), "{fetched:?}");
    // The page came from other.test: it carries the labels of the grant that let it in.
    assert_eq!(
        (&head["class"], &head["untrusted"]),
        (&serde_json::json!("secret"), &serde_json::json!(true)),
        "{head}"
    );
    // Fetched straight from granted.test, it carries that grant's.
    let straight = header(&web.fetch(5, "granted.test", "/page"));
    assert_eq!(
        (&straight["class"], &straight["untrusted"]),
        (&serde_json::json!("public"), &serde_json::json!(false)),
        "{straight}"
    );

    // A redirect to a host whose grant asks is refused, never asked for.
    let refused = web.fetch(2, "granted.test", "/to-asking");
    assert_eq!(denied(&refused), DenyReason::NoGrant);
    let refused = web.fetch(3, "granted.test", "/to-ungranted");
    assert_eq!(denied(&refused), DenyReason::NoGrant);
    // Granted, but a metadata address: refused whatever the grant says.
    let refused = web.fetch(4, "granted.test", "/to-meta");
    assert_eq!(denied(&refused), DenyReason::UnsafeAddress);
    // Granted through a wildcard, on loopback: refused; the expired grant naming the host
    // itself counts for nothing.
    let refused = web.fetch(6, "granted.test", "/to-wild");
    assert_eq!(denied(&refused), DenyReason::UnsafeAddress);
    // Only the pages the grants allow were asked for: the page behind each refusal never was.
    let pages: Vec<String> = web
        .server
        .requests()
        .iter()
        .map(|r| r.target.clone())
        .collect();
    assert_eq!(
        pages,
        [
            "/to-other",
            "/page",
            "/page",
            "/to-asking",
            "/to-ungranted",
            "/to-meta",
            "/to-wild"
        ],
        "{pages:?}"
    );
    let log = fs::read_to_string(web.broker.state.join("audit.jsonl")).unwrap();
    assert!(log.contains("asks the owner first"), "{log}");
    assert!(log.contains("a cloud metadata address"), "{log}");
    assert_eq!(audit_verify(&web.broker).0, 0);
    // A fresh box's proxy ends with the box; a warm fetcher's when it has been idle for
    // warm_idle_ms (each call above had a session of its own).
    assert!(
        eventually(|| web.sockets() == 0),
        "{} proxy sockets left",
        web.sockets()
    );
}

#[test]
fn in_the_box_each_redirect_is_decided_again_and_the_page_is_read_there() {
    // Each call's session keeps a warm fetcher, ended after a second unused.
    redirects_are_decided_hop_by_hop(
        &format!("{FAST}[sandbox]\nwarm_idle_ms = 1000\n"),
        "bubblewrap: brokerd's fetcher sees no file",
    );
}

#[test]
fn in_a_fresh_box_each_call_the_same_answers() {
    redirects_are_decided_hop_by_hop(
        &format!("{FAST}[sandbox]\nwarm_idle_ms = 0\n"),
        "bubblewrap: brokerd's fetcher sees no file",
    );
}

#[test]
fn a_sessions_fetches_share_one_warm_fetcher_and_each_call_is_decided_as_itself() {
    let web = web(FAST);
    let mut client = AgentClient::open(&web.broker.socket(), None);
    let fetched = web.fetch_in(&mut client, 1, "granted.test", "/page");
    assert_eq!(header(&fetched)["status"], 200, "{fetched:?}");
    // The fetcher is the small `brokerd-fetch` beside brokerd (the `fetcher` crate's), not the
    // daemon.
    assert_eq!(web.warm_fetcher_programs(), ["brokerd-fetch"]);
    // The owner approves a fetch of asking.test: that call's first hop keeps its grant.
    let url = web.server.url("asking.test", "/page");
    let id = client.call_pending(2, "http_fetch", &url_args(&url));
    let mut owner = OwnerClient::open(&web.broker.owner_socket());
    assert!(matches!(
        owner.approve(ApprovalId(id), false),
        Some(OwnerReply::Done { .. })
    ));
    let (_, approved) = client.finish_call();
    assert_eq!(header(&approved.unwrap())["status"], 200);
    // The next call in the same fetcher is decided as itself: a redirect to asking.test is
    // refused, whatever the call before was allowed.
    let redirected = web.fetch_in(&mut client, 3, "granted.test", "/to-asking");
    assert_eq!(denied(&redirected), DenyReason::NoGrant);
    let again = web.fetch_in(&mut client, 4, "other.test", "/page");
    assert_eq!(header(&again)["status"], 200, "{again:?}");
    assert_eq!(web.warm_fetchers(), 1, "one fetcher served the session");
    assert_eq!(web.sockets(), 1);
    // The session ends: so do its fetcher and its proxy.
    assert!(matches!(
        client.send(&proto::AgentFrame::Close {}),
        Some(proto::BrokerFrame::Closed {})
    ));
    assert!(eventually(|| web.warm_fetchers() == 0 && web.sockets() == 0));
}

#[test]
fn in_the_brokers_process_the_same_redirects_get_the_same_answers() {
    redirects_are_decided_hop_by_hop(
        &format!("{FAST}[sandbox]\nbubblewrap = false\n"),
        "none: http_fetch ran in the broker's process",
    );
}

#[test]
fn a_fetch_under_an_asking_grant_runs_once_the_owner_approves() {
    for config in [
        FAST.to_string(),
        format!("{FAST}[sandbox]\nbubblewrap = false\n"),
    ] {
        let web = web(&config);
        let mut client = AgentClient::open(&web.broker.socket(), None);
        let url = web.server.url("asking.test", "/page");
        let id = client.call_pending(1, "http_fetch", &url_args(&url));
        let mut owner = OwnerClient::open(&web.broker.owner_socket());
        match owner.approve(ApprovalId(id), false) {
            Some(OwnerReply::Done { .. }) => {}
            other => panic!("not approved: {other:?}"),
        }
        let (_, answer) = client.finish_call();
        let answer = answer.unwrap();
        assert!(
            matches!(answer, ToolResponse::Result { .. }),
            "{config}: {answer:?}"
        );
        assert_eq!(header(&answer)["status"], 200, "{config}: {answer:?}");
    }
}
