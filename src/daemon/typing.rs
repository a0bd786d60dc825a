//! The "typing…" indicator of a turn: sent when the turn starts and refreshed until the turn
//! ends. [`Typing::stop`] ends it before the answer goes out (waiting for a send in flight, so no
//! indicator reaches the chat after the answer); dropping a [`Typing`] (a turn that unwound)
//! aborts it, so it never outlives its turn.

use ethan_channels::{Channel, OutboundMessage};
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Telegram shows "typing…" for about 5 s; refresh before it fades.
pub const TYPING_EVERY: Duration = Duration::from_secs(4);
/// How long [`Typing::stop`] waits for a send in flight before aborting it.
const STOP_WAIT: Duration = Duration::from_secs(2);

/// A running indicator; see the module doc.
pub struct Typing {
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Typing {
    /// Send `msg` (an [`ethan_channels::OutboundBody::Typing`]) on `channel` now and every
    /// [`TYPING_EVERY`]; without a channel, nothing is sent.
    pub fn start(channel: Option<Arc<dyn Channel>>, msg: OutboundMessage) -> Self {
        let stop = CancellationToken::new();
        let task = channel.map(|ch| {
            let stop = stop.clone();
            tokio::spawn(async move {
                while !stop.is_cancelled() {
                    if let Err(e) = ch.send(&msg).await {
                        tracing::debug!("typing indicator failed: {e}");
                    }
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(TYPING_EVERY) => {}
                    }
                }
            })
        });
        Self { stop, task }
    }

    /// Stop refreshing; returns once no indicator can be sent any more.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(mut task) = self.task.take() {
            if tokio::time::timeout(STOP_WAIT, &mut task).await.is_err() {
                task.abort();
                let _ = task.await;
            }
        }
    }
}

impl Drop for Typing {
    fn drop(&mut self) {
        self.stop.cancel();
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}
