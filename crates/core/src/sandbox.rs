//! What the daemon's sandbox found when it started ([`SandboxSettings`]), lent to the tools
//! through their context ([`crate::tool::Services::sandbox`]). The root crate's `sandbox`
//! module probes the kernel and makes the folder; the wiring step gives the result to the agent.

use std::path::PathBuf;

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

/// The sandbox's settings while the kernel is still being probed: the daemon starts the probe
/// (two process starts) and goes on; what lends the settings awaits them ([`Self::settings`]),
/// so a start does not wait for the probe, only the first turn that gets that far before it ends.
#[derive(Debug, Clone)]
pub struct SandboxProbe(tokio::sync::watch::Receiver<Option<std::sync::Arc<SandboxSettings>>>);

/// Where the probe's result goes ([`SandboxProbe::pending`]); dropped without a result, the
/// probe's waiters get the default settings (nothing probed: every command asks).
pub type SandboxProbeResult = tokio::sync::watch::Sender<Option<std::sync::Arc<SandboxSettings>>>;

impl SandboxProbe {
    /// Settings known already.
    pub fn ready(settings: std::sync::Arc<SandboxSettings>) -> Self {
        Self(tokio::sync::watch::Sender::new(Some(settings)).subscribe())
    }

    /// A probe under way: its result is sent to the first half.
    pub fn pending() -> (SandboxProbeResult, Self) {
        let (result, waiting) = tokio::sync::watch::channel(None);
        (result, Self(waiting))
    }

    /// The settings, once probed.
    pub async fn settings(&self) -> std::sync::Arc<SandboxSettings> {
        let mut waiting = self.0.clone();
        let found = waiting
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|found| found.clone());
        // Ended without a result (or with one the wait missed): what the channel holds last.
        found
            .or_else(|| waiting.borrow().clone())
            .unwrap_or_default()
    }
}

impl Default for SandboxProbe {
    fn default() -> Self {
        Self::ready(Default::default())
    }
}

impl From<std::sync::Arc<SandboxSettings>> for SandboxProbe {
    fn from(settings: std::sync::Arc<SandboxSettings>) -> Self {
        Self::ready(settings)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_pending_probe_gives_its_result_to_every_waiter() {
        let (result, probe) = SandboxProbe::pending();
        let early = tokio::spawn({
            let probe = probe.clone();
            async move { probe.settings().await }
        });
        let probed = SandboxSettings {
            mounts_hide: true,
            offline: Ok(()),
            ..Default::default()
        };
        result.send_replace(Some(Arc::new(probed)));
        drop(result);
        assert!(early.await.unwrap().mounts_hide);
        assert!(probe.settings().await.offline.is_ok());
    }

    #[tokio::test]
    async fn a_probe_that_ended_without_a_result_gives_the_default() {
        let (result, probe) = SandboxProbe::pending();
        drop(result);
        let settings = probe.settings().await;
        assert!(settings.offline.is_err() && !settings.mounts_hide);
    }
}
