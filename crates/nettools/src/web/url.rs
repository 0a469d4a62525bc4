//! Reading hosts: the host and port of an `https://` URL (a call's) and of a `host[:port]`
//! entry (a grant's), each host in the one canonical form of [`canonical_host`]
//! (the proxy and `http_fetch` read theirs with it too), so that both sides meet only there.

use super::{HostError, canonical_host};

/// Why `host[:port]` cannot be read. Each message completes "… has ".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostPortError {
    /// `[` without its `]`.
    #[error("an unclosed [ in its host")]
    UnclosedBracket,
    /// Brackets around something that is not an IPv6 address.
    #[error("something other than an IPv6 address in brackets")]
    NotIpv6InBrackets,
    /// Text after `]` that is not `:port`.
    #[error("text after its ] that is not :port")]
    AfterBracket,
    /// An IPv6 address written without brackets.
    #[error("an IPv6 address outside brackets (write [::1] or [::1]:8443)")]
    Ipv6WithoutBrackets,
    /// A port that is not a number from 1 to 65535.
    #[error("an invalid port")]
    InvalidPort,
    /// A host outside the host grammar, or one with no canonical form.
    #[error("{0}")]
    Host(HostError),
}

/// Why a URL is not one `http_fetch` may take.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// The scheme is not `https://`.
    #[error("{0:?} does not start with https://")]
    NotHttps(String),
    /// The URL carries `user@`.
    #[error("{0:?} carries user information")]
    UserInformation(String),
    /// The host and port cannot be read, or the host is refused.
    #[error("{url:?} has {why}")]
    HostPort {
        /// The URL.
        url: String,
        /// What is wrong with its host or port.
        why: HostPortError,
    },
}

/// The host (canonical: [`canonical_host`]) and port of an `https://` URL, or why it is not
/// one.
pub fn https_host(url: &str) -> Result<(String, u16), UrlError> {
    let Some(rest) = url.strip_prefix("https://") else {
        return Err(UrlError::NotHttps(url.to_string()));
    };
    let authority = authority(rest);
    if authority.contains('@') {
        return Err(UrlError::UserInformation(url.to_string()));
    }
    split_host_port(authority).map_err(|why| UrlError::HostPort {
        url: url.to_string(),
        why,
    })
}

/// The authority of a URL without its scheme: everything before the first `/`, `?`, `#` or
/// `\` (which URL parsers read as `/`).
pub fn authority(after_scheme: &str) -> &str {
    match after_scheme.find(['/', '?', '#', '\\']) {
        Some(end) => &after_scheme[..end],
        None => after_scheme,
    }
}

/// Splits `host[:port]` (an IPv6 address always in brackets: `[::1]`, `[::1]:8443`) into the
/// host, in its canonical form ([`canonical_host`]: a host outside the grammar is refused), and
/// the port (443 when none is written).
pub fn split_host_port(text: &str) -> Result<(String, u16), HostPortError> {
    let (host, port) = if let Some(v6) = text.strip_prefix('[') {
        let (host, after) = v6.split_once(']').ok_or(HostPortError::UnclosedBracket)?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or(HostPortError::AfterBracket)?),
        };
        (&text[..host.len() + 2], port)
    } else if text.matches(':').count() > 1 {
        return Err(HostPortError::Ipv6WithoutBrackets);
    } else {
        match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    let port = match port {
        None => 443,
        Some(text) => text
            .parse::<u16>()
            .ok()
            .filter(|p| *p != 0)
            .ok_or(HostPortError::InvalidPort)?,
    };
    let host = canonical_host(host).map_err(|error| match error {
        HostError::Ipv6 if text.starts_with('[') => HostPortError::NotIpv6InBrackets,
        error => HostPortError::Host(error),
    })?;
    Ok((host, port))
}
