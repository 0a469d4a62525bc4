//! `http_fetch`: fetch one https URL, following redirects by hand so that every hop is checked.
//!
//! For each hop (the first URL and every redirect target), in this order:
//! 1. the URL must be `https://` (an `http://` redirect is an error, not a downgrade);
//! 2. `host_allowed(host, port)`, the broker's grant check, must say yes (the host in lower
//!    case without a trailing dot, an IPv6 address without brackets), and says whether a rule
//!    names the host itself ([`HostVerdict::NamedItself`]);
//! 3. the host is resolved (a literal IP is its own address), within the time left;
//! 4. every address must be public ([`address::classify`]); if any one is not, the hop is refused
//!    with [`FetchError::UnsafeAddress`], unless the grant check named the host itself or the
//!    host (or the literal IP) is in `explicit_hosts`. Refusing when any address is unsafe, rather than dropping the unsafe
//!    ones, keeps a name that points both outside and inside from reaching inside at all.
//!    Metadata, unspecified, broadcast and multicast addresses are refused even for explicit
//!    hosts ([`UnsafeKind::never_allowed`]);
//! 5. the checked addresses are pinned in the resolver reqwest uses (it answers nothing else),
//!    and the request goes out with no proxy, no pooled connection and no automatic redirect.
//!
//! With [`FetchOptions::proxy`] (a box whose only way out is the broker's proxy), steps 3 to 5
//! are the proxy's: each hop is a `CONNECT host:port` that the proxy decides, resolves and
//! classifies, and the fetch itself resolves nothing (its resolver answers no name).
//!
//! One deadline covers the whole fetch, lookups and redirects included. The body is read
//! through a limit of `max_bytes + 1` bytes, so an endless body costs at most that much.

pub mod address;
mod content;
mod fetch;
pub mod host;
mod resolve;
mod tls;
pub mod url;
pub mod web_search;

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use address::{METADATA_ADDRESSES, UnsafeKind, classify, is_public};
pub use content::MAX_HTML_DEPTH;
pub use fetch::{CheckedHost, check_url_host, http_fetch};
pub use host::{HostError, canonical_host, canonical_ip};
pub use resolve::{Resolve, SystemResolver};

pub use proto::tools::schemas::{MAX_MAX_LENGTH, broker_http_fetch_schema, http_fetch_schema};

/// The tool's name, as the model calls it.
pub const HTTP_FETCH: &str = "http_fetch";

/// The `User-Agent` sent with every request.
pub const USER_AGENT: &str = concat!("boxmaker-http-fetch/", env!("CARGO_PKG_VERSION"));

/// The arguments of `http_fetch`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpFetchArgs {
    /// The URL; it must start with `https://`.
    pub url: String,
    /// The most characters of the page's text to return (default [`DEFAULT_MAX_LENGTH`], at
    /// most [`MAX_MAX_LENGTH`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_length: Option<usize>,
    /// The character of the page's text to start at, for the next page (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_index: Option<usize>,
}

/// Characters of text returned when the call does not say.
pub const DEFAULT_MAX_LENGTH: usize = 16_000;

impl HttpFetchArgs {
    /// A fetch of `url` from its start, with the default length.
    pub fn new(url: impl Into<String>) -> HttpFetchArgs {
        HttpFetchArgs {
            url: url.into(),
            max_length: None,
            start_index: None,
        }
    }
}

/// What the broker's grant check says of one hop's host and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostVerdict {
    /// Not to be fetched.
    Refused,
    /// Granted: only public addresses may be reached (unless `explicit_hosts` names it).
    Granted,
    /// Granted by a rule that names this host itself (no wildcard): loopback, private and
    /// link-local addresses may be reached too.
    NamedItself,
}

/// The broker's grant check: may this host and port be fetched, and may they be private?
pub type HostAllowed = Arc<dyn Fn(&str, u16) -> HostVerdict + Send + Sync>;

/// What the broker decided for one fetch, and the limits.
#[derive(Clone)]
pub struct FetchOptions {
    /// The whole fetch, every lookup and redirect included.
    pub timeout: Duration,
    /// The body is cut after this many bytes (and `truncated` set).
    pub max_bytes: usize,
    /// At most this many redirects are followed.
    pub max_redirects: usize,
    /// The grant check for each hop's host (lower case, without a trailing dot; an IPv6
    /// address without brackets) and port; this crate decides no policy itself.
    pub host_allowed: HostAllowed,
    /// Hosts or IP addresses that a grant names explicitly: only for these are loopback,
    /// private and link-local addresses allowed (metadata addresses never). Compared case-insensitively; a
    /// trailing dot, IPv6 brackets and a `:port` suffix are ignored.
    pub explicit_hosts: Vec<String>,
    /// The name resolver ([`SystemResolver`] by default).
    pub resolver: Arc<dyn Resolve>,
    /// Trusted roots, each PEM (one or more certificates) or DER. Empty: the Mozilla roots
    /// compiled in by `webpki-roots`. Not empty: only these.
    pub root_certificates: Vec<Vec<u8>>,
    /// The proxy every hop goes through (`http://127.0.0.1:P`, a box's relay to the broker's
    /// proxy), when there is one: the proxy then resolves and classifies each hop's host, and
    /// the fetch resolves nothing itself (`resolver` and `explicit_hosts` are not used).
    pub proxy: Option<String>,
}

impl FetchOptions {
    /// 30 seconds for the whole fetch.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// 1 MiB of body.
    pub const DEFAULT_MAX_BYTES: usize = 1024 * 1024;
    /// 5 redirects.
    pub const DEFAULT_MAX_REDIRECTS: usize = 5;

    /// Defaults for everything but the grant check (yes or no; private addresses only for
    /// `explicit_hosts`): 30 s, 1 MiB, 5 redirects, no explicit host, the system resolver, the
    /// built-in roots.
    pub fn new(host_allowed: impl Fn(&str, u16) -> bool + Send + Sync + 'static) -> FetchOptions {
        FetchOptions::with_verdicts(move |host: &str, port: u16| {
            if host_allowed(host, port) {
                HostVerdict::Granted
            } else {
                HostVerdict::Refused
            }
        })
    }

    /// [`FetchOptions::new`] with a grant check that also says whether a hop's host is named
    /// itself ([`HostVerdict::NamedItself`]), hop by hop.
    pub fn with_verdicts(
        host_allowed: impl Fn(&str, u16) -> HostVerdict + Send + Sync + 'static,
    ) -> FetchOptions {
        FetchOptions {
            timeout: Self::DEFAULT_TIMEOUT,
            max_bytes: Self::DEFAULT_MAX_BYTES,
            max_redirects: Self::DEFAULT_MAX_REDIRECTS,
            host_allowed: Arc::new(host_allowed),
            explicit_hosts: Vec::new(),
            resolver: Arc::new(SystemResolver),
            root_certificates: Vec::new(),
            proxy: None,
        }
    }

    /// Sets the time limit of the whole fetch.
    pub fn with_timeout(mut self, timeout: Duration) -> FetchOptions {
        self.timeout = timeout;
        self
    }

    /// Sets the body cap.
    pub fn with_max_bytes(mut self, max_bytes: usize) -> FetchOptions {
        self.max_bytes = max_bytes;
        self
    }

    /// Sets how many redirects are followed.
    pub fn with_max_redirects(mut self, max_redirects: usize) -> FetchOptions {
        self.max_redirects = max_redirects;
        self
    }

    /// Adds hosts or addresses that a grant names explicitly.
    pub fn with_explicit_hosts<I, S>(mut self, hosts: I) -> FetchOptions
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.explicit_hosts
            .extend(hosts.into_iter().map(Into::into));
        self
    }

    /// Replaces the resolver.
    pub fn with_resolver(mut self, resolver: impl Resolve + 'static) -> FetchOptions {
        self.resolver = Arc::new(resolver);
        self
    }

    /// Sends every hop through the proxy at `url` (see [`FetchOptions::proxy`]).
    pub fn with_proxy(mut self, url: impl Into<String>) -> FetchOptions {
        self.proxy = Some(url.into());
        self
    }

    /// Adds a trusted root (PEM or DER); once one is added, the built-in roots are not used.
    pub fn with_root_certificate(mut self, certificate: impl Into<Vec<u8>>) -> FetchOptions {
        self.root_certificates.push(certificate.into());
        self
    }
}

impl fmt::Debug for FetchOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FetchOptions")
            .field("timeout", &self.timeout)
            .field("max_bytes", &self.max_bytes)
            .field("max_redirects", &self.max_redirects)
            .field("explicit_hosts", &self.explicit_hosts)
            .field("root_certificates", &self.root_certificates.len())
            .field("proxy", &self.proxy)
            .finish_non_exhaustive()
    }
}

/// What a fetch brought back. A 4xx or 5xx answer is a result too.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FetchResult {
    /// The URL that answered, after redirects.
    pub url: String,
    /// The HTTP status code.
    pub status: u16,
    /// The `Content-Type` header, if any.
    pub content_type: Option<String>,
    /// One page of the body's text: HTML as Markdown, other text as it is (as UTF-8, invalid
    /// sequences replaced by U+FFFD), from `start_index`, at most `max_length` characters.
    pub body: String,
    /// How the text was made: `markdown` (from HTML), `text`, or `html` (a page nested too
    /// deeply to convert, given as it is).
    pub format: String,
    /// The whole text's length in characters, every page together.
    pub total_chars: usize,
    /// The character this page starts at.
    pub start_index: usize,
    /// Where the next page starts, when there is more text.
    pub next_start_index: Option<usize>,
    /// How many body bytes were kept (before the UTF-8 replacement).
    pub bytes: usize,
    /// True when the body was longer than `max_bytes` and was cut.
    pub truncated: bool,
    /// The URL of each redirect followed, in order (the last one is `url`).
    pub redirects: Vec<String>,
}

/// Why a fetch failed. Each message names the URL, host or address and what is wrong.
// The fields are the values the variant's message names; each message is their documentation.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FetchError {
    /// The URL (or a redirect's `Location`) cannot be parsed.
    #[error("{url:?} is not a valid URL: {reason}")]
    BadUrl { url: String, reason: String },
    /// The URL (or a redirect target) is not `https://`.
    #[error("{url} is not an https:// URL: only https URLs can be fetched")]
    NotHttps { url: String },
    /// The grant check said no.
    #[error("no grant allows fetching from {host} on port {port}")]
    HostNotAllowed { host: String, port: u16 },
    /// The host resolves to (or is) an address that is not public, and no grant names it.
    #[error("{}", unsafe_address_message(.host, .address))]
    UnsafeAddress { host: String, address: IpAddr },
    /// The host has no address.
    #[error("cannot resolve {host}: {reason}")]
    Resolve { host: String, reason: String },
    /// The time limit of the whole fetch ran out.
    #[error("fetching {url} took longer than the {} ms allowed", .timeout.as_millis())]
    Timeout { url: String, timeout: Duration },
    /// More redirects than `max_redirects`.
    #[error("{url} redirects again after {max} redirects; giving up")]
    TooManyRedirects { url: String, max: usize },
    /// The TLS handshake failed (an untrusted or wrong certificate, a TLS alert, …).
    #[error("TLS with {host} failed: {reason}")]
    Tls { host: String, reason: String },
    /// No TCP connection could be made to the checked addresses.
    #[error("cannot connect to {host} at {}: {reason}", join_addresses(.addresses))]
    Connect {
        host: String,
        addresses: Vec<IpAddr>,
        reason: String,
    },
    /// The proxy answered the tunnel to a hop's host with anything but `200` (it refused the
    /// host or its address, or could not reach it; the proxy's log and the broker say which).
    #[error("the proxy opened no tunnel to {host}:{port}: {reason}")]
    Tunnel {
        host: String,
        port: u16,
        reason: String,
    },
    /// The HTTP exchange failed after connecting (a malformed answer, a reset, …).
    #[error("fetching {url} failed: {reason}")]
    Http { url: String, reason: String },
    /// The answer is of a binary type (an image, an archive, a PDF, …), which is not returned.
    #[error(
        "{url} answered {content_type} ({size}), a binary type: http_fetch returns only HTML and text"
    )]
    Binary {
        url: String,
        content_type: String,
        size: String,
    },
    /// The options cannot be used (an unreadable root certificate, …).
    #[error("cannot set up the HTTP client: {reason}")]
    Setup { reason: String },
}

fn unsafe_address_message(host: &str, address: &IpAddr) -> String {
    let kind = classify(*address).map_or("a non-public", UnsafeKind::describe);
    let never = classify(*address).is_some_and(UnsafeKind::never_allowed);
    let subject = if host.parse::<IpAddr>().ok() == Some(*address) {
        format!("{address} is {kind} address")
    } else {
        format!("{host} resolves to {address}, {kind} address")
    };
    if never {
        format!("{subject}, which is never fetched")
    } else {
        format!("{subject}: refused unless a grant names {host} explicitly")
    }
}

fn join_addresses(addresses: &[IpAddr]) -> String {
    addresses
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}
