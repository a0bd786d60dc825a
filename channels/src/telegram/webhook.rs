//! Telegram webhook mode (Bot API `setWebhook`): Telegram posts each `Update` as JSON to the
//! public `webhook_url`, which the user's reverse proxy forwards to the gateway's
//! `POST /telegram/webhook`. Every post must carry `X-Telegram-Bot-Api-Secret-Token` equal to
//! the configured secret (compared in constant time); others are refused with 401 and logged.
//! The update is recorded before the 200 answer, so a crash loses nothing; a body that is not an
//! update is answered 200 (and logged) so Telegram does not retry it forever.

use super::{poll, TelegramChannel};
use crate::channel::{ChannelError, InboundSink};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use std::sync::Arc;
use subtle::ConstantTimeEq;
use teloxide::payloads::SetWebhookSetters;
use teloxide::prelude::Requester;
use teloxide::types::AllowedUpdate;
use tokio::sync::watch;

/// The header Telegram sends with the secret (Bot API `setWebhook.secret_token`).
pub const SECRET_HEADER: &str = "x-telegram-bot-api-secret-token";

#[derive(Clone)]
struct Hook {
    chan: Arc<TelegramChannel>,
    sink: Arc<dyn InboundSink>,
}

/// The route `POST /telegram/webhook` for the gateway.
pub fn router(chan: Arc<TelegramChannel>, sink: Arc<dyn InboundSink>) -> axum::Router {
    axum::Router::new()
        .route("/telegram/webhook", post(handle))
        .with_state(Hook { chan, sink })
}

async fn handle(State(h): State<Hook>, headers: HeaderMap, body: Bytes) -> StatusCode {
    let expected = h.chan.config.webhook_secret.as_bytes();
    let given = headers
        .get(SECRET_HEADER)
        .map(|v| v.as_bytes())
        .unwrap_or_default();
    if expected.is_empty() || !bool::from(given.ct_eq(expected)) {
        tracing::warn!("refused a telegram webhook post with a wrong or missing secret token");
        return StatusCode::UNAUTHORIZED;
    }
    let update: teloxide::types::Update = match serde_json::from_slice(&body) {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!("telegram webhook body is not an update ({e}); ignored");
            return StatusCode::OK;
        }
    };
    if h.chan.identity().is_none() {
        // Mention detection needs getMe; the run loop normally did it already.
        if let Err(e) = h.chan.get_me().await {
            tracing::error!("telegram getMe failed: {e}");
            return StatusCode::SERVICE_UNAVAILABLE;
        }
    }
    match poll::dispatch(&h.chan, &h.sink, &update).await {
        Ok(()) => StatusCode::OK,
        Err(e) => {
            // Not recorded: Telegram retries non-2xx answers.
            tracing::error!("could not record telegram update {}: {e}", update.id.0);
            StatusCode::INTERNAL_SERVER_ERROR
        }
    }
}

/// Webhook mode's run loop: `getMe`, `setWebhook` with the secret, then wait for shutdown.
pub(super) async fn run(
    chan: Arc<TelegramChannel>,
    mut shutdown: watch::Receiver<bool>,
) -> Result<(), ChannelError> {
    if !poll::start(&chan, &mut shutdown).await? {
        return Ok(());
    }
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
    let _ = shutdown.changed().await;
    Ok(())
}
