//! The Lark/Feishu Open API client: `tenant_access_token`, sending and replying, bot info, and
//! the long-connection endpoint.
//!
//! Protocol (PROTOCOLS §4–5; Go SDK `core/tokenmanager.go`, `core/httptransport.go`,
//! `service/im/v1/resource.go`):
//! - `POST /open-apis/auth/v3/tenant_access_token/internal` `{app_id, app_secret}` →
//!   `{code, tenant_access_token, expire}`. The token is cached and refreshed 3 minutes before
//!   `expire`; concurrent callers share one refresh (single flight: the cache's lock is held
//!   while fetching).
//! - Every call carries `Authorization: Bearer <token>`. An answer with a token code
//!   ([`codes::TOKEN_CODES`]: 99991661/99991663/99991664/99991671) — also with HTTP 200 — drops
//!   the cached token, fetches a new one and retries the call once.
//! - HTTP 429 or code 99991400 waits `x-ogw-ratelimit-reset` seconds (1 s when absent, at most
//!   60 s) and retries, up to 3 times.
//! - `POST /open-apis/im/v1/messages?receive_id_type=chat_id` and
//!   `POST /open-apis/im/v1/messages/{message_id}/reply`: `content` is a JSON *string*; `uuid`
//!   (≤ 50 chars) makes a retried send succeed at most once per hour.
//! - `GET /open-apis/bot/v3/info` → `bot.open_id` (for mention detection).
//! - CardKit v1 (PROTOCOLS §5.2, open.feishu.cn "流式更新文本"): `POST /open-apis/cardkit/v1/cards`
//!   creates a card entity, `PUT …/cards/{card_id}/elements/{element_id}/content` replaces an
//!   element's text, `PATCH …/cards/{card_id}/settings` changes its `config`; the last two
//!   carry a strictly increasing `sequence` per card and an optional `uuid`.
//! - `POST /callback/ws/endpoint` `{"AppID","AppSecret"}` (PascalCase, not under `/open-apis`)
//!   → `data.URL` and `data.ClientConfig` (Go `ws/client.go`).
//!
//! Secrets (app_secret, tokens) never appear in errors or logs.

use crate::codes;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::Duration;
use tokio::sync::Mutex;
use tokio::time::Instant;

/// How long before `expire` a cached token is refreshed (Go SDK `expiryDelta`).
pub const TOKEN_EXPIRY_MARGIN: Duration = Duration::from_secs(180);
/// Most rate-limit waits per call.
const RATE_LIMIT_TRIES: u32 = 3;
/// Longest single rate-limit wait.
const MAX_RATE_WAIT: Duration = Duration::from_secs(60);
/// Minimum spacing of messages to one chat: 5 per second (Lark allows 5 QPS per user/group).
pub const CHAT_SPACING: Duration = Duration::from_millis(200);

/// An Open API failure.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    /// The platform answered with a non-zero `code`.
    #[error("Lark {path} answered code {code}: {msg} ({})", codes::meaning(*.code))]
    Api {
        path: String,
        code: i64,
        msg: String,
        http_status: u16,
    },
    /// The app credentials were refused (no token could be obtained).
    #[error("Lark refused the app credentials: code {code}: {msg} ({})", codes::meaning(*.code))]
    Auth { code: i64, msg: String },
    /// The platform could not be reached or answered something unreadable.
    #[error("Lark {path}: {message}")]
    Transport { path: String, message: String },
}

impl ApiError {
    /// The Open API code, when the platform answered one.
    pub fn code(&self) -> Option<i64> {
        match self {
            ApiError::Api { code, .. } | ApiError::Auth { code, .. } => Some(*code),
            ApiError::Transport { .. } => None,
        }
    }
}

/// The bot's identity from `GET /open-apis/bot/v3/info`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct BotInfo {
    pub open_id: String,
    #[serde(default)]
    pub app_name: String,
}

/// The answer of `POST /callback/ws/endpoint`.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The one-time `wss://…` URL (embeds a ticket; fetch a new one for every connection).
    pub url: String,
    pub client_config: Option<ClientConfig>,
}

/// The connection settings the server sends (`ClientConfig`, PascalCase keys, all intervals in
/// seconds) with the endpoint and in a pong's payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientConfig {
    /// Reconnect attempts after a disconnect; negative = unlimited.
    #[serde(rename = "ReconnectCount", default = "default_reconnect_count")]
    pub reconnect_count: i64,
    /// Seconds between reconnect attempts.
    #[serde(rename = "ReconnectInterval", default = "default_interval")]
    pub reconnect_interval: u64,
    /// Upper bound in seconds of the random delay before the first reconnect attempt.
    #[serde(rename = "ReconnectNonce", default = "default_nonce")]
    pub reconnect_nonce: u64,
    /// Seconds between pings.
    #[serde(rename = "PingInterval", default = "default_interval")]
    pub ping_interval: u64,
}

fn default_reconnect_count() -> i64 {
    -1
}
fn default_interval() -> u64 {
    120
}
fn default_nonce() -> u64 {
    30
}

impl Default for ClientConfig {
    /// The SDK defaults before the server's config arrives: ping 120 s, unlimited reconnects
    /// every 120 s after up to 30 s of jitter.
    fn default() -> Self {
        Self {
            reconnect_count: default_reconnect_count(),
            reconnect_interval: default_interval(),
            reconnect_nonce: default_nonce(),
            ping_interval: default_interval(),
        }
    }
}

/// Who sent a message, from `GET /open-apis/im/v1/messages/{message_id}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSender {
    /// `open_id` for users, `app_id` for apps (see `id_type`).
    pub id: String,
    pub id_type: String,
    /// `user` or `app`.
    pub sender_type: String,
}

struct CachedToken {
    value: String,
    refresh_at: Instant,
}

/// The Open API client. Cheap to share behind an `Arc`.
pub struct LarkApi {
    http: reqwest::Client,
    base_url: String,
    app_id: String,
    app_secret: String,
    token: Mutex<Option<CachedToken>>,
}

impl std::fmt::Debug for LarkApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LarkApi")
            .field("base_url", &self.base_url)
            .field("app_id", &self.app_id)
            .finish_non_exhaustive()
    }
}

impl LarkApi {
    /// `base_url` is `https://open.feishu.cn`, `https://open.larksuite.com` or a loopback fake
    /// (no trailing slash needed; `/open-apis/...` and `/callback/...` are appended).
    pub fn new(base_url: &str, app_id: &str, app_secret: &str) -> Result<Self, ApiError> {
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(5))
            .timeout(Duration::from_secs(30))
            .user_agent(concat!("ethan/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| ApiError::Transport {
                path: String::new(),
                message: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(Self {
            http,
            base_url: base_url.trim_end_matches('/').to_string(),
            app_id: app_id.to_string(),
            app_secret: app_secret.to_string(),
            token: Mutex::new(None),
        })
    }

    /// The base URL requests go to.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The app id (`cli_…`).
    pub fn app_id(&self) -> &str {
        &self.app_id
    }

    /// The shared HTTP client (for calls made with a user token, see `user_api`).
    pub(crate) fn http(&self) -> &reqwest::Client {
        &self.http
    }

    /// The app secret (for the user-token refresh, see `user_api`). Never logged.
    pub(crate) fn app_secret(&self) -> &str {
        &self.app_secret
    }

    fn url(&self, path: &str) -> String {
        format!("{}{}", self.base_url, path)
    }

    /// A valid `tenant_access_token`, from the cache or freshly fetched (single flight).
    pub async fn tenant_access_token(&self) -> Result<String, ApiError> {
        let mut slot = self.token.lock().await;
        if let Some(t) = slot.as_ref() {
            if Instant::now() < t.refresh_at {
                return Ok(t.value.clone());
            }
        }
        let fresh = self.fetch_token().await?;
        let value = fresh.value.clone();
        *slot = Some(fresh);
        Ok(value)
    }

    /// Drop the cached token if it is still `stale` (another caller may have refreshed it).
    pub async fn invalidate_token(&self, stale: &str) {
        let mut slot = self.token.lock().await;
        if slot.as_ref().is_some_and(|t| t.value == stale) {
            *slot = None;
        }
    }

    async fn fetch_token(&self) -> Result<CachedToken, ApiError> {
        const PATH: &str = "/open-apis/auth/v3/tenant_access_token/internal";
        let transport = |message: String| ApiError::Transport {
            path: PATH.into(),
            message,
        };
        let resp = self
            .http
            .post(self.url(PATH))
            .json(&json!({"app_id": self.app_id, "app_secret": self.app_secret}))
            .send()
            .await
            .map_err(|e| transport(format!("request failed: {}", ethan_core::net::describe(&e))))?;
        let status = resp.status().as_u16();
        let body: Value = resp
            .json()
            .await
            .map_err(|e| transport(format!("unreadable answer (HTTP {status}): {e}")))?;
        let code = body.get("code").and_then(Value::as_i64).unwrap_or(-1);
        let msg = body
            .get("msg")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let token = body.get("tenant_access_token").and_then(Value::as_str);
        match (code, token) {
            (0, Some(token)) if !token.is_empty() => {
                let expire =
                    Duration::from_secs(body.get("expire").and_then(Value::as_u64).unwrap_or(7200));
                let lifetime = if expire > TOKEN_EXPIRY_MARGIN * 2 {
                    expire - TOKEN_EXPIRY_MARGIN
                } else {
                    expire / 2
                };
                tracing::debug!(
                    target: "ethan_channels::lark",
                    "got a tenant_access_token valid for {}s",
                    expire.as_secs()
                );
                Ok(CachedToken {
                    value: token.to_string(),
                    refresh_at: Instant::now() + lifetime,
                })
            }
            // A server-side failure is worth retrying; anything else means the credentials.
            _ if status >= 500 || status == 429 || code == codes::RATE_LIMITED => {
                Err(transport(format!("HTTP {status}, code {code}: {msg}")))
            }
            _ => Err(ApiError::Auth { code, msg }),
        }
    }

    /// One authorised Open API call: token handling, rate limits and code checks as described
    /// in the module docs. Returns the whole JSON answer (`code` 0).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, &str)],
        body: Option<&Value>,
    ) -> Result<Value, ApiError> {
        let transport = |message: String| ApiError::Transport {
            path: path.to_string(),
            message,
        };
        let mut refreshed = false;
        let mut rate_waits = 0;
        loop {
            let token = self.tenant_access_token().await?;
            let mut req = self
                .http
                .request(method.clone(), self.url(path))
                .bearer_auth(&token);
            if !query.is_empty() {
                req = req.query(query);
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let resp = req.send().await.map_err(|e| {
                transport(format!("request failed: {}", ethan_core::net::describe(&e)))
            })?;
            let status = resp.status().as_u16();
            let reset = resp
                .headers()
                .get("x-ogw-ratelimit-reset")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.trim().parse::<f64>().ok())
                .filter(|s| s.is_finite() && *s >= 0.0);
            let bytes = resp
                .bytes()
                .await
                .map_err(|e| transport(format!("reading the answer failed: {e}")))?;
            let json: Option<Value> = serde_json::from_slice(&bytes).ok();
            let code = json
                .as_ref()
                .and_then(|j| j.get("code"))
                .and_then(Value::as_i64);
            let msg = json
                .as_ref()
                .and_then(|j| j.get("msg"))
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();

            if status == 429 || code == Some(codes::RATE_LIMITED) {
                if rate_waits < RATE_LIMIT_TRIES {
                    rate_waits += 1;
                    let wait = Duration::from_secs_f64(reset.unwrap_or(1.0)).min(MAX_RATE_WAIT);
                    tracing::warn!(
                        target: "ethan_channels::lark",
                        "{path}: rate limited (HTTP {status}, code {}); waiting {:.1}s",
                        code.unwrap_or(0),
                        wait.as_secs_f64()
                    );
                    tokio::time::sleep(wait).await;
                    continue;
                }
                return Err(ApiError::Api {
                    path: path.into(),
                    code: code.unwrap_or(codes::RATE_LIMITED),
                    msg,
                    http_status: status,
                });
            }
            match code {
                Some(0) => return Ok(json.unwrap_or(Value::Null)),
                Some(c) if codes::is_token_error(c) && !refreshed => {
                    tracing::info!(
                        target: "ethan_channels::lark",
                        "{path}: code {c} ({}); refreshing the tenant_access_token and retrying once",
                        codes::meaning(c)
                    );
                    refreshed = true;
                    self.invalidate_token(&token).await;
                }
                Some(c) => {
                    return Err(ApiError::Api {
                        path: path.into(),
                        code: c,
                        msg,
                        http_status: status,
                    })
                }
                None => {
                    return Err(transport(format!(
                        "unreadable answer (HTTP {status}, {} bytes)",
                        bytes.len()
                    )))
                }
            }
        }
    }

    /// `GET /open-apis/bot/v3/info`: the bot's open_id and name. Fails with code 230006-like
    /// errors when the bot capability is off.
    pub async fn bot_info(&self) -> Result<BotInfo, ApiError> {
        const PATH: &str = "/open-apis/bot/v3/info";
        let v = self.call(reqwest::Method::GET, PATH, &[], None).await?;
        let bot = v
            .get("bot")
            .or_else(|| v.get("data").and_then(|d| d.get("bot")))
            .cloned()
            .unwrap_or(Value::Null);
        serde_json::from_value::<BotInfo>(bot)
            .ok()
            .filter(|b| !b.open_id.is_empty())
            .ok_or_else(|| ApiError::Transport {
                path: PATH.into(),
                message: "the answer has no bot.open_id".into(),
            })
    }

    /// `POST /open-apis/im/v1/messages?receive_id_type=…`: a new message; returns its
    /// `message_id`.
    pub async fn send_message(
        &self,
        receive_id_type: &str,
        receive_id: &str,
        msg_type: &str,
        content: &str,
        uuid: &str,
    ) -> Result<String, ApiError> {
        const PATH: &str = "/open-apis/im/v1/messages";
        let body = json!({
            "receive_id": receive_id,
            "msg_type": msg_type,
            "content": content,
            "uuid": uuid,
        });
        let v = self
            .call(
                reqwest::Method::POST,
                PATH,
                &[("receive_id_type", receive_id_type)],
                Some(&body),
            )
            .await?;
        Ok(message_id_of(&v))
    }

    /// `POST /open-apis/im/v1/messages/{message_id}/reply`: a reply quoting `message_id`
    /// (`reply_in_thread` keeps it inside a topic); returns the new `message_id`.
    pub async fn reply_message(
        &self,
        message_id: &str,
        msg_type: &str,
        content: &str,
        reply_in_thread: bool,
        uuid: &str,
    ) -> Result<String, ApiError> {
        let path = format!(
            "/open-apis/im/v1/messages/{}/reply",
            path_segment(message_id)
        );
        let body = json!({
            "msg_type": msg_type,
            "content": content,
            "reply_in_thread": reply_in_thread,
            "uuid": uuid,
        });
        let v = self
            .call(reqwest::Method::POST, &path, &[], Some(&body))
            .await?;
        Ok(message_id_of(&v))
    }

    /// `PATCH /open-apis/im/v1/messages/{message_id}` `{content}`: replace a card the bot sent
    /// (shared cards only, which JSON 2.0 cards always are; ≤ 14 days old).
    pub async fn update_card(&self, message_id: &str, card_json: &str) -> Result<(), ApiError> {
        let path = format!("/open-apis/im/v1/messages/{}", path_segment(message_id));
        self.call(
            reqwest::Method::PATCH,
            &path,
            &[],
            Some(&json!({ "content": card_json })),
        )
        .await
        .map(|_| ())
    }

    /// `POST /open-apis/cardkit/v1/cards` `{"type":"card_json","data":<card JSON 2.0 as a
    /// string>}`: a card entity; returns its `data.card_id`. Needs the `cardkit:card:write`
    /// scope (refused with 99991672 without it).
    pub async fn create_card(&self, card_json: &str) -> Result<String, ApiError> {
        const PATH: &str = "/open-apis/cardkit/v1/cards";
        let body = json!({"type": "card_json", "data": card_json});
        let v = self
            .call(reqwest::Method::POST, PATH, &[], Some(&body))
            .await?;
        v.pointer("/data/card_id")
            .and_then(Value::as_str)
            .filter(|id| !id.is_empty())
            .map(str::to_string)
            .ok_or_else(|| ApiError::Transport {
                path: PATH.into(),
                message: "the answer has no data.card_id".into(),
            })
    }

    /// `PUT /open-apis/cardkit/v1/cards/{card_id}/elements/{element_id}/content`
    /// `{"content", "sequence", "uuid"}`: the element's full text. Fails with 300309 when the
    /// card's streaming mode is closed and 300317 when `sequence` is not greater than the last.
    pub async fn put_card_element_content(
        &self,
        card_id: &str,
        element_id: &str,
        content: &str,
        sequence: u64,
        uuid: &str,
    ) -> Result<(), ApiError> {
        let path = format!(
            "/open-apis/cardkit/v1/cards/{}/elements/{}/content",
            path_segment(card_id),
            path_segment(element_id)
        );
        let body = json!({"content": content, "sequence": sequence, "uuid": uuid});
        self.call(reqwest::Method::PUT, &path, &[], Some(&body))
            .await
            .map(|_| ())
    }

    /// `PATCH /open-apis/cardkit/v1/cards/{card_id}/settings` `{"settings": <{"config":…} as a
    /// string>, "sequence", "uuid"}`, e.g. to close streaming mode.
    pub async fn patch_card_settings(
        &self,
        card_id: &str,
        settings: &Value,
        sequence: u64,
        uuid: &str,
    ) -> Result<(), ApiError> {
        let path = format!(
            "/open-apis/cardkit/v1/cards/{}/settings",
            path_segment(card_id)
        );
        let body = json!({"settings": settings.to_string(), "sequence": sequence, "uuid": uuid});
        self.call(reqwest::Method::PATCH, &path, &[], Some(&body))
            .await
            .map(|_| ())
    }

    /// `GET /open-apis/im/v1/messages/{message_id}`: who sent a message (to tell whether a
    /// reply answers the bot). `None` when the answer lists no item.
    pub async fn message_sender(
        &self,
        message_id: &str,
    ) -> Result<Option<MessageSender>, ApiError> {
        let path = format!("/open-apis/im/v1/messages/{}", path_segment(message_id));
        let v = self.call(reqwest::Method::GET, &path, &[], None).await?;
        let item = v
            .pointer("/data/items/0/sender")
            .or_else(|| v.pointer("/data/sender"));
        Ok(item.map(|s| MessageSender {
            id: str_field(s, "id"),
            id_type: str_field(s, "id_type"),
            sender_type: str_field(s, "sender_type"),
        }))
    }

    /// `POST /callback/ws/endpoint`: a fresh long-connection URL and the ClientConfig.
    pub async fn ws_endpoint(&self) -> Result<Endpoint, ApiError> {
        const PATH: &str = "/callback/ws/endpoint";
        let transport = |message: String| ApiError::Transport {
            path: PATH.into(),
            message,
        };
        let resp = self
            .http
            .post(self.url(PATH))
            .header("locale", "zh")
            .json(&json!({"AppID": self.app_id, "AppSecret": self.app_secret}))
            .send()
            .await
            .map_err(|e| transport(format!("request failed: {}", ethan_core::net::describe(&e))))?;
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(transport(format!("HTTP {status} (server busy)")));
        }
        let v: Value = resp
            .json()
            .await
            .map_err(|e| transport(format!("unreadable answer: {e}")))?;
        let code = v.get("code").and_then(Value::as_i64).unwrap_or(-1);
        if code != 0 {
            return Err(ApiError::Api {
                path: PATH.into(),
                code,
                msg: v
                    .get("msg")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                http_status: status,
            });
        }
        let url = v
            .pointer("/data/URL")
            .and_then(Value::as_str)
            .filter(|u| !u.is_empty())
            .ok_or_else(|| transport("the answer has no data.URL".into()))?
            .to_string();
        let client_config = v
            .pointer("/data/ClientConfig")
            .and_then(|c| serde_json::from_value(c.clone()).ok());
        Ok(Endpoint { url, client_config })
    }
}

fn str_field(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

fn message_id_of(v: &Value) -> String {
    v.pointer("/data/message_id")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// Keep a platform id from escaping its path segment.
fn path_segment(id: &str) -> String {
    id.chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
        .collect()
}

/// Whether an endpoint failure is worth retrying (PROTOCOLS §1.2: code 1 system busy, 1000040343
/// internal error, any transport/HTTP failure); bad credentials and other codes are fatal.
pub fn endpoint_retryable(e: &ApiError) -> bool {
    match e {
        ApiError::Transport { .. } => true,
        ApiError::Api { code, .. } => {
            *code == codes::WS_SYSTEM_BUSY || *code == codes::WS_INTERNAL_ERROR
        }
        ApiError::Auth { .. } => false,
    }
}

/// Per-chat pacing: at most one message every [`CHAT_SPACING`] to the same chat.
#[derive(Default)]
pub struct Pacer {
    next: std::sync::Mutex<HashMap<String, Instant>>,
}

impl Pacer {
    /// Wait for this chat's next free slot and take it.
    pub async fn wait(&self, chat_id: &str) {
        let slot = {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let now = Instant::now();
            if next.len() > 1024 {
                next.retain(|_, t| *t > now);
            }
            let slot = next
                .get(chat_id)
                .copied()
                .filter(|t| *t > now)
                .unwrap_or(now);
            next.insert(chat_id.to_string(), slot + CHAT_SPACING);
            slot
        };
        tokio::time::sleep_until(slot).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn pacer_spaces_one_chat_but_not_others() {
        let p = Pacer::default();
        let t0 = Instant::now();
        for _ in 0..6 {
            p.wait("oc_a").await;
        }
        // Six messages: the sixth may go out 5 × 200 ms after the first.
        assert_eq!(t0.elapsed(), CHAT_SPACING * 5);
        let t1 = Instant::now();
        p.wait("oc_b").await;
        assert_eq!(t1.elapsed(), Duration::ZERO);
    }

    /// A tiny Open API: tokens `t1`, `t2`, … (each request slow, counted); `/probe` answers
    /// from a script of (status, body, reset header) and records the tokens it saw.
    struct Fake {
        tokens: std::sync::atomic::AtomicUsize,
        script: std::sync::Mutex<Vec<(u16, Value, Option<&'static str>)>>,
        seen: std::sync::Mutex<Vec<String>>,
    }

    async fn fake(
        script: Vec<(u16, Value, Option<&'static str>)>,
    ) -> (std::sync::Arc<Fake>, String) {
        use axum::http::{HeaderMap, StatusCode};
        use axum::response::IntoResponse;
        use std::sync::atomic::Ordering;
        let state = std::sync::Arc::new(Fake {
            tokens: Default::default(),
            script: std::sync::Mutex::new(script),
            seen: Default::default(),
        });
        let s1 = state.clone();
        let s2 = state.clone();
        let app = axum::Router::new()
            .route(
                "/open-apis/auth/v3/tenant_access_token/internal",
                axum::routing::post(move || {
                    let s = s1.clone();
                    async move {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        let n = s.tokens.fetch_add(1, Ordering::SeqCst) + 1;
                        axum::Json(json!({"code": 0, "tenant_access_token": format!("t{n}"), "expire": 7200}))
                    }
                }),
            )
            .route(
                "/probe",
                axum::routing::get(move |h: HeaderMap| {
                    let s = s2.clone();
                    async move {
                        let auth = h.get("authorization").and_then(|v| v.to_str().ok()).unwrap_or("");
                        s.seen.lock().unwrap().push(auth.to_string());
                        let (status, body, reset) = {
                            let mut sc = s.script.lock().unwrap();
                            if sc.is_empty() { (200, json!({"code": 0}), None) } else { sc.remove(0) }
                        };
                        let mut resp = (StatusCode::from_u16(status).unwrap(), axum::Json(body)).into_response();
                        if let Some(r) = reset {
                            resp.headers_mut().insert("x-ogw-ratelimit-reset", r.parse().unwrap());
                        }
                        resp
                    }
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        (state, url)
    }

    #[tokio::test]
    async fn token_fetch_is_single_flight_and_cached() {
        let (state, url) = fake(vec![]).await;
        let api = std::sync::Arc::new(LarkApi::new(&url, "cli_x", "secret").unwrap());
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let api = api.clone();
            tasks.push(tokio::spawn(async move {
                api.tenant_access_token().await.unwrap()
            }));
        }
        for t in tasks {
            assert_eq!(t.await.unwrap(), "t1");
        }
        assert_eq!(state.tokens.load(std::sync::atomic::Ordering::SeqCst), 1);
        api.invalidate_token("not-the-current-one").await;
        assert_eq!(api.tenant_access_token().await.unwrap(), "t1");
        api.invalidate_token("t1").await;
        assert_eq!(api.tenant_access_token().await.unwrap(), "t2");
    }

    #[tokio::test]
    async fn token_codes_refresh_and_retry_once_even_with_http_200() {
        let expired = json!({"code": 99991663, "msg": "Invalid access token"});
        let (state, url) = fake(vec![(200, expired.clone(), None)]).await;
        let api = LarkApi::new(&url, "cli_x", "secret").unwrap();
        api.call(reqwest::Method::GET, "/probe", &[], None)
            .await
            .unwrap();
        assert_eq!(*state.seen.lock().unwrap(), ["Bearer t1", "Bearer t2"]);
        // Twice in a row: the second answer is returned as an error (no loop).
        state
            .script
            .lock()
            .unwrap()
            .extend([(200, expired.clone(), None), (200, expired, None)]);
        let err = api
            .call(reqwest::Method::GET, "/probe", &[], None)
            .await
            .unwrap_err();
        assert_eq!(err.code(), Some(99991663));
        assert!(
            err.to_string().contains("tenant_access_token is invalid"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn rate_limits_wait_for_the_reset_header() {
        let limited = json!({"code": 99991400, "msg": "request trigger frequency limit"});
        let (state, url) = fake(vec![(429, limited, Some("1"))]).await;
        let api = LarkApi::new(&url, "cli_x", "secret").unwrap();
        let t0 = std::time::Instant::now();
        api.call(reqwest::Method::GET, "/probe", &[], None)
            .await
            .unwrap();
        assert!(t0.elapsed() >= Duration::from_secs(1));
        assert_eq!(state.seen.lock().unwrap().len(), 2);
        // Other codes are errors with their meaning.
        state.script.lock().unwrap().push((
            400,
            json!({"code": 230002, "msg": "Bot is not in the chat"}),
            None,
        ));
        let err = api
            .call(reqwest::Method::GET, "/probe", &[], None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not in this chat"), "{err}");
    }

    #[test]
    fn path_segments_are_sanitised() {
        assert_eq!(path_segment("om_abc-1"), "om_abc-1");
        assert_eq!(path_segment("om_x/../y?z"), "om_x..yz");
    }

    #[test]
    fn endpoint_errors_are_classified() {
        let api = |code| ApiError::Api {
            path: String::new(),
            code,
            msg: String::new(),
            http_status: 200,
        };
        assert!(endpoint_retryable(&api(1)));
        assert!(endpoint_retryable(&api(1000040343)));
        assert!(!endpoint_retryable(&api(1000040344)));
        assert!(!endpoint_retryable(&api(10003)));
    }
}
