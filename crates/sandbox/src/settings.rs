//! The sandbox's settings as one value ([`ethan_core::sandbox::SandboxSettings`]), probed once
//! by the wiring step when the daemon (or `ethan chat`, `ethan jobs run`) starts, and lent to
//! the tools through their context: the private temp folder, whether commands can be cut off
//! from the network, whether they get a mount namespace, and the places protected besides
//! Ethan's home.

pub use ethan_core::sandbox::SandboxSettings;
use std::path::{Path, PathBuf};

/// Make the private temp folder and probe the kernel (this starts `/bin/sh` and the sandbox
/// helper once each, at the same time: each is a process start the daemon's start waits for).
/// `config_file`: the config file when one was read, protected wherever it lives.
pub fn probe(config_file: Option<&Path>) -> SandboxSettings {
    let (offline, mounts_hide) = std::thread::scope(|s| {
        let network = s.spawn(super::network::available);
        let mounts_hide = super::helper::namespaces().mounts_hide();
        let offline = network
            .join()
            .unwrap_or_else(|_| Err("the network namespace probe panicked".into()));
        (offline, mounts_hide)
    });
    SandboxSettings {
        private_tmp: super::make_private_tmp(),
        offline,
        mounts_hide,
        protected: protected_also(config_file),
    }
}

/// The places protected besides Ethan's home: the config file (usually inside it already).
pub fn protected_also(config_file: Option<&Path>) -> Vec<PathBuf> {
    config_file
        .map(super::protected::real_path)
        .into_iter()
        .collect()
}

/// What unit tests run with, here and in the crates that use the sandbox (feature `testing`,
/// turned on by their dev-dependencies).
#[cfg(any(test, feature = "testing"))]
pub mod testing {
    use super::SandboxSettings;
    use std::sync::{Arc, OnceLock};

    /// The settings probed once per test process (its private temp folder left to the sweep
    /// of the next start).
    pub fn probed() -> Arc<SandboxSettings> {
        static PROBED: OnceLock<Arc<SandboxSettings>> = OnceLock::new();
        PROBED.get_or_init(|| Arc::new(super::probe(None))).clone()
    }
}
