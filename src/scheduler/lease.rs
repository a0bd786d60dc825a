//! A run's lease, on a shared store (PostgreSQL, several replicas): the replica that claims a
//! slot holds the lease `job.run:<run id>` while the run executes, as a session's turn holds the
//! session's lease. The lease is one of the store's named leases ([`ReplicaStore`]), timed by
//! the database server's clock and held by the claimant's identity (`claimed_by`).
//!
//! - [`RunLeases::hold`] renews it every third of `store.lease_secs` while the run executes; a
//!   renewal that finds it lost (the replica was paused or cut off from the database past the
//!   lease) cancels the run's turn.
//! - [`RunFence`] is the run's [`Fence`]: the tool executor asks it before a call with side
//!   effects, the job executor before it records the result and before it posts the digest. A
//!   run whose lease was lost records and posts nothing: another replica has marked it
//!   `interrupted` and runs the slot again ([`super::takeover`]).
//!
//! With a store only one process uses (SQLite) there are no run leases; a run of a process that
//! died is found by its process id instead.

use crate::store::DaemonStoreRef;
use async_trait::async_trait;
use ethan_core::tool::Fence;
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The lease name of run `run_id`.
pub fn run_lease(run_id: i64) -> String {
    format!("job.run:{run_id}")
}

/// The run leases of one claimant (a replica's scheduler, or `ethan jobs run`).
pub struct RunLeases {
    store: DaemonStoreRef,
    holder: String,
    /// `store.lease_secs`.
    pub secs: u64,
}

impl std::fmt::Debug for RunLeases {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunLeases")
            .field("holder", &self.holder)
            .field("secs", &self.secs)
            .finish_non_exhaustive()
    }
}

impl RunLeases {
    /// Run leases held by `holder` on `store` when the store is shared; `None` for SQLite.
    pub fn for_store(store: &DaemonStoreRef, holder: &str, secs: u64) -> Option<Arc<Self>> {
        store.replicated().then(|| {
            Arc::new(Self {
                store: store.clone(),
                holder: holder.to_string(),
                secs: secs.max(1),
            })
        })
    }

    /// The claimant's identity (the runs' `claimed_by`).
    pub fn holder(&self) -> &str {
        &self.holder
    }

    /// Take the lease of `run_id` (a new claim, or a run whose lease expired); false when
    /// another claimant holds it or the store cannot say.
    pub async fn take(&self, run_id: i64) -> bool {
        let name = run_lease(run_id);
        match self.store.try_lease(&name, &self.holder, self.secs).await {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!("scheduler: cannot take the lease {name}: {e}");
                false
            }
        }
    }

    /// Whether the lease of `run_id` is held without a break since it was taken, extending it.
    /// A store that cannot say counts as lost.
    pub async fn confirm(&self, run_id: i64) -> bool {
        let name = run_lease(run_id);
        match self
            .store
            .confirm_lease(&name, &self.holder, self.secs)
            .await
        {
            Ok(held) => held,
            Err(e) => {
                tracing::warn!("scheduler: cannot confirm the lease {name}: {e}");
                false
            }
        }
    }

    /// Give the lease of `run_id` up (the run ended); a failure leaves it to expire.
    pub async fn release(&self, run_id: i64) {
        let name = run_lease(run_id);
        if let Err(e) = self.store.release_lease(&name, &self.holder).await {
            tracing::warn!("scheduler: cannot release the lease {name}: {e}");
        }
    }

    /// The names of the run leases held by anyone now.
    pub async fn live(&self) -> Result<HashSet<String>, ethan_core::store::StoreError> {
        Ok(self
            .store
            .lease_holders()
            .await?
            .into_iter()
            .map(|(name, _)| name)
            .filter(|name| name.starts_with("job.run:"))
            .collect())
    }

    /// Renew the lease of `run_id` every third of the lease time until the returned guard is
    /// dropped; when a renewal finds it lost, cancel `turn` and stop.
    pub fn hold(
        self: &Arc<Self>,
        run_id: i64,
        turn: CancellationToken,
    ) -> tokio_util::sync::DropGuard {
        let done = CancellationToken::new();
        let (leases, stop) = (self.clone(), done.clone());
        let every = Duration::from_millis((self.secs * 1000 / 3).max(500));
        ethan_core::task::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(every) => {}
                }
                if !leases.confirm(run_id).await {
                    tracing::warn!(
                        "scheduler: run {run_id} lost its lease (this process was paused or cut \
                         off from the database): it is cancelled, and another replica runs the \
                         slot again"
                    );
                    turn.cancel();
                    return;
                }
            }
        });
        done.drop_guard()
    }
}

/// The fence of one run's turn: its lease, and the turn's cancel token.
#[derive(Clone)]
pub struct RunFence {
    leases: Arc<RunLeases>,
    run_id: i64,
    turn: CancellationToken,
}

impl std::fmt::Debug for RunFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunFence")
            .field("run_id", &self.run_id)
            .finish_non_exhaustive()
    }
}

impl RunFence {
    pub fn new(leases: Arc<RunLeases>, run_id: i64, turn: CancellationToken) -> Self {
        Self {
            leases,
            run_id,
            turn,
        }
    }

    /// Whether the run may still record, post or act; when not, its turn is cancelled.
    pub async fn holds(&self) -> bool {
        if self.leases.confirm(self.run_id).await {
            return true;
        }
        self.turn.cancel();
        false
    }
}

#[async_trait]
impl Fence for RunFence {
    async fn check(&self) -> Result<(), String> {
        if self.holds().await {
            return Ok(());
        }
        Err(format!(
            "refused: this replica lost the lease of run {} of this job (it was paused or cut \
             off from the database), and another replica runs the slot again. The call did not \
             run; stop here.",
            self.run_id
        ))
    }
}
