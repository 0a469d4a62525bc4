//! `web_search` against fake providers: Serper and Google Custom Search on the testkit's TLS
//! server, a SearXNG instance over plain http on loopback; retries on transient failures.

use std::time::Duration;

use nettools::web::web_search::{
    Provider, SearchError, SearchHit, SearchOptions, WebSearchArgs, web_search, web_search_schema,
};
use serde_json::{Value, json};
use testkit::PlainServer;
use testkit::tls_server::{TestCa, TlsResponse, TlsServer};

struct Fake {
    ca: TestCa,
    server: TlsServer,
}

fn fake() -> Fake {
    let ca = TestCa::new("boxmaker test CA");
    let server = TlsServer::start(&ca.issue(&["search.test"])).expect("the TLS server starts");
    Fake { ca, server }
}

fn options(fake: &Fake, provider: Provider) -> SearchOptions {
    SearchOptions {
        retries: 3,
        backoff: Duration::from_millis(10),
        root_certificates: vec![fake.ca.cert_pem().into_bytes()],
        resolve: vec![("search.test".into(), fake.server.address())],
        timeout: Duration::from_secs(10),
        ..SearchOptions::new(Some(provider))
    }
}

fn serper(fake: &Fake) -> Provider {
    Provider::Serper {
        endpoint: fake.server.url("search.test", "/search"),
        api_key: "serper-key".into(),
    }
}

fn args(query: &str, max_results: Option<u32>) -> WebSearchArgs {
    WebSearchArgs {
        query: query.into(),
        max_results,
    }
}

fn organic(count: usize) -> String {
    let items: Vec<Value> = (0..count)
        .map(|i| json!({ "title": format!("Title {i}"), "link": format!("https://r{i}.example/"), "snippet": format!("snippet {i}"), "position": i + 1 }))
        .collect();
    json!({ "searchParameters": { "q": "x" }, "organic": items }).to_string()
}

#[test]
fn serper_results_are_titles_urls_and_snippets_at_most_as_many_as_asked() {
    let f = fake();
    f.server
        .route("/search", TlsResponse::ok("application/json", organic(7)));
    let result = web_search(
        &args("rust borrow checker", Some(3)),
        &options(&f, serper(&f)),
    )
    .unwrap();
    assert_eq!(result.provider, "serper");
    assert_eq!(result.attempts, 1);
    assert_eq!(
        result.results,
        (0..3)
            .map(|i| SearchHit {
                title: format!("Title {i}"),
                url: format!("https://r{i}.example/"),
                snippet: format!("snippet {i}"),
            })
            .collect::<Vec<_>>()
    );
    let requests = f.server.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].method, "POST");
    let key = requests[0].headers.iter().find(|(n, _)| n == "x-api-key");
    assert_eq!(key.map(|(_, v)| v.as_str()), Some("serper-key"));
    let body: Value = serde_json::from_slice(&requests[0].body).unwrap();
    assert_eq!(body, json!({ "q": "rust borrow checker", "num": 3 }));
}

#[test]
fn google_custom_search_is_asked_with_key_engine_query_and_count() {
    let f = fake();
    let items = json!({ "items": [
        { "title": "The Book", "link": "https://doc.rust-lang.org/book/", "snippet": "Learn Rust" },
        { "title": "No link" }
    ]});
    f.server.route(
        "/customsearch/v1?key=g-key&cx=engine&q=rust+book&num=5",
        TlsResponse::ok("application/json; charset=UTF-8", items.to_string()),
    );
    let provider = Provider::Google {
        endpoint: f.server.url("search.test", "/customsearch/v1"),
        api_key: "g-key".into(),
        engine: "engine".into(),
    };
    let result = web_search(&args("rust book", None), &options(&f, provider.clone())).unwrap();
    assert_eq!(result.provider, "google");
    assert_eq!(
        result.results,
        vec![SearchHit {
            title: "The Book".into(),
            url: "https://doc.rust-lang.org/book/".into(),
            snippet: "Learn Rust".into(),
        }]
    );
    // Google leaves `items` out when nothing matches.
    f.server.route(
        "/customsearch/v1?key=g-key&cx=engine&q=nothing&num=5",
        TlsResponse::ok("application/json", "{\"kind\":\"customsearch#search\"}"),
    );
    let none = web_search(&args("nothing", None), &options(&f, provider)).unwrap();
    assert!(none.results.is_empty());
}

/// A SearXNG instance over plain http on loopback that answers every request with `body`: its
/// base URL, and the server (the request heads it read).
fn searxng(body: &'static str) -> (String, PlainServer) {
    let server = PlainServer::start("application/json", body).unwrap();
    (format!("http://127.0.0.1:{}", server.port()), server)
}

#[test]
fn a_searxng_instance_on_loopback_is_asked_over_plain_http() {
    let (base, server) = searxng(
        r#"{"query":"q","results":[{"url":"https://a.example/","title":"A","content":"about a","engine":"ddg"}]}"#,
    );
    let options = SearchOptions {
        backoff: Duration::from_millis(10),
        ..SearchOptions::new(Some(Provider::Searxng { base }))
    };
    let result = web_search(&args("what is a", None), &options).unwrap();
    assert_eq!(result.provider, "searxng");
    assert_eq!(
        result.results,
        vec![SearchHit {
            title: "A".into(),
            url: "https://a.example/".into(),
            snippet: "about a".into(),
        }]
    );
    let heads = server.heads();
    assert_eq!(heads.len(), 1, "{heads:?}");
    assert!(
        heads[0].starts_with("GET /search?q=what+is+a&format=json HTTP/1.1\r\n"),
        "{heads:?}"
    );
}

#[test]
fn plain_http_is_refused_for_a_searxng_instance_off_loopback_and_for_the_others() {
    for provider in [
        Provider::Searxng {
            base: "http://searx.example.org".into(),
        },
        Provider::Serper {
            endpoint: "http://127.0.0.1:1/search".into(),
            api_key: "k".into(),
        },
    ] {
        let error = web_search(&args("x", None), &SearchOptions::new(Some(provider))).unwrap_err();
        assert!(matches!(error, SearchError::BadUrl { .. }), "{error}");
    }
}

#[test]
fn transient_failures_are_retried_with_backoff_until_an_answer_comes() {
    let f = fake();
    f.server.route_sequence(
        "/search",
        vec![
            TlsResponse::status(503, "busy"),
            TlsResponse::status(429, "slow down"),
            TlsResponse::ok("application/json", organic(2)),
        ],
    );
    let result = web_search(&args("retry", None), &options(&f, serper(&f))).unwrap();
    assert_eq!(result.attempts, 3);
    assert_eq!(result.results.len(), 2);
    assert_eq!(f.server.requests().len(), 3);
}

#[test]
fn a_provider_that_keeps_failing_gives_up_after_its_retries() {
    let f = fake();
    f.server
        .route("/search", TlsResponse::status(502, "bad gateway"));
    let error = web_search(&args("down", None), &options(&f, serper(&f))).unwrap_err();
    assert_eq!(
        error,
        SearchError::Unavailable {
            provider: "serper",
            attempts: 4,
            reason: "HTTP 502".into(),
        }
    );
    assert_eq!(f.server.requests().len(), 4);
}

#[test]
fn a_refusal_such_as_a_bad_key_is_not_retried() {
    let f = fake();
    f.server.route(
        "/search",
        TlsResponse::status(403, "{\"message\":\"Unauthorized.\"}"),
    );
    let error = web_search(&args("key", None), &options(&f, serper(&f))).unwrap_err();
    assert!(
        matches!(&error, SearchError::Refused { status: 403, detail, .. } if detail.contains("Unauthorized")),
        "{error}"
    );
    assert_eq!(f.server.requests().len(), 1);
}

#[test]
fn an_answer_that_is_not_the_apis_is_an_error_naming_the_provider() {
    let f = fake();
    f.server.route(
        "/search",
        TlsResponse::ok("text/html", "<html>login</html>"),
    );
    let error = web_search(&args("x", None), &options(&f, serper(&f))).unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("serper's answer cannot be read"),
        "{error}"
    );
}

#[test]
fn without_a_provider_the_tool_says_so() {
    let error = web_search(&args("x", None), &SearchOptions::new(None)).unwrap_err();
    assert_eq!(error, SearchError::NoProvider);
    assert!(error.to_string().contains("brokerd.toml"), "{error}");
}

#[test]
fn max_results_defaults_to_five_and_is_at_most_ten() {
    assert_eq!(args("x", None).wanted(), 5);
    assert_eq!(args("x", Some(50)).wanted(), 10);
    assert_eq!(args("x", Some(2)).wanted(), 2);
    let schema = web_search_schema();
    assert_eq!(schema.name, "web_search");
    assert_eq!(
        schema.parameters["properties"]["query"]["description"],
        "Search query in natural language"
    );
    assert_eq!(
        schema.parameters["properties"]["max_results"]["description"],
        "Maximum results (default: 5, max: 10)"
    );
}

#[test]
fn a_failure_to_reach_google_never_shows_the_key_from_its_url() {
    let f = fake();
    let provider = Provider::Google {
        endpoint: "https://search.test:1/customsearch/v1".into(),
        api_key: "secret-key".into(),
        engine: "engine".into(),
    };
    let mut options = options(&f, provider);
    options.retries = 1;
    options.resolve = vec![("search.test".into(), "127.0.0.1:1".parse().unwrap())];
    let error = web_search(&args("x", None), &options).unwrap_err();
    assert!(
        matches!(error, SearchError::Unavailable { attempts: 2, .. }),
        "{error}"
    );
    assert!(!error.to_string().contains("secret-key"), "{error}");
    assert!(!format!("{options:?}").contains("secret-key"));
}
