//! `[web_search]` in `brokerd.toml`: which provider `web_search` asks (providers are the
//! owner's choice, set here and never in a grant or a call), with its key read from the
//! environment once at start.
//!
//! ```toml
//! [web_search]
//! provider = "serper"            # serper | google | searxng
//! url = "https://google.serper.dev/search"   # optional for serper and google; searxng: its base URL
//! key_env = "SERPER_API_KEY"     # the variable holding the key (google: GOOGLE_API_KEY)
//! engine_env = "GOOGLE_CSE_ID"   # google only: the variable holding the engine id (cx)
//! retries = 3                    # tries after the first, on 429, 5xx or a lost connection
//! backoff_ms = 500               # the first wait, doubled before each next try
//! ```

use std::time::Duration;

use nettools::web::web_search::Provider;
use serde::Deserialize;

/// The providers `web_search` can ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderName {
    /// serper.dev.
    Serper,
    /// Google Custom Search JSON API.
    Google,
    /// A SearXNG instance's JSON API.
    Searxng,
}

/// `[web_search]`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebSearchConfig {
    /// The provider.
    pub provider: ProviderName,
    /// Its URL (the public one by default; a SearXNG instance's base URL, which it needs).
    pub url: Option<String>,
    /// The environment variable holding the key.
    pub key_env: Option<String>,
    /// The environment variable holding Google's engine id.
    pub engine_env: Option<String>,
    /// Tries after the first one on transient failures.
    #[serde(default = "default_retries")]
    pub retries: u32,
    /// The wait before the first retry, in milliseconds, doubled before each next one.
    #[serde(default = "default_backoff_ms")]
    pub backoff_ms: u64,
}

fn default_retries() -> u32 {
    3
}

fn default_backoff_ms() -> u64 {
    500
}

/// The provider as the tool needs it, and how it is retried.
#[derive(Debug, Clone)]
pub struct SearchSettings {
    /// The provider, its key read.
    pub provider: Provider,
    /// Tries after the first.
    pub retries: u32,
    /// The first wait.
    pub backoff: Duration,
}

impl WebSearchConfig {
    /// The provider with its key and engine id read through `env`; Err names the missing
    /// setting or variable.
    pub fn settings(&self, env: impl Fn(&str) -> Option<String>) -> Result<SearchSettings, String> {
        let read = |configured: &Option<String>, default: &str| {
            let name = configured.as_deref().unwrap_or(default);
            env(name)
                .filter(|value| !value.trim().is_empty())
                .ok_or_else(|| format!("[web_search]: the environment variable {name} is not set"))
        };
        let provider = match self.provider {
            ProviderName::Serper => Provider::Serper {
                endpoint: self
                    .url
                    .clone()
                    .unwrap_or_else(|| Provider::SERPER_ENDPOINT.to_string()),
                api_key: read(&self.key_env, "SERPER_API_KEY")?,
            },
            ProviderName::Google => Provider::Google {
                endpoint: self
                    .url
                    .clone()
                    .unwrap_or_else(|| Provider::GOOGLE_ENDPOINT.to_string()),
                api_key: read(&self.key_env, "GOOGLE_API_KEY")?,
                engine: read(&self.engine_env, "GOOGLE_CSE_ID")?,
            },
            ProviderName::Searxng => Provider::Searxng {
                base: self.url.clone().ok_or_else(|| {
                    "[web_search]: provider = \"searxng\" needs url, the instance's base URL"
                        .to_string()
                })?,
            },
        };
        Ok(SearchSettings {
            provider,
            retries: self.retries,
            backoff: Duration::from_millis(self.backoff_ms),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(text: &str) -> WebSearchConfig {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn a_provider_takes_its_key_from_the_environment() {
        let env = |name: &str| (name == "SERPER_API_KEY").then(|| "k".to_string());
        let settings = config("provider = \"serper\"").settings(env).unwrap();
        assert_eq!(
            settings.provider,
            Provider::Serper {
                endpoint: Provider::SERPER_ENDPOINT.into(),
                api_key: "k".into()
            }
        );
        assert_eq!(settings.retries, 3);
        let missing = config("provider = \"google\"").settings(env).unwrap_err();
        assert!(missing.contains("GOOGLE_API_KEY is not set"), "{missing}");
        let searxng = config("provider = \"searxng\"").settings(env).unwrap_err();
        assert!(searxng.contains("needs url"), "{searxng}");
    }

    #[test]
    fn an_unknown_provider_or_key_is_refused_by_name() {
        let error = toml::from_str::<WebSearchConfig>("provider = \"bing\"").unwrap_err();
        assert!(error.to_string().contains("bing"), "{error}");
        let error =
            toml::from_str::<WebSearchConfig>("provider = \"serper\"\nkey = \"x\"").unwrap_err();
        assert!(error.to_string().contains("key"), "{error}");
    }
}
