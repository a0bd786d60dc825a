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
mod tests {
    use super::*;
    use crate::stream::ToolState;
    use crate::telegram::chunk::utf16_len;

    #[test]
    fn modes_per_chat() {
        use ChatKind::{Direct, Group};
        assert_eq!(resolve_mode(StreamMode::Off, Direct), None);
        assert_eq!(resolve_mode(StreamMode::Off, Group), None);
        for auto in [StreamMode::Auto, StreamMode::Card, StreamMode::Draft] {
            assert_eq!(resolve_mode(auto, Direct), Some(Shown::Draft));
            assert_eq!(resolve_mode(auto, Group), Some(Shown::Edit));
        }
        assert_eq!(resolve_mode(StreamMode::Edit, Direct), Some(Shown::Edit));
        assert_eq!(resolve_mode(StreamMode::Edit, Group), Some(Shown::Edit));
    }

    #[test]
    fn groups_never_update_faster_than_once_a_second() {
        let fast = Duration::from_millis(300);
        assert_eq!(stream_interval(fast, ChatKind::Direct), fast);
        assert_eq!(stream_interval(fast, ChatKind::Group), GROUP_MIN_INTERVAL);
        let slow = Duration::from_millis(2500);
        assert_eq!(stream_interval(slow, ChatKind::Group), slow);
    }

    #[test]
    fn draft_ids_are_stable_and_non_zero() {
        let a = draft_id("reply:telegram:42");
        assert_eq!(a, draft_id("reply:telegram:42"));
        assert_ne!(a, draft_id("reply:telegram:43"));
        // Known value: pins the hash, so a restarted daemon animates the same draft.
        assert_eq!(draft_id(""), 0x011c_9dc5);
        for key in (0..2000).map(|i| format!("reply:telegram:{i}")) {
            assert!(draft_id(&key) > 0, "{key}");
        }
    }

    #[test]
    fn handle_round_trip() {
        let h = handle_for(&[1001, 1002]);
        assert_eq!(h.0, json!({"message_ids": [1001, 1002]}));
        let stored = serde_json::to_string(&h).expect("serialize");
        let back: DraftHandle = serde_json::from_str(&stored).expect("parse");
        assert_eq!(message_ids(&back), vec![1001, 1002]);
        assert_eq!(
            message_ids(&DraftHandle(json!({"message_ids": ["7", 8, null]}))),
            vec![7, 8]
        );
        assert!(message_ids(&DraftHandle(json!({"card_id": "c"}))).is_empty());
        assert!(message_ids(&DraftHandle(json!([1, 2]))).is_empty());
    }

    fn long_view() -> DraftView {
        let text = (0..400)
            .map(|i| format!("Line {i}: the answer grows **steadily** — ✨ item {i}."))
            .collect::<Vec<_>>()
            .join("\n\n");
        DraftView {
            tools: vec![ToolLine {
                name: "shell".into(),
                state: ToolState::Done,
            }],
            text,
        }
    }

    #[test]
    fn a_long_view_is_cut_at_clean_boundaries() {
        let view = long_view();
        let md = view_markdown(&view);
        assert!(md.starts_with("✅ `shell` done\n\n"), "{md}");
        let parts = message_parts(&md);
        assert!(parts.len() >= 3, "{} parts", parts.len());
        for part in &parts {
            assert!(utf16_len(part) <= TELEGRAM_TEXT_LIMIT);
        }
        // Nothing lost or doubled, and every cut falls at a line end.
        let whole = html_to_display_text(&markdown_to_html(&md));
        let joined: String = parts.iter().map(|p| html_to_display_text(p)).collect();
        assert_eq!(joined, whole);
        for part in &parts[..parts.len() - 1] {
            assert!(html_to_display_text(part).ends_with('\n'), "{part}");
        }
        // The cut of the first part stays where it is as the text grows.
        let mut longer = view.clone();
        longer.text.push_str("\n\nOne more line.");
        assert_eq!(message_parts(&view_markdown(&longer))[0], parts[0]);
        // A draft shows the part being written.
        assert_eq!(draft_html(&view), parts.last().cloned());
    }

    #[test]
    fn an_empty_view_shows_nothing() {
        assert_eq!(draft_html(&DraftView::default()), None);
        let tools_only = DraftView {
            tools: vec![ToolLine {
                name: "web_search".into(),
                state: ToolState::Running,
            }],
            text: String::new(),
        };
        let html = draft_html(&tools_only).expect("progress");
        assert!(html.contains("web_search"), "{html}");
    }

    /// The draft against a loopback Bot API (axum on 127.0.0.1:0): what it sends, in order.
    mod against_a_bot_api {
        use super::*;
        use crate::channel::Channel;
        use crate::model::ChatRef;
        use crate::telegram::{TelegramChannel, TelegramConfig};
        use axum::extract::State;
        use axum::http::{StatusCode, Uri};
        use axum::Json;
        use std::collections::{HashMap, VecDeque};
        use std::sync::Mutex;

        const GROUP: i64 = -100500;
        const USER: i64 = 4242;

        #[derive(Default)]
        struct Api {
            /// `(lowercase method, body)` and `record:{handle}` entries, in order.
            log: Mutex<Vec<(String, Value)>>,
            texts: Mutex<HashMap<i64, String>>,
            /// When each `editMessageText` arrived.
            edit_times: Mutex<Vec<std::time::Instant>>,
            next_id: Mutex<i64>,
            refuse_drafts: AtomicBool,
            /// Error answers for the next calls of a method.
            failures: Mutex<VecDeque<(String, usize, u16, Value)>>,
        }

        impl Api {
            fn calls(&self, method: &str) -> Vec<Value> {
                let log = self.log.lock().unwrap();
                log.iter()
                    .filter(|(m, _)| m == method)
                    .map(|(_, b)| b.clone())
                    .collect()
            }
            fn methods(&self) -> Vec<String> {
                let log = self.log.lock().unwrap();
                log.iter().map(|(m, _)| m.clone()).collect()
            }
            fn fail(&self, method: &str, status: u16, body: Value) {
                self.fail_after(method, 0, status, body);
            }
            /// Fail the call of `method` that comes after `skip` more successful ones.
            fn fail_after(&self, method: &str, skip: usize, status: u16, body: Value) {
                let mut failures = self.failures.lock().unwrap();
                failures.push_back((method.to_string(), skip, status, body));
            }
        }

        async fn serve(
            State(api): State<Arc<Api>>,
            uri: Uri,
            Json(body): Json<Value>,
        ) -> (StatusCode, Json<Value>) {
            let method = uri.path().rsplit('/').next().unwrap_or("").to_lowercase();
            api.log.lock().unwrap().push((method.clone(), body.clone()));
            let failure = {
                let mut failures = api.failures.lock().unwrap();
                match failures.iter_mut().position(|(m, _, _, _)| *m == method) {
                    Some(i) if failures[i].1 > 0 => {
                        failures[i].1 -= 1;
                        None
                    }
                    Some(i) => failures.remove(i),
                    None => None,
                }
            };
            if let Some((_, _, status, answer)) = failure {
                return (StatusCode::from_u16(status).unwrap(), Json(answer));
            }
            let ok = |result: Value| (StatusCode::OK, Json(json!({"ok": true, "result": result})));
            let text = body["text"].as_str().unwrap_or("").to_string();
            let message = |id: i64| {
                json!({"message_id": id, "date": 1700000000, "text": text,
                       "chat": {"id": body["chat_id"], "type": "supergroup", "title": "t"}})
            };
            match method.as_str() {
                "sendmessage" => {
                    let id = {
                        let mut next = api.next_id.lock().unwrap();
                        *next += 1;
                        999 + *next
                    };
                    api.texts.lock().unwrap().insert(id, text.clone());
                    ok(message(id))
                }
                "editmessagetext" => {
                    api.edit_times
                        .lock()
                        .unwrap()
                        .push(std::time::Instant::now());
                    let id = body["message_id"].as_i64().unwrap_or(0);
                    let mut texts = api.texts.lock().unwrap();
                    if texts.get(&id) == Some(&text) {
                        return (
                            StatusCode::BAD_REQUEST,
                            Json(json!({"ok": false, "error_code": 400,
                                "description": "Bad Request: message is not modified"})),
                        );
                    }
                    texts.insert(id, text.clone());
                    ok(message(id))
                }
                "sendmessagedraft" if api.refuse_drafts.load(Ordering::SeqCst) => (
                    StatusCode::NOT_FOUND,
                    Json(json!({"ok": false, "error_code": 404,
                        "description": "Not Found: method not found"})),
                ),
                "deletemessage" => {
                    let id = body["message_id"].as_i64().unwrap_or(0);
                    api.texts.lock().unwrap().remove(&id);
                    ok(json!(true))
                }
                _ => ok(json!(true)),
            }
        }

        /// Records handles into the same log as the calls, so their order can be checked.
        struct Log(Arc<Api>);

        #[async_trait]
        impl DraftLog for Log {
            async fn record(&self, handle: &DraftHandle) -> Result<(), ChannelError> {
                let mut log = self.0.log.lock().unwrap();
                log.push(("record".into(), handle.0.clone()));
                Ok(())
            }
        }

        async fn start(mode: StreamMode) -> (Arc<Api>, TelegramChannel) {
            let api = Arc::new(Api::default());
            let app = axum::Router::new()
                .fallback(serve)
                .with_state(Arc::clone(&api));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            tokio::spawn(async move {
                let _ = axum::serve(listener, app).await;
            });
            let chan = TelegramChannel::new(TelegramConfig {
                token: "123:T".into(),
                api_url: format!("http://{addr}"),
                poll_timeout_secs: 1,
                webhook_url: None,
                webhook_secret: String::new(),
                streaming: mode,
                stream_interval: Duration::from_millis(800),
            })
            .unwrap();
            (api, chan)
        }

        fn target(kind: ChatKind, resume: Option<DraftHandle>) -> DraftTarget {
            let id = match kind {
                ChatKind::Group => GROUP,
                ChatKind::Direct => USER,
            };
            DraftTarget {
                chat: ChatRef {
                    id: id.to_string(),
                    kind,
                    thread: None,
                },
                reply_to: Some("77".into()),
                idempotency_key: Some("reply:telegram:9001".into()),
                resume,
            }
        }

        fn view(text: &str) -> DraftView {
            DraftView {
                tools: Vec::new(),
                text: text.into(),
            }
        }

        fn open(
            chan: &TelegramChannel,
            api: &Arc<Api>,
            kind: ChatKind,
            resume: Option<DraftHandle>,
        ) -> Box<dyn Draft> {
            chan.open_draft(target(kind, resume), Arc::new(Log(Arc::clone(api))))
                .expect("a draft")
        }

        #[tokio::test]
        async fn off_opens_no_draft() {
            let (api, chan) = start(StreamMode::Off).await;
            let log = Arc::new(Log(Arc::clone(&api)));
            assert!(chan
                .open_draft(target(ChatKind::Direct, None), log.clone())
                .is_none());
            assert!(chan
                .open_draft(target(ChatKind::Group, None), log.clone())
                .is_none());
            // A reply that started in a message before the mode changed is finished there.
            let resume = Some(handle_for(&[1001]));
            assert!(chan
                .open_draft(target(ChatKind::Group, resume), log)
                .is_some());
        }

        #[tokio::test]
        async fn a_group_reply_is_sent_recorded_then_edited_and_finished_once() {
            let (api, chan) = start(StreamMode::Auto).await;
            let mut draft = open(&chan, &api, ChatKind::Group, None);
            assert_eq!(draft.interval(), GROUP_MIN_INTERVAL);
            draft.update(&view("Hello")).await.unwrap();
            draft.update(&view("Hello")).await.unwrap();
            draft.update(&view("Hello world")).await.unwrap();
            assert_eq!(
                api.methods(),
                ["sendmessage", "record", "editmessagetext"],
                "an unchanged view is not sent again; the id is recorded before the edit"
            );
            let first = &api.calls("sendmessage")[0];
            assert_eq!(first["reply_parameters"]["message_id"], json!(77));
            assert_eq!(first["parse_mode"], "HTML");
            assert_eq!(api.calls("record")[0], json!({"message_ids": [1000]}));

            let sent = draft.finish("Hello **world**", &[]).await.unwrap();
            assert_eq!(sent.message_ids, ["1000"]);
            assert_eq!(api.texts.lock().unwrap()[&1000], "Hello <b>world</b>");
            // The final edit too waits for the group interval.
            let times = api.edit_times.lock().unwrap().clone();
            assert_eq!(times.len(), 2);
            assert!(times[1] - times[0] >= GROUP_MIN_INTERVAL, "{times:?}");
            // A retry shows nothing twice.
            let again = draft.finish("Hello **world**", &[]).await.unwrap();
            assert_eq!(again, sent);
            assert_eq!(api.calls("sendmessage").len(), 1);
        }

        #[tokio::test]
        async fn a_long_view_continues_in_new_messages_and_finish_deletes_the_rest() {
            let (api, chan) = start(StreamMode::Edit).await;
            let mut draft = open(&chan, &api, ChatKind::Direct, None);
            let long = long_view().text;
            draft.update(&view(&long)).await.unwrap();
            let sends = api.calls("sendmessage");
            assert!(sends.len() >= 3, "{} messages", sends.len());
            // Each new message id is recorded before anything else happens.
            let methods = api.methods();
            for (i, pair) in methods.chunks(2).enumerate() {
                assert_eq!(pair, ["sendmessage", "record"], "step {i}: {methods:?}");
            }
            let records = api.calls("record");
            let all: Vec<i64> = (0..sends.len() as i64).map(|i| 1000 + i).collect();
            assert_eq!(records.last().unwrap(), &json!({"message_ids": all}));
            // Only the first message answers the user (private chat: none does).
            assert!(sends.iter().all(|s| s.get("reply_parameters").is_none()));

            let sent = draft.finish("Short *answer*.", &[]).await.unwrap();
            assert_eq!(sent.message_ids, ["1000"]);
            assert_eq!(api.texts.lock().unwrap()[&1000], "Short <i>answer</i>.");
            let deleted: Vec<Value> = api
                .calls("deletemessage")
                .iter()
                .map(|b| b["message_id"].clone())
                .collect();
            let rest: Vec<Value> = all[1..].iter().map(|i| json!(i)).collect();
            assert_eq!(deleted, rest);
        }

        #[tokio::test]
        async fn messages_already_showing_their_final_part_are_not_edited_again() {
            let (api, chan) = start(StreamMode::Edit).await;
            let mut draft = open(&chan, &api, ChatKind::Direct, None);
            let long = long_view().text;
            let parts = message_parts(&long);
            assert!(parts.len() >= 3);
            // Streamed whole: every message shows its final part already.
            draft.update(&view(&long)).await.unwrap();
            let before = api.calls("editmessagetext").len();
            let sent = draft.finish(&long, &[]).await.unwrap();
            assert_eq!(sent.message_ids.len(), parts.len());
            assert_eq!(
                api.calls("editmessagetext").len(),
                before,
                "{:?}",
                api.methods()
            );
            // A longer final answer edits only the message whose part changed.
            let longer = format!("{long} And one more sentence.");
            let mut draft = open(&chan, &api, ChatKind::Direct, None);
            draft.update(&view(&long)).await.unwrap();
            let before = api.calls("editmessagetext").len();
            draft.finish(&longer, &[]).await.unwrap();
            assert_eq!(api.calls("editmessagetext").len(), before + 1);
        }

        #[tokio::test]
        async fn a_resumed_reply_is_finished_in_its_recorded_message() {
            let (api, chan) = start(StreamMode::Auto).await;
            api.texts.lock().unwrap().insert(1005, "Half an ans".into());
            let resume = Some(handle_for(&[1005]));
            let mut draft = open(&chan, &api, ChatKind::Direct, resume.clone());
            let sent = draft.finish("Half an answer, whole.", &[]).await.unwrap();
            assert_eq!(sent.message_ids, ["1005"]);
            assert_eq!(api.methods(), ["editmessagetext"]);
            // After another crash, the same again: "not modified" is success.
            let mut draft = open(&chan, &api, ChatKind::Direct, resume);
            draft.finish("Half an answer, whole.", &[]).await.unwrap();
            assert!(api.calls("sendmessage").is_empty());
        }

        #[tokio::test]
        async fn a_private_reply_is_drafted_then_sent_once() {
            let (api, chan) = start(StreamMode::Auto).await;
            let mut draft = open(&chan, &api, ChatKind::Direct, None);
            assert_eq!(draft.interval(), Duration::from_millis(800));
            draft.update(&view("The answer")).await.unwrap();
            draft.update(&view("The answer **grows**")).await.unwrap();
            let drafts = api.calls("sendmessagedraft");
            assert_eq!(drafts.len(), 2);
            let id = json!(draft_id("reply:telegram:9001"));
            assert!(drafts.iter().all(|d| d["draft_id"] == id));
            assert_eq!(drafts[1]["text"], "The answer <b>grows</b>");
            assert_eq!(drafts[1]["parse_mode"], "HTML");
            assert_eq!(drafts[1]["chat_id"], json!(USER));

            let sent = draft.finish("The answer **grows**.", &[]).await.unwrap();
            assert_eq!(sent.message_ids, ["1000"]);
            let again = draft.finish("The answer **grows**.", &[]).await.unwrap();
            assert_eq!(again, sent);
            let sends = api.calls("sendmessage");
            assert_eq!(sends.len(), 1);
            assert_eq!(sends[0]["text"], "The answer <b>grows</b>.");
            assert!(api.calls("editmessagetext").is_empty());
            assert!(api.calls("record").is_empty());
        }

        #[tokio::test]
        async fn a_final_reply_cut_by_a_failure_continues_at_the_failed_part() {
            let (api, chan) = start(StreamMode::Auto).await;
            let mut draft = open(&chan, &api, ChatKind::Direct, None);
            let long = long_view().text;
            let parts = message_parts(&long);
            assert!(parts.len() >= 3);
            api.fail_after(
                "sendmessage",
                1,
                400,
                json!({"ok": false, "error_code": 400, "description": "Bad Request: boom"}),
            );
            match draft.finish(&long, &[]).await {
                Err(ChannelError::Partial {
                    delivered, total, ..
                }) => assert_eq!((delivered, total), (1, parts.len())),
                other => panic!("expected a partial delivery, got {other:?}"),
            }
            let sent = draft.finish(&long, &[]).await.unwrap();
            assert_eq!(sent.message_ids.len(), parts.len());
            let texts: Vec<String> = api
                .calls("sendmessage")
                .iter()
                .map(|b| b["text"].as_str().unwrap().to_string())
                .collect();
            // Part 1 was tried twice; nothing was shown twice.
            let mut expected = parts.clone();
            expected.insert(1, parts[1].clone());
            assert_eq!(texts, expected);
        }

        #[tokio::test]
        async fn refused_drafts_fall_back_to_edits_for_the_process() {
            let (api, chan) = start(StreamMode::Auto).await;
            api.refuse_drafts.store(true, Ordering::SeqCst);
            let mut draft = open(&chan, &api, ChatKind::Direct, None);
            draft.update(&view("First")).await.unwrap();
            assert_eq!(api.methods(), ["sendmessagedraft", "sendmessage", "record"]);
            let sent = draft.finish("First and last", &[]).await.unwrap();
            assert_eq!(sent.message_ids, ["1000"]);
            assert_eq!(api.calls("sendmessage").len(), 1);
            assert_eq!(api.texts.lock().unwrap()[&1000], "First and last");
            // The next reply does not try drafts again.
            let mut next = open(&chan, &api, ChatKind::Direct, None);
            next.update(&view("Second")).await.unwrap();
            assert_eq!(api.calls("sendmessagedraft").len(), 1);
        }

        #[tokio::test]
        async fn a_429_skips_updates_until_retry_after() {
            let (api, chan) = start(StreamMode::Auto).await;
            let mut draft = open(&chan, &api, ChatKind::Group, None);
            draft.update(&view("One")).await.unwrap();
            api.fail(
                "editmessagetext",
                429,
                json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 30",
                       "parameters": {"retry_after": 30}}),
            );
            let started = std::time::Instant::now();
            draft.update(&view("One two")).await.unwrap();
            draft.update(&view("One two three")).await.unwrap();
            assert!(started.elapsed() < Duration::from_secs(5), "update slept");
            assert_eq!(api.calls("editmessagetext").len(), 1, "{:?}", api.methods());
        }
    }
}
