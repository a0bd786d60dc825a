//! Streamed replies on Telegram: the channel's [`Draft`] capability (see [`crate::stream`]).
//!
//! This module owns how a reply is shown while the model writes it, and how it is then turned
//! into the final reply:
//!
//! * **Draft mode** (private chats): `sendMessageDraft` (Bot API 9.3+, all bots since 9.5) with a
//!   non-zero `draft_id` that is stable for the reply ([`draft_id`]) and the view rendered to
//!   HTML ([`super::render`]). A draft is an ephemeral preview: the final answer goes out with
//!   the ordinary send path ([`super::send::send_text`]), rendered and split exactly as a
//!   non-streamed reply. A view longer than one message shows its **tail**: the last of the
//!   parts [`chunk_html`] cuts it into, i.e. the part being written now (the earlier parts
//!   appear when the answer is sent). A server that refuses the method (404 "method not
//!   found", or a 400 other than an entity error) makes this reply and every later one of the
//!   process use edit mode; one warning is logged.
//! * **Edit mode** (groups, or `streaming: edit`): the first update is a `sendMessage` (in groups
//!   a reply to the user's message, in the chat's thread); its id is recorded with the
//!   [`DraftLog`] as `{"message_ids":[…]}` before any edit; later updates are `editMessageText`.
//!   The view is cut into parts of at most 4096 UTF-16 units at clean boundaries
//!   ([`chunk_html`]): part `i` lives in message `i`, and a part past the last message starts a
//!   new one (recorded before it is edited). `finish` edits each message to the final part `i`
//!   (the parts of [`super::send::send_text`]) unless it already shows it, sends the parts
//!   that have no message yet, and
//!   deletes draft messages the answer no longer needs (best effort). Two edits are at least the
//!   interval apart (measured from the answer to the previous one), the final ones included.
//!
//! Errors: a 429 during an update skips updates until its `retry_after` has passed (never a
//! long sleep inside `update`); "message is not modified" counts as success; "can't parse
//! entities" sends the same part as plain text. `finish` may be called again after a failed
//! attempt or, with [`DraftTarget::resume`], after a restart: edits are idempotent, and parts
//! already delivered by a previous attempt are not sent again.

use super::chunk::{chunk_html, TELEGRAM_TEXT_LIMIT};
use super::render::{html_to_display_text, markdown_to_html};
use super::send::{parse_i32, send_text};
use super::PLATFORM;
use crate::channel::ChannelError;
use crate::model::{ChatKind, OutboundBody, OutboundMessage, SentRef};
use crate::stream::{Draft, DraftHandle, DraftLog, DraftTarget, DraftView, StreamMode, ToolLine};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use teloxide::Bot;
use tokio::time::Instant;

/// The least time between two edits in a group (Telegram allows about 20 messages a minute
/// per group; edits count).
pub const GROUP_MIN_INTERVAL: Duration = Duration::from_secs(1);

/// Timeout of one streaming request (`sendMessageDraft`, `editMessageText`, …).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(15);

/// Tries per part in `finish` (429 waits exactly `retry_after`, as [`super::send`] does).
const MAX_TRIES: usize = 5;

/// The longest an update waits for the interval since the previous edit to pass (the daemon's
/// clock and ours differ by the request time); when more is left the edit is skipped.
const UPDATE_MAX_WAIT: Duration = Duration::from_millis(250);

/// The longest `retry_after` `finish` waits for; a longer one fails the attempt.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// How one reply is shown while it is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// `sendMessageDraft` previews, then one ordinary send.
    Draft,
    /// `sendMessage`, then `editMessageText`.
    Edit,
}

/// The way a reply in a chat of kind `chat` is shown under `channels.telegram.streaming`
/// = `mode`; `None` for no streaming. `Card` (Lark's) is read as `Auto`; drafts exist only in
/// private chats, so `Auto` and `Draft` edit in groups.
pub fn resolve_mode(mode: StreamMode, chat: ChatKind) -> Option<Shown> {
    match (mode, chat) {
        (StreamMode::Off, _) => None,
        (StreamMode::Edit, _) => Some(Shown::Edit),
        (StreamMode::Auto | StreamMode::Card | StreamMode::Draft, ChatKind::Direct) => {
            Some(Shown::Draft)
        }
        (StreamMode::Auto | StreamMode::Card | StreamMode::Draft, ChatKind::Group) => {
            Some(Shown::Edit)
        }
    }
}

/// The least time between two updates: `configured` (`stream_interval_ms`), and in groups at
/// least [`GROUP_MIN_INTERVAL`].
pub fn stream_interval(configured: Duration, chat: ChatKind) -> Duration {
    match chat {
        ChatKind::Direct => configured,
        ChatKind::Group => configured.max(GROUP_MIN_INTERVAL),
    }
}

/// The `draft_id` of the reply with idempotency key `key`: a non-zero positive `i32`, the same
/// in every process (32-bit FNV-1a of the key's bytes, top bit cleared; 0 becomes 1).
pub fn draft_id(key: &str) -> i32 {
    let mut hash: u32 = 0x811c_9dc5;
    for byte in key.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    let id = i32::try_from(hash & 0x7fff_ffff).unwrap_or(1);
    if id == 0 {
        1
    } else {
        id
    }
}

/// The handle of an edit-mode reply: `{"message_ids":[id, …]}`, the Telegram message ids of
/// its parts in order.
pub fn handle_for(message_ids: &[i32]) -> DraftHandle {
    DraftHandle(json!({ "message_ids": message_ids }))
}

/// The message ids of a handle written by [`handle_for`] (numbers or numeric strings); empty for
/// anything else.
pub fn message_ids(handle: &DraftHandle) -> Vec<i32> {
    handle
        .0
        .get("message_ids")
        .and_then(Value::as_array)
        .map(|ids| {
            ids.iter()
                .filter_map(|v| match v {
                    Value::Number(n) => n.as_i64().and_then(|n| i32::try_from(n).ok()),
                    Value::String(s) => s.trim().parse().ok(),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The Markdown a view shows: its progress lines, a blank line, the answer so far.
pub fn view_markdown(view: &DraftView) -> String {
    let progress = view.progress_markdown();
    match (progress.is_empty(), view.text.trim().is_empty()) {
        (true, _) => view.text.clone(),
        (false, true) => progress,
        (false, false) => format!("{progress}\n\n{}", view.text),
    }
}

/// Rendered Markdown cut into message parts of at most 4096 UTF-16 units, as
/// [`super::send::send_text`] cuts a reply; parts without visible text are dropped (Telegram
/// refuses them, and the send path skips them).
pub fn message_parts(markdown: &str) -> Vec<String> {
    chunk_html(&markdown_to_html(markdown), TELEGRAM_TEXT_LIMIT)
        .into_iter()
        .filter(|part| !html_to_display_text(part).trim().is_empty())
        .collect()
}

/// The HTML of a draft preview of `view`: the whole view when it fits one message, else its
/// last part (see the module docs); `None` when there is nothing to show.
pub fn draft_html(view: &DraftView) -> Option<String> {
    message_parts(&view_markdown(view)).pop()
}

/// Why a Bot API call failed.
#[derive(Debug)]
enum CallError {
    /// The API answered `ok: false`.
    Api {
        code: i64,
        description: String,
        retry_after: Option<u64>,
    },
    /// No answer, or one that is not a Bot API response.
    Transport(String),
}

impl CallError {
    fn is(&self, needle: &str) -> bool {
        matches!(self, CallError::Api { description, .. } if description.to_ascii_lowercase().contains(needle))
    }

    fn retry_after(&self) -> Option<Duration> {
        match self {
            CallError::Api {
                code: 429,
                retry_after,
                ..
            } => Some(Duration::from_secs(retry_after.unwrap_or(1))),
            _ => None,
        }
    }

    fn into_channel_error(self) -> ChannelError {
        match self {
            CallError::Api {
                code: 401,
                description,
                ..
            } => ChannelError::Unauthorized {
                platform: PLATFORM,
                message: description,
            },
            CallError::Api {
                code, description, ..
            } if code >= 500 => ChannelError::Transport {
                platform: PLATFORM,
                message: format!("Bot API server error {code}: {description}"),
            },
            CallError::Api {
                code, description, ..
            } => ChannelError::Api {
                platform: PLATFORM,
                code,
                description,
            },
            CallError::Transport(message) => ChannelError::Transport {
                platform: PLATFORM,
                message,
            },
        }
    }
}

/// Raw JSON calls to `{api_url}/bot{token}/{method}` (teloxide 0.17 has no `sendMessageDraft`,
/// and its error type drops `retry_after` details for edits).
#[derive(Clone)]
struct RawApi {
    http: reqwest::Client,
    /// `{api_url}/bot{token}`; never logged.
    base: String,
}

impl RawApi {
    /// POST `body` to `method`; the `result` on success.
    async fn call(&self, method: &str, body: &Value) -> Result<Value, CallError> {
        let resp = self
            .http
            .post(format!("{}/{method}", self.base))
            .timeout(REQUEST_TIMEOUT)
            .json(body)
            .send()
            .await
            // The URL holds the token: keep it out of the message.
            .map_err(|e| CallError::Transport(format!("{method}: {}", crate::net::describe(&e))))?;
        let status = resp.status().as_u16();
        let answer: Value = resp.json().await.map_err(|e| {
            CallError::Transport(format!(
                "{method}: HTTP {status} with an unreadable body: {}",
                e.without_url()
            ))
        })?;
        if answer.get("ok").and_then(Value::as_bool) == Some(true) {
            return Ok(answer.get("result").cloned().unwrap_or(Value::Null));
        }
        Err(CallError::Api {
            code: answer
                .get("error_code")
                .and_then(Value::as_i64)
                .unwrap_or(i64::from(status)),
            description: answer
                .get("description")
                .and_then(Value::as_str)
                .unwrap_or("no description")
                .to_string(),
            retry_after: answer
                .pointer("/parameters/retry_after")
                .and_then(Value::as_u64),
        })
    }
}

/// Open a draft for `target`, or `None` when this chat does not stream (see [`resolve_mode`]).
/// A resumed handle with message ids continues those messages in edit mode, whatever the mode
/// (also `off`: the answer is finished where it started).
pub(super) fn open(
    chan: &super::TelegramChannel,
    target: DraftTarget,
    log: Arc<dyn DraftLog>,
) -> Option<Box<dyn Draft>> {
    let config = &chan.config;
    let resumed = target.resume.as_ref().map(message_ids).unwrap_or_default();
    // A reply that already lives in messages is finished there, whatever the mode is now.
    let mut shown = if resumed.is_empty() {
        resolve_mode(config.streaming, target.chat.kind)?
    } else {
        Shown::Edit
    };
    if chan.drafts_refused.load(Ordering::Relaxed) {
        shown = Shown::Edit;
    }
    let Ok(chat_id) = target.chat.id.trim().parse::<i64>() else {
        tracing::warn!(
            "not a Telegram chat id: {:?}; not streaming",
            target.chat.id
        );
        return None;
    };
    let key = target
        .idempotency_key
        .clone()
        .unwrap_or_else(|| format!("{}:{:?}", target.chat.id, target.reply_to));
    let texts = vec![String::new(); resumed.len()];
    Some(Box::new(TelegramDraft {
        api: RawApi {
            http: chan.bot().client().clone(),
            base: format!(
                "{}/bot{}",
                config.api_url.trim_end_matches('/'),
                config.token
            ),
        },
        bot: chan.bot().clone(),
        chat_id,
        thread: parse_i32(&target.chat.thread),
        reply_to: match target.chat.kind {
            ChatKind::Group => parse_i32(&target.reply_to),
            ChatKind::Direct => None,
        },
        interval: stream_interval(config.stream_interval, target.chat.kind),
        draft_id: draft_id(&key),
        target,
        shown,
        log,
        drafts_refused: Arc::clone(&chan.drafts_refused),
        not_before: None,
        last_edit: None,
        messages: resumed,
        texts,
        parts_done: 0,
        sent_ids: Vec::new(),
        finished: None,
    }))
}

/// One streamed Telegram reply.
struct TelegramDraft {
    api: RawApi,
    bot: Bot,
    target: DraftTarget,
    chat_id: i64,
    thread: Option<i32>,
    /// The message the first part answers (groups only, as non-streamed replies).
    reply_to: Option<i32>,
    shown: Shown,
    interval: Duration,
    draft_id: i32,
    log: Arc<dyn DraftLog>,
    /// Process-wide: the server refused `sendMessageDraft`.
    drafts_refused: Arc<AtomicBool>,
    /// Updates are skipped until then (a 429's `retry_after`).
    not_before: Option<Instant>,
    /// When the last `editMessageText` was answered: edits are at least `interval` apart.
    last_edit: Option<Instant>,
    /// Edit mode: the ids of the messages holding the parts, in order.
    messages: Vec<i32>,
    /// Edit mode: the HTML each message shows (empty when unknown, e.g. resumed).
    texts: Vec<String>,
    /// Draft mode: parts of the final reply delivered by earlier `finish` attempts.
    parts_done: usize,
    /// Draft mode: the ids of those parts.
    sent_ids: Vec<String>,
    /// The result of a `finish` that succeeded.
    finished: Option<SentRef>,
}

impl TelegramDraft {
    fn base_body(&self) -> Value {
        let mut body = json!({ "chat_id": self.chat_id });
        if let Some(t) = self.thread {
            body["message_thread_id"] = json!(t);
        }
        body
    }

    /// Record the current message ids (best effort: a failure is logged; the draft goes on).
    async fn record(&self) {
        if let Err(e) = self.log.record(&handle_for(&self.messages)).await {
            tracing::warn!("cannot record the telegram draft message ids: {e}");
        }
    }

    /// `method` with `body`, whose `text` is `html` in HTML mode, or its display text when
    /// Telegram cannot parse the entities.
    async fn call_text(
        &self,
        method: &str,
        mut body: Value,
        html: &str,
    ) -> Result<Value, CallError> {
        body["text"] = json!(html);
        body["parse_mode"] = json!("HTML");
        match self.api.call(method, &body).await {
            Err(e) if e.is("can't parse entities") => {
                tracing::warn!("telegram rejected the HTML of a {method} ({e:?}); plain text");
                body["text"] = json!(html_to_display_text(html));
                if let Some(obj) = body.as_object_mut() {
                    obj.remove("parse_mode");
                }
                self.api.call(method, &body).await
            }
            other => other,
        }
    }

    /// `sendMessage` of one part; its message id.
    async fn post(&self, html: &str, reply_to: Option<i32>) -> Result<i32, CallError> {
        let mut body = self.base_body();
        body["link_preview_options"] = json!({ "is_disabled": true });
        if let Some(r) = reply_to {
            body["reply_parameters"] =
                json!({ "message_id": r, "allow_sending_without_reply": true });
        }
        let msg = self.call_text("sendMessage", body, html).await?;
        msg.get("message_id")
            .and_then(Value::as_i64)
            .and_then(|id| i32::try_from(id).ok())
            .ok_or_else(|| CallError::Transport("sendMessage answered no message_id".into()))
    }

    /// `editMessageText` of message `id`; "message is not modified" is success.
    async fn edit(&self, id: i32, html: &str) -> Result<(), CallError> {
        let mut body = json!({ "chat_id": self.chat_id, "message_id": id });
        body["link_preview_options"] = json!({ "is_disabled": true });
        match self.call_text("editMessageText", body, html).await {
            Ok(_) => Ok(()),
            Err(e) if e.is("message is not modified") => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// How long until the next edit may go out (`interval` after the last one was answered).
    fn edit_wait(&self) -> Duration {
        self.last_edit.map_or(Duration::ZERO, |t| {
            (t + self.interval).saturating_duration_since(Instant::now())
        })
    }

    /// Show `view` in the messages (edit mode). An edit due later than [`UPDATE_MAX_WAIT`] from
    /// now is left for the next update.
    async fn edit_update(&mut self, view: &DraftView) -> Result<(), CallError> {
        let parts = message_parts(&view_markdown(view));
        for (i, part) in parts.iter().enumerate() {
            if let Some(&id) = self.messages.get(i) {
                if self.texts.get(i) == Some(part) {
                    continue;
                }
                let wait = self.edit_wait();
                if wait > UPDATE_MAX_WAIT {
                    return Ok(());
                }
                tokio::time::sleep(wait).await;
                let edited = self.edit(id, part).await;
                self.last_edit = Some(Instant::now());
                edited?;
                self.texts[i] = part.clone();
            } else {
                let reply_to = if i == 0 { self.reply_to } else { None };
                let id = self.post(part, reply_to).await?;
                self.messages.push(id);
                self.texts.push(part.clone());
                self.record().await;
            }
        }
        Ok(())
    }

    /// Show `view` as a draft; `Ok(false)` when the server refused drafts (now remembered).
    async fn draft_update(&mut self, view: &DraftView) -> Result<bool, CallError> {
        let Some(html) = draft_html(view) else {
            return Ok(true);
        };
        let mut body = self.base_body();
        body["draft_id"] = json!(self.draft_id);
        match self.call_text("sendMessageDraft", body, &html).await {
            Ok(_) => Ok(true),
            Err(CallError::Api {
                code, description, ..
            }) if code == 404
                || (code == 400 && {
                    // Only a refusal of the method itself: a 400 about this chat or thread
                    // must not turn drafts off for every chat.
                    let d = description.to_ascii_lowercase();
                    d.contains("method") || d.contains("draft")
                }) =>
            {
                if !self.drafts_refused.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        "telegram refused sendMessageDraft ({code}: {description}); streamed \
                         replies in private chats use sendMessage + editMessageText from now on \
                         (a Bot API server older than 9.5?)"
                    );
                }
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }

    /// A call of `finish`, retried on 429 (waiting `retry_after`, at most [`MAX_TRIES`] tries).
    async fn with_retry<T, F, Fut>(&self, what: &str, mut f: F) -> Result<T, ChannelError>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, CallError>>,
    {
        let mut tries = 0;
        loop {
            tries += 1;
            match f().await {
                Ok(v) => return Ok(v),
                Err(e) => match e.retry_after() {
                    Some(wait) if tries < MAX_TRIES && wait <= MAX_RETRY_AFTER => {
                        tracing::warn!("telegram 429 on {what}; waiting {}s", wait.as_secs());
                        tokio::time::sleep(wait).await;
                    }
                    _ => return Err(e.into_channel_error()),
                },
            }
        }
    }

    /// Edit mode: make the messages show the final reply (see the module docs).
    async fn edit_finish(&mut self, markdown: &str) -> Result<SentRef, ChannelError> {
        let parts = message_parts(markdown);
        let mut sent = SentRef::default();
        for (i, part) in parts.iter().enumerate() {
            let step = match self.messages.get(i).copied() {
                // Already showing its final text: an edit would only be refused as "not
                // modified", and count toward the chat's limit.
                Some(id) if self.texts.get(i) == Some(part) => Ok(id),
                Some(id) => {
                    tokio::time::sleep(self.edit_wait()).await;
                    let edited = self
                        .with_retry("editMessageText", || self.edit(id, part))
                        .await;
                    self.last_edit = Some(Instant::now());
                    match edited {
                        Err(ChannelError::Api { description, .. })
                            if description.contains("message to edit not found") =>
                        {
                            // Someone deleted the message: send the part anew.
                            self.finish_post(i, part, true).await
                        }
                        other => other.map(|()| id),
                    }
                }
                None => self.finish_post(i, part, false).await,
            };
            match step {
                Ok(id) => {
                    self.texts[i] = part.clone();
                    sent.message_ids.push(id.to_string());
                }
                Err(e) => return Err(ChannelError::stopped_at(0, i, parts.len(), sent, e)),
            }
        }
        let leftovers = self
            .messages
            .split_off(parts.len().min(self.messages.len()));
        self.texts.truncate(self.messages.len());
        for id in leftovers {
            let body = json!({ "chat_id": self.chat_id, "message_id": id });
            if let Err(e) = self.api.call("deleteMessage", &body).await {
                tracing::debug!("cannot delete leftover draft message {id}: {e:?}");
            }
        }
        Ok(sent)
    }

    /// Send part `i` of the final reply as a new message (in place of message `i` when
    /// `replace`), and record the ids right after.
    async fn finish_post(
        &mut self,
        i: usize,
        part: &str,
        replace: bool,
    ) -> Result<i32, ChannelError> {
        let reply_to = if i == 0 { self.reply_to } else { None };
        let id = self
            .with_retry("sendMessage", || self.post(part, reply_to))
            .await?;
        if replace && i < self.messages.len() {
            self.messages[i] = id;
        } else {
            self.messages.push(id);
            self.texts.push(String::new());
        }
        self.record().await;
        Ok(id)
    }

    /// Draft mode: send the reply with the ordinary send path, from the first part no earlier
    /// attempt delivered.
    async fn draft_finish(&mut self, markdown: &str) -> Result<SentRef, ChannelError> {
        let msg = OutboundMessage {
            chat: self.target.chat.clone(),
            reply_to: self.target.reply_to.clone(),
            body: OutboundBody::Text(markdown.to_string()),
            idempotency_key: self.target.idempotency_key.clone(),
        };
        match send_text(&self.bot, &msg, markdown, self.parts_done).await {
            Ok(sent) => {
                self.sent_ids.extend(sent.message_ids);
                Ok(SentRef {
                    message_ids: self.sent_ids.clone(),
                })
            }
            Err(ChannelError::Partial {
                delivered,
                total,
                sent,
                cause,
            }) => {
                self.sent_ids.extend(sent.message_ids.iter().cloned());
                self.parts_done = delivered;
                Err(ChannelError::Partial {
                    delivered,
                    total,
                    sent,
                    cause,
                })
            }
            Err(e) => Err(e),
        }
    }
}

#[async_trait]
impl Draft for TelegramDraft {
    fn interval(&self) -> Duration {
        self.interval
    }

    async fn update(&mut self, view: &DraftView) -> Result<(), ChannelError> {
        if self.finished.is_some() {
            return Ok(());
        }
        if self.not_before.is_some_and(|t| Instant::now() < t) {
            return Ok(());
        }
        if self.shown == Shown::Draft && self.drafts_refused.load(Ordering::Relaxed) {
            self.shown = Shown::Edit;
        }
        let result = match self.shown {
            Shown::Draft => match self.draft_update(view).await {
                Ok(true) => Ok(()),
                Ok(false) => {
                    self.shown = Shown::Edit;
                    self.edit_update(view).await
                }
                Err(e) => Err(e),
            },
            Shown::Edit => self.edit_update(view).await,
        };
        match result {
            Ok(()) => Ok(()),
            Err(e) => match e.retry_after() {
                Some(wait) => {
                    tracing::debug!("telegram 429 while streaming; next update in {wait:?}");
                    // A server's absurd retry_after must not overflow the clock.
                    let wait = wait.min(std::time::Duration::from_secs(3600));
                    self.not_before = Some(Instant::now() + wait);
                    Ok(())
                }
                None => Err(e.into_channel_error()),
            },
        }
    }

    async fn finish(
        &mut self,
        markdown: &str,
        _tools: &[ToolLine],
    ) -> Result<SentRef, ChannelError> {
        if let Some(done) = &self.finished {
            return Ok(done.clone());
        }
        let sent = match self.shown {
            Shown::Draft => self.draft_finish(markdown).await?,
            Shown::Edit => self.edit_finish(markdown).await?,
        };
        self.finished = Some(sent.clone());
        Ok(sent)
    }

    async fn abandon(&mut self) {
        // A draft expires by itself; an edited message keeps the text it shows.
    }
}

#[cfg(test)]
mod tests;
