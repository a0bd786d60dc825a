//! Approvals shared between replicas: with a store that several `ethan run` processes use
//! (PostgreSQL), a request waiting on replica A is also written to the store, so a button press
//! that the platform delivers to replica B resolves it there; A finds the answer by polling the
//! store every [`POLL_EVERY`] while it waits.
//!
//! Keys in the store's kv table: `consent.request:<id>` (what the request is: channel, chat,
//! the owner it was sent to in private, if so, tool; deleted when answered or when the wait ends) and `consent.answer:<id>` (the choice,
//! written by the replica that took the press, deleted by the waiter).

use ethan_channels::{ApprovalChoice, ChannelKind};
use ethan_core::store::{KvStore, StoreError};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How often a waiting replica looks for an answer given on another replica.
pub const POLL_EVERY: Duration = Duration::from_millis(300);

/// A waiting request as the store keeps it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SharedRequest {
    pub channel: ChannelKind,
    pub chat_id: String,
    /// Sent in private: only this owner may answer (see `super::route`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answerer: Option<String>,
    pub tool: String,
    /// When it was asked (Unix seconds; 0 in a record of an older version): a record older
    /// than the consent timeout is one its replica did not live to forget.
    #[serde(default)]
    pub asked_at: i64,
}

fn request_key(id: &str) -> String {
    format!("consent.request:{id}")
}

fn answer_key(id: &str) -> String {
    format!("consent.answer:{id}")
}

/// Record a request as waiting.
pub async fn publish(store: &dyn KvStore, id: &str, req: &SharedRequest) -> Result<(), StoreError> {
    let json = serde_json::to_string(req).map_err(|e| StoreError::Corrupt {
        op: "approval request",
        message: e.to_string(),
    })?;
    store.kv_set(&request_key(id), &json).await
}

/// The waiting request `id`, if any replica has one (an unreadable record counts as none).
pub async fn request(store: &dyn KvStore, id: &str) -> Result<Option<SharedRequest>, StoreError> {
    Ok(store
        .kv_get(&request_key(id))
        .await?
        .and_then(|v| serde_json::from_str(&v).ok()))
}

/// The most requests [`waiting`] reads.
const LIST_AT_MOST: usize = 200;

/// The ids of requests waiting on any replica that `/approve` without an id in `chat_id` of
/// `channel` may mean: those posted in that chat and, when `owner` is given (the owner's
/// direct chat), those sent to `owner` in private; asked at or after `since` (Unix seconds).
pub async fn waiting(
    store: &dyn KvStore,
    channel: ChannelKind,
    chat_id: &str,
    owner: Option<&str>,
    since: i64,
) -> Result<Vec<String>, StoreError> {
    let prefix = request_key("");
    Ok(store
        .kv_list(&prefix, LIST_AT_MOST)
        .await?
        .into_iter()
        .filter_map(|(key, value)| {
            let req: SharedRequest = serde_json::from_str(&value).ok()?;
            let here =
                req.chat_id == chat_id || (owner.is_some() && req.answerer.as_deref() == owner);
            (req.channel == channel && here && req.asked_at >= since)
                .then(|| key[prefix.len()..].to_string())
        })
        .collect())
}

/// Answer request `id`: the request is taken (deleted and read in one statement, so of two
/// presses at once only one counts), then the answer written. `Ok(false)`: it was no longer
/// waiting (answered, or the wait ended).
pub async fn answer(
    store: &dyn KvStore,
    id: &str,
    choice: ApprovalChoice,
) -> Result<bool, StoreError> {
    let json = serde_json::to_string(&choice).map_err(|e| StoreError::Corrupt {
        op: "approval answer",
        message: e.to_string(),
    })?;
    if store.kv_take(&request_key(id)).await?.is_none() {
        return Ok(false);
    }
    store.kv_set(&answer_key(id), &json).await?;
    Ok(true)
}

/// Wait for an answer to `id` given on another replica (polling; never returns otherwise —
/// the caller bounds the wait). Store errors are logged and the polling goes on.
pub async fn wait_answer(store: &dyn KvStore, id: &str) -> ApprovalChoice {
    loop {
        tokio::time::sleep(POLL_EVERY).await;
        match store.kv_get(&answer_key(id)).await {
            Ok(Some(v)) => match serde_json::from_str(&v) {
                Ok(choice) => return choice,
                Err(e) => tracing::warn!("unreadable answer to approval {id}: {e}"),
            },
            Ok(None) => {}
            Err(e) => tracing::warn!("cannot look for the answer to approval {id}: {e}"),
        }
    }
}

/// Forget request `id` and its answer (the wait ended). Best effort.
pub async fn forget(store: &dyn KvStore, id: &str) {
    for key in [request_key(id), answer_key(id)] {
        if let Err(e) = store.kv_delete(&key).await {
            tracing::debug!("cannot forget {key}: {e}");
        }
    }
}
