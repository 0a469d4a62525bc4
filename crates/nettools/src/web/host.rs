//! Hosts in one canonical form. Every place that checks a host against the grants (the
//! grants' own `hosts` entries and a call's URL in `policy::hosts`, the broker's proxy,
//! `http_fetch` on each hop, `git_clone`) reads it with [`canonical_host`] and compares only
//! what it returns, so two spellings of one host never meet two different answers.
//!
//! Refused outright: any character outside a host name's grammar (ASCII letters, digits, `-`,
//! `.`, `_`, and letters beyond ASCII that IDNA maps): NUL and every control, spaces, `%`
//! (escapes and IPv6 zone ids), `@` (user information), `/`, `\`, `:` outside an IPv6 address;
//! an empty label; a label over 63 or a name over 253 characters; a name IDNA cannot map.
//!
//! Canonical: lower case, one trailing dot removed, IDNA to ASCII (UTS 46, as browsers and the
//! URL parser map it: `ＥＸＡＭＰＬＥ．com` is `example.com`, `bücher.de` is
//! `xn--bcher-kva.de`), every IPv4 spelling read as the address (`0x7f.1`, `0177.0.0.1`,
//! `2130706433` are `127.0.0.1`), an IPv6 address in its shortest form without brackets, and an
//! IPv4-mapped IPv6 address (`::ffff:127.0.0.1`) as the IPv4 address it maps.

use std::net::{IpAddr, Ipv6Addr};

/// Why a host is refused. Each message completes "… has ".
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum HostError {
    /// Nothing where the host goes.
    #[error("an empty host")]
    Empty,
    /// A character no host name has (shown as its code point, never raw).
    #[error("a character no host name has (U+{:04X}) in its host", u32::from(*.0))]
    Character(char),
    /// A `%`: an escape, which the host is never decoded from.
    #[error("a %-escape in its host (write the host itself)")]
    PercentEscape,
    /// A `user@` part.
    #[error("user information (user@) in its host")]
    UserInformation,
    /// An IPv6 address with a zone id (`fe80::1%eth0`).
    #[error("a zone id (%) in its IPv6 address")]
    ZoneId,
    /// Something in brackets, or with colons, that is not an IPv6 address.
    #[error("an invalid IPv6 address")]
    Ipv6,
    /// Two dots in a row, or a dot at the start.
    #[error("an empty label in its host")]
    EmptyLabel,
    /// A label over 63 characters, or a name over 253, in its ASCII form.
    #[error("a host name too long for DNS")]
    TooLong,
    /// A name IDNA cannot map to ASCII, or a number that is no IPv4 address (`1.2.3.256`).
    #[error("a host that is neither a valid name nor an IP address")]
    Invalid,
}

/// `host` (as written: a name, an IPv4 address in any spelling, an IPv6 address with or
/// without brackets) in its one canonical form (see the module docs), or why it is refused.
pub fn canonical_host(host: &str) -> Result<String, HostError> {
    if host.is_empty() {
        return Err(HostError::Empty);
    }
    if let Some(inside) = host.strip_prefix('[') {
        let Some(inside) = inside.strip_suffix(']') else {
            return Err(HostError::Ipv6);
        };
        return ipv6(inside);
    }
    if host.contains(':') {
        return ipv6(host);
    }
    for c in host.chars() {
        match c {
            '%' => return Err(HostError::PercentEscape),
            '@' => return Err(HostError::UserInformation),
            'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '.' | '_' => {}
            c if !c.is_ascii() && !c.is_control() && !c.is_whitespace() => {}
            c => return Err(HostError::Character(c)),
        }
    }
    let name = strip_one_dot(host)?;
    let parsed = url::Host::parse(name).map_err(|_| HostError::Invalid)?;
    match parsed {
        url::Host::Ipv4(v4) => Ok(v4.to_string()),
        url::Host::Ipv6(v6) => Ok(canonical_ip(IpAddr::V6(v6))),
        url::Host::Domain(ascii) => {
            // IDNA may map a character to a dot (`。`), so the labels are checked on its output.
            let ascii = strip_one_dot(&ascii)?;
            if let Some(c) = ascii
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_')))
            {
                return Err(HostError::Character(c));
            }
            if ascii.len() > 253 || ascii.split('.').any(|label| label.len() > 63) {
                return Err(HostError::TooLong);
            }
            Ok(ascii.to_ascii_lowercase())
        }
    }
}

/// `ip` as [`canonical_host`] writes it: an IPv4-mapped IPv6 address as its IPv4 address.
pub fn canonical_ip(ip: IpAddr) -> String {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        IpAddr::V4(v4) => v4.to_string(),
    }
}

/// An IPv6 address written without brackets.
fn ipv6(text: &str) -> Result<String, HostError> {
    if text.contains('%') {
        return Err(HostError::ZoneId);
    }
    let v6: Ipv6Addr = text.parse().map_err(|_| HostError::Ipv6)?;
    Ok(canonical_ip(IpAddr::V6(v6)))
}

/// `name` without one trailing dot, refused when a label is empty.
fn strip_one_dot(name: &str) -> Result<&str, HostError> {
    let name = name.strip_suffix('.').unwrap_or(name);
    if name.is_empty() {
        return Err(HostError::Empty);
    }
    if name.split('.').any(str::is_empty) {
        return Err(HostError::EmptyLabel);
    }
    Ok(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_spelling_of_one_host_has_one_canonical_form() {
        for (written, canonical) in [
            ("example.com", "example.com"),
            ("EXAMPLE.Com.", "example.com"),
            ("ＥＸＡＭＰＬＥ．com", "example.com"),
            ("bücher.de", "xn--bcher-kva.de"),
            ("XN--BCHER-KVA.de", "xn--bcher-kva.de"),
            ("under_score.test", "under_score.test"),
            ("127.0.0.1", "127.0.0.1"),
            ("2130706433", "127.0.0.1"),
            ("0x7f000001", "127.0.0.1"),
            ("0177.0.0.1", "127.0.0.1"),
            ("0x7f.1", "127.0.0.1"),
            ("127.1", "127.0.0.1"),
            ("127.0.0.1.", "127.0.0.1"),
            ("::1", "::1"),
            ("[0:0::1]", "::1"),
            ("[FE80:0:0::0:1]", "fe80::1"),
            ("[::ffff:127.0.0.1]", "127.0.0.1"),
            ("::ffff:7f00:1", "127.0.0.1"),
            ("[::FFFF:169.254.169.254]", "169.254.169.254"),
        ] {
            assert_eq!(
                canonical_host(written),
                Ok(canonical.to_string()),
                "{written}"
            );
        }
    }

    #[test]
    fn every_character_outside_the_grammar_is_refused() {
        for (written, error) in [
            ("", HostError::Empty),
            (".", HostError::Empty),
            ("exa\0mple.com", HostError::Character('\0')),
            ("example.com\0.evil", HostError::Character('\0')),
            ("exa\tmple.com", HostError::Character('\t')),
            ("exa\nmple.com", HostError::Character('\n')),
            ("exa\u{7f}mple.com", HostError::Character('\u{7f}')),
            ("exa\u{85}mple.com", HostError::Character('\u{85}')),
            ("exa\u{202e}mple.com", HostError::Invalid),
            ("exa mple.com", HostError::Character(' ')),
            ("exa\u{a0}mple.com", HostError::Character('\u{a0}')),
            ("exa%6dple.com", HostError::PercentEscape),
            ("127.0.0.1%2e", HostError::PercentEscape),
            ("user@example.com", HostError::UserInformation),
            ("example.com/x", HostError::Character('/')),
            ("example.com\\x", HostError::Character('\\')),
            ("a..example.com", HostError::EmptyLabel),
            (".example.com", HostError::EmptyLabel),
            ("example.com..", HostError::EmptyLabel),
            ("[fe80::1%eth0]", HostError::ZoneId),
            ("fe80::1%25eth0", HostError::ZoneId),
            ("[::1", HostError::Ipv6),
            ("[example.com]", HostError::Ipv6),
            ("1.2.3.256", HostError::Invalid),
            ("example.0x100000000", HostError::Invalid),
            ("ex\u{ff05}61mple.com", HostError::Invalid),
        ] {
            assert_eq!(canonical_host(written), Err(error), "{written:?}");
        }
        let long_label = format!("{}.com", "a".repeat(64));
        assert_eq!(canonical_host(&long_label), Err(HostError::TooLong));
        let long_name = vec!["a".repeat(60); 5].join(".");
        assert_eq!(canonical_host(&long_name), Err(HostError::TooLong));
    }

    #[test]
    fn a_refusal_never_shows_the_character_raw() {
        let message = HostError::Character('\u{1b}').to_string();
        assert!(message.contains("U+001B"), "{message}");
        assert!(!message.contains('\u{1b}'));
    }
}
