//! Lark/Feishu adapter: events over the long connection (default) or a webhook, replies as
//! cards, approvals by card buttons.
//!
//! There is no well-kept Rust SDK for the long connection, so the protocol is implemented here
//! from the official SDKs' behaviour (larksuite/oapi-sdk-go `ws/`, oapi-sdk-python
//! `lark_oapi/ws/`, node-sdk `ws-client/`) and the open.feishu.cn docs; the facts are collected
//! in `../shared/reference/PROTOCOLS.md`. Split by concern:
//!
//! - [`frame`]: the pbbp2 protobuf frame codec (ping, ACK);
//! - [`fragments`]: reassembly of data frames split into fragments (bounded, 5 s TTL);
//! - [`ws`]: the long connection (endpoint, dial, ping, fragments, ACK within 3 s, reconnect);
//! - [`webhook`]: the `POST /lark/events` route (url_verification, AES-256-CBC decryption,
//!   signature and token checks);
//! - [`inbound`]: what both transports do with an event (normalise, stale rule, publish,
//!   approval presses);
//! - [`api`]: the Open API client (`tenant_access_token`, send/reply, bot info), from
//!   `ethan-lark-api` like [`codes`] and [`user_api`] (calls as a Lark user);
//! - [`normalize`]: `im.message.receive_v1` → [`InboundEvent`](crate::InboundEvent);
//! - [`render`]: reply cards (JSON 2.0), post/text fallbacks, approval cards;
//! - [`send`]: delivering an [`OutboundMessage`] (reply API, `uuid`, pacing, fallbacks);
//! - [`stream`]: streamed replies as CardKit streaming cards (the [`crate::Draft`] of Lark);
//! - [`codes`]: error codes and their meanings.
//!
//! The base URL is configurable (`channels.lark.base_url`, else `domain: feishu | lark`), which
//! is how tests point the adapter at a loopback fake and how users reach Lark international.

pub mod fragments;
pub mod frame;
pub mod inbound;
pub mod normalize;
pub mod render;
pub mod send;
pub mod stream;
pub mod webhook;
pub mod ws;

/// The Open API client, its error codes and calls as a user live in `ethan-lark-api` (shared with
/// the Lark tools); they keep their paths here.
pub use ethan_lark_api::{api, codes, user_api};

/// The websocket client crate the long connection uses, re-exported so that test fakes speak
/// the same websocket implementation and version.
pub use tokio_tungstenite;

use crate::channel::{Channel, ChannelError, InboundSink, StateStore};
use crate::model::{ApprovalRequest, ChannelKind, OutboundMessage, SentRef};
use api::{BotInfo, LarkApi, Pacer};
use async_trait::async_trait;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;

pub(crate) const PLATFORM: &str = "lark";

/// An Open API failure as the adapter reports it.
impl From<api::ApiError> for ChannelError {
    fn from(e: api::ApiError) -> Self {
        match e {
            api::ApiError::Api { code, msg, .. } => ChannelError::Api {
                platform: PLATFORM,
                code,
                description: format!("{msg} ({})", codes::meaning(code)),
            },
            api::ApiError::Auth { code, msg } => ChannelError::Unauthorized {
                platform: PLATFORM,
                message: format!("code {code}: {msg} ({})", codes::meaning(code)),
            },
            api::ApiError::Transport { message, .. } => ChannelError::Transport {
                platform: PLATFORM,
                message,
            },
        }
    }
}

/// Feishu (China) Open Platform base URL (`domain: feishu`).
pub const FEISHU_BASE_URL: &str = "https://open.feishu.cn";
/// Lark (international) Open Platform base URL (`domain: lark`).
pub const LARK_BASE_URL: &str = "https://open.larksuite.com";

/// State-store key: Unix seconds at which `ethan run` started this channel.
pub const STARTED_AT_KEY: &str = "lark.started_at";
/// State-store key: Unix seconds of the last event received from Lark (any type).
pub const LAST_EVENT_AT_KEY: &str = "lark.last_event_at";

/// State-store key recording that a message was published once (see [`inbound`]).
pub fn seen_key(message_id: &str) -> String {
    format!("lark.seen:{message_id}")
}

/// The base URL for `domain` unless `base_url` overrides it.
pub fn resolve_base_url(domain_is_lark: bool, base_url: &str) -> String {
    let b = base_url.trim();
    if !b.is_empty() {
        b.trim_end_matches('/').to_string()
    } else if domain_is_lark {
        LARK_BASE_URL.to_string()
    } else {
        FEISHU_BASE_URL.to_string()
    }
}

/// How events reach the daemon.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LarkMode {
    /// The long connection (`POST /callback/ws/endpoint`, then a websocket); no public URL
    /// needed.
    #[default]
    Websocket,
    /// Lark posts events to `POST /lark/events` on the gateway.
    Webhook,
}

/// Settings the adapter needs, taken from `channels.lark` in the daemon config.
#[derive(Clone, Default)]
pub struct LarkConfig {
    /// `cli_…`.
    pub app_id: String,
    /// Never logged.
    pub app_secret: String,
    /// Resolved base URL ([`resolve_base_url`]), e.g. `https://open.feishu.cn`.
    pub base_url: String,
    pub mode: LarkMode,
    /// Webhook Encrypt Key (empty = plaintext bodies). Never logged.
    pub encrypt_key: String,
    /// Webhook Verification Token (empty = not checked). Never logged.
    pub verification_token: String,
    /// A message older than this when it first arrives is skipped (0 = never).
    pub stale_after_secs: u64,
    /// How replies are shown while written (`channels.lark.streaming`): CardKit streaming
    /// cards unless `Off`.
    pub streaming: crate::stream::StreamMode,
    /// The least time between two card updates (`stream_interval_ms`); CardKit allows at most
    /// 10 operations per second per card.
    pub stream_interval: std::time::Duration,
}

impl std::fmt::Debug for LarkConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redact = |s: &str| {
            if s.is_empty() {
                "<empty>"
            } else {
                "<redacted>"
            }
        };
        f.debug_struct("LarkConfig")
            .field("app_id", &self.app_id)
            .field("app_secret", &redact(&self.app_secret))
            .field("base_url", &self.base_url)
            .field("mode", &self.mode)
            .field("encrypt_key", &redact(&self.encrypt_key))
            .field("verification_token", &redact(&self.verification_token))
            .field("stale_after_secs", &self.stale_after_secs)
            .field("streaming", &self.streaming)
            .field("stream_interval", &self.stream_interval)
            .finish()
    }
}

/// A small bounded memory of recent items (oldest forgotten first).
pub(crate) struct Recent<T> {
    items: VecDeque<T>,
    cap: usize,
}

impl<T> Recent<T> {
    fn new(cap: usize) -> Self {
        Self {
            items: VecDeque::new(),
            cap,
        }
    }
    fn push(&mut self, item: T) {
        if self.items.len() >= self.cap {
            self.items.pop_front();
        }
        self.items.push_back(item);
    }
}

/// What sending needs, shared by the channel and its streaming drafts (which outlive a borrow
/// of the channel): the API client, the per-chat pacing, the ids of messages sent, and the
/// CardKit refusal memory.
pub(crate) struct Core {
    pub(crate) api: LarkApi,
    pub(crate) pacer: Pacer,
    /// Ids of messages this process sent (to recognise replies to the bot without an API call).
    sent: Mutex<Recent<String>>,
    pub(crate) cardkit: stream::CardKitGate,
}

impl Core {
    pub(crate) fn remember_sent(&self, message_id: &str) {
        if !message_id.is_empty() {
            self.sent
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(message_id.to_string());
        }
    }
}

/// The Lark channel. Cheap to share behind an `Arc`.
pub struct LarkChannel {
    config: LarkConfig,
    core: Arc<Core>,
    bot: tokio::sync::OnceCell<BotInfo>,
    /// Approval requests sent as cards, with the card's message id, to show the outcome.
    approvals: Mutex<Recent<(ApprovalRequest, String)>>,
    /// Whether the long connection is up (always true in webhook mode).
    connected: std::sync::atomic::AtomicBool,
}

impl LarkChannel {
    /// Build the adapter. Fails when the base URL is not an http(s) URL or credentials are
    /// missing.
    pub fn new(config: LarkConfig) -> Result<Self, ChannelError> {
        let bad = |message: String| ChannelError::Transport {
            platform: PLATFORM,
            message,
        };
        match url::Url::parse(&config.base_url) {
            Ok(u) if u.scheme() == "http" || u.scheme() == "https" => {}
            _ => {
                return Err(bad(format!(
                    "channels.lark.base_url {:?} is not an http(s) URL",
                    config.base_url
                )))
            }
        }
        if config.app_id.trim().is_empty() || config.app_secret.trim().is_empty() {
            return Err(ChannelError::Unauthorized {
                platform: PLATFORM,
                message: "channels.lark.app_id and app_secret are both needed".into(),
            });
        }
        let api = LarkApi::new(&config.base_url, &config.app_id, &config.app_secret)
            .map_err(ChannelError::from)?;
        Ok(Self {
            config,
            core: Arc::new(Core {
                api,
                pacer: Pacer::default(),
                sent: Mutex::new(Recent::new(4096)),
                cardkit: stream::CardKitGate::default(),
            }),
            bot: tokio::sync::OnceCell::new(),
            approvals: Mutex::new(Recent::new(256)),
            connected: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// The settings this channel was built with.
    pub fn config(&self) -> &LarkConfig {
        &self.config
    }

    /// The Open API client.
    pub fn api(&self) -> &LarkApi {
        &self.core.api
    }

    /// The bot identity, once learned (`/open-apis/bot/v3/info`).
    pub fn bot_info(&self) -> Option<&BotInfo> {
        self.bot.get()
    }

    /// Learn (once) and return the bot identity.
    pub async fn fetch_bot_info(&self) -> Result<BotInfo, ChannelError> {
        self.bot
            .get_or_try_init(|| async {
                self.core.api.bot_info().await.map_err(ChannelError::from)
            })
            .await
            .cloned()
    }

    pub(crate) fn set_connected(&self, up: bool) {
        self.connected
            .store(up, std::sync::atomic::Ordering::Relaxed);
    }

    pub(crate) fn sent_by_us(&self, message_id: &str) -> bool {
        self.core
            .sent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .items
            .iter()
            .any(|m| m == message_id)
    }

    pub(crate) fn remember_approval(&self, req: &ApprovalRequest, message_id: &str) {
        self.approvals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((req.clone(), message_id.to_string()));
    }

    /// The approval request sent for `request_id` and the message id of its card.
    pub(crate) fn approval(&self, request_id: &str) -> Option<(ApprovalRequest, String)> {
        self.approvals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .items
            .iter()
            .rev()
            .find(|(r, _)| r.request_id == request_id)
            .cloned()
    }

    /// Learn the bot identity, retrying transient failures with a growing delay (1 s doubling
    /// to 60 s). `Ok(None)` when shutdown fired first; rejected credentials are an error.
    pub(crate) async fn learn_bot(
        &self,
        shutdown: &mut watch::Receiver<bool>,
    ) -> Result<Option<BotInfo>, ChannelError> {
        let mut delay = Duration::from_secs(1);
        loop {
            match self.fetch_bot_info().await {
                Ok(b) => {
                    tracing::info!(
                        target: "ethan_channels::lark",
                        "lark bot {:?} (open_id {})",
                        b.app_name,
                        b.open_id
                    );
                    return Ok(Some(b));
                }
                Err(e @ ChannelError::Unauthorized { .. }) => return Err(e),
                Err(e) => {
                    tracing::warn!(
                        target: "ethan_channels::lark",
                        "lark bot info failed: {e}; retrying in {}s",
                        delay.as_secs()
                    );
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = shutdown.changed() => return Ok(None),
                    }
                    delay = (delay * 2).min(Duration::from_secs(60));
                }
            }
        }
    }

    /// The axum router serving `POST /lark/events` (webhook mode). Events go to `sink`; the
    /// router shares one ordered processing queue.
    pub fn webhook_router(
        self: &Arc<Self>,
        sink: Arc<dyn InboundSink>,
        state: Arc<dyn StateStore>,
    ) -> axum::Router {
        let inbound = inbound::Inbound::start(Arc::clone(self), sink, state);
        webhook::router(webhook::WebhookSecrets::from_config(&self.config), inbound)
    }
}

/// Unix seconds now.
pub(crate) fn unix_now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[async_trait]
impl Channel for LarkChannel {
    fn kind(&self) -> ChannelKind {
        ChannelKind::Lark
    }

    /// Fetches a `tenant_access_token` and the bot info.
    async fn probe(&self) -> Result<String, ChannelError> {
        let b = self.fetch_bot_info().await?;
        Ok(format!("{} (open_id {})", b.app_name, b.open_id))
    }

    async fn run(
        self: Arc<Self>,
        sink: Arc<dyn InboundSink>,
        state: Arc<dyn StateStore>,
        mut shutdown: watch::Receiver<bool>,
    ) -> Result<(), ChannelError> {
        if let Err(e) = state.set(STARTED_AT_KEY, &unix_now().to_string()).await {
            tracing::warn!(target: "ethan_channels::lark", "cannot record the start time: {e}");
        }
        match self.config.mode {
            LarkMode::Websocket => ws::run(self, sink, state, shutdown).await,
            LarkMode::Webhook => {
                // Events arrive through the gateway route; only the bot identity is needed here.
                if self.learn_bot(&mut shutdown).await?.is_none() {
                    return Ok(());
                }
                let _ = shutdown.changed().await;
                Ok(())
            }
        }
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

    /// The request `uuid` is derived from the idempotency key (see [`send::uuid_for`]) and Lark
    /// keeps a `uuid` for one hour.
    fn idempotent_send_window(&self) -> Option<Duration> {
        Some(Duration::from_secs(3600))
    }

    /// A CardKit streaming card ([`stream`]) unless `streaming` is `off`, or CardKit was
    /// refused for lack of the `cardkit:card:write` scope less than an hour ago.
    /// A person's direct chat is addressed by their `open_id` (`ou_…`): the send goes out with
    /// `receive_id_type=open_id` ([`send::receive_id_type`]), so no p2p `chat_id` is needed.
    fn direct_chat(&self, user_id: &str) -> Option<crate::model::ChatRef> {
        let id = user_id.trim();
        send::is_open_id(id).then(|| crate::model::ChatRef {
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
        stream::open(&self.config, &self.core, target, log)
    }

    /// `GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}?type=image|file`
    /// with the tenant token (PROTOCOLS §3): `image` for pictures, `file` for files and audio.
    async fn media_source(
        &self,
        event: &crate::model::InboundEvent,
        kind: crate::model::AttachmentKind,
        file: &crate::model::FileRef,
    ) -> Result<crate::model::MediaSource, ChannelError> {
        let message_id = event.message_id.as_deref().unwrap_or(&event.event_id);
        let safe = |s: &str| {
            !s.is_empty()
                && s.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !safe(message_id) || !safe(&file.id) {
            return Err(ChannelError::Api {
                platform: "lark",
                code: 400,
                description: "the message id or file key has unexpected characters".into(),
            });
        }
        let kind = match kind {
            crate::model::AttachmentKind::Image => "image",
            _ => "file",
        };
        let token = self.api().tenant_access_token().await?;
        Ok(crate::model::MediaSource {
            url: format!(
                "{}/open-apis/im/v1/messages/{message_id}/resources/{}?type={kind}",
                self.api().base_url().trim_end_matches('/'),
                file.id
            ),
            bearer: Some(token),
            size: None,
        })
    }

    /// Webhook mode: always; long connection: while a connection is established.
    fn is_up(&self) -> bool {
        self.config.mode == LarkMode::Webhook
            || self.connected.load(std::sync::atomic::Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_resolution() {
        assert_eq!(resolve_base_url(false, ""), FEISHU_BASE_URL);
        assert_eq!(resolve_base_url(true, " "), LARK_BASE_URL);
        assert_eq!(
            resolve_base_url(true, "http://127.0.0.1:9/"),
            "http://127.0.0.1:9"
        );
    }

    #[test]
    fn config_debug_hides_secrets() {
        let c = LarkConfig {
            app_id: "cli_1".into(),
            app_secret: "sekret".into(),
            base_url: FEISHU_BASE_URL.into(),
            encrypt_key: "ek".into(),
            ..LarkConfig::default()
        };
        let s = format!("{c:?}");
        assert!(!s.contains("sekret") && !s.contains("\"ek\""), "{s}");
        assert!(s.contains("cli_1"));
    }

    #[test]
    fn new_refuses_bad_settings() {
        let mut c = LarkConfig {
            app_id: "cli_1".into(),
            app_secret: "s".into(),
            base_url: "ftp://x".into(),
            ..LarkConfig::default()
        };
        assert!(LarkChannel::new(c.clone()).is_err());
        c.base_url = FEISHU_BASE_URL.into();
        assert!(LarkChannel::new(c.clone()).is_ok());
        c.app_secret = String::new();
        assert!(matches!(
            LarkChannel::new(c),
            Err(ChannelError::Unauthorized { .. })
        ));
    }

    #[test]
    fn is_up_follows_the_connection() {
        let mut c = LarkConfig {
            app_id: "cli_1".into(),
            app_secret: "s".into(),
            base_url: FEISHU_BASE_URL.into(),
            ..LarkConfig::default()
        };
        let ch = LarkChannel::new(c.clone()).unwrap();
        assert!(!ch.is_up());
        ch.set_connected(true);
        assert!(ch.is_up());
        c.mode = LarkMode::Webhook;
        assert!(LarkChannel::new(c).unwrap().is_up());
    }

    #[test]
    fn recent_is_bounded() {
        let mut r = Recent::new(2);
        r.push(1);
        r.push(2);
        r.push(3);
        assert_eq!(r.items, [2, 3]);
    }
}
