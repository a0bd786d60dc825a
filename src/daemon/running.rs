//! The running daemon's record (`$ETHAN_HOME/daemon.json`): its pid, start time, version and
//! gateway address, written once it is up and removed when it stops, so `ethan status` can find
//! it (and tell a daemon that died without removing it). A file of the daemon's own home, not a
//! row of the store: replicas sharing one store each have their own.

use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The record's file in `home`.
pub fn path(home: &Path) -> PathBuf {
    home.join("daemon.json")
}

/// What `ethan run` records about itself.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct DaemonRecord {
    pub pid: u32,
    /// Unix seconds.
    pub started_at: i64,
    pub version: String,
    /// The address the gateway listens on (`/healthz`); `None` when it is off.
    pub gateway: Option<std::net::SocketAddr>,
}

/// Record this process as the running daemon (a failure is logged: it only costs `ethan status`).
pub async fn record_start(home: &Path, gateway: Option<std::net::SocketAddr>) {
    let r = DaemonRecord {
        pid: std::process::id(),
        started_at: chrono::Utc::now().timestamp(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        gateway,
    };
    let json = serde_json::to_string(&r).unwrap_or_default();
    if let Err(e) = tokio::fs::write(path(home), json).await {
        tracing::warn!("cannot record the running daemon for `ethan status`: {e}");
    }
}

/// Remove the record (the daemon is stopping).
pub async fn record_stop(home: &Path) {
    let _ = tokio::fs::remove_file(path(home)).await;
}

/// The record, if a daemon wrote one.
pub async fn read(home: &Path) -> Option<DaemonRecord> {
    let v = tokio::fs::read_to_string(path(home)).await.ok()?;
    serde_json::from_str(&v).ok()
}

/// Whether process `pid` exists (signal 0 checks without sending anything).
pub fn is_alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 sends nothing; it only checks that the process exists.
    let r = unsafe { libc::kill(pid, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}
