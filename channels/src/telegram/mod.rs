//! Telegram Bot API adapter (teloxide requests, Ethan's own narrow update types).
//!
//! Split by concern: [`wire`] reads the Bot API objects Ethan handles (only the fields it uses);
//! [`calls`] sends teloxide's requests with narrow answer types; [`normalize`] turns an update
//! into an [`InboundEvent`]; [`poll`]
//! runs `getUpdates` long polling with a durable offset; [`send`] delivers replies (Markdown →
//! HTML, split at 4096 UTF-16 units, plain-text fallback, `retry_after`); [`render`] and
//! [`chunk`] are the pure text functions behind it; [`stream`] shows a reply while it is written
//! (`sendMessageDraft` in private chats, `editMessageText` in groups).
//!
//! The API base URL is configurable (`channels.telegram.api_url`, without `/bot<token>`), which is
//! how tests point the adapter at a loopback fake and how users reach a self-hosted Bot API server.

pub mod approval;
pub mod calls;
pub mod chunk;
pub mod errors;
pub mod normalize;
pub mod part;
pub mod poll;
pub mod render;
pub mod send;
pub mod stream;
pub mod webhook;
pub mod wire;

use crate::channel::{Channel, ChannelError, InboundSink, StateStore};
use crate::model::{ChannelKind, InboundEvent, OutboundMessage, SentRef};
use async_trait::async_trait;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use teloxide::Bot;

pub(crate) const PLATFORM: &str = "telegram";

/// Settings the adapter needs, taken from `channels.telegram` in the daemon config.
#[derive(Clone)]
pub struct TelegramConfig {
    /// Bot token from @BotFather (`123456:ABC…`). Never logged.
    pub token: String,
    /// Base URL without `/bot<token>`, e.g. `https://api.telegram.org`.
    pub api_url: String,
    /// `getUpdates` long-poll timeout in seconds (the HTTP client waits this + 15 s).
    pub poll_timeout_secs: u32,
    /// Webhook mode: the public URL Telegram posts to (`setWebhook`); `None` = long polling.
    pub webhook_url: Option<String>,
    /// `X-Telegram-Bot-Api-Secret-Token` sent with `setWebhook` and required on every post.
    pub webhook_secret: String,
    /// How replies are shown while written (`channels.telegram.streaming`): drafts in private
    /// chats and edits in groups by default.
    pub streaming: crate::stream::StreamMode,
    /// The least time between two draft updates or edits (`stream_interval_ms`); never under
    /// 1 s in groups.
    pub stream_interval: Duration,
}

impl std::fmt::Debug for TelegramConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramConfig")
            .field("token", &"<redacted>")
            .field("api_url", &self.api_url)
            .field("poll_timeout_secs", &self.poll_timeout_secs)
            .field("webhook_url", &self.webhook_url)
            .field("webhook_secret", &"<redacted>")
            .field("streaming", &self.streaming)
            .field("stream_interval", &self.stream_interval)
            .finish()
    }
}

/// The bot's own identity, learned from `getMe` when taking updates in starts ([`poll`],
/// [`webhook`]) and handed to what reads the updates (mention detection).
#[derive(Debug, Clone)]
pub struct BotIdentity {
    pub id: u64,
    pub username: String,
}

/// The Telegram channel. Cheap to share behind an `Arc`.
pub struct TelegramChannel {
    bot: Bot,
    config: TelegramConfig,
    /// Webhook mode: the posts of the route, read by the run loop (which knows the bot).
    posts: webhook::Posts,
    approvals: Mutex<HashMap<String, approval::SentApproval>>,
    up: std::sync::atomic::AtomicBool,
    /// The Bot API server refused `sendMessageDraft`: stream with edits from now on.
    drafts_refused: Arc<std::sync::atomic::AtomicBool>,
}

impl TelegramChannel {
    /// Build the adapter. Fails only when `api_url` is not a URL.
    pub fn new(config: TelegramConfig) -> Result<Self, ChannelError> {
        let url = reqwest::Url::parse(&config.api_url).map_err(|e| ChannelError::Transport {
            platform: PLATFORM,
            message: format!(
                "channels.telegram.api_url {:?} is not a URL: {e}",
                config.api_url
            ),
        })?;
        let client = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(
                u64::from(config.poll_timeout_secs) + 15,
            ))
            .build()
            .map_err(|e| ChannelError::Transport {
                platform: PLATFORM,
                message: format!("cannot build the HTTP client: {e}"),
            })?;
        let bot = Bot::with_client(config.token.clone(), client).set_api_url(url);
        Ok(Self {
            bot,
            config,
            posts: webhook::Posts::default(),
            approvals: Mutex::new(HashMap::new()),
            up: std::sync::atomic::AtomicBool::new(false),
            drafts_refused: Arc::new(std::sync::atomic::AtomicBool::new(false)),
        })
    }

    pub(crate) fn bot(&self) -> &Bot {
        &self.bot
    }

    pub(crate) fn set_up(&self, up: bool) {
        self.up.store(up, std::sync::atomic::Ordering::Relaxed);
    }

    /// Approval messages sent and not yet resolved, by request id.
    fn approvals(&self) -> MutexGuard<'_, HashMap<String, approval::SentApproval>> {
        self.approvals.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `getMe`: who the bot is.
    pub(crate) async fn get_me(&self) -> Result<BotIdentity, ChannelError> {
        let me: calls::Me = calls::call(&self.bot, teloxide::payloads::GetMe::new())
            .await
            .map_err(errors::map_error)?;
        Ok(BotIdentity {
            id: me.id,
            username: me.username.unwrap_or_default(),
        })
    }
}

#[async_trait]
impl Channel for TelegramChannel {
    fn kind(&self) -> ChannelKind {
        ChannelKind::Telegram
    }

    async fn probe(&self) -> Result<String, ChannelError> {
        let me = self.get_me().await?;
        Ok(format!("@{} (id {})", me.username, me.id))
    }

    async fn run(
        self: Arc<Self>,
        sink: Arc<dyn InboundSink>,
        state: Arc<dyn StateStore>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), ChannelError> {
        if self.config.webhook_url.is_some() {
            webhook::run(self, sink, shutdown).await
        } else {
            poll::run(self, sink, state, shutdown).await
        }
    }

    fn is_up(&self) -> bool {
        self.up.load(std::sync::atomic::Ordering::Relaxed)
    }

    async fn send(&self, msg: &OutboundMessage) -> Result<SentRef, ChannelError> {
        send::send(self, msg, 0).await
    }

    async fn send_from(
        &self,
        msg: &OutboundMessage,
        first_part: usize,
    ) -> Result<SentRef, ChannelError> {
        send::send(self, msg, first_part).await
    }

    /// A user's private chat with the bot has the user's id as its chat id (user ids are
    /// positive; groups are negative).
    fn direct_chat(&self, user_id: &str) -> Option<crate::model::ChatRef> {
        let id = user_id.trim().parse::<i64>().ok().filter(|id| *id > 0)?;
        Some(crate::model::ChatRef {
            id: id.to_string(),
            kind: crate::model::ChatKind::Direct,
            thread: None,
        })
    }

    fn open_draft(
        &self,
        target: crate::stream::DraftTarget,
        log: Arc<dyn crate::stream::DraftLog>,
    ) -> Option<Box<dyn crate::stream::Draft>> {
        stream::open(self, target, log)
    }

    /// `getFile{file_id}` → `file_path`; the bytes are at `{api_url}/file/bot<token>/<file_path>`
    /// (valid for at least an hour).
    async fn media_source(
        &self,
        _event: &InboundEvent,
        _kind: crate::model::AttachmentKind,
        file: &crate::model::FileRef,
    ) -> Result<crate::model::MediaSource, ChannelError> {
        let payload = teloxide::payloads::GetFile::new(teloxide::types::FileId(file.id.clone()));
        let f: calls::FileInfo = calls::call(&self.bot, payload)
            .await
            .map_err(errors::map_error)?;
        let path = f.file_path.trim_start_matches('/');
        if path.is_empty() || path.split('/').any(|seg| seg == "..") {
            return Err(ChannelError::Api {
                platform: PLATFORM,
                code: 400,
                description: "getFile returned no usable file_path".into(),
            });
        }
        Ok(crate::model::MediaSource {
            url: format!(
                "{}/file/bot{}/{path}",
                self.config.api_url.trim_end_matches('/'),
                self.config.token
            ),
            bearer: None,
            size: f.file_size.filter(|s| *s > 0),
        })
    }

    /// The Bot API serves files up to 20 MB to bots (`getFile`).
    fn max_download_bytes(&self) -> Option<u64> {
        Some(MAX_DOWNLOAD_BYTES)
    }
}

/// The largest file the Bot API lets a bot download (`getFile`: "up to 20 MB").
pub const MAX_DOWNLOAD_BYTES: u64 = 20 * 1024 * 1024;
