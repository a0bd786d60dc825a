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
