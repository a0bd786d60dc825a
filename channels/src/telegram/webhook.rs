//! Telegram webhook mode (Bot API `setWebhook`): Telegram posts each `Update` as JSON to the
//! public `webhook_url`, which the user's reverse proxy forwards to the gateway's
//! `POST /telegram/webhook`. Every post must carry `X-Telegram-Bot-Api-Secret-Token` equal to
//! the configured secret (compared in constant time); others are refused with 401 and logged.
//! The update is recorded before the 200 answer, so a crash loses nothing; a body that is not an
//! update is answered 200 (and logged) so Telegram does not retry it forever.
//!
//! The route hands each update to the run loop ([`Posts`]), which asked `getMe` once at its
//! start and so reads the updates knowing the bot (mentions); a post it does not take within
//! [`POST_WAIT`] (the run loop is not there yet, or still waiting for the network) is answered
//! 503, and Telegram posts it again.

use super::wire::Update;
use super::{poll, BotIdentity, TelegramChannel};
use crate::channel::{ChannelError, InboundSink};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use std::sync::Arc;
use std::time::Duration;
use subtle::ConstantTimeEq;
use teloxide::payloads::SetWebhookSetters;
use teloxide::prelude::Requester;
use teloxide::types::AllowedUpdate;
use tokio::sync::{mpsc, oneshot, watch};

/// The header Telegram sends with the secret (Bot API `setWebhook.secret_token`).
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

/// The longest a post waits for the run loop to take it and record its update.
pub const POST_WAIT: Duration = Duration::from_secs(20);

/// Posts waiting at most this many for the run loop: more wait to be queued.
const QUEUED_POSTS: usize = 64;

/// One post's update, and where the answer to Telegram goes.
pub(super) struct Post {
    update: Update,
    answer: oneshot::Sender<StatusCode>,
}

/// The posts of the route, from it to the run loop: made with the adapter, read by the run
/// loop of webhook mode (one at a time: a second waits for the first to end).
pub(super) struct Posts {
    queue: mpsc::Sender<Post>,
    taken: tokio::sync::Mutex<mpsc::Receiver<Post>>,
}

impl Default for Posts {
    fn default() -> Self {
        let (queue, taken) = mpsc::channel(QUEUED_POSTS);
        Self {
            queue,
            taken: tokio::sync::Mutex::new(taken),
        }
    }
}

/// The route `POST /telegram/webhook` for the gateway; the updates go to the sink the run loop
/// ([`Channel::run`](crate::channel::Channel::run)) was given.
pub fn router(chan: Arc<TelegramChannel>) -> axum::Router {
    axum::Router::new()
        .route("/telegram/webhook", post(handle))
        .with_state(chan)
}

async fn handle(
    State(chan): State<Arc<TelegramChannel>>,
    headers: HeaderMap,
    body: Bytes,
) -> StatusCode {
    let expected = chan.config.webhook_secret.as_bytes();
    let given = headers
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if expected.is_empty() || !bool::from(given.ct_eq(expected)) {
        tracing::warn!("refused a telegram webhook post with a wrong or missing secret token");
        return StatusCode::UNAUTHORIZED;
    }
    let update = match Update::from_slice(&body) {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!("telegram webhook body is not an update ({e}); ignored");
            return StatusCode::OK;
        }
    };
    let id = update.id;
    let (answer, answered) = oneshot::channel();
    let handed = async {
        chan.posts.queue.send(Post { update, answer }).await.ok()?;
        answered.await.ok()
    };
    match tokio::time::timeout(POST_WAIT, handed).await {
        Ok(Some(status)) => status,
        _ => {
            tracing::warn!(
                "telegram update {id} was not recorded within {} s (is the channel running?); \
                 answered 503, Telegram posts it again",
                POST_WAIT.as_secs()
            );
            StatusCode::SERVICE_UNAVAILABLE
        }
    }
}

/// One post's update to the sink: 200 once recorded (or not for the agent), 500 when it could
/// not be (Telegram retries non-2xx answers).
async fn take(
    chan: &Arc<TelegramChannel>,
    me: &BotIdentity,
    sink: &Arc<dyn InboundSink>,
    update: &Update,
) -> StatusCode {
    match poll::dispatch(chan, me, sink, update).await {
        Ok(()) => StatusCode::OK,
        Err(e) => {
            tracing::error!("could not record telegram update {}: {e}", update.id);
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

/// Webhook mode's run loop: `getMe`, `setWebhook` with the secret, then the posts of the
/// route until shutdown, each on a task of its own.
pub(super) async fn run(
    chan: Arc<TelegramChannel>,
    sink: Arc<dyn InboundSink>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), ChannelError> {
    let mut posts = tokio::select! {
        posts = chan.posts.taken.lock() => posts,
        _ = shutdown.changed() => return Ok(()),
    };
    let Some(me) = poll::start(&chan, &mut shutdown).await? else {
        return Ok(());
    };
    set_webhook(&chan).await?;
    let me = Arc::new(me);
    loop {
        let post = tokio::select! {
            post = posts.recv() => post,
            _ = shutdown.changed() => return Ok(()),
        };
        // The adapter holds the queue's sender: it never ends while this runs.
        let Some(Post { update, answer }) = post else {
            return Ok(());
        };
        if answer.is_closed() {
            // Answered 503 already: Telegram posts it again.
            continue;
        }
        let (chan, me, sink) = (Arc::clone(&chan), Arc::clone(&me), Arc::clone(&sink));
        tokio::spawn(async move {
            let _ = answer.send(take(&chan, &me, &sink, &update).await);
        });
    }
}

/// `setWebhook` with the secret; a failure is logged (a webhook set before may still post).
///
/// # Errors
/// `webhook_url` is not a URL.
async fn set_webhook(chan: &TelegramChannel) -> Result<(), ChannelError> {
    let url = chan.config.webhook_url.clone().unwrap_or_default();
    let parsed = reqwest::Url::parse(&url).map_err(|e| ChannelError::Transport {
        platform: super::PLATFORM,
        message: format!("channels.telegram.webhook_url {url:?} is not a URL: {e}"),
    })?;
    let req = chan
        .bot()
        .set_webhook(parsed)
        .secret_token(chan.config.webhook_secret.clone())
        .allowed_updates(vec![
            AllowedUpdate::Message,
            AllowedUpdate::EditedMessage,
            AllowedUpdate::CallbackQuery,
        ]);
    match req.await {
        Ok(_) => {
            tracing::info!("telegram webhook set to {url}");
            chan.set_up(true);
        }
        Err(e) => {
            tracing::error!(
                "telegram setWebhook failed: {}",
                super::errors::map_error(e)
            );
        }
    }
    Ok(())
}
