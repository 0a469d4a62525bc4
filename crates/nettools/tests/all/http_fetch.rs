//! `http_fetch` against a real HTTPS server on 127.0.0.1 (testkit's `TlsServer`) with a test CA
//! made by rcgen. The fetch trusts only that CA; a fake resolver maps the test names.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nettools::web::{
    FetchError, FetchOptions, FetchResult, HttpFetchArgs, USER_AGENT, http_fetch, http_fetch_schema,
};
use testkit::tls_server::{TestCa, TlsResponse, TlsServer};

const LOCALHOST: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

struct Fixture {
    ca: TestCa,
    server: TlsServer,
}

/// A CA and a server with a certificate for fetch.test, other.test and 127.0.0.1.
fn fixture() -> Fixture {
    let ca = TestCa::new("boxmaker test CA");
    let cert = ca.issue(&["fetch.test", "other.test", "127.0.0.1"]);
    let server = TlsServer::start(&cert).expect("the TLS server starts");
    Fixture { ca, server }
}

/// A resolver that knows only `names`.
fn resolver(
    names: &[(&str, &[IpAddr])],
) -> impl Fn(&str) -> io::Result<Vec<IpAddr>> + Send + Sync + 'static {
    let names: HashMap<String, Vec<IpAddr>> = names
        .iter()
        .map(|(name, addresses)| (name.to_string(), addresses.to_vec()))
        .collect();
    move |host: &str| {
        names
            .get(host)
            .cloned()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host}: no such name")))
    }
}

/// Options that grant `granted` (any port), name `explicit` explicitly, map fetch.test and
/// other.test to 127.0.0.1, trust only the fixture's CA, and give up after 10 s.
fn options(fixture: &Fixture, granted: &[&str], explicit: &[&str]) -> FetchOptions {
    let granted: Vec<String> = granted.iter().map(|host| host.to_string()).collect();
    FetchOptions::new(move |host, _port| granted.iter().any(|granted| granted == host))
        .with_explicit_hosts(explicit.iter().copied())
        .with_resolver(resolver(&[
            ("fetch.test", &[LOCALHOST]),
            ("other.test", &[LOCALHOST]),
        ]))
        .with_root_certificate(fixture.ca.cert_pem())
        .with_timeout(Duration::from_secs(10))
}

fn fetch(url: &str, options: &FetchOptions) -> Result<FetchResult, FetchError> {
    http_fetch(&HttpFetchArgs::new(url), options)
}

#[test]
fn a_host_named_explicitly_that_resolves_to_loopback_is_fetched() {
    let f = fixture();
    f.server.route(
        "/page",
        TlsResponse::ok("text/plain; charset=utf-8", "hello, fetch"),
    );
    let url = f.server.url("fetch.test", "/page");
    let result = fetch(&url, &options(&f, &["fetch.test"], &["fetch.test"])).expect("fetched");
    assert_eq!(
        result,
        FetchResult {
            url: url.clone(),
            status: 200,
            content_type: Some("text/plain; charset=utf-8".to_string()),
            body: "hello, fetch".to_string(),
            format: "text".to_string(),
            total_chars: 12,
            start_index: 0,
            next_start_index: None,
            bytes: 12,
            truncated: false,
            redirects: Vec::new(),
        }
    );
    let requests = f.server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "GET");
    assert_eq!(requests[0].target, "/page");
    assert_eq!(
        requests[0].host.as_deref(),
        Some(format!("fetch.test:{}", f.server.port()).as_str())
    );
    let agent = requests[0]
        .headers
        .iter()
        .find(|(name, _)| name == "user-agent");
    assert_eq!(agent.map(|(_, value)| value.as_str()), Some(USER_AGENT));
}

#[test]
fn a_granted_host_that_is_not_named_explicitly_may_not_resolve_to_loopback() {
    let f = fixture();
    f.server.route("/", TlsResponse::ok("text/plain", "secret"));
    let error = fetch(
        &f.server.url("fetch.test", "/"),
        &options(&f, &["fetch.test"], &[]),
    )
    .expect_err("refused");
    assert_eq!(
        error,
        FetchError::UnsafeAddress {
            host: "fetch.test".to_string(),
            address: LOCALHOST
        }
    );
    assert_eq!(f.server.connections(), 0);
}

#[test]
fn a_redirect_to_a_host_without_a_grant_is_refused() {
    let f = fixture();
    let target = f.server.url("other.test", "/next");
    f.server.route("/", TlsResponse::redirect(302, &target));
    f.server
        .route("/next", TlsResponse::ok("text/plain", "other"));
    let error = fetch(
        &f.server.url("fetch.test", "/"),
        &options(&f, &["fetch.test"], &["fetch.test", "other.test"]),
    )
    .expect_err("refused");
    assert_eq!(
        error,
        FetchError::HostNotAllowed {
            host: "other.test".to_string(),
            port: f.server.port()
        }
    );
    assert_eq!(f.server.requests().len(), 1);
    assert!(error.to_string().contains("other.test"), "{error}");
}

#[test]
fn a_redirect_to_a_granted_host_is_followed_and_recorded() {
    let f = fixture();
    let target = f.server.url("other.test", "/next");
    f.server.route("/", TlsResponse::redirect(301, &target));
    f.server
        .route("/next", TlsResponse::ok("text/html", "<p>other</p>"));
    let result = fetch(
        &f.server.url("fetch.test", "/"),
        &options(
            &f,
            &["fetch.test", "other.test"],
            &["fetch.test", "other.test"],
        ),
    )
    .expect("fetched");
    assert_eq!(result.url, target);
    assert_eq!(result.redirects, vec![target.clone()]);
    // HTML comes back as Markdown.
    assert_eq!(result.body, "other");
    assert_eq!(result.format, "markdown");
    let hosts: Vec<Option<String>> = f.server.requests().into_iter().map(|r| r.host).collect();
    assert_eq!(
        hosts,
        vec![
            Some(format!("fetch.test:{}", f.server.port())),
            Some(format!("other.test:{}", f.server.port())),
        ]
    );
}

#[test]
fn a_relative_redirect_is_resolved_against_the_current_url() {
    let f = fixture();
    f.server
        .route("/a/b", TlsResponse::redirect(307, "../c?d=e"));
    f.server
        .route("/c?d=e", TlsResponse::ok("text/plain", "relative"));
    let result = fetch(
        &f.server.url("fetch.test", "/a/b"),
        &options(&f, &["fetch.test"], &["fetch.test"]),
    )
    .expect("fetched");
    assert_eq!(result.body, "relative");
    assert_eq!(result.url, f.server.url("fetch.test", "/c?d=e"));
}

#[test]
fn a_redirect_to_a_loopback_address_not_named_explicitly_is_refused() {
    let f = fixture();
    let target = f.server.url("127.0.0.1", "/");
    f.server.route("/", TlsResponse::redirect(302, &target));
    let error = fetch(
        &f.server.url("fetch.test", "/"),
        &options(&f, &["fetch.test", "127.0.0.1"], &["fetch.test"]),
    )
    .expect_err("refused");
    assert_eq!(
        error,
        FetchError::UnsafeAddress {
            host: "127.0.0.1".to_string(),
            address: LOCALHOST
        }
    );
    assert_eq!(f.server.requests().len(), 1);
    assert!(
        error
            .to_string()
            .contains("127.0.0.1 is a loopback address"),
        "{error}"
    );
}

#[test]
fn a_loopback_literal_as_the_first_url_is_refused_without_connecting() {
    let f = fixture();
    for host in [
        "127.0.0.1",
        "127.1",
        "0x7f000001",
        "[::1]",
        "[::ffff:127.0.0.1]",
    ] {
        let error = fetch(
            &f.server.url(host, "/"),
            &options(&f, &["127.0.0.1", "::1", "::ffff:127.0.0.1"], &[]),
        )
        .expect_err("refused");
        assert!(
            matches!(error, FetchError::UnsafeAddress { .. }),
            "{host}: {error:?}"
        );
    }
    assert_eq!(f.server.connections(), 0);
}

#[test]
fn a_loopback_literal_named_explicitly_is_fetched() {
    let f = fixture();
    f.server
        .route("/", TlsResponse::ok("text/plain", "by address"));
    let result = fetch(
        &f.server.url("127.0.0.1", "/"),
        &options(&f, &["127.0.0.1"], &["127.0.0.1"]),
    )
    .expect("fetched");
    assert_eq!(result.body, "by address");
}

#[test]
fn dns_answering_a_private_or_metadata_address_is_refused_without_connecting() {
    let f = fixture();
    let unsafe_answers: [IpAddr; 7] = [
        "10.0.0.5".parse().expect("ip"),
        "169.254.169.254".parse().expect("ip"),
        "100.100.100.200".parse().expect("ip"),
        "::1".parse().expect("ip"),
        "::ffff:127.0.0.1".parse().expect("ip"),
        "fd00:ec2::254".parse().expect("ip"),
        "192.168.1.10".parse().expect("ip"),
    ];
    for address in unsafe_answers {
        let options = options(&f, &["fetch.test"], &[])
            .with_resolver(resolver(&[("fetch.test", &[address])]));
        let error = fetch(&f.server.url("fetch.test", "/"), &options).expect_err("refused");
        assert_eq!(
            error,
            FetchError::UnsafeAddress {
                host: "fetch.test".to_string(),
                address
            }
        );
        let message = error.to_string();
        assert!(
            message.contains("fetch.test") && message.contains(&address.to_string()),
            "{message}"
        );
    }
    assert_eq!(f.server.connections(), 0);
}

#[test]
fn one_unsafe_address_among_public_ones_refuses_the_host() {
    let f = fixture();
    let public: IpAddr = "1.1.1.1".parse().expect("ip");
    let private: IpAddr = "10.0.0.5".parse().expect("ip");
    let options = options(&f, &["fetch.test"], &[])
        .with_resolver(resolver(&[("fetch.test", &[public, private])]));
    let error = fetch(&f.server.url("fetch.test", "/"), &options).expect_err("refused");
    assert_eq!(
        error,
        FetchError::UnsafeAddress {
            host: "fetch.test".to_string(),
            address: private
        }
    );
}

#[test]
fn a_host_named_explicitly_may_still_not_resolve_to_an_unspecified_address() {
    let f = fixture();
    let options = options(&f, &["fetch.test"], &["fetch.test"]).with_resolver(resolver(&[(
        "fetch.test",
        &[IpAddr::V4(Ipv4Addr::UNSPECIFIED)],
    )]));
    let error = fetch(&f.server.url("fetch.test", "/"), &options).expect_err("refused");
    assert!(
        matches!(error, FetchError::UnsafeAddress { .. }),
        "{error:?}"
    );
    assert!(error.to_string().contains("never fetched"), "{error}");
    assert_eq!(f.server.connections(), 0);
}

#[test]
fn an_oversize_body_is_cut_at_exactly_max_bytes() {
    let f = fixture();
    f.server
        .route("/big", TlsResponse::ok("text/plain", vec![b'a'; 100_000]));
    f.server
        .route("/exact", TlsResponse::ok("text/plain", vec![b'b'; 4096]));
    let options = options(&f, &["fetch.test"], &["fetch.test"]).with_max_bytes(4096);
    let big = fetch(&f.server.url("fetch.test", "/big"), &options).expect("fetched");
    assert!(big.truncated);
    assert_eq!(big.bytes, 4096);
    assert_eq!(big.body, "a".repeat(4096));
    let exact = fetch(&f.server.url("fetch.test", "/exact"), &options).expect("fetched");
    assert!(!exact.truncated);
    assert_eq!(exact.bytes, 4096);
}

#[test]
fn an_endless_body_is_cut_and_the_fetch_returns() {
    let f = fixture();
    f.server.route(
        "/endless",
        TlsResponse::endless("text/plain", vec![b'z'; 8192]),
    );
    let options = options(&f, &["fetch.test"], &["fetch.test"]).with_max_bytes(10_000);
    let result = fetch(&f.server.url("fetch.test", "/endless"), &options).expect("fetched");
    assert!(result.truncated);
    assert_eq!(result.bytes, 10_000);
    assert_eq!(result.body.len(), 10_000);
}

#[test]
fn invalid_utf8_is_replaced_and_counted_as_bytes_kept() {
    let f = fixture();
    f.server.route(
        "/bin",
        TlsResponse::ok("text/plain", vec![0xff, b'o', b'k']),
    );
    let result = fetch(
        &f.server.url("fetch.test", "/bin"),
        &options(&f, &["fetch.test"], &["fetch.test"]),
    )
    .expect("fetched");
    assert_eq!(result.body, "\u{fffd}ok");
    assert_eq!(result.bytes, 3);
}

#[test]
fn an_error_status_is_a_result_not_an_error() {
    let f = fixture();
    f.server
        .route("/boom", TlsResponse::status(500, "it broke"));
    let options = options(&f, &["fetch.test"], &["fetch.test"]);
    let result = fetch(&f.server.url("fetch.test", "/boom"), &options).expect("a result");
    assert_eq!((result.status, result.body.as_str()), (500, "it broke"));
    let missing = fetch(&f.server.url("fetch.test", "/missing"), &options).expect("a result");
    assert_eq!(missing.status, 404);
}

#[test]
fn an_http_url_is_refused() {
    let f = fixture();
    let url = format!("http://fetch.test:{}/", f.server.port());
    let error = fetch(&url, &options(&f, &["fetch.test"], &["fetch.test"])).expect_err("refused");
    assert_eq!(error, FetchError::NotHttps { url: url.clone() });
    assert_eq!(f.server.connections(), 0);
}

#[test]
fn a_redirect_to_http_is_refused() {
    let f = fixture();
    let target = format!("http://fetch.test:{}/plain", f.server.port());
    f.server.route("/", TlsResponse::redirect(302, &target));
    let error = fetch(
        &f.server.url("fetch.test", "/"),
        &options(&f, &["fetch.test"], &["fetch.test"]),
    )
    .expect_err("refused");
    assert_eq!(error, FetchError::NotHttps { url: target });
}

#[test]
fn a_url_that_does_not_parse_is_a_bad_url() {
    let f = fixture();
    let error = fetch("https://exa mple.test/", &options(&f, &[], &[])).expect_err("refused");
    assert!(matches!(error, FetchError::BadUrl { .. }), "{error:?}");
}

#[test]
fn an_unknown_field_in_the_arguments_is_refused() {
    let error =
        serde_json::from_str::<HttpFetchArgs>(r#"{"url":"https://fetch.test/","method":"POST"}"#)
            .expect_err("refused");
    assert!(error.to_string().contains("method"), "{error}");
    let missing = serde_json::from_str::<HttpFetchArgs>("{}").expect_err("refused");
    assert!(
        missing.to_string().starts_with("missing field `url`"),
        "{missing}"
    );
    let args: HttpFetchArgs =
        serde_json::from_str(r#"{"url":"https://fetch.test/"}"#).expect("accepted");
    assert_eq!(args.url, "https://fetch.test/");
}

#[test]
fn the_schema_has_the_seed_texts_exactly() {
    let schema = serde_json::to_string(&http_fetch_schema()).expect("serializes");
    assert_eq!(
        schema,
        r#"{"name":"http_fetch","description":"Fetch an https URL. Needs a grant from the owner for the host.","parameters":{"type":"object","properties":{"url":{"type":"string","description":"The URL. It must start with https://."}},"required":["url"]}}"#
    );
}

#[test]
fn the_args_accept_exactly_the_schema_properties() {
    let schema = http_fetch_schema();
    let properties = schema.parameters["properties"]
        .as_object()
        .expect("properties");
    let full: serde_json::Map<String, serde_json::Value> = properties
        .keys()
        .map(|key| (key.clone(), serde_json::json!("https://x.test/")))
        .collect();
    let args: HttpFetchArgs =
        serde_json::from_value(serde_json::Value::Object(full)).expect("accepted");
    let back = serde_json::to_value(&args).expect("serializes");
    let keys: Vec<&String> = back.as_object().expect("object").keys().collect();
    assert_eq!(keys, properties.keys().collect::<Vec<_>>());
}

#[test]
fn a_redirect_loop_ends_with_too_many_redirects() {
    let f = fixture();
    f.server.route("/loop", TlsResponse::redirect(302, "/loop"));
    let options = options(&f, &["fetch.test"], &["fetch.test"]).with_max_redirects(5);
    let error = fetch(&f.server.url("fetch.test", "/loop"), &options).expect_err("refused");
    assert!(
        matches!(error, FetchError::TooManyRedirects { max: 5, .. }),
        "{error:?}"
    );
    assert_eq!(f.server.requests().len(), 6);
}

#[test]
fn exactly_max_redirects_are_followed() {
    let f = fixture();
    f.server.route("/1", TlsResponse::redirect(302, "/2"));
    f.server.route("/2", TlsResponse::redirect(303, "/3"));
    f.server.route("/3", TlsResponse::ok("text/plain", "three"));
    let options = options(&f, &["fetch.test"], &["fetch.test"]).with_max_redirects(2);
    let result = fetch(&f.server.url("fetch.test", "/1"), &options).expect("fetched");
    assert_eq!(result.body, "three");
    assert_eq!(
        result.redirects,
        vec![
            f.server.url("fetch.test", "/2"),
            f.server.url("fetch.test", "/3")
        ]
    );
    let none = options.with_max_redirects(0);
    let error = fetch(&f.server.url("fetch.test", "/1"), &none).expect_err("refused");
    assert!(
        matches!(error, FetchError::TooManyRedirects { max: 0, .. }),
        "{error:?}"
    );
}

#[test]
fn a_server_that_hangs_times_out() {
    let f = fixture();
    f.server.route("/hang", TlsResponse::hang());
    let options =
        options(&f, &["fetch.test"], &["fetch.test"]).with_timeout(Duration::from_millis(500));
    let started = Instant::now();
    let error = fetch(&f.server.url("fetch.test", "/hang"), &options).expect_err("timed out");
    assert!(matches!(error, FetchError::Timeout { .. }), "{error:?}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(f.server.requests().len(), 1);
}

#[test]
fn a_server_that_never_starts_tls_times_out() {
    let f = fixture();
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("binds");
    let port = listener.local_addr().expect("address").port();
    let holder = std::thread::spawn(move || {
        // Accept one connection and keep it silent for a while, then let it go (the thread
        // ends by itself; the test does not wait for it).
        let accepted = listener.accept();
        std::thread::sleep(Duration::from_secs(2));
        drop(accepted);
    });
    let options =
        options(&f, &["fetch.test"], &["fetch.test"]).with_timeout(Duration::from_millis(300));
    let error = fetch(&format!("https://fetch.test:{port}/"), &options).expect_err("timed out");
    assert!(matches!(error, FetchError::Timeout { .. }), "{error:?}");
    assert!(error.to_string().contains("300 ms"), "{error}");
    drop(holder);
}

#[test]
fn a_resolver_that_hangs_times_out() {
    let f = fixture();
    let options = options(&f, &["fetch.test"], &["fetch.test"])
        .with_timeout(Duration::from_millis(200))
        .with_resolver(|_: &str| {
            std::thread::sleep(Duration::from_secs(2));
            Ok(vec![LOCALHOST])
        });
    let started = Instant::now();
    let error = fetch(&f.server.url("fetch.test", "/"), &options).expect_err("timed out");
    assert!(matches!(error, FetchError::Timeout { .. }), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[test]
fn a_name_that_does_not_resolve_is_a_resolve_error() {
    let f = fixture();
    let error = fetch(
        &f.server.url("nowhere.test", "/"),
        &options(&f, &["nowhere.test"], &["nowhere.test"]),
    )
    .expect_err("refused");
    assert!(
        matches!(&error, FetchError::Resolve { host, .. } if host == "nowhere.test"),
        "{error:?}"
    );
}

#[test]
fn a_certificate_from_another_ca_is_a_tls_error() {
    let f = fixture();
    let stranger = TestCa::new("some other CA");
    let server = TlsServer::start(&stranger.issue(&["fetch.test"])).expect("starts");
    server.route("/", TlsResponse::ok("text/plain", "untrusted"));
    let error = fetch(
        &server.url("fetch.test", "/"),
        &options(&f, &["fetch.test"], &["fetch.test"]),
    )
    .expect_err("refused");
    assert!(
        matches!(&error, FetchError::Tls { host, .. } if host == "fetch.test"),
        "{error:?}"
    );
    assert!(server.requests().is_empty());
}

#[test]
fn a_certificate_for_another_name_is_a_tls_error() {
    let f = fixture();
    let server = TlsServer::start(&f.ca.issue(&["other.test"])).expect("starts");
    let error = fetch(
        &server.url("fetch.test", "/"),
        &options(&f, &["fetch.test"], &["fetch.test"]),
    )
    .expect_err("refused");
    assert!(matches!(error, FetchError::Tls { .. }), "{error:?}");
}

#[test]
fn without_roots_of_its_own_the_fetch_does_not_trust_the_test_ca() {
    let f = fixture();
    f.server.route("/", TlsResponse::ok("text/plain", "hello"));
    let mut options = options(&f, &["fetch.test"], &["fetch.test"]);
    options.root_certificates.clear();
    let error = fetch(&f.server.url("fetch.test", "/"), &options).expect_err("refused");
    assert!(matches!(error, FetchError::Tls { .. }), "{error:?}");
}

#[test]
fn a_root_certificate_in_der_is_trusted_too() {
    let f = fixture();
    f.server.route("/", TlsResponse::ok("text/plain", "der"));
    let mut options = options(&f, &["fetch.test"], &["fetch.test"]);
    options.root_certificates = vec![f.ca.cert_der()];
    let result = fetch(&f.server.url("fetch.test", "/"), &options).expect("fetched");
    assert_eq!(result.body, "der");
}

#[test]
fn a_root_certificate_that_does_not_parse_is_a_setup_error() {
    let f = fixture();
    let mut options = options(&f, &["fetch.test"], &["fetch.test"]);
    options.root_certificates = vec![b"not a certificate".to_vec()];
    let error = fetch(&f.server.url("fetch.test", "/"), &options).expect_err("refused");
    assert!(matches!(error, FetchError::Setup { .. }), "{error:?}");
}

#[test]
fn a_refused_connection_is_a_connect_error() {
    let f = fixture();
    let port = {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("binds");
        listener.local_addr().expect("address").port()
    };
    let error = fetch(
        &format!("https://fetch.test:{port}/"),
        &options(&f, &["fetch.test"], &["fetch.test"]),
    )
    .expect_err("refused");
    assert!(
        matches!(&error, FetchError::Connect { host, addresses, .. }
            if host == "fetch.test" && addresses == &vec![LOCALHOST]),
        "{error:?}"
    );
    assert!(error.to_string().contains("127.0.0.1"), "{error}");
}

#[test]
fn the_grant_check_sees_each_hops_host_and_port() {
    let f = fixture();
    let target = f.server.url("other.test", "/");
    f.server.route("/", TlsResponse::redirect(302, &target));
    let seen: Arc<Mutex<Vec<(String, u16)>>> = Arc::default();
    let mut options = options(&f, &[], &["fetch.test", "other.test"]);
    options.host_allowed = {
        let seen = Arc::clone(&seen);
        Arc::new(move |host: &str, port: u16| {
            seen.lock()
                .unwrap_or_else(|p| p.into_inner())
                .push((host.to_string(), port));
            if host == "fetch.test" {
                nettools::web::HostVerdict::Granted
            } else {
                nettools::web::HostVerdict::Refused
            }
        })
    };
    let error = fetch(&f.server.url("fetch.test", "/"), &options).expect_err("refused");
    assert!(
        matches!(error, FetchError::HostNotAllowed { .. }),
        "{error:?}"
    );
    let error = fetch("https://Other.Test/x", &options).expect_err("refused");
    assert_eq!(
        error,
        FetchError::HostNotAllowed {
            host: "other.test".to_string(),
            port: 443
        }
    );
    let port = f.server.port();
    assert_eq!(
        *seen.lock().unwrap_or_else(|p| p.into_inner()),
        vec![
            ("fetch.test".to_string(), port),
            ("other.test".to_string(), port),
            ("other.test".to_string(), 443),
        ]
    );
}

#[test]
fn only_a_hop_whose_grant_names_the_host_itself_may_reach_loopback() {
    let f = fixture();
    f.server
        .route("/page", TlsResponse::ok("text/plain", "named itself"));
    f.server.route(
        "/away",
        TlsResponse::redirect(302, &f.server.url("other.test", "/page")),
    );
    // fetch.test is named itself; other.test only through a wildcard, hop by hop.
    let seen: Arc<Mutex<Vec<String>>> = Arc::default();
    let noted = Arc::clone(&seen);
    let options = FetchOptions::with_verdicts(move |host: &str, _port: u16| {
        noted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(host.to_string());
        match host {
            "fetch.test" => nettools::web::HostVerdict::NamedItself,
            "other.test" => nettools::web::HostVerdict::Granted,
            _ => nettools::web::HostVerdict::Refused,
        }
    })
    .with_resolver(resolver(&[
        ("fetch.test", &[LOCALHOST]),
        ("fetch.test.", &[LOCALHOST]),
        ("other.test", &[LOCALHOST]),
    ]))
    .with_root_certificate(f.ca.cert_pem())
    .with_timeout(Duration::from_secs(10));
    let port = f.server.port();
    // A trailing dot and capitals name the same host to the grant check.
    let fetched = fetch(&format!("https://Fetch.Test.:{port}/page"), &options).expect("fetched");
    assert_eq!(fetched.body, "named itself");
    let error = fetch(&f.server.url("fetch.test", "/away"), &options).expect_err("refused");
    assert!(
        matches!(&error, FetchError::UnsafeAddress { host, .. } if host == "other.test"),
        "{error:?}"
    );
    assert_eq!(
        *seen.lock().unwrap_or_else(|p| p.into_inner()),
        ["fetch.test", "fetch.test", "other.test"]
    );
}

// ---- what the model reads: Markdown, text, paging, binary types ----

/// A real page, saved in the repository: the rustdoc book's "What is rustdoc?" (mdBook HTML,
/// with its navigation, scripts and styles).
const RUSTDOC_PAGE: &str = include_str!("../fixtures/what-is-rustdoc.html");

fn fetch_page(
    f: &Fixture,
    path: &str,
    max_length: Option<usize>,
    start: Option<usize>,
) -> FetchResult {
    let args = HttpFetchArgs {
        url: f.server.url("fetch.test", path),
        max_length,
        start_index: start,
    };
    http_fetch(&args, &options(f, &["fetch.test"], &["fetch.test"])).expect("fetched")
}

#[test]
fn a_real_html_page_comes_back_as_markdown_without_scripts_or_styles() {
    let f = fixture();
    f.server.route(
        "/rustdoc",
        TlsResponse::ok("text/html; charset=utf-8", RUSTDOC_PAGE),
    );
    let result = fetch_page(&f, "/rustdoc", Some(1_000_000), None);
    assert_eq!(result.format, "markdown");
    assert_eq!(result.status, 200);
    assert_eq!(
        result.content_type.as_deref(),
        Some("text/html; charset=utf-8")
    );
    assert_eq!(result.bytes, RUSTDOC_PAGE.len());
    let md = &result.body;
    assert!(
        md.contains("# [What is rustdoc?](#what-is-rustdoc)"),
        "{md}"
    );
    assert!(md.contains("## [Basic usage](#basic-usage)"), "{md}");
    assert!(md.contains("```"), "code blocks are fenced: {md}");
    for gone in ["<script", "<div", "<style", "window.", "var path_to_root"] {
        assert!(!md.contains(gone), "{gone} left in {md}");
    }
    assert_eq!(result.total_chars, md.chars().count());
    assert_eq!(result.next_start_index, None);
    assert!(md.len() < RUSTDOC_PAGE.len() / 2, "{} bytes", md.len());
}

#[test]
fn a_long_text_is_read_page_by_page_with_start_index() {
    let f = fixture();
    let text: String = (0..2000).map(|i| format!("line {i} é\n")).collect();
    f.server
        .route("/long", TlsResponse::ok("text/plain", text.clone()));
    let total = text.chars().count();
    let first = fetch_page(&f, "/long", Some(100), None);
    assert_eq!(first.format, "text");
    assert_eq!(first.body.chars().count(), 100);
    assert_eq!(first.total_chars, total);
    assert_eq!(first.next_start_index, Some(100));
    let mut pages = first.body.clone();
    let mut next = first.next_start_index;
    while let Some(start) = next {
        let page = fetch_page(&f, "/long", Some(4000), Some(start));
        assert_eq!(page.start_index, start);
        pages.push_str(&page.body);
        next = page.next_start_index;
    }
    assert_eq!(pages, text);
    let past = fetch_page(&f, "/long", None, Some(total + 5));
    assert_eq!((past.body.as_str(), past.next_start_index), ("", None));
    let default = fetch_page(&f, "/long", None, None);
    assert_eq!(
        default.body.chars().count(),
        nettools::web::DEFAULT_MAX_LENGTH
    );
}

#[test]
fn a_binary_type_is_refused_with_its_type_and_size() {
    let f = fixture();
    f.server.route(
        "/logo.png",
        TlsResponse::ok("image/png", vec![0x89u8; 4321]),
    );
    let args = HttpFetchArgs::new(f.server.url("fetch.test", "/logo.png"));
    let error =
        http_fetch(&args, &options(&f, &["fetch.test"], &["fetch.test"])).expect_err("refused");
    assert_eq!(
        error,
        FetchError::Binary {
            url: f.server.url("fetch.test", "/logo.png"),
            content_type: "image/png".to_string(),
            size: "4321 bytes".to_string(),
        }
    );
    assert!(
        error.to_string().contains("image/png (4321 bytes)"),
        "{error}"
    );
    // Without a Content-Type, bytes that are not text are refused the same way.
    f.server.route(
        "/blob",
        TlsResponse::status(200, b"\x00\x01\x02binary".to_vec()),
    );
    let args = HttpFetchArgs::new(f.server.url("fetch.test", "/blob"));
    let error =
        http_fetch(&args, &options(&f, &["fetch.test"], &["fetch.test"])).expect_err("refused");
    assert!(
        matches!(error, FetchError::Binary { ref size, .. } if size == "9 bytes"),
        "{error}"
    );
}

#[test]
fn json_is_text_as_it_is() {
    let f = fixture();
    f.server.route(
        "/api",
        TlsResponse::ok("application/json", "{\"a\": [1, 2]}"),
    );
    let result = fetch_page(&f, "/api", None, None);
    assert_eq!(
        (result.format.as_str(), result.body.as_str()),
        ("text", "{\"a\": [1, 2]}")
    );
}

#[test]
fn every_spelling_of_a_granted_host_is_checked_as_that_host_and_the_rest_never_reach_the_check() {
    let f = fixture();
    f.server.route(
        "/page",
        TlsResponse::ok("text/plain; charset=utf-8", "same host"),
    );
    let asked: Arc<Mutex<Vec<String>>> = Arc::default();
    let seen = Arc::clone(&asked);
    let granted = ["127.0.0.1", "fetch.test"];
    let options = FetchOptions::new(move |host, _port| {
        seen.lock().unwrap().push(host.to_string());
        granted.contains(&host)
    })
    .with_explicit_hosts(granted)
    .with_resolver(resolver(&[("fetch.test", &[LOCALHOST])]))
    .with_root_certificate(f.ca.cert_pem())
    .with_timeout(Duration::from_secs(10));
    let port = f.server.port();
    for (spelling, canonical) in [
        ("127.0.0.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("0x7f000001", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("127.1", "127.0.0.1"),
        ("FETCH.Test", "fetch.test"),
        (
            "\u{ff46}\u{ff45}\u{ff54}\u{ff43}\u{ff48}.test",
            "fetch.test",
        ),
    ] {
        asked.lock().unwrap().clear();
        let url = format!("https://{spelling}:{port}/page");
        let result = fetch(&url, &options);
        assert_eq!(*asked.lock().unwrap(), [canonical], "{spelling}");
        assert_eq!(
            result.map(|r| r.body),
            Ok("same host".to_string()),
            "{spelling}"
        );
    }
    // An IPv4-mapped IPv6 address is the IPv4 address to the grants (whether TLS then accepts a
    // certificate for 127.0.0.1 at that address is TLS's business).
    asked.lock().unwrap().clear();
    let mapped = fetch(&format!("https://[::ffff:127.0.0.1]:{port}/page"), &options);
    assert_eq!(*asked.lock().unwrap(), ["127.0.0.1"]);
    assert!(
        !matches!(
            mapped,
            Err(FetchError::HostNotAllowed { .. } | FetchError::UnsafeAddress { .. })
        ),
        "{mapped:?}"
    );
    for spelling in [
        "fetch%2etest",
        "127.0.0.1%2e",
        "user@fetch.test",
        "fetch.test\u{0}.evil",
        "fetch\t.test",
        "fetch .test",
        "fetch..test",
        "[fe80::1%25lo]",
        "fetch\u{202e}.test",
    ] {
        asked.lock().unwrap().clear();
        let url = format!("https://{spelling}:{port}/page");
        let result = fetch(&url, &options);
        assert!(
            matches!(result, Err(FetchError::BadUrl { .. })),
            "{spelling:?}: {result:?}"
        );
        assert!(asked.lock().unwrap().is_empty(), "{spelling:?}");
    }
}

#[test]
fn a_redirect_whose_host_is_outside_the_grammar_is_not_followed() {
    let f = fixture();
    let port = f.server.port();
    for location in [
        format!("https://fetch%2etest:{port}/next"),
        format!("https://user@fetch.test:{port}/next"),
        format!("//fetch%2etest:{port}/next"),
    ] {
        f.server
            .route("/start", TlsResponse::redirect(302, &location));
        let url = f.server.url("fetch.test", "/start");
        let result = fetch(&url, &options(&f, &["fetch.test"], &["fetch.test"]));
        assert!(
            matches!(result, Err(FetchError::BadUrl { .. })),
            "{location}: {result:?}"
        );
    }
}

#[test]
fn a_page_reaches_the_model_cleaned_of_terminal_controls() {
    let f = fixture();
    f.server.route(
        "/page",
        TlsResponse::ok(
            "text/plain; charset=utf-8",
            "\u{1b}[31mred\u{1b}[0m \u{1b}]0;title\u{7}ok\u{7f}\u{9b}\r\n",
        ),
    );
    let url = f.server.url("fetch.test", "/page");
    let result = fetch(&url, &options(&f, &["fetch.test"], &["fetch.test"])).unwrap();
    assert_eq!(result.body, "red ok\n");
}
