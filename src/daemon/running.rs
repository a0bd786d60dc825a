//! The running daemon's record in the store (kv `daemon.running`): its pid, start time,
//! version and gateway address, written once it is up and removed when it stops, so
//! `ethan status` can find it (and tell a daemon that died without removing it).

use crate::store::prelude::*;
use crate::store::Store;
use serde::{Deserialize, Serialize};

/// The kv key.
pub const KEY: &str = "daemon.running";

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
pub async fn record_start(store: &Store, gateway: Option<std::net::SocketAddr>) {
    let r = DaemonRecord {
        pid: std::process::id(),
        started_at: chrono::Utc::now().timestamp(),
        version: env!("CARGO_PKG_VERSION").to_string(),
        gateway,
    };
    let json = serde_json::to_string(&r).unwrap_or_default();
    if let Err(e) = store.kv_set(KEY, &json).await {
        tracing::warn!("cannot record the running daemon for `ethan status`: {e}");
    }
}

/// Remove the record (the daemon is stopping).
pub async fn record_stop(store: &Store) {
    let _ = store.kv_delete(KEY).await;
}

/// The record, if a daemon wrote one.
pub async fn read(store: &Store) -> Option<DaemonRecord> {
    let v = store.kv_get(KEY).await.ok().flatten()?;
    serde_json::from_str(&v).ok()
}
