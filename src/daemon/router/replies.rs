//! The router's replies: delivering an answer (recorded as `sending` first, then `done` or
//! `failed`), finishing it in the draft that showed it being written, cards and notices, and
//! settling replies a crash caught mid-send. Every send — a message's parts or a draft's finish —
//! is retried by one policy, [`DELIVERY_RETRY`] ([`ethan_channels::delivery::Tries`]).

use super::{reply_key, Router};
use crate::daemon::fence::LeaseFence;
use crate::daemon::stream;
use crate::store::inbound::UnconfirmedReply;
use ethan_channels::delivery::{send_with_retry_fenced, DeliveryError, RetryPolicy};
use ethan_channels::{
    ChannelKind, Draft, DraftHandle, DraftTarget, InboundEvent, OutboundBody, OutboundMessage,
    ToolLine,
};
use std::sync::Arc;
use std::time::Duration;

/// An unconfirmed reply is re-sent only if this much of the platform's idempotency window is
/// still left (the re-send itself may take retries).
const RESEND_MARGIN: Duration = Duration::from_secs(300);
/// Replies and cards: three tries, 1 s then 2 s apart.
const DELIVERY_RETRY: RetryPolicy = RetryPolicy {
    attempts: 3,
    first_delay: Duration::from_secs(1),
    max_delay: Duration::from_secs(4),
};

impl Router {
    /// A reply caught in `sending` by a crash: `Some` when it is to be sent again (finished in
    /// its recorded draft, or re-sent with the same idempotency key inside the channel's
    /// window); otherwise it is marked `unconfirmed` with a warning saying why, and `None`.
    pub(super) async fn settle_unconfirmed(&self, r: UnconfirmedReply) -> Option<UnconfirmedReply> {
        let now = crate::store::now();
        let ev = &r.event;
        let what = format!(
            "the reply ({} characters) to {} event {} in {}",
            r.reply.chars().count(),
            ev.channel,
            ev.event_id,
            ev.session_key()
        );
        let platform = platform_name(ev.channel);
        let age = Duration::from_secs(u64::try_from(now - r.since).unwrap_or(0));
        let window = self
            .channels
            .get(&ev.channel)
            .map(|ch| ch.idempotent_send_window());
        if window.is_some() && stream::recorded_handle(&self.store, ev).await.is_some() {
            tracing::info!(
                "{what} was being sent when the daemon stopped; finishing it in the \
                 message it was streamed into"
            );
            return Some(r);
        }
        match window {
            Some(Some(w)) if age + RESEND_MARGIN < w => {
                tracing::info!(
                    "{what} was being sent when the daemon stopped; sending it again with \
                     the same idempotency key, so {platform} shows it once"
                );
                return Some(r);
            }
            Some(Some(w)) => {
                tracing::warn!(
                    "{what} was being sent when the daemon stopped {} s ago, longer than \
                     {platform} recognises a repeated send ({} s); it is not sent again, so \
                     it may be missing",
                    age.as_secs(),
                    w.as_secs()
                );
            }
            Some(None) => {
                tracing::warn!(
                    "{what} was being sent when the daemon stopped; {platform} has no \
                     idempotent send, so it is not sent again (it may or may not have \
                     arrived)"
                );
            }
            None => {
                tracing::warn!(
                    "{what} was being sent when the daemon stopped; no {} channel is \
                     running now, so it is not sent again",
                    ev.channel
                );
            }
        }
        self.mark(ev, "unconfirmed").await;
        None
    }

    /// Record `text` as the reply to `ev` being sent (state `sending`, one write; a failure is
    /// logged).
    async fn record_sending(&self, ev: &InboundEvent, text: &str) {
        if let Err(e) = self
            .store
            .set_inbound_sending(ev.channel.as_str(), &ev.event_id, text)
            .await
        {
            tracing::error!(
                "cannot record the reply to event {} as being sent: {e}",
                ev.event_id
            );
        }
    }

    /// [`Router::answer`] for an event answered outside its session's queue: with replicas the
    /// reply is not recorded as `sending` (another replica would take that over), only the
    /// final state.
    pub(super) async fn answer_out_of_band(&self, ev: &InboundEvent, text: &str) {
        if self.replica.is_none() {
            return self.answer(ev, text).await;
        }
        self.deliver_and_mark(ev, text).await;
    }

    /// Send `text` as the reply and mark the event `done` (or `failed`, logged).
    pub(super) async fn deliver_and_mark(&self, ev: &InboundEvent, text: &str) {
        let state = match self.reply(ev, text).await {
            Ok(()) => "done",
            Err(e) if e.fenced => return self.lost_while_sending(ev),
            Err(e) => {
                tracing::error!(
                    "could not deliver the reply in {} ({} tries): {}",
                    ev.session_key(),
                    e.attempts,
                    e.error
                );
                "failed"
            }
        };
        self.mark(ev, state).await;
    }

    /// Deliver `text` as the reply to `ev`: first record it as being sent (state `sending`, one
    /// write), then send, then mark the event `done` once the platform confirmed it, or `failed`
    /// when it refused or could not be reached (logged).
    pub(super) async fn answer(&self, ev: &InboundEvent, text: &str) {
        self.record_sending(ev, text).await;
        self.deliver_and_mark(ev, text).await;
    }

    /// Send again a reply a crash caught mid-send: finish it in the message it was streamed
    /// into when a draft handle was recorded, else send it with the same idempotency key as the
    /// first send.
    pub(super) async fn resend(&self, r: UnconfirmedReply) {
        let ev = &r.event;
        // Only a draft that was recorded: a new one would show the reply a second time.
        if let Some(handle) = stream::recorded_handle(&self.store, ev).await {
            if let Some(draft) = self.draft_for(ev, Some(handle)) {
                self.answer_in_draft(ev, &r.reply, draft, &[]).await;
                return;
            }
        }
        let state = match self.reply(ev, &r.reply).await {
            Ok(()) => {
                tracing::info!(
                    "re-sent the reply to {} event {} in {}",
                    ev.channel,
                    ev.event_id,
                    ev.session_key()
                );
                "done"
            }
            Err(e) if e.fenced => return self.lost_while_sending(ev),
            Err(e) => {
                tracing::error!(
                    "could not re-send the reply to {} event {} in {} ({} tries): {}",
                    ev.channel,
                    ev.event_id,
                    ev.session_key(),
                    e.attempts,
                    e.error
                );
                "failed"
            }
        };
        self.mark(ev, state).await;
    }

    /// A reply whose retry the session's lease refused: this replica lost the session while it
    /// waited to try again, so it leaves the event as it is (`sending`) to the replica that
    /// holds the session now (which settles it as a reply caught mid-send).
    fn lost_while_sending(&self, ev: &InboundEvent) {
        tracing::warn!(
            "the reply to {} event {} in {} is not sent again: this replica lost the session \
             while it waited to retry it",
            ev.channel,
            ev.event_id,
            ev.session_key()
        );
    }

    /// Send `text` as the reply to `ev` (key [`reply_key`]), through [`Router::deliver`].
    async fn reply(&self, ev: &InboundEvent, text: &str) -> Result<(), DeliveryError> {
        self.deliver(
            ev,
            OutboundBody::Text(text.to_string()),
            Some(reply_key(ev)),
        )
        .await
    }

    /// Send `body` (a notice, a card) into `ev`'s chat beside its reply; a failure is logged as
    /// "could not {what}" and changes nothing else.
    pub(super) async fn send_aside(
        &self,
        ev: &InboundEvent,
        body: OutboundBody,
        what: impl FnOnce() -> String,
    ) {
        if let Err(e) = self.deliver(ev, body, None).await {
            tracing::warn!("could not {} ({} tries): {}", what(), e.attempts, e.error);
        }
    }

    /// Send `body` into `ev`'s chat as an answer to it, retrying transient failures
    /// ([`DELIVERY_RETRY`]); a retry sends only the parts not shown yet, so a long answer whose
    /// third part failed does not show its first two twice. Replicas: while this replica holds
    /// the session's lease, every retry first confirms it ([`LeaseFence`]); a refused retry
    /// ends the delivery with nothing more sent (`fenced`).
    pub(super) async fn deliver(
        &self,
        ev: &InboundEvent,
        body: OutboundBody,
        idempotency_key: Option<String>,
    ) -> Result<(), DeliveryError> {
        let Some(ch) = self.channels.get(&ev.channel) else {
            return Err(DeliveryError {
                attempts: 0,
                error: format!("no {} channel is running", ev.channel),
                fenced: false,
            });
        };
        let msg = OutboundMessage {
            chat: ev.chat.clone(),
            reply_to: ev.message_id.clone(),
            body,
            idempotency_key,
        };
        let fence = self.session_fence(ev);
        let fence = fence.as_ref().map(|f| f as &dyn ethan_core::tool::Fence);
        send_with_retry_fenced(ch.as_ref(), &msg, &DELIVERY_RETRY, fence).await?;
        self.count_sent(ev);
        Ok(())
    }

    /// The fence of a send for `ev`'s session: its lease while this replica holds it (`None`
    /// on a store that is not shared, or when this replica never held it).
    fn session_fence(&self, ev: &InboundEvent) -> Option<LeaseFence> {
        LeaseFence::for_turn(
            self.replica.as_ref(),
            &ev.session_key(),
            &tokio_util::sync::CancellationToken::new(),
        )
    }

    /// The channel's draft for the reply to `ev` (see [`stream`]), continuing the one a
    /// previous run recorded when `resumed`; `None` when the channel does not stream here.
    pub(super) async fn open_draft(
        &self,
        ev: &InboundEvent,
        resumed: bool,
    ) -> Option<Box<dyn Draft>> {
        let resume = if resumed {
            stream::recorded_handle(&self.store, ev).await
        } else {
            None
        };
        self.draft_for(ev, resume)
    }

    /// The channel's draft for the reply to `ev`, continuing `resume` when given.
    fn draft_for(&self, ev: &InboundEvent, resume: Option<DraftHandle>) -> Option<Box<dyn Draft>> {
        let ch = self.channels.get(&ev.channel)?;
        ch.open_draft(
            DraftTarget {
                chat: ev.chat.clone(),
                reply_to: ev.message_id.clone(),
                idempotency_key: Some(reply_key(ev)),
                resume,
            },
            Arc::new(stream::StoreDraftLog {
                store: self.store.clone(),
                key: stream::draft_key(ev),
            }),
        )
    }

    /// Deliver `text` as the reply to `ev` in the draft that showed it being written: record it
    /// as being sent, [`Draft::finish`] it (retried by [`DELIVERY_RETRY`], the policy of every send;
    /// a draft's finish is safe to repeat), then mark the event `done` or `failed` and forget the
    /// draft's handle.
    pub(super) async fn answer_in_draft(
        &self,
        ev: &InboundEvent,
        text: &str,
        mut draft: Box<dyn Draft>,
        tools: &[ToolLine],
    ) {
        self.record_sending(ev, text).await;
        let mut tries = DELIVERY_RETRY.tries();
        // As in [`Router::deliver`]: while this replica holds the session, a retry first
        // confirms the lease, and a refused one leaves the reply to the replica holding it.
        let fence = self.session_fence(ev);
        let fence = fence.as_ref().map(|f| f as &dyn ethan_core::tool::Fence);
        let state = loop {
            let e = match draft.finish(text, tools).await {
                Ok(_) => {
                    self.count_sent(ev);
                    break "done";
                }
                Err(e) => e,
            };
            let made = tries.made();
            let Some(delay) = tries.retry_after(&e) else {
                tracing::error!(
                    "could not deliver the streamed reply in {} ({made} tries): {e}",
                    ev.session_key()
                );
                break "failed";
            };
            tracing::warn!(
                "could not finish the streamed reply in {} (try {made}): {e}; retrying in {} ms",
                ev.session_key(),
                delay.as_millis()
            );
            if tries.pause(delay, fence).await.is_err() {
                return self.lost_while_sending(ev);
            }
        };
        self.settle(ev, state).await;
    }
}

/// The platform's name for people (log lines).
fn platform_name(kind: ChannelKind) -> &'static str {
    match kind {
        ChannelKind::Telegram => "Telegram",
        ChannelKind::Lark => "Lark",
        ChannelKind::Terminal => "the terminal",
        ChannelKind::Web => "the web gateway",
    }
}

impl Router {
    /// Count a reply, card or finished draft the platform took.
    fn count_sent(&self, ev: &InboundEvent) {
        self.metrics
            .messages_out
            .with_label_values(&[ev.channel.as_str()])
            .inc();
    }
}
