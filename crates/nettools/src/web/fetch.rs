//! The fetch loop: one checked hop at a time (see the module docs of `web`).

use std::error::Error as StdError;
use std::io::{self, Read};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::resolve::{PinnedResolver, Resolved, resolve_within};
use super::{
    FetchError, FetchOptions, FetchResult, HostError, HostVerdict, HttpFetchArgs, USER_AGENT,
    address, canonical_host, content,
};
use reqwest::Url;
use reqwest::blocking::{Client, Response};
use reqwest::header::{ACCEPT, CONTENT_TYPE, LOCATION};
use reqwest::redirect::Policy;

/// Fetches `args.url` under `options`; see the module docs of `web` for the checks on each hop.
pub fn http_fetch(args: &HttpFetchArgs, options: &FetchOptions) -> Result<FetchResult, FetchError> {
    let deadline = Deadline::start(options.timeout);
    let mut url = parse_url(&args.url)?;
    let pins = Arc::new(PinnedResolver::default());
    let mut client: Option<Client> = None;
    let mut redirects: Vec<String> = Vec::new();
    loop {
        let hop = check_hop(&url, options, &deadline)?;
        pins.pin(&hop.pin_name, &hop.addresses);
        let client = match &client {
            Some(client) => client,
            None => client.insert(build_client(options, Arc::clone(&pins))?),
        };
        let remaining = deadline.remaining(&url)?;
        let response = client
            .get(url.clone())
            .header(ACCEPT, "*/*")
            .timeout(remaining)
            .send()
            .map_err(|error| {
                send_error(&error, &url, (&hop, options.proxy.is_some()), &deadline)
            })?;
        if let Some(next) = redirect_target(&response, &url)? {
            if redirects.len() >= options.max_redirects {
                return Err(FetchError::TooManyRedirects {
                    url: url.to_string(),
                    max: options.max_redirects,
                });
            }
            drop(response);
            redirects.push(next.to_string());
            url = next;
            continue;
        }
        return read_result(response, &url, redirects, (args, options), &deadline);
    }
}

/// A URL's host as `http_fetch` checks its first hop: `https://`, allowed by the grant check,
/// resolved within the options' time limit, and every address public unless the host is one
/// of the explicit hosts. What `git_clone` pins before git connects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckedHost {
    /// The host in canonical form (`canonical_host`: an IPv6 address without brackets).
    pub host: String,
    /// The port (443 when the URL names none).
    pub port: u16,
    /// Whether the host is a literal IP address (then it is its own only address).
    pub literal: bool,
    /// The checked addresses, every one of them allowed.
    pub addresses: Vec<IpAddr>,
    /// The URL with its host written in that canonical form: what a program given the URL
    /// (git) must be handed, so that it looks up the very name that was checked and pinned.
    pub url: String,
}

/// Checks `url`'s host as [`http_fetch`] checks each hop (see the module docs of `web`),
/// without fetching anything.
pub fn check_url_host(url: &str, options: &FetchOptions) -> Result<CheckedHost, FetchError> {
    let deadline = Deadline::start(options.timeout);
    let url = parse_url(url)?;
    let hop = check_hop(&url, options, &deadline)?;
    let mut canonical = url.clone();
    let written = if hop.host.contains(':') {
        format!("[{}]", hop.host)
    } else {
        hop.host.clone()
    };
    canonical
        .set_host(Some(&written))
        .map_err(|error| FetchError::BadUrl {
            url: url.to_string(),
            reason: format!("its host {written} cannot be written back: {error}"),
        })?;
    Ok(CheckedHost {
        literal: hop.host.parse::<IpAddr>().is_ok(),
        port: url.port_or_known_default().unwrap_or(443),
        host: hop.host,
        addresses: hop.addresses,
        url: canonical.to_string(),
    })
}

/// One deadline for the whole fetch.
struct Deadline {
    at: Option<Instant>,
    timeout: Duration,
}

impl Deadline {
    fn start(timeout: Duration) -> Deadline {
        Deadline {
            at: Instant::now().checked_add(timeout),
            timeout,
        }
    }

    fn passed(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }

    /// The time left, or a timeout error naming `url` when none is.
    fn remaining(&self, url: &Url) -> Result<Duration, FetchError> {
        let left = match self.at {
            Some(at) => at.saturating_duration_since(Instant::now()),
            // Too far in the future for an Instant: a year is as good as forever.
            None => Duration::from_secs(365 * 24 * 3600),
        };
        if left.is_zero() {
            Err(self.error(url))
        } else {
            Ok(left)
        }
    }

    fn error(&self, url: &Url) -> FetchError {
        FetchError::Timeout {
            url: url.to_string(),
            timeout: self.timeout,
        }
    }
}

fn parse_url(text: &str) -> Result<Url, FetchError> {
    let url = Url::parse(text).map_err(|error| FetchError::BadUrl {
        url: text.to_string(),
        reason: error.to_string(),
    })?;
    if url.scheme() != "https" {
        return Err(FetchError::NotHttps {
            url: url.to_string(),
        });
    }
    let written = written_host(text)?;
    checked_against(url, text, written.as_deref())
}

/// The canonical form of the host written in `text` (after `//`), checked as written: before a
/// URL parser decodes `%`-escapes, drops tabs and newlines or takes `user@` off. `None` for a
/// reference without a host (a redirect's `/next`). Any control character or space anywhere in
/// `text` is refused too: a URL never has one.
fn written_host(text: &str) -> Result<Option<String>, FetchError> {
    let bad = |reason: String| FetchError::BadUrl {
        url: text.to_string(),
        reason,
    };
    if let Some(c) = text.chars().find(|c| c.is_control() || c.is_whitespace()) {
        return Err(bad(format!(
            "it has a character no URL has (U+{:04X})",
            u32::from(c)
        )));
    }
    let after = match text.find("//") {
        Some(at) if !text[..at].contains(['/', '?', '#']) => &text[at + 2..],
        _ => return Ok(None),
    };
    let authority = after
        .find(['/', '?', '#', '\\'])
        .map_or(after, |end| &after[..end]);
    if authority.contains('@') {
        return Err(bad(format!("it has {}", HostError::UserInformation)));
    }
    let host = match authority.strip_prefix('[') {
        Some(inside) => inside
            .find(']')
            .map_or(authority, |end| &authority[..end + 2]),
        None => authority
            .rsplit_once(':')
            .map_or(authority, |(host, _port)| host),
    };
    canonical_host(host)
        .map(Some)
        .map_err(|error| bad(format!("it has {error}")))
}

/// `url` if its host, in canonical form, is the one written in `text` (a parser that read
/// another host than the one written is never followed).
fn checked_against(url: Url, text: &str, written: Option<&str>) -> Result<Url, FetchError> {
    let parsed = url.host_str().map(canonical_host);
    match (written, parsed) {
        (Some(written), Some(Ok(parsed))) if written != parsed => Err(FetchError::BadUrl {
            url: text.to_string(),
            reason: format!("its host reads as {parsed}, not as the {written} written"),
        }),
        (_, Some(Err(error))) => Err(FetchError::BadUrl {
            url: text.to_string(),
            reason: format!("it has {error}"),
        }),
        _ => Ok(url),
    }
}

/// A hop that passed its checks: where reqwest may connect.
struct Hop {
    /// The host as given to `host_allowed` and named in errors (IPv6 without brackets).
    host: String,
    /// The port.
    port: u16,
    /// The name reqwest will ask the pinned resolver for.
    pin_name: String,
    addresses: Vec<IpAddr>,
}

fn check_hop(url: &Url, options: &FetchOptions, deadline: &Deadline) -> Result<Hop, FetchError> {
    if url.scheme() != "https" {
        return Err(FetchError::NotHttps {
            url: url.to_string(),
        });
    }
    // The URL parser has already turned every IPv4 spelling (0x7f.1, 2130706433, …) into
    // dotted decimal, mapped the name through IDNA and put IPv6 addresses in brackets.
    let Some(host_str) = url.host_str().filter(|host| !host.is_empty()) else {
        return Err(FetchError::BadUrl {
            url: url.to_string(),
            reason: "it has no host".to_string(),
        });
    };
    // One canonical form for the grants (`Docs.RS.` and `docs.rs` are one host, and
    // `::ffff:127.0.0.1` is `127.0.0.1`); the name itself, with its dot, is what is sent.
    let host = canonical_host(host_str).map_err(|error| FetchError::BadUrl {
        url: url.to_string(),
        reason: format!("it has {error}"),
    })?;
    let literal = host.parse::<IpAddr>().ok();
    let port = url.port_or_known_default().unwrap_or(443);
    let verdict = (options.host_allowed)(&host, port);
    if verdict == HostVerdict::Refused {
        return Err(FetchError::HostNotAllowed { host, port });
    }
    if options.proxy.is_some() {
        // The proxy resolves and classifies the host; nothing is pinned, nothing resolved here.
        return Ok(Hop {
            host,
            port,
            pin_name: host_str.to_string(),
            addresses: Vec::new(),
        });
    }
    let addresses = match literal {
        Some(ip) => vec![ip],
        None => match resolve_within(&options.resolver, &host, deadline.remaining(url)?) {
            Resolved::Addresses(addresses) => addresses,
            Resolved::Failed(reason) => return Err(FetchError::Resolve { host, reason }),
            Resolved::TimedOut => return Err(deadline.error(url)),
        },
    };
    let explicit =
        verdict == HostVerdict::NamedItself || is_explicit(&host, &options.explicit_hosts);
    for ip in &addresses {
        if let Some(kind) = address::classify(*ip)
            && (!explicit || kind.never_allowed())
        {
            return Err(FetchError::UnsafeAddress { host, address: *ip });
        }
    }
    Ok(Hop {
        host,
        port,
        pin_name: host_str.to_string(),
        addresses,
    })
}

/// Is `host` (canonical: [`canonical_host`]) one that `explicit_hosts` names? Each entry is
/// read the same way, without its `:port`.
fn is_explicit(host: &str, explicit_hosts: &[String]) -> bool {
    explicit_hosts
        .iter()
        .any(|entry| canonical_host(&without_port(entry.trim())).is_ok_and(|entry| entry == host))
}

/// `entry` without a `:port` suffix (an IPv6 address bare or in brackets kept whole).
fn without_port(entry: &str) -> String {
    if entry.parse::<IpAddr>().is_ok() {
        return entry.to_string();
    }
    if let Some(rest) = entry.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest).to_string();
    }
    match entry.rsplit_once(':') {
        Some((name, port)) if port.parse::<u16>().is_ok() => name.to_string(),
        _ => entry.to_string(),
    }
}

fn build_client(options: &FetchOptions, pins: Arc<PinnedResolver>) -> Result<Client, FetchError> {
    let builder = Client::builder();
    let builder = match &options.proxy {
        Some(proxy) => {
            builder.proxy(
                reqwest::Proxy::https(proxy).map_err(|error| FetchError::Setup {
                    reason: format!("the proxy {proxy:?}: {}", chain_message(&error)),
                })?,
            )
        }
        None => builder.no_proxy(),
    };
    let builder = builder
        .redirect(Policy::none())
        .pool_max_idle_per_host(0)
        .referer(false)
        .https_only(true)
        .http1_only()
        .user_agent(USER_AGENT)
        .timeout(options.timeout)
        .dns_resolver(pins);
    let tls = super::tls::client_config(&options.root_certificates)
        .map_err(|reason| FetchError::Setup { reason })?;
    builder
        .tls_backend_preconfigured(tls)
        .build()
        .map_err(|error| FetchError::Setup {
            reason: chain_message(&error),
        })
}

/// The next URL when `response` is a redirect with a `Location`; a 3xx without one is a result.
fn redirect_target(response: &Response, url: &Url) -> Result<Option<Url>, FetchError> {
    if !matches!(response.status().as_u16(), 301 | 302 | 303 | 307 | 308) {
        return Ok(None);
    }
    let Some(location) = response.headers().get(LOCATION) else {
        return Ok(None);
    };
    let location = location.to_str().map_err(|_| FetchError::BadUrl {
        url: String::from_utf8_lossy(location.as_bytes()).into_owned(),
        reason: format!("the redirect from {url} is not a readable Location"),
    })?;
    let written = written_host(location)?;
    let next = url.join(location).map_err(|error| FetchError::BadUrl {
        url: location.to_string(),
        reason: format!("the redirect from {url}: {error}"),
    })?;
    checked_against(next, location, written.as_deref()).map(Some)
}

fn read_result(
    response: Response,
    url: &Url,
    redirects: Vec<String>,
    (args, options): (&HttpFetchArgs, &FetchOptions),
    deadline: &Deadline,
) -> Result<FetchResult, FetchError> {
    let status = response.status().as_u16();
    let content_type = response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .map(str::to_string);
    let declared = response.content_length();
    let limit = u64::try_from(options.max_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let read_error = |error: io::Error| {
        if deadline.passed() || io_is_timeout(&error) {
            deadline.error(url)
        } else {
            FetchError::Http {
                url: url.to_string(),
                reason: format!("reading the body: {}", chain_message(&error)),
            }
        }
    };
    let mut reader = response.take(limit);
    if let (Some(declared_type), content::Kind::Binary) =
        (&content_type, content::kind(content_type.as_deref(), b""))
    {
        // Counted, never kept.
        let size = match declared {
            Some(length) => format!("{length} bytes"),
            None => {
                let read = io::copy(&mut reader, &mut io::sink()).map_err(read_error)?;
                if read >= limit {
                    format!("more than {} bytes", options.max_bytes)
                } else {
                    format!("{read} bytes")
                }
            }
        };
        return Err(FetchError::Binary {
            url: url.to_string(),
            content_type: declared_type.clone(),
            size,
        });
    }
    let mut body = Vec::new();
    reader.read_to_end(&mut body).map_err(read_error)?;
    let truncated = body.len() > options.max_bytes;
    body.truncate(options.max_bytes);
    let kind = content::kind(content_type.as_deref(), &body);
    if kind == content::Kind::Binary {
        return Err(FetchError::Binary {
            url: url.to_string(),
            content_type: content_type.unwrap_or_else(|| "no Content-Type".to_string()),
            size: if truncated {
                format!("more than {} bytes", options.max_bytes)
            } else {
                format!("{} bytes", body.len())
            },
        });
    }
    // Cleaned as every tool's output is (no terminal control reaches the model), before it is
    // paged, so pages count the characters the model reads.
    let text = tools::clean::clean_output(&body);
    let (text, format) = match kind {
        content::Kind::Html => match content::markdown(&text) {
            Some(markdown) => (markdown, "markdown"),
            None => (text, "html"),
        },
        _ => (text, "text"),
    };
    let start = args.start_index.unwrap_or(0);
    let max = args
        .max_length
        .unwrap_or(super::DEFAULT_MAX_LENGTH)
        .min(super::MAX_MAX_LENGTH);
    let (page, total_chars, next_start_index) = content::page(&text, start, max);
    Ok(FetchResult {
        url: url.to_string(),
        status,
        content_type,
        body: page,
        format: format.to_string(),
        total_chars,
        start_index: start,
        next_start_index,
        bytes: body.len(),
        truncated,
        redirects,
    })
}

fn io_is_timeout(error: &io::Error) -> bool {
    if error.kind() == io::ErrorKind::TimedOut {
        return true;
    }
    error
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<reqwest::Error>())
        .is_some_and(reqwest::Error::is_timeout)
}

fn send_error(
    error: &reqwest::Error,
    url: &Url,
    (hop, options_proxy): (&Hop, bool),
    deadline: &Deadline,
) -> FetchError {
    if error.is_timeout() || deadline.passed() {
        return deadline.error(url);
    }
    if let Some(tls) = find_tls_error(error) {
        return FetchError::Tls {
            host: hop.host.clone(),
            reason: tls.to_string(),
        };
    }
    if options_proxy && error.is_connect() {
        return FetchError::Tunnel {
            host: hop.host.clone(),
            port: hop.port,
            reason: chain_message(error),
        };
    }
    if error.is_connect() {
        return FetchError::Connect {
            host: hop.host.clone(),
            addresses: hop.addresses.clone(),
            reason: chain_message(error),
        };
    }
    FetchError::Http {
        url: url.to_string(),
        reason: chain_message(error),
    }
}

/// The rustls error somewhere in the chain. hyper-rustls and tokio-rustls wrap it in an
/// `io::Error` inside another, and `io::Error::source` skips what it wraps, so each
/// `io::Error` is opened with `get_ref` as well.
fn find_tls_error<'a>(error: &'a (dyn StdError + 'static)) -> Option<&'a rustls::Error> {
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(error) = current {
        if let Some(tls) = error.downcast_ref::<rustls::Error>() {
            return Some(tls);
        }
        current = match error
            .downcast_ref::<io::Error>()
            .and_then(io::Error::get_ref)
        {
            Some(inner) => Some(inner as &(dyn StdError + 'static)),
            None => error.source(),
        };
    }
    None
}

/// An error and its sources, joined with ": ", without repeating a part already said.
pub(super) fn chain_message(error: &(dyn StdError + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut current: Option<&(dyn StdError + 'static)> = Some(error);
    while let Some(error) = current {
        let text = error.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        current = error.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_hosts_are_compared_in_canonical_form() {
        let entries = vec![
            "Fetch.Test.".to_string(),
            "[::1]".to_string(),
            "10.0.0.5:8443".to_string(),
            "*.wild.test".to_string(),
            "0x7f.2".to_string(),
        ];
        assert!(is_explicit("fetch.test", &entries));
        assert!(is_explicit("::1", &entries));
        assert!(is_explicit("10.0.0.5", &entries));
        assert!(is_explicit("127.0.0.2", &entries));
        assert!(!is_explicit("other.test", &entries));
        assert!(!is_explicit("a.wild.test", &entries));
        assert!(!is_explicit("127.0.0.1", &entries));
    }

    #[test]
    fn a_url_whose_written_host_is_outside_the_grammar_is_refused_before_parsing() {
        for url in [
            "https://exa%6dple.com/",
            "https://127.0.0.1%2e/",
            "https://user@example.com/",
            "https://user:pw@example.com/",
            "https://exa\tmple.com/",
            "https://exa\nmple.com/",
            "https://example.com\0.evil/",
            "https://exa mple.com/",
            "https://[fe80::1%25eth0]/",
            "https://a..example.com/",
        ] {
            assert!(
                matches!(parse_url(url), Err(FetchError::BadUrl { .. })),
                "{url:?}"
            );
        }
        for (url, host) in [
            ("https://EXAMPLE.com./x", "example.com."),
            ("https://0x7f.1/", "127.0.0.1"),
            ("https://example.com\\@evil.test/", "example.com"),
            ("https://b\u{fc}cher.de/", "xn--bcher-kva.de"),
            ("https://[::ffff:127.0.0.1]:8443/", "[::ffff:7f00:1]"),
        ] {
            let parsed = parse_url(url).unwrap();
            assert_eq!(parsed.host_str(), Some(host), "{url}");
        }
    }

    #[test]
    fn a_checked_url_is_handed_on_with_the_host_that_was_checked() {
        let public: IpAddr = "93.184.216.34".parse().unwrap();
        let options = FetchOptions::new(|_, _| true).with_resolver(move |_: &str| Ok(vec![public]));
        for (url, host, handed) in [
            (
                "https://EXAMPLE.com./a/b?c#d",
                "example.com",
                "https://example.com/a/b?c#d",
            ),
            (
                "https://b\u{fc}cher.de/r",
                "xn--bcher-kva.de",
                "https://xn--bcher-kva.de/r",
            ),
            (
                "https://0x5db8d822/r",
                "93.184.216.34",
                "https://93.184.216.34/r",
            ),
            (
                "https://[::ffff:93.184.216.34]:8443/r",
                "93.184.216.34",
                "https://93.184.216.34:8443/r",
            ),
        ] {
            let checked = check_url_host(url, &options).unwrap();
            assert_eq!(
                (checked.host.as_str(), checked.url.as_str()),
                (host, handed),
                "{url}"
            );
        }
    }

    #[test]
    fn only_https_urls_parse() {
        assert!(parse_url("https://fetch.test/").is_ok());
        assert!(matches!(
            parse_url("http://fetch.test/"),
            Err(FetchError::NotHttps { .. })
        ));
        assert!(matches!(
            parse_url("file:///etc/passwd"),
            Err(FetchError::NotHttps { .. })
        ));
        assert!(matches!(
            parse_url("fetch.test"),
            Err(FetchError::BadUrl { .. })
        ));
        assert!(matches!(
            parse_url("https://"),
            Err(FetchError::BadUrl { .. })
        ));
    }

    #[test]
    fn a_tiny_timeout_is_reported_before_connecting() {
        let deadline = Deadline::start(Duration::ZERO);
        let url = parse_url("https://fetch.test/").ok();
        let Some(url) = url else {
            panic!("the URL did not parse");
        };
        assert!(matches!(
            deadline.remaining(&url),
            Err(FetchError::Timeout { .. })
        ));
    }
}
