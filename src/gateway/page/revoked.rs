//! Sessions that signed out before their expiry: a session cookie is stateless (a MAC over its
//! expiry and nonce, [`super::session`]), so signing out records its nonce here, and a session
//! whose nonce is recorded is refused. Kept in the `kv` table, so every replica sharing the
//! database refuses it at once:
//! - `gateway.session_revoked.<nonce>` = its expiry (Unix seconds), one row per session, which
//!   is what a request checks;
//! - `gateway.sessions_revoked` = `<nonce> <expiry>` lines, the rows still kept: each sign-out
//!   deletes the rows of sessions past their expiry (a cookie that old is refused anyway).
//!
//! Two sign-outs at the same moment may lose one line of the list (the rows themselves are
//! written separately and never lost): that row is then kept longer than needed, nothing
//! more.

use super::session::Valid;
use crate::store::{DaemonStoreRef, StoreError};

const ROW: &str = "gateway.session_revoked.";
const LIST: &str = "gateway.sessions_revoked";

/// Record session `v` as signed out, and forget the sessions that have expired by `now`.
pub async fn revoke(store: &DaemonStoreRef, v: &Valid, now: i64) -> Result<(), StoreError> {
    store
        .kv_set(&format!("{ROW}{}", v.nonce), &v.expiry.to_string())
        .await?;
    let list = store.kv_get(LIST).await?.unwrap_or_default();
    let mut keep = Vec::new();
    for line in list.lines() {
        let Some((nonce, expiry)) = line.split_once(' ') else {
            continue;
        };
        match expiry.parse::<i64>() {
            Ok(e) if e > now => keep.push(line.to_string()),
            _ => store.kv_delete(&format!("{ROW}{nonce}")).await?,
        }
    }
    keep.push(format!("{} {}", v.nonce, v.expiry));
    store.kv_set(LIST, &keep.join("\n")).await
}

/// Whether the session of `nonce` signed out.
pub async fn is_revoked(store: &DaemonStoreRef, nonce: &str) -> Result<bool, StoreError> {
    Ok(store.kv_get(&format!("{ROW}{nonce}")).await?.is_some())
}
