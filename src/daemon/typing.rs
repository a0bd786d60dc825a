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
        Self::start_every(channel, msg, TYPING_EVERY, None)
    }

    /// [`Typing::start`], each send after the first asking `fence` (replicas: a turn whose
    /// replica lost the session sends no indicator either); the first refusal ends it.
    pub fn start_fenced(
        channel: Option<Arc<dyn Channel>>,
        msg: OutboundMessage,
        fence: Option<Arc<dyn ethan_core::tool::Fence>>,
    ) -> Self {
        Self::start_every(channel, msg, TYPING_EVERY, fence)
    }

    fn start_every(
        channel: Option<Arc<dyn Channel>>,
        msg: OutboundMessage,
        every: Duration,
        fence: Option<Arc<dyn ethan_core::tool::Fence>>,
    ) -> Self {
        let stop = CancellationToken::new();
        let task = channel.map(|ch| {
            let stop = stop.clone();
            ethan_core::task::spawn(async move {
                // The first indicator goes out unasked: the turn starts right after its
                // replica took (or confirmed) the session, and a fence only exists while this
                // replica believes it holds it.
                let mut first = true;
                while !stop.is_cancelled() {
                    if let Some(fence) = fence.as_ref().filter(|_| !first) {
                        if fence.check().await.is_err() {
                            break;
                        }
                    }
                    first = false;
                    if let Err(e) = ch.send(&msg).await {
                        tracing::debug!("typing indicator failed: {e}");
                    }
                    tokio::select! {
                        biased;
                        _ = stop.cancelled() => break,
                        _ = tokio::time::sleep(every) => {}
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

#[cfg(test)]
mod tests {
    use super::*;
    use async_trait::async_trait;
    use ethan_channels::{
        ChannelError, ChannelKind, ChatKind, ChatRef, InboundSink, OutboundBody, SentRef,
        StateStore,
    };
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A platform whose sends take `takes`; counts the sends begun and finished.
    struct Slow {
        takes: Duration,
        begun: AtomicU32,
        finished: AtomicU32,
    }

    fn slow(takes: Duration) -> Arc<Slow> {
        Arc::new(Slow {
            takes,
            begun: AtomicU32::new(0),
            finished: AtomicU32::new(0),
        })
    }

    #[async_trait]
    impl Channel for Slow {
        fn kind(&self) -> ChannelKind {
            ChannelKind::Telegram
        }
        async fn probe(&self) -> Result<String, ChannelError> {
            Ok(String::new())
        }
        async fn run(
            self: Arc<Self>,
            _: Arc<dyn InboundSink>,
            _: Arc<dyn StateStore>,
            _: tokio::sync::watch::Receiver<bool>,
        ) -> Result<(), ChannelError> {
            Ok(())
        }
        async fn send(&self, _: &OutboundMessage) -> Result<SentRef, ChannelError> {
            self.begun.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(self.takes).await;
            self.finished.fetch_add(1, Ordering::SeqCst);
            Ok(SentRef {
                message_ids: vec![],
            })
        }
    }

    fn typing_msg() -> OutboundMessage {
        OutboundMessage {
            chat: ChatRef {
                id: "1".into(),
                kind: ChatKind::Direct,
                thread: None,
            },
            reply_to: None,
            body: OutboundBody::Typing,
            idempotency_key: None,
        }
    }

    const EVERY: Duration = Duration::from_millis(20);

    #[tokio::test]
    async fn stop_lets_a_send_in_flight_finish_and_sends_nothing_after() {
        let ch = slow(Duration::from_millis(300));
        let typing = Typing::start_every(Some(ch.clone()), typing_msg(), EVERY, None);
        // Refreshed while the turn runs (each send takes 300 ms, so one is most likely in
        // flight when the turn ends).
        tokio::time::sleep(Duration::from_millis(800)).await;
        typing.stop().await;
        let begun = ch.begun.load(Ordering::SeqCst);
        assert!(begun >= 2, "{begun}");
        assert_eq!(
            ch.finished.load(Ordering::SeqCst),
            begun,
            "a send was cut off"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(ch.begun.load(Ordering::SeqCst), begun, "sent after stop");
    }

    #[tokio::test]
    async fn a_dropped_indicator_sends_nothing_more() {
        let ch = slow(Duration::from_secs(2));
        let typing = Typing::start_every(Some(ch.clone()), typing_msg(), EVERY, None);
        while ch.begun.load(Ordering::SeqCst) == 0 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        drop(typing);
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert_eq!(ch.begun.load(Ordering::SeqCst), 1);
        assert_eq!(
            ch.finished.load(Ordering::SeqCst),
            0,
            "the send was not aborted"
        );
    }
}
