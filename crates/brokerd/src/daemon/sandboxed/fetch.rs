//! `http_fetch` in the box: the fetch worker (`brokerd-fetch box-fetch`, or `brokerd box-fetch`
//! without it) in a box that holds no file of the host's but the minimal system and that binary, whose only way out is a
//! proxy of its own that decides each hop's host again as a call of its own
//! ([`crate::daemon::fetch::hop_decider`]). The page is read and converted in the box. The box
//! is the session's warm fetcher, kept with its proxy, or (`warm_idle_ms = 0`) a fresh one.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::Value;

use super::super::fetch::{FetchRequest, REQUEST, boxed_outcome, hop_decider};
use super::super::proxy::{BoxProxy, HopDecider, HostCheck, Proxies, Refused};
use super::super::runner::{Outcome, RunContext};
use super::super::warm::Kept;
use super::{SandboxedRunner, box_error};
use policy::decide::Allowed;

/// One fetch's request to the worker, ready to send, and the decider of its hops.
struct Fetch {
    spec: sandbox::CommandSpec,
    request: Vec<u8>,
    decider: Arc<HopDecider>,
}

impl SandboxedRunner {
    /// Whether `http_fetch` runs in a box here: as `git_clone` does, when a box can have a
    /// network of granted hosts.
    pub(super) fn fetches_in_box(&self) -> bool {
        self.clones_in_box()
    }

    /// Runs `http_fetch` in a box through a proxy that decides each hop.
    pub(super) fn fetch_in_box(
        &self,
        args: &nettools::web::HttpFetchArgs,
        allowed: &Allowed,
        context: &RunContext,
    ) -> Outcome {
        let Some(proxies) = &self.proxies else {
            return Outcome::Failed("this broker has no proxy for http_fetch's hosts".to_string());
        };
        let exe = match self.fetch_worker() {
            Ok(exe) => exe,
            Err(failed) => return failed,
        };
        let request = FetchRequest {
            args: args.clone(),
            timeout_ms: u64::try_from(fetch_limit(context.limit).as_millis()).unwrap_or(u64::MAX),
            root_certificates: self.direct.root_certificates.clone(),
        };
        let request = match serde_json::to_vec(&request) {
            Ok(bytes) => bytes,
            Err(e) => return Outcome::Failed(format!("cannot write http_fetch's request: {e}")),
        };
        let fetch = Fetch {
            spec: sandbox::CommandSpec {
                program: exe,
                args: vec!["box-fetch".into()],
                env: Vec::new(),
                cwd: PathBuf::from("/"),
            },
            request,
            decider: Arc::new(hop_decider(allowed, context)),
        };
        let (outcome, refused) = if self.warm.enabled() {
            self.fetch_warm(proxies, fetch, context)
        } else {
            self.fetch_fresh(proxies, fetch, context)
        };
        match boxed_outcome(outcome, refused) {
            Outcome::Ran { mut fields, body } => {
                fields.insert(
                    "sandbox".to_string(),
                    Value::from(fetch_boxed(self.landlock())),
                );
                Outcome::Ran { fields, body }
            }
            other => other,
        }
    }

    /// The fetch through the session's warm fetcher, kept with its proxy: the call puts its
    /// decider in the proxy's slot while it runs, and ends its connections after.
    fn fetch_warm(
        &self,
        proxies: &Proxies,
        mut fetch: Fetch,
        context: &RunContext,
    ) -> (Outcome, Option<Refused>) {
        fetch.spec.args.push("--warm".into());
        let build = || {
            let slot: Arc<Slot> = Arc::default();
            let proxy = proxies.open_checked(HostCheck::Decided(Arc::new({
                let slot = Arc::clone(&slot);
                move |host: &str, port: u16| match slot.lock().ok().and_then(|s| s.clone()) {
                    Some(decide) => decide(host, port),
                    None => Err("no http_fetch call of this session is running".to_string()),
                }
            })))?;
            let mut policy =
                self.policy_with(vec![fetch.spec.program.clone()], Vec::new(), context);
            policy.network = Some(sandbox::Network::new(proxy.socket()));
            // Its CPU limit covers its life; each call's deadline is the call's own.
            policy.limits.cpu_seconds = super::super::warm::LIFETIME
                .as_secs()
                .saturating_mul(super::cores());
            let kept: Kept = Arc::new(WarmFetcher { slot, proxy });
            Ok((policy, Some(kept)))
        };
        let prepare = |kept: Option<&Kept>| {
            if let Some(fetcher) = kept.and_then(|k| k.downcast_ref::<WarmFetcher>()) {
                fetcher.proxy.clear_refused();
                if let Ok(mut slot) = fetcher.slot.lock() {
                    *slot = Some(Arc::clone(&fetch.decider));
                }
            }
        };
        // Before the box waits for another call: every connection of this call ended (none
        // carries over, none notes a refusal later), what was refused read, the slot emptied.
        let finish = |kept: Option<&Kept>| {
            let fetcher = kept.and_then(|k| k.downcast_ref::<WarmFetcher>())?;
            if !fetcher.proxy.end_connections(CONNECTIONS_END) {
                tracing::warn!("a warm fetcher's connections did not end in time");
            }
            let refused = fetcher.proxy.last_refused();
            if let Ok(mut slot) = fetcher.slot.lock() {
                *slot = None;
            }
            refused
        };
        let cap = usize::try_from(sandbox::Limits::default().output_bytes).unwrap_or(usize::MAX);
        let (answer, refused) = self.warm.exchange_kept(
            super::super::warm::Key::fetch(&context.session),
            &fetch.spec,
            build,
            prepare,
            finish,
            &fetch.request,
            context.limit,
            cap,
        );
        let outcome = match answer {
            Ok((answer, _)) => super::super::worker::outcome(&answer, b"", None),
            Err(e) => Outcome::Failed(format!("the warm fetcher failed: {e}")),
        };
        (outcome, refused.flatten())
    }

    /// The fetch in a fresh box with a proxy of its own, its request a file in the box.
    fn fetch_fresh(
        &self,
        proxies: &Proxies,
        fetch: Fetch,
        context: &RunContext,
    ) -> (Outcome, Option<Refused>) {
        let proxy = match proxies.open_checked(HostCheck::Decided(fetch.decider)) {
            Ok(proxy) => proxy,
            Err(why) => return (Outcome::Failed(why), None),
        };
        let mut policy = self.policy_with(vec![fetch.spec.program.clone()], Vec::new(), context);
        policy.network = Some(sandbox::Network::new(proxy.socket()));
        policy.files = vec![(PathBuf::from(REQUEST), fetch.request)];
        let outcome = match sandbox::spawn_boxed(&fetch.spec, &policy, context.limit) {
            Ok(child) => super::files::finish(child),
            Err(e) => Outcome::Failed(box_error(e)),
        };
        // The box has ended: its proxy's socket and tunnels end with the proxy, after this.
        (outcome, proxy.last_refused())
    }
}

/// How long a warm fetcher's call waits for its proxy to end the call's connections.
const CONNECTIONS_END: std::time::Duration = std::time::Duration::from_secs(1);

/// Where a warm fetcher's proxy finds the decider of the call it serves (none between calls,
/// when every hop is refused).
type Slot = Mutex<Option<Arc<HopDecider>>>;

/// What a session's warm fetcher keeps for its life: its proxy, and the slot its proxy reads.
struct WarmFetcher {
    slot: Arc<Slot>,
    proxy: BoxProxy,
}

/// What the header of an `http_fetch` result says when it ran in a box.
pub fn fetch_boxed(landlock: sandbox::Enforcement) -> String {
    format!(
        "bubblewrap: brokerd's fetcher sees no file but a read-only system; Landlock {landlock}; network: only through the broker's proxy, which decides each hop's host again as a call of its own (no redirect to a host whose grant asks) and refuses private and metadata addresses unless the deciding grant names the host itself; every capability dropped; the page read and converted in the box"
    )
}

/// The fetcher's own time limit within the box's: what starting the box takes is left out
/// (up to half a second), so a slow page ends with the fetch's own sentence, not the box's.
fn fetch_limit(limit: std::time::Duration) -> std::time::Duration {
    limit
        .saturating_sub(std::time::Duration::from_millis(500))
        .max(limit / 2)
}
