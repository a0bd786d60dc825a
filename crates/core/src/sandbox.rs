//! What the daemon's sandbox found when it started ([`SandboxSettings`]), lent to the tools
//! through their context ([`crate::tool::Services::sandbox`]). The root crate's `sandbox`
//! module probes the kernel and makes the folder; the wiring step gives the result to the agent.

use futures_util::future::{BoxFuture, FutureExt, Shared};
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

/// The sandbox's settings on this machine, probed once when the daemon (or `ethan chat`)
/// starts. The default is what nothing was probed for: no private temp folder, and commands
/// cannot be cut off from the network, so every command asks.
#[derive(Debug, Clone)]
pub struct SandboxSettings {
    /// The daemon's private temp folder (mode 0700): writable by commands without approval, and
    /// a file written there needs no consent. `None` when it could not be made.
    pub private_tmp: Option<PathBuf>,
    /// Whether commands can be cut off from the network here; `Err` says why not.
    pub offline: Result<(), String>,
    /// Whether commands get a mount namespace, in which the folders holding a protected place
    /// can still get new entries.
    pub mounts_hide: bool,
    /// Places protected besides Ethan's home (the config file, when it lives elsewhere).
    pub protected: Vec<PathBuf>,
}

impl Default for SandboxSettings {
    fn default() -> Self {
        Self {
            private_tmp: None,
            offline: Err("the sandbox was not probed".into()),
            mounts_hide: false,
            protected: Vec::new(),
        }
    }
}

/// The sandbox's settings as a probe not yet run (two process starts): a shared future that
/// runs when first awaited ([`Self::settings`]) — by the first turn that lends them to its tools,
/// or by the daemon once it is ready — so a start never waits for it.
#[derive(Clone)]
pub struct SandboxProbe(Shared<BoxFuture<'static, Arc<SandboxSettings>>>);

impl SandboxProbe {
    /// Settings known already.
    pub fn ready(settings: Arc<SandboxSettings>) -> Self {
        Self(futures_util::future::ready(settings).boxed().shared())
    }

    /// The settings `probe` finds, once something awaits them.
    pub fn lazy(probe: impl Future<Output = Arc<SandboxSettings>> + Send + 'static) -> Self {
        Self(probe.boxed().shared())
    }

    /// The settings (probing now if nothing awaited them before).
    pub async fn settings(&self) -> Arc<SandboxSettings> {
        self.0.clone().await
    }
}

impl std::fmt::Debug for SandboxProbe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SandboxProbe").field(&self.0.peek()).finish()
    }
}

impl Default for SandboxProbe {
    fn default() -> Self {
        Self::ready(Default::default())
    }
}

impl From<Arc<SandboxSettings>> for SandboxProbe {
    fn from(settings: Arc<SandboxSettings>) -> Self {
        Self::ready(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test]
    async fn a_probe_runs_once_when_first_awaited_and_every_waiter_gets_its_result() {
        let runs = Arc::new(AtomicUsize::new(0));
        let probe = SandboxProbe::lazy({
            let runs = runs.clone();
            async move {
                runs.fetch_add(1, Ordering::SeqCst);
                Arc::new(SandboxSettings {
                    mounts_hide: true,
                    offline: Ok(()),
                    ..Default::default()
                })
            }
        });
        tokio::task::yield_now().await;
        assert_eq!(runs.load(Ordering::SeqCst), 0, "nothing awaited it yet");
        let other = probe.clone();
        let (a, b) = tokio::join!(probe.settings(), other.settings());
        assert!(a.mounts_hide && b.offline.is_ok());
        assert!(probe.settings().await.mounts_hide);
        assert_eq!(runs.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn the_default_is_nothing_probed() {
        let settings = SandboxProbe::default().settings().await;
        assert!(settings.offline.is_err() && !settings.mounts_hide);
        assert!(settings.private_tmp.is_none());
    }
}
