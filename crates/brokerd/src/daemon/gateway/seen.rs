//! What the owner is shown of the downstream servers (`bx grants check`): each server's tools
//! as its instances list them, and the definitions kept by hash in the state folder so that a
//! pinned tool's old definition can be shown beside its new one.

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::sync::{Arc, PoisonError};
use std::time::Duration;

use policy::downstream::Downstream;

use super::{Definition, Gateway, Instance, Owner};
use crate::daemon::runner::Runner;
use policy::decide::Protected;

/// The most definitions one broker keeps in the folder of definitions seen.
const MAX_REMEMBERED: usize = 10_000;

impl Gateway {
    /// Each server's tools as it lists them now (the owner's own instance of it, started if
    /// need be) and the definitions seen before of `hashes`, for `bx grants check`.
    pub async fn owner_view(
        &self,
        runner: &dyn Runner,
        protected: &Protected,
        grants: &Downstream,
        hashes: &[String],
    ) -> (Vec<proto::DownstreamView>, Vec<proto::DownstreamTool>) {
        let mut views = Vec::new();
        for name in self.servers.keys() {
            let listed = self
                .tools_of(runner, protected, name, Owner::Probe, grants)
                .await;
            views.push(match listed {
                Ok(tools) => proto::DownstreamView {
                    name: name.clone(),
                    tools: self.every_definition(name, &tools, grants).await,
                    error: None,
                },
                Err(error) => proto::DownstreamView {
                    name: name.clone(),
                    tools: Vec::new(),
                    error: Some(error),
                },
            });
        }
        let known = hashes
            .iter()
            .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .filter_map(|hash| {
                let folder = self.seen.as_ref()?;
                let text = std::fs::read_to_string(folder.join(format!("{hash}.json"))).ok()?;
                serde_json::from_str::<proto::DownstreamTool>(&text).ok()
            })
            .collect();
        (views, known)
    }

    /// `listed` and every other definition the running instances of `server` list now (a
    /// session's instance may have changed a tool since it started), each once.
    async fn every_definition(
        &self,
        server: &str,
        listed: &[Definition],
        grants: &Downstream,
    ) -> Vec<proto::DownstreamTool> {
        let mut views: Vec<proto::DownstreamTool> = listed.iter().map(|d| d.view(server)).collect();
        let Some(config) = self.servers.get(server) else {
            return views;
        };
        let running: Vec<Arc<Instance>> = config
            .instances
            .lock()
            .await
            .values()
            .filter(|r| !r.instance.is_dead())
            .map(|r| Arc::clone(&r.instance))
            .collect();
        let limit = Duration::from_millis(config.config.start_ms);
        for instance in running {
            let Ok(tools) = instance.tools(limit).await else {
                continue;
            };
            self.remember(server, &tools, grants);
            for definition in tools.iter() {
                if !views.iter().any(|v| v.hash == definition.hash) {
                    views.push(definition.view(server));
                }
            }
        }
        views
    }

    /// Keeps each of `tools` of `server` that a grant names in the folder of definitions seen,
    /// once; at most [`MAX_REMEMBERED`] new ones in a broker's life, so a server that keeps
    /// changing its tools cannot fill the disk.
    pub(super) fn remember(&self, server: &str, tools: &[Definition], grants: &Downstream) {
        let Some(folder) = &self.seen else {
            return;
        };
        let mut kept = self.kept.lock().unwrap_or_else(PoisonError::into_inner);
        // Each hash is looked for on disk once in a broker's life, not on every catalog.
        let named: Vec<&Definition> = tools
            .iter()
            .filter(|d| !kept.contains(&d.hash))
            .filter(|d| grants.tools.iter().any(|g| g.names(server, &d.tool)))
            .collect();
        if named.is_empty() {
            return;
        }
        if let Err(error) = crate::daemon::dirs::make_private_dir(folder) {
            tracing::warn!(%error, "the folder of downstream definitions cannot be made");
            return;
        }
        for definition in named {
            if kept.len() >= MAX_REMEMBERED {
                tracing::warn!(
                    server,
                    "too many downstream definitions seen; no more are kept"
                );
                return;
            }
            kept.insert(definition.hash.clone());
            let path = folder.join(format!("{}.json", definition.hash));
            if path.exists() {
                continue;
            }
            let Ok(text) = serde_json::to_string(&definition.view(server)) else {
                continue;
            };
            let temporary = folder.join(format!(".{}.tmp", definition.hash));
            // Mode 0600, as every file in the state folder.
            let written = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o600)
                .open(&temporary)
                .and_then(|mut file| file.write_all(text.as_bytes()))
                .and_then(|()| std::fs::rename(&temporary, &path));
            if let Err(error) = written {
                tracing::warn!(%error, "a downstream definition was not kept");
            }
        }
    }
}
