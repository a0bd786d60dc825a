//! `getUpdates` long polling with a durable offset.
//!
//! Bot API semantics: an update is confirmed once `getUpdates` is called with an `offset`
//! higher than its `update_id`. The offset is stored (key [`OFFSET_KEY`]) and advanced only after
//! the update was handed to the daemon's sink, which records it durably first; so a crash never
//! loses an update, and a redelivered one is recognised by its `update_id`. Polling goes on from
//! the offset in memory; the stored one is written at most every [`OFFSET_SAVE_EVERY`] and when
//! polling stops, not per update: a stored offset that lags only means that, after a restart
//! (or on the replica that polls next), updates not yet confirmed to Telegram come again and
//! are recognised as duplicates — confirmed ones Telegram does not send again at all.
//!
//! Errors: 409 Conflict (another poller, or a webhook still set) is logged once with its cause and
//! retried with a growing delay (1 s doubling to 60 s); 429 waits exactly `retry_after`; a rejected
//! token ends the loop; anything else is retried with the same growing delay.

use super::wire::{Update, UpdateKind};
use super::{calls, BotIdentity, TelegramChannel, PLATFORM};
use crate::channel::{ChannelError, InboundSink, PublishOutcome, StateStore};
use std::sync::Arc;
use std::time::Duration;
use teloxide::payloads::{GetUpdates, GetUpdatesSetters, GetWebhookInfo};
use teloxide::prelude::{Request, Requester};
use teloxide::types::{AllowedUpdate, BotCommand};
use teloxide::{ApiError, RequestError};
use tokio::sync::watch;

/// Key of the persisted offset in the daemon's state store.
pub const OFFSET_KEY: &str = "telegram.offset";

/// The stored offset is written at most this often while updates come in.
pub const OFFSET_SAVE_EVERY: Duration = Duration::from_secs(10);

/// The offset polling has reached, and when it was last stored.
struct Offset {
    now: i32,
    stored: i32,
    stored_at: Option<std::time::Instant>,
}

impl Offset {
    /// Store the offset if it moved and `force` or [`OFFSET_SAVE_EVERY`] passed since the last
    /// write. A failed write is logged; polling goes on from memory.
    async fn save(&mut self, state: &dyn StateStore, force: bool) {
        let due = self
            .stored_at
            .is_none_or(|at| at.elapsed() >= OFFSET_SAVE_EVERY);
        if self.now == self.stored || !(force || due) {
            return;
        }
        match state.set(OFFSET_KEY, &self.now.to_string()).await {
            Ok(()) => {
                self.stored = self.now;
                self.stored_at = Some(std::time::Instant::now());
            }
            Err(e) => tracing::warn!(
                "could not store the telegram offset {}: {e}; polling goes on",
                self.now
            ),
        }
    }
}

/// The commands shown in Telegram's menu (`setMyCommands`).
pub fn bot_commands() -> Vec<BotCommand> {
    vec![
        BotCommand::new("start", "What this bot can do"),
        BotCommand::new("help", "What this bot can do"),
        BotCommand::new("new", "Start a fresh conversation"),
        BotCommand::new("stop", "Cancel the running answer"),
    ]
}

struct Backoff {
    next: Duration,
}

impl Backoff {
    fn new() -> Self {
        Self {
            next: Duration::from_secs(1),
        }
    }
    fn step(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(Duration::from_secs(60));
        d
    }
    fn reset(&mut self) {
        self.next = Duration::from_secs(1);
    }
}

/// Sleep `d` unless shutdown fires first; returns false on shutdown.
async fn pause(d: Duration, shutdown: &mut watch::Receiver<bool>) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = shutdown.changed() => false,
    }
}

/// The error and its causes, each once: teloxide says only "A network error: error sending
/// request"; the cause says what happened (e.g. the connection closed before the answer).
fn with_causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let s = c.to_string();
        if !text.contains(&s) {
            text.push_str(": ");
            text.push_str(&s);
        }
        cause = c.source();
    }
    text
}

/// Hand one update to the daemon: a `callback_query` to the approval handler (on a task of its
/// own: its answers to Telegram must not hold up the updates behind it), a message to the sink
/// (read knowing the bot `me`, for mentions); one that could not be read is logged and
/// skipped. `Err` only when the event could not be recorded (the caller must not acknowledge
/// it).
pub(super) async fn dispatch(
    chan: &Arc<TelegramChannel>,
    me: &BotIdentity,
    sink: &Arc<dyn InboundSink>,
    update: &Update,
) -> Result<(), ChannelError> {
    let id = update.id;
    match &update.kind {
        UpdateKind::CallbackQuery(q) => {
            let (chan, sink, q) = (Arc::clone(chan), Arc::clone(sink), q.clone());
            tokio::spawn(
                async move { super::approval::on_callback(&chan, sink.as_ref(), &q).await },
            );
            return Ok(());
        }
        UpdateKind::Malformed(why) => {
            tracing::warn!("telegram update {id} could not be read ({why}); skipped");
            return Ok(());
        }
        UpdateKind::Message(_) | UpdateKind::Other => {}
    }
    match super::normalize::normalize_update(update, me) {
        Some(event) => match sink.publish(event).await? {
            PublishOutcome::Duplicate => {
                tracing::debug!("telegram update {id} already handled; skipping");
                Ok(())
            }
            _ => Ok(()),
        },
        None => {
            tracing::debug!("telegram update {id} is not a message for the agent");
            Ok(())
        }
    }
}

/// `getMe` (retried while transient: the network may not be up yet), then `setMyCommands` in
/// the background (the command menu must not delay the first poll). Who the bot is, for the
/// reading of the updates; `None` on shutdown.
pub(super) async fn start(
    chan: &Arc<TelegramChannel>,
    shutdown: &mut watch::Receiver<bool>,
) -> Result<Option<BotIdentity>, ChannelError> {
    let mut backoff = Backoff::new();
    let me = loop {
        match chan.get_me().await {
            Ok(me) => {
                tracing::info!(target: "ethan_channels::telegram", "connected as @{} (id {})", me.username, me.id);
                break me;
            }
            Err(e @ ChannelError::Unauthorized { .. }) => return Err(e),
            Err(e) => {
                let d = backoff.step();
                tracing::warn!("telegram getMe failed: {e}; retrying in {}s", d.as_secs());
                if !pause(d, shutdown).await {
                    return Ok(None);
                }
            }
        }
    };
    let menu = Arc::clone(chan);
    tokio::spawn(async move {
        if let Err(e) = menu.bot().set_my_commands(bot_commands()).await {
            tracing::warn!("telegram setMyCommands failed (the command menu may be stale): {e}");
        }
    });
    Ok(Some(me))
}

/// Switching back from webhook mode: a webhook still set would make `getUpdates` fail (409).
async fn remove_leftover_webhook(chan: &TelegramChannel) {
    let info = calls::call::<_, calls::WebhookInfo>(chan.bot(), GetWebhookInfo::new());
    match info.await {
        Ok(info) if !info.url.is_empty() => {
            tracing::info!("telegram: removing the webhook left from webhook mode (deleteWebhook)");
            if let Err(e) = chan.bot().delete_webhook().await {
                tracing::warn!("telegram deleteWebhook failed: {e}");
            }
        }
        Ok(_) => {}
        Err(e) => tracing::debug!("telegram getWebhookInfo failed: {e}"),
    }
}

/// Read and hand one `getUpdates` batch to the daemon in order, moving `offset` past each
/// update handed (or skipped); `false` when one could not be recorded (the offset stays before
/// it, so it and those after it come again), or when the batch ends with updates without a
/// readable `update_id` (nothing moves the offset past them, so they come again at once: the
/// caller pauses before asking again, as after any failure).
async fn take_batch(
    chan: &Arc<TelegramChannel>,
    me: &BotIdentity,
    sink: &Arc<dyn InboundSink>,
    updates: Vec<serde_json::Value>,
    offset: &mut Offset,
) -> bool {
    let mut unread_at_end = false;
    for value in updates {
        let update = match Update::read(value) {
            Ok(u) => u,
            Err(e) => {
                // No id: nothing to acknowledge it by; the next one's id does.
                tracing::warn!("telegram getUpdates returned {e}; skipped");
                unread_at_end = true;
                continue;
            }
        };
        unread_at_end = false;
        let id = update.id as i32;
        if let Err(e) = dispatch(chan, me, sink, &update).await {
            tracing::error!("could not record telegram update {id}: {e}");
            return false;
        }
        offset.now = id.saturating_add(1);
    }
    !unread_at_end
}

/// Long polling until shutdown.
pub(super) async fn run(
    chan: Arc<TelegramChannel>,
    sink: Arc<dyn InboundSink>,
    state: Arc<dyn StateStore>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), ChannelError> {
    // All before the first poll, and independent: one round trip instead of three.
    let (started, (), stored) = tokio::join!(
        start(&chan, &mut shutdown),
        remove_leftover_webhook(&chan),
        state.get(OFFSET_KEY)
    );
    let Some(me) = started? else {
        return Ok(());
    };
    let mut backoff = Backoff::new();

    let stored: i32 = match stored? {
        Some(v) => v.trim().parse().unwrap_or_else(|_| {
            tracing::warn!("ignoring unreadable stored telegram offset {v:?}");
            0
        }),
        None => 0,
    };
    let mut offset = Offset {
        now: stored,
        stored,
        stored_at: None,
    };
    let mut conflict_logged = false;
    loop {
        if *shutdown.borrow() {
            offset.save(&*state, true).await;
            return Ok(());
        }
        let req = GetUpdates::new()
            .offset(offset.now)
            .timeout(chan.config.poll_timeout_secs)
            .allowed_updates(vec![
                AllowedUpdate::Message,
                AllowedUpdate::EditedMessage,
                AllowedUpdate::CallbackQuery,
            ]);
        // The updates as JSON values, each read on its own (one that does not read is skipped).
        let req = calls::call::<_, Vec<serde_json::Value>>(chan.bot(), req);
        let res = tokio::select! {
            r = req.send() => r,
            _ = shutdown.changed() => {
                offset.save(&*state, true).await;
                return Ok(());
            }
        };
        match res {
            Ok(updates) => {
                backoff.reset();
                if conflict_logged {
                    tracing::info!("telegram getUpdates works again");
                    conflict_logged = false;
                }
                chan.set_up(true);
                if !take_batch(&chan, &me, &sink, updates, &mut offset).await {
                    let d = backoff.step();
                    if !pause(d, &mut shutdown).await {
                        return Ok(());
                    }
                }
                // The updates are recorded; polling goes on from memory (see the module doc).
                offset.save(&*state, false).await;
            }
            Err(RequestError::RetryAfter(s)) => {
                tracing::warn!("telegram asks to wait {}s (429)", s.seconds());
                if !pause(s.duration(), &mut shutdown).await {
                    return Ok(());
                }
            }
            Err(RequestError::Api(ApiError::InvalidToken)) => {
                return Err(ChannelError::Unauthorized {
                    platform: PLATFORM,
                    message: "getUpdates: the bot token was rejected".into(),
                });
            }
            Err(e) => {
                chan.set_up(false);
                let d = backoff.step();
                let conflict = matches!(
                    e,
                    RequestError::Api(ApiError::TerminatedByOtherGetUpdates)
                        | RequestError::Api(ApiError::CantGetUpdates)
                );
                if conflict {
                    if !conflict_logged {
                        tracing::warn!(
                            "telegram 409 Conflict: {e}. Another process is polling this bot, or a webhook \
                             is set (deleteWebhook or use channels.telegram.mode: webhook). Retrying with a growing delay."
                        );
                        conflict_logged = true;
                    } else {
                        tracing::debug!("telegram conflict persists; next try in {}s", d.as_secs());
                    }
                } else {
                    tracing::warn!(
                        "telegram getUpdates failed: {}; retrying in {}s",
                        with_causes(&e),
                        d.as_secs()
                    );
                }
                if !pause(d, &mut shutdown).await {
                    return Ok(());
                }
            }
        }
    }
}
