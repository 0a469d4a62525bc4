//! `[ledger]` in `brokerd.toml`: where the ledger is. Absent, it is the SQLite file in the
//! state folder (zero setup). With `url = "postgres://…"` (any of libpq's forms) it is a
//! PostgreSQL database that several brokers may share, each under its own `name`, with the
//! password optionally from `password_file` or the environment variable `password_env`.

use std::path::PathBuf;

use ledger::Ledger;
use ledger::engine::url::PgSettings;
use serde::Deserialize;

/// `[ledger]`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LedgerConfig {
    /// A PostgreSQL connection string; absent, the SQLite file in the state folder.
    pub url: Option<String>,
    /// A file holding the password.
    pub password_file: Option<PathBuf>,
    /// An environment variable holding the password.
    pub password_env: Option<String>,
    /// This broker's name among the brokers sharing the database (its audit anchor's);
    /// absent, the machine's host name.
    pub name: Option<String>,
}

impl LedgerConfig {
    /// The PostgreSQL settings and this broker's name, or `None` for the SQLite default; a
    /// `url` that is not PostgreSQL's, or a password named without a URL, is an error that
    /// says so.
    pub fn postgres(&self) -> Result<Option<(PgSettings, String)>, String> {
        let Some(url) = &self.url else {
            if self.password_file.is_some() || self.password_env.is_some() {
                return Err(
                    "[ledger] names a password but no url: the SQLite ledger takes none"
                        .to_string(),
                );
            }
            return Ok(None);
        };
        if !PgSettings::is_postgres_url(url) {
            return Err(format!(
                "[ledger] url {:?} is not a postgres:// or postgresql:// URL (leave it out for the SQLite ledger in the state folder)",
                ledger::engine::url::hide_password(url)
            ));
        }
        let name = match &self.name {
            Some(name) if !name.is_empty() => name.clone(),
            Some(_) => return Err("[ledger] name is empty".to_string()),
            None => std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .ok()
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "broker".to_string()),
        };
        let settings = PgSettings {
            url: url.clone(),
            password_file: self.password_file.clone(),
            password_env: self.password_env.clone(),
        };
        settings.config()?;
        Ok(Some((settings, name)))
    }

    /// Opens the ledger these settings name: the writing connection (`read_only` false) or
    /// the reading one the broker keeps beside it (`sqlite` is the state folder's file).
    pub fn open(
        &self,
        sqlite: &std::path::Path,
        read_only: bool,
    ) -> Result<Ledger, ledger::LedgerError> {
        match self.postgres().map_err(ledger::LedgerError::Settings)? {
            Some((settings, name)) => Ledger::connect(&settings, &name),
            None if read_only => Ledger::open_read_only(sqlite),
            None => Ledger::open(sqlite),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::LedgerConfig;

    fn parsed(text: &str) -> LedgerConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn no_url_is_the_sqlite_ledger_and_a_postgres_url_names_its_broker() {
        assert_eq!(LedgerConfig::default().postgres().unwrap(), None);
        let config = parsed("url = \"postgres://ledger@%2Frun%2Fpg/team\"\nname = \"north\"");
        let (settings, name) = config.postgres().unwrap().unwrap();
        assert_eq!(name, "north");
        assert_eq!(settings.url, "postgres://ledger@%2Frun%2Fpg/team");
    }

    #[test]
    fn a_url_of_another_kind_or_a_lone_password_is_refused_by_name() {
        let error = parsed("url = \"mysql://a:pw@b/c\"").postgres().unwrap_err();
        assert!(error.contains("not a postgres://"), "{error}");
        assert!(!error.contains("pw"), "{error}");
        let error = parsed("password_env = \"PW\"").postgres().unwrap_err();
        assert!(error.contains("no url"), "{error}");
        assert!(toml::from_str::<LedgerConfig>("uri = \"x\"").is_err());
    }
}
