//! What the proxy checks before it connects: the host and port against the box's granted host
//! rules, then every address the host resolves to (`nettools::web::address`): metadata,
//! unspecified, broadcast and multicast addresses always refused; loopback, private, link-local
//! and the other non-public ranges refused unless a rule names the host itself (no wildcard).

use std::collections::HashMap;
use std::io;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use nettools::web::address::classify;
use nettools::web::{Resolve, SystemResolver};

use super::request::{Refusal, RefusalKind, host_port};
use policy::grants::HostRule;

/// The variable that maps test names to addresses, `name=address[,name=address…]`, for tests
/// of granted hosts without a DNS server: the proxy and the broker's host checks of
/// `http_fetch` and `git_clone` use them; other names go to the system resolver.
pub const TEST_RESOLVE: &str = "BOXMAKER_TEST_RESOLVE";

/// Decides one host and port for a box: the deciding grant's host rules, or why not.
pub type HopDecider = dyn Fn(&str, u16) -> Result<Vec<HostRule>, String> + Send + Sync;

/// Which hosts a box's proxy lets through.
#[derive(Clone)]
pub enum HostCheck {
    /// Exactly these rules: a `shell`, `bash_bg` or `git_clone` box, the deciding grant's hosts.
    Rules(Vec<HostRule>),
    /// Each host decided again, as a call of its own would be: for `http_fetch`, whose
    /// redirects may lead to a host another grant covers. The closure gives the deciding
    /// grant's host rules when such a call would run unasked, or the sentence saying why not.
    Decided(Arc<HopDecider>),
}

impl HostCheck {
    /// Whether `host` on `port` may be reached, and whether a rule names it itself (no
    /// wildcard), or the refusal naming the host.
    pub(super) fn check(&self, host: &str, port: u16) -> Result<bool, Refusal> {
        match self {
            HostCheck::Rules(rules) => granted(rules, host, port),
            HostCheck::Decided(decide) => match decide(host, port) {
                Ok(rules) => granted(&rules, host, port),
                Err(why) => Err(
                    Refusal::new(403, format!("{}: {why}", host_port(host, port)))
                        .of(RefusalKind::NotGranted),
                ),
            },
        }
    }
}

/// Whether `host` on `port` is granted, and whether it is named explicitly (by a rule without
/// a wildcard), or the refusal naming the host.
pub(super) fn granted(rules: &[HostRule], host: &str, port: u16) -> Result<bool, Refusal> {
    if !rules.iter().any(|rule| rule.covers(host, port)) {
        let names: Vec<String> = rules.iter().map(rule_text).collect();
        return Err(Refusal::new(
            403,
            format!(
                "{} is not a host granted to this box (granted: {})",
                host_port(host, port),
                names.join(", ")
            ),
        )
        .of(RefusalKind::NotGranted));
    }
    Ok(policy::grants::names_itself(rules, host, port))
}

/// A rule as `host:port`, `*.domain:port`.
pub(super) fn rule_text(rule: &HostRule) -> String {
    let host = if rule.wildcard {
        format!("*.{}", rule.host)
    } else {
        rule.host.clone()
    };
    host_port(&host, rule.port)
}

/// Why the proxy does not connect to `ip` for `host`, if it does not: `explicit` when a rule
/// names the host itself.
pub(super) fn address_refusal(host: &str, ip: IpAddr, explicit: bool) -> Option<Refusal> {
    let kind = classify(ip)?;
    let literal = host.parse::<IpAddr>().is_ok();
    let what = if literal {
        format!("{ip} is {} address", kind.describe())
    } else {
        format!("{host} resolves to {ip}, {} address", kind.describe())
    };
    if kind.never_allowed() {
        return Some(
            Refusal::new(
                403,
                format!("{what}, which the proxy never connects to, whatever a grant says"),
            )
            .of(RefusalKind::UnsafeAddress),
        );
    }
    (!explicit).then(|| {
        Refusal::new(
            403,
            format!(
                "{what}; only a host the grant names itself (not through a wildcard) may reach one"
            ),
        )
        .of(RefusalKind::UnsafeAddress)
    })
}

/// The resolver of the proxy and of the broker's host checks: the system's, or the test names
/// of [`TEST_RESOLVE`] first.
pub fn resolver_from_env() -> Result<Arc<dyn Resolve>, String> {
    let Some(value) = std::env::var_os(TEST_RESOLVE) else {
        return Ok(Arc::new(SystemResolver));
    };
    let value = value
        .into_string()
        .map_err(|_| format!("{TEST_RESOLVE} is not UTF-8"))?;
    let mut names: HashMap<String, Vec<IpAddr>> = HashMap::new();
    for entry in value.split(',').filter(|e| !e.trim().is_empty()) {
        let (name, address) = entry
            .split_once('=')
            .ok_or_else(|| format!("{TEST_RESOLVE}: {entry:?} is not name=address"))?;
        let ip: IpAddr = address.trim().parse().map_err(|_| {
            format!("{TEST_RESOLVE}: {address:?} in {entry:?} is not an IP address")
        })?;
        names
            .entry(name.trim().to_ascii_lowercase())
            .or_default()
            .push(ip);
    }
    tracing::warn!(
        names = names.len(),
        "{TEST_RESOLVE} is set: the broker resolves its test names without DNS"
    );
    Ok(Arc::new(move |host: &str| -> io::Result<Vec<IpAddr>> {
        match names.get(host) {
            Some(addresses) => Ok(addresses.clone()),
            None => SystemResolver.resolve(host),
        }
    }))
}

/// The addresses of `host` (a literal address is its own), resolved off the async threads
/// within `limit`, or the refusal naming why not.
pub(super) async fn resolve(
    resolver: &Arc<dyn Resolve>,
    host: &str,
    port: u16,
    limit: Duration,
) -> Result<Vec<IpAddr>, Refusal> {
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(vec![ip]);
    }
    let resolver = Arc::clone(resolver);
    let name = host.to_string();
    let lookup = tokio::task::spawn_blocking(move || resolver.resolve(&name));
    let target = host_port(host, port);
    match tokio::time::timeout(limit, lookup).await {
        Ok(Ok(Ok(addresses))) if !addresses.is_empty() => Ok(addresses),
        Ok(Ok(Ok(_))) => Err(Refusal::new(
            502,
            format!("{target}: the host has no address"),
        )),
        Ok(Ok(Err(error))) => Err(Refusal::new(
            502,
            format!("{target}: cannot resolve the host: {error}"),
        )),
        Ok(Err(_)) => Err(Refusal::new(
            502,
            format!("{target}: the resolver stopped without an answer"),
        )),
        Err(_) => Err(Refusal::new(
            504,
            format!(
                "{target}: the host was not resolved within {} ms",
                limit.as_millis()
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use policy::grants::host_rule;

    fn rules(written: &[&str]) -> Vec<HostRule> {
        written.iter().map(|w| host_rule(w).unwrap()).collect()
    }

    #[test]
    fn only_granted_hosts_on_their_ports_pass_and_a_refusal_names_the_host() {
        let rules = rules(&["granted.test", "*.example.org:8443", "127.0.0.1:9443"]);
        assert_eq!(granted(&rules, "granted.test", 443), Ok(true));
        assert_eq!(granted(&rules, "a.example.org", 8443), Ok(false));
        assert_eq!(granted(&rules, "127.0.0.1", 9443), Ok(true));
        for (host, port) in [
            ("granted.test", 80),
            ("example.org", 8443),
            ("other.test", 443),
            ("127.0.0.1", 443),
        ] {
            let refusal = granted(&rules, host, port).unwrap_err();
            assert_eq!(refusal.status, 403);
            assert_eq!(
                refusal.reason,
                format!(
                    "{host}:{port} is not a host granted to this box (granted: granted.test:443, *.example.org:8443, 127.0.0.1:9443)"
                )
            );
        }
    }

    #[test]
    fn private_addresses_need_a_host_named_explicitly_and_metadata_is_never_reached() {
        let public: IpAddr = "93.184.215.14".parse().unwrap();
        let loopback: IpAddr = "127.0.0.1".parse().unwrap();
        let private: IpAddr = "10.1.2.3".parse().unwrap();
        let metadata: IpAddr = "169.254.169.254".parse().unwrap();
        let mapped: IpAddr = "::ffff:169.254.169.254".parse().unwrap();
        assert_eq!(address_refusal("a.test", public, false), None);
        assert_eq!(address_refusal("a.test", loopback, true), None);
        assert_eq!(address_refusal("a.test", private, true), None);
        let refusal = address_refusal("a.example.org", private, false).unwrap();
        assert_eq!(
            refusal.reason,
            "a.example.org resolves to 10.1.2.3, a private address; only a host the grant names itself (not through a wildcard) may reach one"
        );
        for ip in [metadata, mapped, "0.0.0.0".parse().unwrap()] {
            let refusal = address_refusal("meta.test", ip, true).unwrap();
            assert_eq!(refusal.status, 403);
            assert!(refusal.reason.contains("never connects to"), "{refusal:?}");
        }
        let refusal = address_refusal("169.254.169.254", metadata, true).unwrap();
        assert!(
            refusal
                .reason
                .starts_with("169.254.169.254 is a cloud metadata address"),
            "{refusal:?}"
        );
    }

    #[tokio::test]
    async fn a_literal_address_is_not_resolved_and_a_failure_is_a_sentence() {
        let resolver: Arc<dyn Resolve> = Arc::new(|_: &str| -> io::Result<Vec<IpAddr>> {
            Err(io::Error::other("no such name"))
        });
        let limit = Duration::from_secs(5);
        assert_eq!(
            resolve(&resolver, "::1", 443, limit).await,
            Ok(vec!["::1".parse().unwrap()])
        );
        let refusal = resolve(&resolver, "x.test", 443, limit).await.unwrap_err();
        assert_eq!(refusal.status, 502);
        assert_eq!(
            refusal.reason,
            "x.test:443: cannot resolve the host: no such name"
        );
    }
}
