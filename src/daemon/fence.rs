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

    /// [`LeaseFence::holds`] and the answer's `sending` record for `ev` in one store step:
    /// `false` (the turn cancelled, nothing recorded) when the lease is not held.
    pub async fn holds_sending(&self, ev: &ethan_channels::InboundEvent, reply: &str) -> bool {
        if self
            .replica
            .confirm_sending(&self.lease, ev.channel.as_str(), &ev.event_id, reply)
            .await
        {
            return true;
        }
        self.cancel.cancel();
        false
    }

    /// Cancel the turn once this replica no longer believes it holds the lease, until `done`
    /// is cancelled (the turn ended).
    pub fn watch(&self, done: CancellationToken) {
        let fence = self.clone();
        ethan_core::task::spawn(async move {
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

impl LeaseFence {
    /// The fence of a turn of `key` under its session's lease: `None` without replicas, or
    /// when this replica does not hold the lease (a turn outside the session's queue).
    pub fn for_turn(
        replica: Option<&Arc<Replica>>,
        key: &str,
        cancel: &CancellationToken,
    ) -> Option<LeaseFence> {
        let replica = replica?;
        let lease = crate::store::session_lease(key);
        replica
            .holds(&lease)
            .then(|| LeaseFence::new(replica.clone(), lease, cancel.clone()))
    }

    /// [`LeaseFence::watch`] until the returned guard is dropped.
    pub fn watching(&self) -> tokio_util::sync::DropGuard {
        let done = CancellationToken::new();
        self.watch(done.clone());
        done.drop_guard()
    }

    /// This fence as the executor's and the typing indicator's.
    pub fn shared(&self) -> Arc<dyn ethan_core::tool::Fence> {
        Arc::new(self.clone())
    }
}

/// The answer to a web turn that could not have its session's lease within `wait` (another
/// replica ran a turn of it all that time): nothing was done.
pub fn busy_elsewhere(wait: Duration) -> crate::agent::TurnReply {
    failed(
        format!(
            "This conversation is busy on another replica (for over {} s); nothing was done. \
             Send your message again in a moment.",
            wait.as_secs()
        ),
        "the session's lease is held by another replica",
    )
}

/// The answer to a web turn whose replica lost its session's lease while it ran (paused or cut
/// off from the database): calls refused from then on did not run.
pub fn taken_over() -> crate::agent::TurnReply {
    failed(
        "This replica lost this conversation while answering (it was paused or cut off from the \
         database); what it had not done yet was not done. Send your message again."
            .into(),
        "the session's lease was lost during the turn",
    )
}

fn failed(user_message: String, detail: &str) -> crate::agent::TurnReply {
    crate::agent::TurnReply {
        outcome: crate::agent::TurnOutcome::Failed {
            user_message,
            detail: detail.into(),
        },
        cards: Vec::new(),
        refused: false,
    }
}
