//! Name resolution for `http_fetch`: the [`Resolve`] trait the caller plugs in, the system
//! resolver, and the pinned resolver that reqwest is given so that it connects only to the
//! addresses that were checked.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex, PoisonError, mpsc};
use std::time::Duration;

/// Turns a host name into its addresses. Implemented by [`SystemResolver`] and by any
/// `Fn(&str) -> io::Result<Vec<IpAddr>>` (tests plug a fake one).
pub trait Resolve: Send + Sync {
    /// Every address `host` has; an empty list counts as a failure.
    fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>>;
}

impl<F> Resolve for F
where
    F: Fn(&str) -> io::Result<Vec<IpAddr>> + Send + Sync,
{
    fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        self(host)
    }
}

/// The operating system's resolver (`getaddrinfo`, through [`ToSocketAddrs`]).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemResolver;

impl Resolve for SystemResolver {
    fn resolve(&self, host: &str) -> io::Result<Vec<IpAddr>> {
        let mut addresses: Vec<IpAddr> = Vec::new();
        for address in (host, 0).to_socket_addrs()? {
            if !addresses.contains(&address.ip()) {
                addresses.push(address.ip());
            }
        }
        Ok(addresses)
    }
}

/// How a resolution within a time limit ended.
pub(crate) enum Resolved {
    Addresses(Vec<IpAddr>),
    Failed(String),
    TimedOut,
}

/// Resolves `host` on a helper thread and waits at most `limit` (the system resolver has no
/// time limit of its own). A resolver that panics is a failure, not a panic here.
pub(crate) fn resolve_within(resolver: &Arc<dyn Resolve>, host: &str, limit: Duration) -> Resolved {
    let (sender, receiver) = mpsc::channel();
    let resolver = Arc::clone(resolver);
    let name = host.to_string();
    let spawned = std::thread::Builder::new()
        .name("http_fetch-resolve".to_string())
        .spawn(move || {
            let _ = sender.send(resolver.resolve(&name));
        });
    if let Err(error) = spawned {
        return Resolved::Failed(format!("cannot start the resolver thread: {error}"));
    }
    match receiver.recv_timeout(limit) {
        Ok(Ok(addresses)) if addresses.is_empty() => Resolved::Failed("no addresses".to_string()),
        Ok(Ok(addresses)) => Resolved::Addresses(addresses),
        Ok(Err(error)) => Resolved::Failed(error.to_string()),
        Err(mpsc::RecvTimeoutError::Timeout) => Resolved::TimedOut,
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            Resolved::Failed("the resolver stopped without an answer".to_string())
        }
    }
}

/// The resolver reqwest uses: it answers only with addresses pinned after their check, so no
/// second lookup can hand reqwest an address that was not checked. A name never pinned fails.
#[derive(Debug, Default)]
pub(crate) struct PinnedResolver {
    pins: Mutex<HashMap<String, Vec<IpAddr>>>,
}

impl PinnedResolver {
    /// From now on `host` resolves to exactly `addresses`.
    pub(crate) fn pin(&self, host: &str, addresses: &[IpAddr]) {
        let mut pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        pins.insert(host.to_ascii_lowercase(), addresses.to_vec());
    }

    fn lookup(&self, host: &str) -> Option<Vec<IpAddr>> {
        let pins = self.pins.lock().unwrap_or_else(PoisonError::into_inner);
        pins.get(&host.to_ascii_lowercase()).cloned()
    }
}

impl reqwest::dns::Resolve for PinnedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        let found = self.lookup(&host);
        Box::pin(async move {
            match found {
                Some(addresses) => {
                    // Port 0: reqwest puts the URL's port in.
                    let addrs: reqwest::dns::Addrs = Box::new(
                        addresses
                            .into_iter()
                            .map(|ip| SocketAddr::new(ip, 0))
                            .collect::<Vec<_>>()
                            .into_iter(),
                    );
                    Ok(addrs)
                }
                None => Err(format!("{host} was not checked before connecting").into()),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn a_closure_is_a_resolver() {
        let resolver: Arc<dyn Resolve> =
            Arc::new(|_: &str| Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]));
        match resolve_within(&resolver, "fetch.test", Duration::from_secs(5)) {
            Resolved::Addresses(addresses) => {
                assert_eq!(addresses, vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
            }
            _ => panic!("the closure's answer was lost"),
        }
    }

    #[test]
    fn an_empty_answer_and_a_panicking_resolver_are_failures() {
        let empty: Arc<dyn Resolve> = Arc::new(|_: &str| Ok(Vec::new()));
        assert!(matches!(
            resolve_within(&empty, "x.test", Duration::from_secs(5)),
            Resolved::Failed(_)
        ));
        let panicking: Arc<dyn Resolve> =
            Arc::new(|_: &str| -> io::Result<Vec<IpAddr>> { panic!("resolver bug") });
        assert!(matches!(
            resolve_within(&panicking, "x.test", Duration::from_secs(5)),
            Resolved::Failed(_)
        ));
    }

    #[test]
    fn a_slow_resolver_times_out() {
        let slow: Arc<dyn Resolve> = Arc::new(|_: &str| {
            std::thread::sleep(Duration::from_secs(2));
            Ok(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
        });
        assert!(matches!(
            resolve_within(&slow, "x.test", Duration::from_millis(50)),
            Resolved::TimedOut
        ));
    }

    #[test]
    fn the_system_resolver_knows_localhost_literals() {
        let addresses = SystemResolver.resolve("127.0.0.1").unwrap_or_default();
        assert_eq!(addresses, vec![IpAddr::V4(Ipv4Addr::LOCALHOST)]);
    }

    #[test]
    fn the_pinned_resolver_answers_only_pinned_names() {
        let pinned = PinnedResolver::default();
        pinned.pin("Fetch.Test", &[IpAddr::V4(Ipv4Addr::LOCALHOST)]);
        assert_eq!(
            pinned.lookup("fetch.test"),
            Some(vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])
        );
        assert_eq!(pinned.lookup("other.test"), None);
    }
}
