//! The daemon's store seam: the traits beyond [`ethan_core::store::Storage`] that the daemon
//! itself needs (inbound events and their reply state, retention, the backend's identity and
//! schema version), and [`DaemonStore`], all of them in one handle. Two implementations: the
//! SQLite [`super::Store`] (the default, one file) and, with a `postgres://` `store.url`, the
//! PostgreSQL store.

use super::inbound::{RetentionCounts, UnconfirmedReply};
use async_trait::async_trait;
use ethan_channels::InboundEvent;
use ethan_core::store::{Storage, StoreError};
use std::sync::Arc;

/// Inbound platform events: recorded before the platform is acknowledged, deduplicated by the
/// platform's event id (a unique constraint), and moved through the reply states described in
/// [`super::inbound`].
#[async_trait]
pub trait InboundStore: Send + Sync {
    /// Record an event; `Ok(true)` when it is new, `Ok(false)` for a redelivery (the same
    /// `(channel, event_id)` already recorded, within the dedupe window).
    async fn record_inbound(&self, ev: &InboundEvent) -> Result<bool, StoreError>;
    /// Move an event to `state` (`processing` counts an attempt; `done` forgets the stored reply).
    async fn set_inbound_state(
        &self,
        channel: &str,
        event_id: &str,
        state: &str,
    ) -> Result<(), StoreError>;
    /// [`InboundStore::set_inbound_state`] for a caller that does not need to wait for the
    /// write: a store that runs its calls in the order given (SQLite's one connection thread)
    /// queues it, and every later call sees it; any other store writes it before returning. A
    /// failure is logged.
    async fn queue_inbound_state(&self, channel: &str, event_id: &str, state: &str) {
        if let Err(e) = self.set_inbound_state(channel, event_id, state).await {
            tracing::error!("cannot mark event {event_id} {state}: {e}");
        }
    }
    /// [`ethan_core::store::KvStore::kv_delete`], queued as
    /// [`InboundStore::queue_inbound_state`] is (the draft handle of a reply that is settled).
    async fn queue_kv_delete(&self, key: &str);
    /// A reply's end: the event moved to `state` ([`InboundStore::queue_inbound_state`]) and
    /// the reply's draft handle under `draft_key` forgotten ([`InboundStore::queue_kv_delete`]),
    /// queued as they are. SQLite writes both in one transaction.
    async fn queue_reply_settled(
        &self,
        channel: &str,
        event_id: &str,
        state: &str,
        draft_key: &str,
    ) {
        self.queue_inbound_state(channel, event_id, state).await;
        self.queue_kv_delete(draft_key).await;
    }
    /// State `sending` and the reply text, in one write, just before the reply is sent.
    async fn set_inbound_sending(
        &self,
        channel: &str,
        event_id: &str,
        reply: &str,
    ) -> Result<(), StoreError>;
    /// [`InboundStore::set_inbound_sending`] only while `holder` holds the lease `lease`
    /// without a break (extending it by `secs` seconds, as
    /// [`ReplicaStore::confirm_lease`]), in one step: the fence before a turn's answer and the
    /// answer's record at once. `Ok(false)`: the lease is not held, nothing was written. A
    /// store without replicas grants every lease.
    async fn set_inbound_sending_fenced(
        &self,
        channel: &str,
        event_id: &str,
        reply: &str,
        _lease: &str,
        _holder: &str,
        _secs: u64,
    ) -> Result<bool, StoreError> {
        self.set_inbound_sending(channel, event_id, reply).await?;
        Ok(true)
    }
    /// Replies left in `sending` (sent, not confirmed), oldest first; unreadable rows are marked
    /// `failed` and left out.
    async fn unconfirmed_replies(&self) -> Result<Vec<UnconfirmedReply>, StoreError>;
    /// The state of one event, if recorded.
    async fn inbound_state(
        &self,
        channel: &str,
        event_id: &str,
    ) -> Result<Option<String>, StoreError>;
    /// Events recorded but not finished, oldest first; those started
    /// [`super::inbound::MAX_ATTEMPTS`] times are marked `failed` and left out.
    async fn unfinished_inbound(&self) -> Result<Vec<InboundEvent>, StoreError>;
    /// Rows in each table that retention prunes (for `ethan doctor`).
    async fn retention_counts(&self) -> Result<RetentionCounts, StoreError>;
    /// Delete finished events older than `days` days (never inside the dedupe window) and the
    /// Lark adapter's `lark.seen:*` keys of the same age; returns `(events, seen keys)` removed.
    async fn prune_inbound(&self, days: u32) -> Result<(usize, usize), StoreError>;
    /// Delete audit entries and replay keys older than `days` days; returns the entries removed.
    async fn prune_audit(&self, days: u32) -> Result<usize, StoreError>;
}

/// What `ethan doctor` and `/health` say about the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendInfo {
    /// `sqlite` or `postgresql`.
    pub backend: &'static str,
    /// The file path (SQLite) or `host:port/database` (PostgreSQL; never the password).
    pub location: String,
    /// The server's version (`PostgreSQL 15.18`), or SQLite's library version.
    pub server_version: String,
    /// Migrations applied to the database.
    pub schema_version: i64,
    /// Migrations this binary knows; a database with more was written by a newer Ethan.
    pub binary_schema_version: i64,
    /// How the connection is protected ("encrypted (TLSv1.3), verified (sslmode=verify-full,
    /// …)"); `None` for a file.
    pub connection: Option<String>,
}

/// One active session of a key, for a list of conversations (the web page's).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SessionSummary {
    /// The session key (`web:<id>`).
    pub key: String,
    /// The session's first user message, if it has one yet.
    pub title: Option<String>,
    /// Unix seconds of the session's creation.
    pub created_at: i64,
    /// Unix seconds of its newest message (its creation when it has none).
    pub updated_at: i64,
}

/// The backend's identity and housekeeping.
#[async_trait]
pub trait StoreAdmin: Send + Sync {
    /// The active sessions whose key starts with `prefix` (taken literally: `%` and `_` are
    /// not wildcards), most recently used first, at most `limit`.
    async fn list_sessions(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<SessionSummary>, StoreError>;
    /// The backend, where it is, and its schema version. Errors: the store cannot be reached.
    async fn backend_info(&self) -> Result<BackendInfo, StoreError>;
    /// Migrations applied to the database (a cheap liveness check too).
    async fn schema_version(&self) -> Result<i64, StoreError>;
    /// Flush what the engine buffers (SQLite's WAL) at shutdown; a no-op where nothing is.
    async fn checkpoint(&self) -> Result<(), StoreError> {
        Ok(())
    }
    /// Wait until every write queued before this call is written (SQLite queues the writes no
    /// one waits on, `Store::post`): a process that ends without another store call calls it
    /// last. Nothing to wait for where no write is queued.
    async fn settle(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

/// An event of one session that is not finished, as a replica that takes the session over
/// finds it.
#[derive(Debug, Clone, PartialEq)]
pub enum Pending {
    /// A turn to run: `received`, or `processing` when the replica that started it is gone
    /// (`resumed`: run again, continuing its draft).
    Turn { event: InboundEvent, resumed: bool },
    /// A reply caught in `sending` by a replica that is gone.
    Reply(UnconfirmedReply),
}

impl Pending {
    /// The event it belongs to.
    pub fn event(&self) -> &InboundEvent {
        match self {
            Pending::Turn { event, .. } => event,
            Pending::Reply(r) => &r.event,
        }
    }
}

/// Sharing one store between several `ethan run` processes (replicas): named leases that expire
/// unless renewed, taken on a session before its events are handled and on the Telegram poller.
/// Lease times are the database server's clock, so the replicas' clocks do not matter. The
/// defaults are those of a store only one process uses (SQLite): nothing is shared, every lease
/// is granted.
#[async_trait]
pub trait ReplicaStore: Send + Sync {
    /// True when other processes may use this store at the same time (PostgreSQL).
    fn replicated(&self) -> bool {
        false
    }
    /// Take the lease `name` for `holder` for `secs` seconds: `Ok(true)` when it was free,
    /// expired, or already `holder`'s (then it is extended).
    async fn try_lease(&self, _name: &str, _holder: &str, _secs: u64) -> Result<bool, StoreError> {
        Ok(true)
    }
    /// Extend the leases of `names` that `holder` still holds by `secs` seconds; returns the
    /// names it no longer holds (expired, whether or not another took them).
    async fn renew_leases(
        &self,
        _names: &[String],
        _holder: &str,
        _secs: u64,
    ) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }
    /// Whether `holder` holds the lease `name` without a break (it has not expired since it
    /// was taken or last renewed), extending it by `secs` seconds when it does. A lease that
    /// expired is not held, even if nobody took it: another replica may have seen it free.
    async fn confirm_lease(
        &self,
        _name: &str,
        _holder: &str,
        _secs: u64,
    ) -> Result<bool, StoreError> {
        Ok(true)
    }
    /// Give the lease up (if `holder` holds it).
    async fn release_lease(&self, _name: &str, _holder: &str) -> Result<(), StoreError> {
        Ok(())
    }
    /// The unfinished events of `session_key` in the platform's order (`seq`, then arrival);
    /// events started [`super::inbound::MAX_ATTEMPTS`] times are marked `failed` and left out.
    async fn pending_inbound(&self, _session_key: &str) -> Result<Vec<Pending>, StoreError> {
        Ok(Vec::new())
    }
    /// Take the session's lease `lease` for `holder` and read its unfinished events, in one
    /// step: only when `session_key` has an unfinished event not in `handled` (event ids) is the
    /// lease taken (free, expired, or already `holder`'s). `None`: nothing to do, or the lease is
    /// another's; `Some(events)`: the lease is `holder`'s and `events` are those
    /// [`ReplicaStore::pending_inbound`] returns, without `handled`. With the lease taken, the
    /// kv key `forget` is deleted in the same step (a stop request left from an earlier turn).
    async fn claim_pending(
        &self,
        session_key: &str,
        lease: &str,
        holder: &str,
        secs: u64,
        handled: &[String],
        _forget: &str,
    ) -> Result<Option<Vec<Pending>>, StoreError> {
        if !self.try_lease(lease, holder, secs).await? {
            return Ok(None);
        }
        let pending = self.pending_inbound(session_key).await?;
        Ok(Some(
            pending
                .into_iter()
                .filter(|p| !handled.contains(&p.event().event_id))
                .collect(),
        ))
    }
    /// Let the session's lease go unless `session_key` has unfinished events not in `handled`,
    /// in one step: `Some(events)` (not empty) when it has, the lease kept and `forget`
    /// deleted as in [`ReplicaStore::claim_pending`]; `None` when the lease was let go. An
    /// event recorded by another replica while this step ran is found by the next
    /// [`ReplicaStore::claim_pending`].
    async fn release_if_idle(
        &self,
        session_key: &str,
        lease: &str,
        holder: &str,
        handled: &[String],
        _forget: &str,
    ) -> Result<Option<Vec<Pending>>, StoreError> {
        let pending: Vec<Pending> = self
            .pending_inbound(session_key)
            .await?
            .into_iter()
            .filter(|p| !handled.contains(&p.event().event_id))
            .collect();
        if pending.is_empty() {
            self.release_lease(lease, holder).await?;
            return Ok(None);
        }
        Ok(Some(pending))
    }
    /// The leases held now (not expired): `(name, holder)`.
    async fn lease_holders(&self) -> Result<Vec<(String, String)>, StoreError> {
        Ok(Vec::new())
    }
    /// Session keys with unfinished events (`received`, `processing`, `sending`) whose lease
    /// (`session:<key>`) is not held by anyone: their replica died, or their event arrived while
    /// another replica was letting the session go.
    async fn unleased_sessions(&self) -> Result<Vec<String>, StoreError> {
        Ok(Vec::new())
    }
}

/// The lease name of a session.
pub fn session_lease(session_key: &str) -> String {
    format!("session:{session_key}")
}

/// Everything the daemon needs from its store.
pub trait DaemonStore: Storage + InboundStore + StoreAdmin + ReplicaStore {}

impl<T> DaemonStore for T where T: Storage + InboundStore + StoreAdmin + ReplicaStore + ?Sized {}

/// A shared daemon store handle (either backend).
pub type DaemonStoreRef = Arc<dyn DaemonStore>;

/// `.shared()` on a daemon store handle: the same store as the core traits' handle (what the
/// agent, the tool engine, the tools and the scheduler take).
pub trait SharedStorage {
    fn shared(&self) -> ethan_core::store::StorageRef;
}

impl SharedStorage for DaemonStoreRef {
    fn shared(&self) -> ethan_core::store::StorageRef {
        self.clone()
    }
}

/// The stores a process opened from its configuration: `main` (the configured backend) and
/// `index`, the knowledge index — in the same SQLite file as `main` with the default backend;
/// with PostgreSQL, tables in the same database, shared by every replica.
#[derive(Clone)]
pub struct OpenStore {
    pub main: DaemonStoreRef,
    pub index: super::knowledge_index::IndexHandle,
    /// The SQLite store when it is `main` (for its background checkpoints).
    pub sqlite: Option<super::Store>,
}

impl OpenStore {
    /// One SQLite store as both the main store and the index.
    pub fn sqlite(store: super::Store) -> Self {
        Self {
            main: store.daemon(),
            index: store.clone().into(),
            sqlite: Some(store),
        }
    }
}
