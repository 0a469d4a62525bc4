//! Where a PostgreSQL ledger is: `brokerd.toml`'s `[ledger] url` in any of libpq's forms (a
//! `postgres://` or `postgresql://` URL, a Unix socket folder as a percent-encoded host or as
//! `?host=/dir`, or `key=value` words), and a password that may come from the URL, a file or
//! the environment.

use std::path::PathBuf;

use postgres::Config;

/// A PostgreSQL ledger's settings, as `brokerd.toml` gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgSettings {
    /// The connection string.
    pub url: String,
    /// A file whose content (less a trailing newline) is the password.
    pub password_file: Option<PathBuf>,
    /// An environment variable whose value is the password.
    pub password_env: Option<String>,
}

impl PgSettings {
    /// Settings of `url` alone.
    pub fn url(url: &str) -> PgSettings {
        PgSettings {
            url: url.to_string(),
            password_file: None,
            password_env: None,
        }
    }

    /// Whether `url` names a PostgreSQL database (rather than a SQLite file).
    pub fn is_postgres_url(url: &str) -> bool {
        url.starts_with("postgres://") || url.starts_with("postgresql://")
    }

    /// The URL as it may be shown: any password in it replaced by `***`.
    pub fn shown(&self) -> String {
        hide_password(&self.url)
    }

    /// The connection's configuration: the URL parsed, the password from the file or the
    /// environment when one is named. Every error names what is wrong.
    pub fn config(&self) -> Result<Config, String> {
        let mut config: Config = self.url.parse().map_err(|e| {
            format!(
                "the ledger url {} is not a libpq connection string: {e}",
                self.shown()
            )
        })?;
        if config.get_hosts().is_empty() {
            return Err(format!(
                "the ledger url {} names no host: give one, a socket folder as a percent-encoded host \
                 (postgres://user@%2Frun%2Fpostgresql/db) or ?host=/dir",
                self.shown()
            ));
        }
        if config.get_user().is_none() {
            return Err(format!("the ledger url {} names no user", self.shown()));
        }
        match (&self.password_file, &self.password_env) {
            (Some(_), Some(_)) => {
                return Err(
                    "the ledger's password comes from a file or from the environment, not both"
                        .to_string(),
                );
            }
            (Some(file), None) => {
                let text = std::fs::read_to_string(file)
                    .map_err(|e| format!("the ledger's password file {}: {e}", file.display()))?;
                config.password(text.trim_end_matches(['\n', '\r']));
            }
            (None, Some(name)) => {
                let value = std::env::var(name).map_err(|_| {
                    format!("the ledger's password variable {name} is not set (or not UTF-8)")
                })?;
                config.password(value);
            }
            (None, None) => {}
        }
        Ok(config)
    }
}

/// `url` with the password of a `scheme://user:password@host` form replaced by `***`, and any
/// `password=` word or parameter likewise.
pub fn hide_password(url: &str) -> String {
    let mut shown = url.to_string();
    if let Some(scheme_end) = shown.find("://") {
        let rest = scheme_end + 3;
        let authority_end = shown[rest..]
            .find(['/', '?'])
            .map_or(shown.len(), |i| rest + i);
        if let Some(at) = shown[rest..authority_end].rfind('@') {
            let userinfo = &shown[rest..rest + at];
            if let Some(colon) = userinfo.find(':') {
                shown.replace_range(rest + colon + 1..rest + at, "***");
            }
        }
    }
    let mut out = String::with_capacity(shown.len());
    let mut rest = shown.as_str();
    while let Some(at) = rest.find("password=") {
        let (before, after) = rest.split_at(at + "password=".len());
        out.push_str(before);
        out.push_str("***");
        let end = after.find(['&', ' ']).unwrap_or(after.len());
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use postgres::config::Host;

    use super::{PgSettings, hide_password};

    #[test]
    fn a_socket_folder_is_a_percent_encoded_host_or_a_host_parameter() {
        for url in [
            "postgres://ledger@%2Fvar%2Frun%2Fpg/boxmaker",
            "postgresql://ledger@/boxmaker?host=/var/run/pg",
            "host=/var/run/pg user=ledger dbname=boxmaker",
        ] {
            let config = PgSettings::url(url).config().unwrap();
            assert_eq!(
                config.get_hosts(),
                &[Host::Unix("/var/run/pg".into())],
                "{url}"
            );
            assert_eq!(config.get_user(), Some("ledger"), "{url}");
            assert_eq!(config.get_dbname(), Some("boxmaker"), "{url}");
        }
    }

    #[test]
    fn a_password_comes_from_a_file_or_the_environment_never_both() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("pw");
        std::fs::write(&file, "s3cret\n").unwrap();
        let mut settings = PgSettings::url("postgres://ledger@db.example/boxmaker");
        settings.password_file = Some(file.clone());
        assert_eq!(
            settings.config().unwrap().get_password(),
            Some(&b"s3cret"[..])
        );
        settings.password_env = Some("BOXMAKER_TEST_NO_SUCH_VARIABLE".into());
        assert!(settings.config().unwrap_err().contains("not both"));
        settings.password_file = None;
        let error = settings.config().unwrap_err();
        assert!(error.contains("BOXMAKER_TEST_NO_SUCH_VARIABLE"), "{error}");
    }

    #[test]
    fn a_url_without_host_or_user_is_refused_by_name() {
        let error = PgSettings::url("postgres:///boxmaker")
            .config()
            .unwrap_err();
        assert!(error.contains("names no host"), "{error}");
        let error = PgSettings::url("postgres://%2Frun/boxmaker")
            .config()
            .unwrap_err();
        assert!(error.contains("names no user"), "{error}");
        let error = PgSettings::url("postgres://a@b/c?nonsense=1")
            .config()
            .unwrap_err();
        assert!(error.contains("not a libpq connection string"), "{error}");
    }

    #[test]
    fn a_shown_url_hides_its_password() {
        assert_eq!(
            hide_password("postgres://ledger:hunter2@db/boxmaker?sslmode=prefer"),
            "postgres://ledger:***@db/boxmaker?sslmode=prefer"
        );
        assert_eq!(
            hide_password("host=/run user=a password=x dbname=b"),
            "host=/run user=a password=*** dbname=b"
        );
        assert_eq!(hide_password("postgres://a@b/c"), "postgres://a@b/c");
    }
}
