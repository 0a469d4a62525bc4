//! `web_search` (seed 002): a query sent to the search provider the owner set in
//! `brokerd.toml` (Serper, Google Custom Search, or a SearXNG instance's JSON API), and the
//! results as title, URL and snippet. The provider is the owner's choice, never the model's:
//! the call names only the query and how many results.
//!
//! Transient failures (no connection, a time-out, HTTP 429 or 5xx) are retried with exponential
//! backoff; anything else is an error at once. The answer is read through a limit, and every
//! text in it is untrusted (it comes from the web).

use std::io::Read;
use std::net::SocketAddr;
use std::time::Duration;

use reqwest::blocking::{Client, RequestBuilder};
use reqwest::redirect::Policy;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::USER_AGENT;
use super::fetch::chain_message;

pub use proto::tools::schemas::{MAX_RESULTS, web_search_schema};

/// The tool's name, as the model calls it.
pub const WEB_SEARCH: &str = "web_search";
/// Results when the call does not say (seed 002).
pub const DEFAULT_MAX_RESULTS: u32 = 5;
/// The most bytes of a provider's answer read.
pub const ANSWER_LIMIT: u64 = 2 * 1024 * 1024;

/// The arguments of `web_search`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchArgs {
    /// The search query, in natural language.
    pub query: String,
    /// How many results at most (default [`DEFAULT_MAX_RESULTS`], at most [`MAX_RESULTS`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_results: Option<u32>,
}

impl WebSearchArgs {
    /// The number of results asked for, within the seed's limits.
    pub fn wanted(&self) -> u32 {
        self.max_results
            .unwrap_or(DEFAULT_MAX_RESULTS)
            .clamp(1, MAX_RESULTS)
    }
}

/// The provider the owner configured, with what it needs.
#[derive(Clone, PartialEq, Eq)]
pub enum Provider {
    /// Serper (`POST {endpoint}` with `X-API-KEY`); endpoint `https://google.serper.dev/search`.
    Serper {
        /// The API's URL.
        endpoint: String,
        /// The key, from the environment.
        api_key: String,
    },
    /// Google Custom Search JSON API (`GET {endpoint}?key&cx&q&num`); endpoint
    /// `https://www.googleapis.com/customsearch/v1`.
    Google {
        /// The API's URL.
        endpoint: String,
        /// The key, from the environment.
        api_key: String,
        /// The search engine id (`cx`).
        engine: String,
    },
    /// A SearXNG instance (`GET {base}/search?q&format=json`); `http://` only on loopback.
    Searxng {
        /// The instance's base URL.
        base: String,
    },
}

impl Provider {
    /// Serper's public endpoint.
    pub const SERPER_ENDPOINT: &str = "https://google.serper.dev/search";
    /// Google Custom Search's public endpoint.
    pub const GOOGLE_ENDPOINT: &str = "https://www.googleapis.com/customsearch/v1";

    /// The provider's name, as results and errors give it.
    pub fn name(&self) -> &'static str {
        match self {
            Provider::Serper { .. } => "serper",
            Provider::Google { .. } => "google",
            Provider::Searxng { .. } => "searxng",
        }
    }

    fn url(&self) -> &str {
        match self {
            Provider::Serper { endpoint, .. } | Provider::Google { endpoint, .. } => endpoint,
            Provider::Searxng { base } => base,
        }
    }
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("Provider")
            .field("name", &self.name())
            .field("url", &self.url())
            .finish_non_exhaustive()
    }
}

/// How a search runs.
#[derive(Debug, Clone)]
pub struct SearchOptions {
    /// The provider, or None when `brokerd.toml` names none.
    pub provider: Option<Provider>,
    /// The whole search, retries included.
    pub timeout: Duration,
    /// Tries after the first one, on transient failures.
    pub retries: u32,
    /// The wait before the first retry; doubled before each next one.
    pub backoff: Duration,
    /// Trusted roots (PEM or DER); empty: the built-in Mozilla roots.
    pub root_certificates: Vec<Vec<u8>>,
    /// Names answered with a fixed address (tests: a fake provider on loopback).
    pub resolve: Vec<(String, SocketAddr)>,
}

impl SearchOptions {
    /// Defaults for `provider`: 30 s, 3 retries after 500 ms, the built-in roots.
    pub fn new(provider: Option<Provider>) -> SearchOptions {
        SearchOptions {
            provider,
            timeout: Duration::from_secs(30),
            retries: 3,
            backoff: Duration::from_millis(500),
            root_certificates: Vec::new(),
            resolve: Vec::new(),
        }
    }
}

/// One result: untrusted text from the web.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchHit {
    /// The page's title.
    pub title: String,
    /// The page's URL.
    pub url: String,
    /// The provider's snippet of the page.
    pub snippet: String,
}

/// What a search found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchResult {
    /// The provider that answered.
    pub provider: String,
    /// The results, at most the number asked for.
    pub results: Vec<SearchHit>,
    /// How many tries it took (1 without a retry).
    pub attempts: u32,
}

/// Why a search failed, each naming what to do.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SearchError {
    /// `brokerd.toml` names no provider.
    #[error(
        "web_search has no search provider: the owner sets one in brokerd.toml ([web_search] provider = \"serper\", \"google\" or \"searxng\")"
    )]
    NoProvider,
    /// The query is empty.
    #[error("the query is empty")]
    EmptyQuery,
    /// The provider's URL cannot be used.
    #[error("the {provider} URL {url} cannot be used: {reason}")]
    BadUrl {
        provider: &'static str,
        url: String,
        reason: String,
    },
    /// The provider kept failing in a way that may pass.
    #[error("{provider} failed {attempts} times; the last time: {reason}")]
    Unavailable {
        provider: &'static str,
        attempts: u32,
        reason: String,
    },
    /// The provider refused the request (a bad key, a quota, a bad request).
    #[error("{provider} answered HTTP {status}: {detail}")]
    Refused {
        provider: &'static str,
        status: u16,
        detail: String,
    },
    /// The answer is not what the provider's API returns.
    #[error("{provider}'s answer cannot be read: {reason}")]
    BadAnswer {
        provider: &'static str,
        reason: String,
    },
}

/// Runs `args` against the configured provider.
pub fn web_search(
    args: &WebSearchArgs,
    options: &SearchOptions,
) -> Result<SearchResult, SearchError> {
    let Some(provider) = &options.provider else {
        return Err(SearchError::NoProvider);
    };
    if args.query.trim().is_empty() {
        return Err(SearchError::EmptyQuery);
    }
    let name = provider.name();
    check_url(provider)?;
    let client = client(options).map_err(|reason| SearchError::BadUrl {
        provider: name,
        url: provider.url().to_string(),
        reason,
    })?;
    let wanted = args.wanted();
    let deadline = std::time::Instant::now() + options.timeout;
    let mut wait = options.backoff;
    let mut attempt = 0;
    loop {
        attempt += 1;
        match try_once(&client, provider, &args.query, wanted) {
            Ok(answer) => {
                let mut results = parse_answer(provider, &answer)?;
                results.truncate(wanted as usize);
                return Ok(SearchResult {
                    provider: name.to_string(),
                    results,
                    attempts: attempt,
                });
            }
            Err(Try::Final(error)) => return Err(error),
            Err(Try::Transient(reason)) => {
                let late = std::time::Instant::now() + wait >= deadline;
                if attempt > options.retries || late {
                    return Err(SearchError::Unavailable {
                        provider: name,
                        attempts: attempt,
                        reason,
                    });
                }
                std::thread::sleep(wait);
                wait = wait.saturating_mul(2);
            }
        }
    }
}

/// One try's failure: worth another try, or not.
enum Try {
    Transient(String),
    Final(SearchError),
}

fn check_url(provider: &Provider) -> Result<(), SearchError> {
    let bad = |reason: &str| SearchError::BadUrl {
        provider: provider.name(),
        url: provider.url().to_string(),
        reason: reason.to_string(),
    };
    let url = reqwest::Url::parse(provider.url()).map_err(|e| bad(&e.to_string()))?;
    match url.scheme() {
        "https" => Ok(()),
        "http" if matches!(provider, Provider::Searxng { .. }) => {
            let host = url.host_str().ok_or_else(|| bad("the URL names no host"))?;
            let unbracketed = host.trim_start_matches('[').trim_end_matches(']');
            let loopback = host.eq_ignore_ascii_case("localhost")
                || unbracketed
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback());
            if loopback {
                Ok(())
            } else {
                Err(bad(
                    "http:// is allowed only for a SearXNG instance on loopback",
                ))
            }
        }
        _ => Err(bad("it must be an https:// URL")),
    }
}

fn client(options: &SearchOptions) -> Result<Client, String> {
    let mut builder = Client::builder()
        .redirect(Policy::none())
        .no_proxy()
        .referer(false)
        .user_agent(USER_AGENT)
        .timeout(options.timeout);
    builder =
        builder.tls_backend_preconfigured(super::tls::client_config(&options.root_certificates)?);
    for (name, address) in &options.resolve {
        builder = builder.resolve(name, *address);
    }
    builder.build().map_err(|error| chain_message(&error))
}

fn request(client: &Client, provider: &Provider, query: &str, wanted: u32) -> RequestBuilder {
    match provider {
        Provider::Serper { endpoint, api_key } => client
            .post(endpoint)
            .header("X-API-KEY", api_key)
            .header("Content-Type", "application/json")
            .body(json!({ "q": query, "num": wanted }).to_string()),
        Provider::Google {
            endpoint,
            api_key,
            engine,
        } => client.get(with_query(
            endpoint,
            &[
                ("key", api_key.as_str()),
                ("cx", engine.as_str()),
                ("q", query),
                ("num", &wanted.to_string()),
            ],
        )),
        Provider::Searxng { base } => client.get(with_query(
            &format!("{}/search", base.trim_end_matches('/')),
            &[("q", query), ("format", "json")],
        )),
    }
}

/// `url` with `pairs` appended to its query, form-encoded as reqwest's `query` did; a URL that
/// does not parse is passed on as it is, for the request to fail on it as before.
fn with_query(url: &str, pairs: &[(&str, &str)]) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.query_pairs_mut().extend_pairs(pairs);
            parsed.into()
        }
        Err(_) => url.to_string(),
    }
}

fn try_once(client: &Client, provider: &Provider, query: &str, wanted: u32) -> Result<Value, Try> {
    let name = provider.name();
    let response = request(client, provider, query, wanted)
        .header("Accept", "application/json")
        .send()
        // Without the URL: Google's carries the key.
        .map_err(|error| Try::Transient(chain_message(&error.without_url())))?;
    let status = response.status();
    let mut body = Vec::new();
    response
        .take(ANSWER_LIMIT)
        .read_to_end(&mut body)
        .map_err(|error| Try::Transient(format!("reading the answer: {error}")))?;
    if status.as_u16() == 429 || status.is_server_error() {
        return Err(Try::Transient(format!("HTTP {}", status.as_u16())));
    }
    if !status.is_success() {
        // The provider's text reaches the agent in the failure: cleaned as a result would be.
        let detail: String = tools::clean::clean_output(&body)
            .chars()
            .take(300)
            .collect();
        return Err(Try::Final(SearchError::Refused {
            provider: name,
            status: status.as_u16(),
            detail,
        }));
    }
    serde_json::from_slice(&body).map_err(|error| {
        Try::Final(SearchError::BadAnswer {
            provider: name,
            reason: error.to_string(),
        })
    })
}

/// The results of a provider's answer, in its order.
fn parse_answer(provider: &Provider, answer: &Value) -> Result<Vec<SearchHit>, SearchError> {
    let (list, title, url, snippet) = match provider {
        Provider::Serper { .. } => ("organic", "title", "link", "snippet"),
        Provider::Google { .. } => ("items", "title", "link", "snippet"),
        Provider::Searxng { .. } => ("results", "title", "url", "content"),
    };
    let Some(items) = answer.get(list) else {
        // Google leaves `items` out when nothing matches; the others send an empty list.
        return if answer.is_object() {
            Ok(Vec::new())
        } else {
            Err(SearchError::BadAnswer {
                provider: provider.name(),
                reason: "it is not a JSON object".into(),
            })
        };
    };
    let items = items.as_array().ok_or_else(|| SearchError::BadAnswer {
        provider: provider.name(),
        reason: format!("`{list}` is not a list"),
    })?;
    // Each field is one line of text from outside: cleaned as every tool's output is
    // (`clean_output`), its line breaks and runs of spaces made one space, so a title cannot
    // start a line that looks like another result.
    let text = |item: &Value, key: &str| {
        let raw = item.get(key).and_then(Value::as_str).unwrap_or_default();
        tools::clean::clean_output(raw.as_bytes())
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    };
    Ok(items
        .iter()
        .map(|item| SearchHit {
            title: text(item, title),
            url: text(item, url),
            snippet: text(item, snippet),
        })
        .filter(|hit| !hit.url.is_empty())
        .collect())
}
