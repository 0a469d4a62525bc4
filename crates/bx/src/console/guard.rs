//! Who may talk to the console: the `Host` and `Origin` a request must carry (checked before
//! anything else, against DNS rebinding and other pages), the one-time login token, the
//! session cookies and their CSRF tokens. Everything lives in memory and dies with the process.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the printed login address works, from `bx console`'s start: once, within this.
pub const LOGIN_LIFETIME: Duration = Duration::from_secs(10 * 60);

/// The name of the session cookie, with the port in it: cookies are not kept apart by port,
/// so two consoles on one machine must not overwrite each other's.
pub fn cookie_name(addr: SocketAddr) -> String {
    format!("bx_console_{}", addr.port())
}

/// A secret of 256 bits from the operating system, as 64 hex digits.
pub fn secret() -> Result<String, getrandom::Error> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Whether two secrets are equal, in a time that does not depend on where they differ.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |diff, (x, y)| diff | (x ^ y))
            == 0
}

/// The hosts a request may name: the listen address as bound, and `localhost` with its port
/// when it is a loopback address.
#[derive(Debug, Clone)]
pub struct Hosts {
    allowed: Vec<String>,
}

impl Hosts {
    /// The hosts for a console listening on `addr`.
    pub fn for_addr(addr: SocketAddr) -> Hosts {
        let mut allowed = vec![addr.to_string()];
        if addr.ip().is_loopback() {
            allowed.push(format!("localhost:{}", addr.port()));
        }
        Hosts { allowed }
    }

    /// Whether a request with this `Host` and (when it has one) this `Origin` may go on. A
    /// missing `Host` is foreign; an `Origin` must be `http://` and an allowed host.
    pub fn admits(&self, host: Option<&str>, origin: Option<&str>) -> bool {
        let Some(host) = host else {
            return false;
        };
        if !self.allowed.iter().any(|a| a.eq_ignore_ascii_case(host)) {
            return false;
        }
        match origin {
            None => true,
            Some(origin) => origin
                .strip_prefix("http://")
                .is_some_and(|rest| self.allowed.iter().any(|a| a.eq_ignore_ascii_case(rest))),
        }
    }
}

/// One browser's session: the CSRF token its forms carry.
#[derive(Debug, Clone)]
pub struct Session {
    /// The token every POST of this session must carry.
    pub csrf: String,
}

/// The login token and the sessions opened with it.
#[derive(Debug)]
pub struct Gate {
    login: Mutex<Option<String>>,
    expires: Instant,
    sessions: Mutex<HashMap<String, Session>>,
}

/// Why a login failed.
#[derive(Debug, PartialEq, Eq)]
pub enum LoginRefused {
    /// The token is wrong, or was already used.
    BadToken,
    /// The token's [`LOGIN_LIFETIME`] is over.
    Expired,
    /// The operating system gave no randomness for the session.
    NoRandomness,
}

impl Gate {
    /// A gate whose one login token is `token`, good for [`LOGIN_LIFETIME`] from now.
    pub fn new(token: String) -> Gate {
        Gate::lasting(token, LOGIN_LIFETIME)
    }

    /// A gate whose one login token is `token`, good for `lifetime` from now.
    pub fn lasting(token: String, lifetime: Duration) -> Gate {
        Gate {
            expires: Instant::now() + lifetime,
            login: Mutex::new(Some(token)),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Spends the login token: the new session's cookie value, or why not. The token works
    /// once, within its lifetime; a second use, a late one or a wrong token is refused.
    pub fn login(&self, token: &str) -> Result<String, LoginRefused> {
        let mut login = self.login.lock().unwrap_or_else(|e| e.into_inner());
        match login.as_deref() {
            Some(expected) if same(expected, token) => {}
            _ => return Err(LoginRefused::BadToken),
        }
        if Instant::now() >= self.expires {
            *login = None;
            return Err(LoginRefused::Expired);
        }
        let cookie = secret().map_err(|_| LoginRefused::NoRandomness)?;
        let csrf = secret().map_err(|_| LoginRefused::NoRandomness)?;
        *login = None;
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(cookie.clone(), Session { csrf });
        Ok(cookie)
    }

    /// The session of a request's `Cookie` header, if it names one.
    pub fn session(&self, cookie_header: Option<&str>, name: &str) -> Option<Session> {
        let sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        cookie_header?
            .split(';')
            .filter_map(|pair| pair.trim().split_once('='))
            .filter(|(key, _)| *key == name)
            .find_map(|(_, value)| {
                sessions
                    .iter()
                    .find(|(cookie, _)| same(cookie, value))
                    .map(|(_, session)| session.clone())
            })
    }
}

/// Whether `given` is `session`'s CSRF token.
pub fn csrf_ok(session: &Session, given: Option<&str>) -> bool {
    given.is_some_and(|given| same(&session.csrf, given))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr() -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], 8421))
    }

    #[test]
    fn only_the_listen_address_and_localhost_with_its_port_are_admitted_as_host_and_origin() {
        let hosts = Hosts::for_addr(addr());
        assert!(hosts.admits(Some("127.0.0.1:8421"), None));
        assert!(hosts.admits(Some("localhost:8421"), Some("http://localhost:8421")));
        assert!(!hosts.admits(None, None));
        assert!(!hosts.admits(Some("evil.example:8421"), None));
        assert!(!hosts.admits(Some("127.0.0.1:8421"), Some("http://evil.example")));
        assert!(!hosts.admits(Some("127.0.0.1:8421"), Some("null")));
        assert!(!hosts.admits(Some("127.0.0.1:8421"), Some("https://127.0.0.1:8421")));
        assert!(!hosts.admits(Some("127.0.0.1"), None));
    }

    #[test]
    fn the_login_token_works_once_and_its_cookie_names_a_session_with_a_csrf_token() {
        let gate = Gate::new("t".repeat(64));
        assert_eq!(gate.login("x"), Err(LoginRefused::BadToken));
        let cookie = gate.login(&"t".repeat(64)).unwrap();
        assert_eq!(gate.login(&"t".repeat(64)), Err(LoginRefused::BadToken));
        let name = cookie_name(addr());
        let header = format!("other=1; {name}={cookie}");
        let session = gate.session(Some(&header), &name).unwrap();
        assert_eq!(session.csrf.len(), 64);
        assert!(csrf_ok(&session, Some(&session.csrf.clone())));
        assert!(!csrf_ok(&session, None));
        assert!(!csrf_ok(&session, Some("0")));
        assert!(gate.session(Some("bx_console_8421=wrong"), &name).is_none());
        assert!(gate.session(None, &name).is_none());
    }

    #[test]
    fn a_login_token_past_its_lifetime_is_refused_and_spent() {
        let gate = Gate::lasting("t".repeat(64), Duration::ZERO);
        assert_eq!(gate.login(&"t".repeat(64)), Err(LoginRefused::Expired));
        assert_eq!(gate.login(&"t".repeat(64)), Err(LoginRefused::BadToken));
    }
}
