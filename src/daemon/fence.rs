//! Fencing of turns by the session lease (replicas only). A turn runs while its replica holds
//! the session's lease; a replica paused past the lease (a stop signal, a long GC-like stall,
//! a stalled disk) or cut off from the database loses it, and another replica runs the
//! session's event again. The paused replica's turn must then neither send nor act:
//!
//! - [`LeaseFence`] is the turn's [`ethan_core::tool::Fence`]: the executor asks it before each
//!   call with side effects, and the router before anything of the turn is sent. It asks the
//!   store ([`super::replica::Replica::confirm`]: held without a break, extended); a lost lease
//!   cancels the turn, which ends as a `/stop` would (what ran is recorded), and nothing of it
//!   is sent.
//! - [`LeaseFence::watch`] cancels the turn as soon as the lease renewals find the lease lost,
//!   so a turn waiting on the model stops waiting.
//!
//! What remains is the window between the last check and the platform's receipt of a send.

use super::replica::Replica;
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// How often [`LeaseFence::watch`] looks at what the renewals found.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// One turn's fence: its replica, the session's lease, and the turn's cancel token.
#[derive(Clone)]
pub struct LeaseFence {
    replica: Arc<Replica>,
    lease: String,
    cancel: CancellationToken,
}

impl std::fmt::Debug for LeaseFence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaseFence")
            .field("lease", &self.lease)
            .finish_non_exhaustive()
    }
}

impl LeaseFence {
    pub fn new(replica: Arc<Replica>, lease: String, cancel: CancellationToken) -> Self {
        Self {
            replica,
            lease,
            cancel,
        }
    }

    /// Whether the turn may still send or act: the lease is confirmed by the store. When it
    /// is not, the turn is cancelled.
    pub async fn holds(&self) -> bool {
        if self.replica.confirm(&self.lease).await {
            return true;
        }
        self.cancel.cancel();
        false
    }

    /// Cancel the turn once this replica no longer believes it holds the lease, until `done`
    /// is cancelled (the turn ended).
    pub fn watch(&self, done: CancellationToken) {
        let fence = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = done.cancelled() => return,
                    _ = tokio::time::sleep(WATCH_EVERY) => {}
                }
                if !fence.replica.holds(&fence.lease) {
                    tracing::warn!(
                        "{} was lost while its turn ran: the turn is cancelled, and the replica \
                         that holds it now answers",
                        fence.lease
                    );
                    fence.cancel.cancel();
                    return;
                }
            }
        });
    }
}

#[async_trait]
impl ethan_core::tool::Fence for LeaseFence {
    async fn check(&self) -> Result<(), String> {
        if self.holds().await {
            return Ok(());
        }
        Err(format!(
            "refused: this replica no longer holds this conversation ({}): it was paused or cut \
             off from the database past its lease, and another replica now runs this turn. \
             The call did not run; stop here.",
            self.lease
        ))
    }
}
