//! Several `ethan run` processes on one shared store (PostgreSQL): what one replica does so
//! that every event is answered once, in the platform's order, by whichever replica is alive.
//!
//! - **Sessions**: a replica handles a session's events only while it holds the session's
//!   lease ([`crate::store::session_lease`], `store.lease_secs`, renewed every third of it).
//!   It takes the lease, runs the session's unfinished events in the platform's order (the
//!   router's `pump`), lets the lease go as soon as it has nothing left, and looks once more, so
//!   an event recorded by another replica meanwhile is not left behind.
//! - **Takeover**: every [`SWEEP_EVERY`] each replica asks the store for sessions with unfinished
//!   events and no live lease (their replica died, or the event arrived while the session was
//!   being let go) and pumps them. A replica killed mid-turn loses its lease after
//!   `lease_secs`; its event is then run again by another replica (as after a crash).
//! - **Telegram polling** ([`telegram_poller`]): one poller at a time, the holder of the
//!   `telegram.poller` lease; the others try every [`LEADER_RETRY`], so another replica polls
//!   within `lease_secs` + 5 s of the poller's death. The update offset is in the shared store.
//!
//! With the SQLite store (one process) none of this runs: the router queues events directly.

use crate::store::DaemonStoreRef;
use ethan_channels::{Channel, InboundSink, StateStore};
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

/// How often each replica looks for sessions nobody holds.
pub const SWEEP_EVERY: Duration = Duration::from_secs(1);
/// How soon it looks again when it left sessions behind for want of room.
pub const SWEEP_BUSY: Duration = Duration::from_millis(50);
/// How often a replica that is not the Telegram poller tries to become it.
pub const LEADER_RETRY: Duration = Duration::from_secs(5);
/// The Telegram poller's lease name.
pub const TELEGRAM_POLLER_LEASE: &str = "telegram.poller";

/// This replica: its id, its lease time, and the leases it holds now.
pub struct Replica {
    /// `host:pid:random`, unique per process.
    pub id: String,
    /// `store.lease_secs`.
    pub lease: Duration,
    store: DaemonStoreRef,
    /// Leases held, each with the generation it was taken in: a renewal that started before a
    /// lease was given up and taken again cannot drop the new hold.
    held: Mutex<HashMap<String, u64>>,
    generation: std::sync::atomic::AtomicU64,
    /// Sessions with a pump queued here and not started yet.
    queued: Mutex<HashSet<String>>,
    /// Pumps running here now.
    running: std::sync::atomic::AtomicUsize,
    /// Most sessions this replica queues or runs at once; the rest wait in the store for
    /// whichever replica has room (so a busy replica leaves work to the others).
    capacity: usize,
}

impl Replica {
    /// A replica on `store` when the store is shared (PostgreSQL); `None` for SQLite.
    /// `capacity`: most sessions queued or running here at once.
    pub fn for_store(
        store: &DaemonStoreRef,
        lease_secs: u64,
        capacity: usize,
    ) -> Option<Arc<Replica>> {
        if !store.replicated() {
            return None;
        }
        Some(Arc::new(Replica {
            id: replica_id(),
            lease: Duration::from_secs(lease_secs.max(1)),
            store: store.clone(),
            held: Mutex::new(HashMap::new()),
            generation: std::sync::atomic::AtomicU64::new(0),
            queued: Mutex::new(HashSet::new()),
            running: std::sync::atomic::AtomicUsize::new(0),
            capacity: capacity.max(1),
        }))
    }

    fn queued(&self) -> std::sync::MutexGuard<'_, HashSet<String>> {
        self.queued.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether to queue a pump of `key` here: not when one is already queued (it will find the
    /// new event), nor when this replica is full (the session waits in the store for a sweep,
    /// here or on another replica). [`Want::Queue`] counts it as queued.
    pub fn want(&self, key: &str) -> Want {
        let mut queued = self.queued();
        if queued.contains(key) {
            return Want::Already;
        }
        let running = self.running.load(std::sync::atomic::Ordering::Relaxed);
        if queued.len() + running >= self.capacity {
            return Want::Full;
        }
        queued.insert(key.to_string());
        Want::Queue
    }

    /// A queued pump of `key` starts; it counts as running until the guard is dropped (also
    /// when the pump panics).
    pub fn started(self: &Arc<Self>, key: &str) -> PumpGuard {
        self.queued().remove(key);
        self.running
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        PumpGuard(self.clone())
    }

    fn held(&self) -> std::sync::MutexGuard<'_, HashMap<String, u64>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Take (or extend) the lease `name`; false when another replica holds it. A store error is
    /// logged and counts as not taken (the sweep tries again).
    pub async fn take(&self, name: &str) -> bool {
        match self
            .store
            .try_lease(name, &self.id, self.lease.as_secs())
            .await
        {
            Ok(true) => {
                let generation = self
                    .generation
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.held().insert(name.to_string(), generation);
                true
            }
            Ok(false) => false,
            Err(e) => {
                tracing::warn!("cannot take the lease {name}: {e}");
                false
            }
        }
    }

    /// Take the session lease of `key` and its unfinished events not in `handled`, in one
    /// store step (the lease is taken only when there is something to run, and the stop
    /// request of an earlier turn is forgotten with it). `None`: nothing to run, the lease is
    /// another replica's, or the store failed (logged).
    pub async fn claim(&self, key: &str, handled: &[String]) -> Option<Vec<crate::store::Pending>> {
        let name = crate::store::session_lease(key);
        let forget = remote_stop::key(key);
        match self
            .store
            .claim_pending(key, &name, &self.id, self.lease.as_secs(), handled, &forget)
            .await
        {
            Ok(Some(events)) => {
                let generation = self
                    .generation
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                self.held().insert(name, generation);
                Some(events)
            }
            Ok(None) => None,
            Err(e) => {
                tracing::error!("cannot claim the session {key}: {e}");
                None
            }
        }
    }

    /// Let the session lease of `key` go unless it has unfinished events not in `handled`, in
    /// one store step: `Some(events)` to run next (the lease kept), `None` once it is let go
    /// (also when the store failed: then it is let go by a plain release, logged).
    pub async fn release_if_idle(
        &self,
        key: &str,
        handled: &[String],
    ) -> Option<Vec<crate::store::Pending>> {
        let name = crate::store::session_lease(key);
        let forget = remote_stop::key(key);
        match self
            .store
            .release_if_idle(key, &name, &self.id, handled, &forget)
            .await
        {
            Ok(Some(events)) => Some(events),
            Ok(None) => {
                self.held().remove(&name);
                None
            }
            Err(e) => {
                tracing::error!("cannot read the unfinished events of {key}: {e}");
                self.give_up(&name).await;
                None
            }
        }
    }

    /// Give every held lease up (at shutdown, once no turn runs: other replicas take the
    /// sessions over at once instead of after `lease_secs`).
    pub async fn give_up_all(&self) {
        let names: Vec<String> = self.held().keys().cloned().collect();
        for name in names {
            self.give_up(&name).await;
        }
    }

    /// Give the lease `name` up (a failure is logged; the lease then expires by itself).
    pub async fn give_up(&self, name: &str) {
        self.held().remove(name);
        if let Err(e) = self.store.release_lease(name, &self.id).await {
            tracing::warn!("cannot release the lease {name}: {e}");
        }
    }

    /// Whether this replica still holds `name`, asked of the store (the fence before a side
    /// effect or a send): held without a break since it was taken, and extended by the lease
    /// time. A lease found lost, or a store that cannot say, counts as lost: it is dropped here
    /// and given up, so a sweep (here or on another replica) runs the session's events again.
    pub async fn confirm(&self, name: &str) -> bool {
        if !self.holds(name) {
            return false;
        }
        let confirmed = self
            .store
            .confirm_lease(name, &self.id, self.lease.as_secs())
            .await;
        self.kept(name, confirmed).await
    }

    /// [`Replica::confirm`] and the reply's `sending` record in one store step: `true` when
    /// the lease `name` is held without a break and `reply` is recorded as being sent for
    /// `channel`'s event `event_id`; otherwise nothing is recorded, the lease is given up, and
    /// nothing of the turn may be sent.
    pub async fn confirm_sending(
        &self,
        name: &str,
        channel: &str,
        event_id: &str,
        reply: &str,
    ) -> bool {
        if !self.holds(name) {
            return false;
        }
        let confirmed = self
            .store
            .set_inbound_sending_fenced(
                channel,
                event_id,
                reply,
                name,
                &self.id,
                self.lease.as_secs(),
            )
            .await;
        self.kept(name, confirmed).await
    }

    /// The store's answer to a confirmation of the lease `name`: `true` when it is still held;
    /// otherwise (expired, or a store that cannot say) the loss is logged, the lease given up,
    /// and `false`.
    async fn kept(
        &self,
        name: &str,
        confirmed: Result<bool, ethan_core::store::StoreError>,
    ) -> bool {
        let why = match confirmed {
            Ok(true) => return true,
            Ok(false) => "it expired (this replica was paused or cut off from the database)".into(),
            Err(e) => format!("the store cannot confirm it: {e}"),
        };
        tracing::warn!("this replica lost the lease {name}: {why}");
        self.give_up(name).await;
        false
    }

    /// Whether this replica believes it holds `name`.
    pub fn holds(&self, name: &str) -> bool {
        self.held().contains_key(name)
    }

    /// Renew every held lease every third of the lease time, until `shutdown`. A lease found
    /// taken by another replica (this one was too slow to renew) is dropped and logged.
    pub async fn renew_loop(self: Arc<Self>, mut shutdown: watch::Receiver<bool>) {
        let every = (self.lease / 3).max(Duration::from_millis(500));
        loop {
            tokio::select! {
                _ = tokio::time::sleep(every) => {}
                _ = shutdown.changed() => return,
            }
            let snapshot: HashMap<String, u64> = self.held().clone();
            if snapshot.is_empty() {
                continue;
            }
            let names: Vec<String> = snapshot.keys().cloned().collect();
            match self
                .store
                .renew_leases(&names, &self.id, self.lease.as_secs())
                .await
            {
                Ok(lost) => {
                    let mut held = self.held();
                    for name in lost {
                        // Given up and taken again since the snapshot: the new hold stands.
                        if held.get(&name) != snapshot.get(&name) {
                            continue;
                        }
                        tracing::warn!(
                            "the lease {name} expired before it was renewed and another \
                             replica may have taken it over"
                        );
                        held.remove(&name);
                    }
                }
                Err(e) => tracing::warn!("cannot renew leases: {e}"),
            }
        }
    }
}

/// What [`Replica::want`] says about a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Want {
    /// Queue a pump of it here.
    Queue,
    /// A pump of it is already queued here.
    Already,
    /// This replica has no room; leave it in the store.
    Full,
}

/// A running pump (see [`Replica::started`]).
pub struct PumpGuard(Arc<Replica>);

impl Drop for PumpGuard {
    fn drop(&mut self) {
        self.0
            .running
            .fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// This machine's name, as replica ids start with it.
fn host_name() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    if host.is_empty() {
        "host".into()
    } else {
        host
    }
}

/// `host:pid:random`.
fn replica_id() -> String {
    format!(
        "{}:{}:{:08x}",
        host_name(),
        std::process::id(),
        rand::random::<u32>()
    )
}

impl Replica {
    /// At start: give up the leases still held by replicas of *this* machine whose process is
    /// gone (a crash or kill -9 before this restart), so their sessions are taken over now
    /// rather than after `lease_secs`. Leases of live processes and of other machines are
    /// left alone. Returns how many were released.
    pub async fn release_dead_local(&self) -> usize {
        let holders = match self.store.lease_holders().await {
            Ok(h) => h,
            Err(e) => {
                tracing::warn!("cannot read the leases: {e}");
                return 0;
            }
        };
        let host = host_name();
        let mut released = 0;
        for (name, holder) in holders {
            let mut parts = holder.split(':');
            let (Some(h), Some(pid)) = (parts.next(), parts.next()) else {
                continue;
            };
            let Ok(pid) = pid.parse::<u32>() else {
                continue;
            };
            if h != host || pid == std::process::id() {
                continue;
            }
            if std::path::Path::new(&format!("/proc/{pid}")).exists() {
                continue;
            }
            match self.store.release_lease(&name, &holder).await {
                Ok(()) => {
                    tracing::info!(
                        "released the lease {name} of {holder}: that process on this machine is gone"
                    );
                    released += 1;
                }
                Err(e) => tracing::warn!("cannot release the lease {name} of {holder}: {e}"),
            }
        }
        released
    }
}

/// Poll Telegram only while this replica holds the `telegram.poller` lease; try to take it
/// every [`LEADER_RETRY`] otherwise. Stops polling when the lease is lost or at `shutdown`.
pub async fn telegram_poller(
    replica: Arc<Replica>,
    channel: Arc<dyn Channel>,
    sink: Arc<dyn InboundSink>,
    state: Arc<dyn StateStore>,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        if *shutdown.borrow() {
            return;
        }
        if !replica.take(TELEGRAM_POLLER_LEASE).await {
            tokio::select! {
                _ = tokio::time::sleep(LEADER_RETRY) => continue,
                _ = shutdown.changed() => return,
            }
        }
        tracing::info!("this replica ({}) polls Telegram now", replica.id);
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut poll =
            ethan_core::task::spawn(channel.clone().run(sink.clone(), state.clone(), stop_rx));
        let stopping = loop {
            tokio::select! {
                r = &mut poll => {
                    match r {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => tracing::error!("telegram channel stopped: {e}"),
                        Err(e) => tracing::error!("telegram polling task failed: {e}"),
                    }
                    replica.give_up(TELEGRAM_POLLER_LEASE).await;
                    return;
                }
                _ = shutdown.changed() => break true,
                _ = tokio::time::sleep(replica.lease / 3) => {
                    if !replica.holds(TELEGRAM_POLLER_LEASE) {
                        tracing::warn!("this replica lost the Telegram poller lease; it stops polling");
                        break false;
                    }
                }
            }
        };
        let _ = stop_tx.send(true);
        if tokio::time::timeout(Duration::from_secs(5), &mut poll)
            .await
            .is_err()
        {
            // Never two pollers in one process.
            poll.abort();
        }
        if stopping {
            replica.give_up(TELEGRAM_POLLER_LEASE).await;
            return;
        }
    }
}

/// `/stop` for a turn running on another replica: the replica that takes the `/stop` in writes
/// a request under `replica.stop:<session key>`; the replica running the session's turn looks
/// for it every [`STOP_POLL`] and cancels the turn when the sender may stop it (the owner, or in
/// a group the person who asked). A replica clears the key when it starts a turn, so a request
/// found during a turn was made during it.
pub mod remote_stop {
    use ethan_core::store::KvStore;
    use serde::{Deserialize, Serialize};
    use std::time::Duration;
    use tokio_util::sync::CancellationToken;

    /// How often a running turn looks for a stop request from another replica.
    pub const STOP_POLL: Duration = Duration::from_millis(500);

    /// Who asked to stop.
    #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
    pub struct StopRequest {
        pub sender_id: String,
        pub owner: bool,
    }

    /// The kv key of `session_key`'s stop request.
    pub fn key(session_key: &str) -> String {
        format!("replica.stop:{session_key}")
    }

    /// Ask the replica running `session_key`'s turn to stop it.
    pub async fn request(
        store: &dyn KvStore,
        session_key: &str,
        req: &StopRequest,
    ) -> Result<(), ethan_core::store::StoreError> {
        let json = serde_json::to_string(req).unwrap_or_default();
        store.kv_set(&key(session_key), &json).await
    }

    /// Until `done` fires: cancel `cancel` on a request from someone who may stop this turn
    /// (`may_stop(request)`); other requests are dropped and logged.
    pub async fn watch(
        store: &dyn KvStore,
        session_key: &str,
        may_stop: impl Fn(&StopRequest) -> bool,
        cancel: CancellationToken,
        done: CancellationToken,
    ) {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(STOP_POLL) => {}
                _ = done.cancelled() => return,
            }
            let Ok(Some(v)) = store.kv_get(&key(session_key)).await else {
                continue;
            };
            let _ = store.kv_delete(&key(session_key)).await;
            match serde_json::from_str::<StopRequest>(&v) {
                Ok(req) if may_stop(&req) => {
                    tracing::info!(
                        "stopping the turn of {session_key}: /stop taken in by another replica"
                    );
                    cancel.cancel();
                    return;
                }
                Ok(req) => tracing::info!(
                    "user {} may not stop the turn of {session_key}; refused",
                    req.sender_id
                ),
                Err(e) => tracing::warn!("unreadable stop request for {session_key}: {e}"),
            }
        }
    }
}
