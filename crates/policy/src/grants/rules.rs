//! The constraints a grant names: paths (folders and globs) and hosts.

use std::path::{Path, PathBuf};

use globset::{GlobBuilder, GlobMatcher};

use crate::hosts::{HostPortError, split_host_port};
use crate::paths::{ResolveError, resolve};

/// Why a `paths` or `hosts` entry cannot be used: the sentence the owner reads beside its line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// A path that is neither absolute nor under `~/`.
    #[error("path {0:?} must be absolute or start with ~/")]
    PathNotAbsolute(String),
    /// A path (or a glob's leading folders) that cannot be resolved.
    #[error("path {written:?}: {error}")]
    PathUnresolvable {
        /// The entry as written.
        written: String,
        /// Why it cannot be resolved.
        error: ResolveError,
    },
    /// A glob that globset refuses.
    #[error("path {written:?} is not a valid glob: {why}")]
    InvalidGlob {
        /// The entry as written.
        written: String,
        /// globset's reason.
        why: String,
    },
    /// A host whose host or port cannot be read.
    #[error("host {written:?} has {why}")]
    HostPort {
        /// The entry as written.
        written: String,
        /// What is wrong with it.
        why: HostPortError,
    },
    /// A wildcard over an address (`*.` goes before a domain name only).
    #[error("host {0:?} must be a host name, an IP address, or *. and a domain")]
    InvalidHost(String),
}

/// A path a grant names: a folder (covering everything below it) or a glob.
///
/// A `paths` entry is a glob when it has an unescaped `*`, `?`, `[` or `{`; a `\` escapes the
/// one character after it, so `~/mail/\[Gmail\]` names the folder `[Gmail]`. A glob's literal
/// leading folders are resolved like a folder (symbolic links followed), so a rule and the
/// resolved paths of calls meet on the same spelling. A deny rule with glob characters covers
/// both readings: what the glob matches and the folder spelled by its characters taken
/// literally, so a deny of a maildir's `[Gmail]` never covers nothing.
#[derive(Debug, Clone)]
pub struct PathRule {
    /// As the owner wrote it.
    pub written: String,
    /// The folder itself, or a glob's literal leading folder: resolved.
    base: PathBuf,
    /// The glob reading, when the entry has unescaped glob characters.
    glob: Option<Glob>,
    /// The literal reading of a deny entry with glob characters, resolved.
    literal: Option<PathBuf>,
}

#[derive(Debug, Clone)]
struct Glob {
    matcher: GlobMatcher,
    /// The components after the base, as written (escapes kept).
    rest: Vec<String>,
}

impl PathRule {
    /// Whether `resolved` (absolute, without `..` or symbolic links) is this path or below it.
    /// A folder never covers a sibling that shares its prefix (`/a/notes` does not cover
    /// `/a/notes-private`); a glob covers what it matches and everything below that.
    pub fn covers(&self, resolved: &Path) -> bool {
        match &self.glob {
            None => resolved.starts_with(&self.base),
            Some(glob) => {
                resolved.ancestors().any(|p| glob.matcher.is_match(p))
                    || self
                        .literal
                        .as_ref()
                        .is_some_and(|literal| resolved.starts_with(literal))
            }
        }
    }

    /// What a walker leaves out for this rule, as data it can take into a box: exactly the
    /// paths [`PathRule::covers`] covers.
    pub fn exclusions(&self) -> Vec<tools::search::Exclusion> {
        use tools::search::Exclusion;
        match &self.glob {
            None => vec![Exclusion::Below {
                path: self.base.clone(),
            }],
            Some(glob) => std::iter::once(Exclusion::Glob {
                glob: glob.matcher.glob().glob().to_string(),
            })
            .chain(self.literal.iter().map(|literal| Exclusion::Below {
                path: literal.clone(),
            }))
            .collect(),
        }
    }

    /// The folder to make available for this rule: the folder itself, or a glob's longest
    /// literal leading folder, resolved.
    pub fn base(&self) -> PathBuf {
        self.base.clone()
    }

    /// Whether this rule spells out `root` (a `.git` folder, a git config file or folder)
    /// rather than reaching it through a broader folder or a glob: the rule is `root` or lies
    /// below it, or it is a glob whose written components name `root`'s last component
    /// literally (`~/src/*/.git`). `~/src` and `~/src/**` do not name `~/src/app/.git`.
    pub fn names(&self, root: &Path) -> bool {
        if self.base.starts_with(root) {
            return true;
        }
        let (Some(glob), Some(name)) = (&self.glob, root.file_name()) else {
            return false;
        };
        let name = name.to_string_lossy();
        root.starts_with(&self.base) && glob.rest.iter().any(|c| unescape(c) == name)
    }

    /// Whether the entry, read literally, names a path that exists although the entry reads
    /// as a glob: the owner probably meant the literal folder and should escape it.
    pub fn literal_exists(&self, home: &Path) -> Option<PathBuf> {
        self.glob.as_ref()?;
        let literal = expand_home(&self.written, home);
        literal.exists().then_some(literal)
    }
}

/// Reads one `paths` entry: `~` expanded, absolute, a folder (resolved when it exists) or a
/// glob whose literal leading folders are resolved. `deny` keeps the literal reading of a
/// glob too.
pub fn path_rule(written: &str, home: &Path, deny: bool) -> Result<PathRule, RuleError> {
    let expanded = expand_home(written, home);
    if !expanded.is_absolute() {
        return Err(RuleError::PathNotAbsolute(written.to_string()));
    }
    let unresolvable = |error| RuleError::PathUnresolvable {
        written: written.to_string(),
        error,
    };
    let text = expanded.to_string_lossy().into_owned();
    let components: Vec<&str> = text.split('/').filter(|c| !c.is_empty()).collect();
    let first_glob = components.iter().position(|c| has_glob_characters(c));
    let Some(first_glob) = first_glob else {
        let folder = PathBuf::from(unescape(&text));
        let base = resolve(&folder).map_err(unresolvable)?;
        return Ok(PathRule {
            written: written.to_string(),
            base,
            glob: None,
            literal: None,
        });
    };
    let (lead, rest) = components.split_at(first_glob);
    let lead: PathBuf = std::iter::once("/".to_string())
        .chain(lead.iter().map(|c| unescape(c)))
        .collect();
    let base = resolve(&lead).map_err(unresolvable)?;
    let pattern = format!(
        "{}/{}",
        globset::escape(&base.to_string_lossy()).trim_end_matches('/'),
        rest.join("/")
    );
    let matcher = GlobBuilder::new(&pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| RuleError::InvalidGlob {
            written: written.to_string(),
            why: e.to_string(),
        })?
        .compile_matcher();
    let literal = if deny {
        Some(resolve(&expanded).map_err(unresolvable)?)
    } else {
        None
    };
    Ok(PathRule {
        written: written.to_string(),
        base,
        glob: Some(Glob {
            matcher,
            rest: rest.iter().map(|c| (*c).to_string()).collect(),
        }),
        literal,
    })
}

fn expand_home(written: &str, home: &Path) -> PathBuf {
    if written == "~" {
        home.to_path_buf()
    } else if let Some(rest) = written.strip_prefix("~/") {
        home.join(rest)
    } else {
        PathBuf::from(written)
    }
}

/// Whether `text` has a `*`, `?`, `[` or `{` that no `\` escapes.
fn has_glob_characters(text: &str) -> bool {
    let mut escaped = false;
    for c in text.chars() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            '*' | '?' | '[' | '{' => return true,
            _ => {}
        }
    }
    false
}

/// `text` with each `\x` read as `x`.
fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut escaped = false;
    for c in text.chars() {
        if escaped || c != '\\' {
            out.push(c);
            escaped = false;
        } else {
            escaped = true;
        }
    }
    out
}

/// A host a grant names: exactly, or every subdomain of a domain (`*.example.org`, which does
/// not cover `example.org` itself), on one port (443 unless written `host:port`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostRule {
    /// As the owner wrote it.
    pub written: String,
    /// The host in canonical form (`nettools::web::canonical_host`); for a wildcard, the domain
    /// after `*.`.
    pub host: String,
    /// Whether it names subdomains of `host` rather than `host` itself.
    pub wildcard: bool,
    /// The port.
    pub port: u16,
}

impl HostRule {
    /// Whether `host` (canonical: `nettools::web::canonical_host`) on `port` is covered; a
    /// wildcard never covers an address.
    pub fn covers(&self, host: &str, port: u16) -> bool {
        if port != self.port {
            return false;
        }
        if self.wildcard {
            host.parse::<std::net::IpAddr>().is_err()
                && host
                    .strip_suffix(&self.host)
                    .is_some_and(|head| head.ends_with('.') && head.len() > 1)
        } else {
            host == self.host
        }
    }
}

/// Whether a rule of `rules` names `host` (lower case) on `port` itself, not through a
/// wildcard: only such a host may resolve to a loopback, private or link-local address.
pub fn names_itself(rules: &[HostRule], host: &str, port: u16) -> bool {
    rules
        .iter()
        .any(|rule| !rule.wildcard && rule.covers(host, port))
}

/// Reads one `hosts` entry: its host in the canonical form of every host check
/// ([`nettools::web::canonical_host`]); a wildcard's domain must be a name, not an address.
pub fn host_rule(written: &str) -> Result<HostRule, RuleError> {
    let trimmed = written.trim();
    let (wildcard, rest) = match trimmed.strip_prefix("*.") {
        Some(domain) => (true, domain),
        None => (false, trimmed),
    };
    let (host, port) = split_host_port(rest).map_err(|why| RuleError::HostPort {
        written: written.to_string(),
        why,
    })?;
    if wildcard && host.parse::<std::net::IpAddr>().is_ok() {
        return Err(RuleError::InvalidHost(written.to_string()));
    }
    Ok(HostRule {
        written: written.to_string(),
        host,
        wildcard,
        port,
    })
}
