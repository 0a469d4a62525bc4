//! Reloading the grants when their folder changes (`notify`, not polling): a call made after the
//! broker logs `grants reloaded` sees the change. Editors that save through a temporary file and
//! a rename, and a grants folder deleted and made again, both work, since the whole config
//! folder is watched. A folder with problems loads nothing: every call gets `GrantsInvalid`
//! until it is fixed, and each problem is logged with its file and line.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};

use policy::grants::load_dir;

use super::{Broker, GrantsState};
use policy::decide::IndexedGrants;

/// How long changes settle before a reload (an editor's save is several events).
const SETTLE: Duration = Duration::from_millis(50);

/// Loads the grants folder now.
pub fn load(grants: &Path, home: &Path) -> GrantsState {
    match load_dir(grants, home) {
        Ok(set) => {
            for warning in &set.warnings {
                tracing::warn!(%warning, "grant warning");
            }
            GrantsState::Loaded(
                Arc::new(IndexedGrants::new(set.grants)),
                Arc::new(set.downstream),
            )
        }
        Err(problems) => {
            for problem in &problems {
                tracing::error!(%problem, "grant problem");
            }
            GrantsState::Invalid(Arc::new(problems))
        }
    }
}

/// Whether every path of an event is the runtime folder's record or its temporary file.
fn only_the_record(paths: &[PathBuf]) -> bool {
    !paths.is_empty()
        && paths.iter().all(|path| {
            path.file_name()
                .and_then(|name| name.to_str())
                .is_some_and(|name| {
                    name.trim_start_matches('.')
                        .starts_with(proto::rendezvous::RECORD_FILE)
                })
        })
}

/// Watches the config folder and reloads the grants into `broker` on every change; the
/// watcher lives as long as the returned value.
pub fn watch(broker: Arc<Broker>, home: PathBuf) -> notify::Result<notify::RecommendedWatcher> {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<()>();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        // Reading the files (our own reload included) is an access, not a change; the record
        // of the runtime folder (`proto::rendezvous`) is no grant.
        if event.is_ok_and(|e| {
            !matches!(e.kind, notify::EventKind::Access(_)) && !only_the_record(&e.paths)
        }) {
            let _ = tx.send(());
        }
    })?;
    watcher.watch(&broker.dirs.config, RecursiveMode::Recursive)?;
    tokio::spawn(async move {
        while rx.recv().await.is_some() {
            tokio::time::sleep(SETTLE).await;
            while rx.try_recv().is_ok() {}
            let state = load(&broker.dirs.grants(), &home);
            let count = match &state {
                GrantsState::Loaded(grants, downstream) => {
                    Some(grants.len() + downstream.tools.len() + downstream.servers.len())
                }
                GrantsState::Invalid(_) => None,
            };
            broker.publish(match &state {
                GrantsState::Loaded(..) => proto::OwnerEvent::GrantsLoaded {
                    grants: count.unwrap_or(0),
                },
                GrantsState::Invalid(problems) => proto::OwnerEvent::GrantProblems {
                    problems: problems.iter().map(|p| p.to_string()).collect(),
                },
            });
            broker.set_grants(state);
            match count {
                Some(count) => tracing::info!(grants = count, "grants reloaded"),
                None => tracing::error!(
                    "grants reloaded with problems: every call is refused until they are fixed"
                ),
            }
        }
    });
    Ok(watcher)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_folders_record_and_its_temporary_file_are_no_change_of_the_grants() {
        let config = Path::new("/c");
        let record = config.join(proto::rendezvous::RECORD_FILE);
        let temporary = config.join(format!(".{}.42", proto::rendezvous::RECORD_FILE));
        assert!(only_the_record(std::slice::from_ref(&record)));
        assert!(only_the_record(&[temporary, record.clone()]));
        assert!(!only_the_record(&[record, config.join("grants/a.toml")]));
        assert!(!only_the_record(&[config.join("brokerd.toml")]));
        assert!(!only_the_record(&[]));
    }
}
