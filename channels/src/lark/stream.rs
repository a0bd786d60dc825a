//! Streamed replies on Lark: a CardKit streaming card that fills in while the model writes, with
//! one progress line per tool call above the answer. Owns the [`Draft`] of the Lark channel,
//! the card JSON it creates, the card's `sequence` numbers, the per-card operation budget and
//! the process-wide memory of CardKit refusals ([`CardKitGate`]).
//!
//! Protocol (PROTOCOLS §5.2 and §6, open.feishu.cn "流式更新文本" / "卡片 JSON 2.0 结构"):
//! 1. On the first update (a tool line or the first text) `POST /open-apis/cardkit/v1/cards`
//!    creates a card entity from [`streaming_card`]: card JSON 2.0 with
//!    `config.streaming_mode: true`, `config.summary` and two `markdown` elements,
//!    [`PROGRESS_ELEMENT`] (tool lines) above [`ANSWER_ELEMENT`]. Its [`CardHandle`]
//!    (`{"card_id","created_ms","progress_element","answer_element"}`) goes to the
//!    [`DraftLog`] right away, before anything else.
//! 2. The card is sent as the reply to the user's message, `msg_type: interactive` with
//!    `content: {"type":"card","data":{"card_id":…}}`, through the adapter's reply endpoint with a
//!    `uuid` derived from [`DraftTarget::idempotency_key`] as for every reply
//!    ([`super::send::uuid_for`], message type tag [`CARD_UUID_TAG`], so it never collides with
//!    the ordinary reply's `uuid`). Sending it again after a crash is deduplicated by Lark, which
//!    keeps a `uuid` for an hour.
//! 3. Updates `PUT …/cards/{card_id}/elements/{element_id}/content` with the full text so far.
//!    `sequence` is [`next_sequence`]: the time since `created_ms` in 10 ms units, or the last
//!    one plus one if that is larger, so it keeps increasing across a daemon restart (which
//!    only knows `created_ms`). At most [`OPS_PER_WINDOW`] card operations go out per
//!    [`OPS_WINDOW`] (CardKit allows 10 per second per card; the window has a margin); an update
//!    that finds the budget spent leaves its write to the next one.
//! 4. [`Draft::finish`] writes the final answer rendered as a non-streamed reply card renders it
//!    (its first [`render::CARD_TEXT_LIMIT`] part, [`render::hard_breaks`]), the final progress
//!    lines, then `PATCH …/cards/{card_id}/settings` with `streaming_mode: false` and the
//!    answer's summary. The rest of a long answer continues as ordinary reply cards (the parts
//!    from the second on, with the same `uuid`s as a non-streamed reply's). Calling it again
//!    writes the same content with new sequence numbers: the answer is shown once.
//!
//! Refusals:
//! - creating the card refused for a missing scope ([`codes::SCOPE_MISSING`]) → this reply and
//!   every reply for the next [`SCOPE_BACKOFF`] (one hour; a restart tries again) go out as
//!   today's reply cards ([`super::send::send_text`]), and ONE warning per process names the
//!   scope to add ([`SCOPE`]). Any other refusal of the create call (or of sending the card)
//!   sends this reply the ordinary way (one warning per process, then debug lines).
//! - a write refused after the card was shown: updates stop; `finish` retries once after
//!   re-opening streaming (300309, streaming closed after ~10 minutes or by an earlier finish)
//!   or with a much larger `sequence` (300317); if still refused, it closes the card (best
//!   effort) and sends the whole answer as an ordinary reply card. The partial card then stays
//!   above the ordinary reply: the answer is complete once, in the ordinary reply.

use super::api::ApiError;
use super::{codes, render, send, Core, LarkConfig};
use crate::channel::ChannelError;
use crate::model::{OutboundBody, OutboundMessage, SentRef};
use crate::stream::{Draft, DraftHandle, DraftLog, DraftTarget, DraftView, StreamMode, ToolLine};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

const TARGET: &str = "ethan_channels::lark";

/// `element_id` of the tool progress lines (letters, digits and `_`, starting with a letter,
/// at most 20 characters).
pub const PROGRESS_ELEMENT: &str = "tool_progress";
/// `element_id` of the answer.
pub const ANSWER_ELEMENT: &str = "answer";
/// The scope CardKit needs.
pub const SCOPE: &str = "cardkit:card:write";
/// How long after a missing-scope refusal no streaming card is tried.
pub const SCOPE_BACKOFF: Duration = Duration::from_secs(3600);
/// Most card operations (create, content writes, settings) per [`OPS_WINDOW`].
pub const OPS_PER_WINDOW: usize = 10;
/// The window of [`OPS_PER_WINDOW`]: CardKit's one second plus a margin for network jitter.
pub const OPS_WINDOW: Duration = Duration::from_millis(1100);
/// Most bytes of progress lines shown in a card (the answer part may use the rest of the
/// 30 KB card limit beyond [`render::CARD_TEXT_LIMIT`]).
pub const PROGRESS_LIMIT: usize = 1536;
/// The message-type tag of the card message's `uuid` (see the module docs).
pub const CARD_UUID_TAG: &str = "cardkit";
/// The chat-list preview while the card is being written.
const WRITING_SUMMARY: &str = "…";
/// The least update interval (CardKit's 10 operations per second, two elements per update).
const MIN_INTERVAL: Duration = Duration::from_millis(100);

/// The process-wide memory of CardKit refusals (one per channel).
#[derive(Default)]
pub(crate) struct CardKitGate {
    refused_until: Mutex<Option<std::time::Instant>>,
    scope_warned: AtomicBool,
    other_warned: AtomicBool,
}

impl CardKitGate {
    /// Whether a streaming card may be tried now.
    fn open_now(&self) -> bool {
        let slot = self.refused_until.lock().unwrap_or_else(|p| p.into_inner());
        slot.is_none_or(|until| std::time::Instant::now() >= until)
    }

    /// Note that Lark refused CardKit with `code` (see the module docs for what follows).
    fn refused(&self, code: i64) {
        if codes::is_scope_missing(code) {
            *self.refused_until.lock().unwrap_or_else(|p| p.into_inner()) =
                Some(std::time::Instant::now() + SCOPE_BACKOFF);
            if !self.scope_warned.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    target: TARGET,
                    "Lark refused the streaming card (code {code}): the app lacks the `{SCOPE}` scope. \
                     Add `{SCOPE}` under Permissions & Scopes and publish a new app version; until then \
                     replies are sent as ordinary cards (streaming is tried again in an hour)"
                );
            } else {
                tracing::debug!(target: TARGET, "streaming card refused for lack of a scope (code {code})");
            }
        } else if !self.other_warned.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                target: TARGET,
                "Lark refused a streaming card (code {code}: {}); this reply is sent as an ordinary card",
                codes::meaning(code)
            );
        } else {
            tracing::debug!(target: TARGET, "streaming card refused (code {code}); ordinary reply");
        }
    }
}

/// What a streaming card keeps in the daemon's store ([`DraftHandle`]) to be finished after a
/// crash: `{"card_id": "…", "created_ms": <Unix ms of creation>, "progress_element": "…",
/// "answer_element": "…"}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CardHandle {
    pub card_id: String,
    pub created_ms: i64,
    pub progress_element: String,
    pub answer_element: String,
    /// The message that shows the card, once it was sent: a finish after a restart does not
    /// post the card again (Lark keeps a `uuid` for an hour only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message_id: Option<String>,
}

impl CardHandle {
    /// The handle as the daemon stores it.
    pub fn to_draft_handle(&self) -> DraftHandle {
        DraftHandle(serde_json::to_value(self).unwrap_or(Value::Null))
    }

    /// Read a stored handle; `None` when it is not a usable card handle (then a new card is
    /// created).
    pub fn from_draft_handle(handle: &DraftHandle) -> Option<CardHandle> {
        serde_json::from_value::<CardHandle>(handle.0.clone())
            .ok()
            .filter(|h| {
                !h.card_id.is_empty()
                    && valid_element_id(&h.progress_element)
                    && valid_element_id(&h.answer_element)
            })
    }
}

/// Whether `id` is a valid card `element_id`: ASCII letters, digits and `_`, starting with a
/// letter, 1–20 characters (PROTOCOLS §5.2).
pub fn valid_element_id(id: &str) -> bool {
    id.len() <= 20
        && id.starts_with(|c: char| c.is_ascii_alphabetic())
        && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// The next `sequence` of a card created at `created_ms` (Unix ms): the 10 ms units elapsed
/// since then, plus one, or `last + 1` if larger. Within a process the value grows by at least
/// ten per operation (at most ten operations per second), so it never runs more than ten ahead
/// of the clock; a restarted process (which knows only `created_ms`) starts above every value
/// used before as long as the restart takes over 100 ms and the wall clock does not go back.
pub fn next_sequence(last: u64, created_ms: i64, now_ms: i64) -> u64 {
    let by_time = u64::try_from((now_ms - created_ms).max(0) / 10).unwrap_or(0) + 1;
    by_time.max(last + 1)
}

/// Card JSON 2.0 of a streaming card: `config.streaming_mode: true`, a summary, and the
/// markdown elements [`PROGRESS_ELEMENT`] (small text) and [`ANSWER_ELEMENT`].
pub fn streaming_card(progress: &str, answer: &str) -> Value {
    json!({
        "schema": "2.0",
        "config": {
            "update_multi": true,
            "streaming_mode": true,
            "summary": {"content": WRITING_SUMMARY},
        },
        "body": {
            "elements": [
                {"tag": "markdown", "element_id": PROGRESS_ELEMENT, "content": progress, "text_size": "notation"},
                {"tag": "markdown", "element_id": ANSWER_ELEMENT, "content": answer},
            ],
        },
    })
}

/// The progress lines of `tools` as Markdown ([`DraftView::progress_markdown`]), at most
/// [`PROGRESS_LIMIT`] bytes: older lines give way to `… N earlier calls`.
pub fn progress_markdown(tools: &[ToolLine]) -> String {
    let view = DraftView {
        tools: tools.to_vec(),
        text: String::new(),
    };
    let all = view.progress_markdown();
    if all.len() <= PROGRESS_LIMIT {
        return all;
    }
    let lines: Vec<&str> = all.lines().collect();
    let mut kept: Vec<&str> = Vec::new();
    let mut size = 40; // room for the "earlier calls" line
    for line in lines.iter().rev() {
        if size + line.len() + 1 > PROGRESS_LIMIT {
            break;
        }
        size += line.len() + 1;
        kept.push(line);
    }
    kept.reverse();
    let dropped = lines.len() - kept.len();
    format!("… {dropped} earlier calls\n{}", kept.join("\n"))
}

/// The answer as the card shows it: the first reply-card part of `markdown`
/// ([`render::split_markdown`] at [`render::CARD_TEXT_LIMIT`]) with [`render::hard_breaks`], as
/// a non-streamed reply renders it; `""` for an empty answer.
pub fn card_answer(markdown: &str) -> String {
    render::split_markdown(markdown, render::CARD_TEXT_LIMIT)
        .first()
        .map(|p| render::hard_breaks(p))
        .unwrap_or_default()
}

/// The `config` that closes streaming, with the answer's chat-list summary.
fn closing_settings(markdown: &str) -> Value {
    let summary = render::summary(markdown);
    let mut config = json!({"streaming_mode": false});
    if !summary.is_empty() {
        config["summary"] = json!({ "content": summary });
    }
    json!({ "config": config })
}

/// The card operations of the last [`OPS_WINDOW`].
#[derive(Default)]
struct OpsWindow {
    recent: VecDeque<Instant>,
}

impl OpsWindow {
    fn prune(&mut self, now: Instant) {
        while self.recent.front().is_some_and(|t| *t + OPS_WINDOW <= now) {
            self.recent.pop_front();
        }
    }

    /// Operations that may go out now.
    fn available(&mut self) -> usize {
        self.prune(Instant::now());
        OPS_PER_WINDOW.saturating_sub(self.recent.len())
    }

    /// Wait for a free slot and take it.
    async fn take(&mut self) {
        loop {
            let now = Instant::now();
            self.prune(now);
            match self.recent.front() {
                Some(first) if self.recent.len() >= OPS_PER_WINDOW => {
                    tokio::time::sleep_until(*first + OPS_WINDOW).await;
                }
                _ => {
                    self.recent.push_back(now);
                    return;
                }
            }
        }
    }
}

/// A card this reply uses.
struct Card {
    handle: CardHandle,
    /// The last `sequence` used by this process (0: none yet).
    seq: u64,
    /// The reply message carrying the card, once sent by this process.
    message_id: Option<String>,
    /// Content last written per element (`None`: unknown, after a resume).
    progress: Option<String>,
    answer: Option<String>,
}

impl Card {
    fn written(&self, element: &str) -> Option<&str> {
        if element == self.handle.answer_element {
            self.answer.as_deref()
        } else {
            self.progress.as_deref()
        }
    }
}

/// A reply shown in a CardKit streaming card (see the module docs).
pub(crate) struct CardDraft {
    core: Arc<Core>,
    target: DraftTarget,
    log: Arc<dyn DraftLog>,
    interval: Duration,
    card: Option<Card>,
    /// CardKit refused this reply (no card shown): `finish` sends an ordinary reply.
    refused: bool,
    /// A write to the shown card was refused: no more updates; `finish` tries once more.
    stalled: bool,
    ops: OpsWindow,
    /// Reply cards sent the ordinary way so far by `finish` (the fallback, or the continuation
    /// of a long answer): the next `finish` starts at part `parts_sent`, so a part already
    /// shown is not requested again.
    parts_sent: usize,
    parts_ids: Vec<String>,
}

impl Card {
    /// The `sequence` of the card's next operation and the request `uuid` derived from it.
    fn next_op(&mut self) -> (u64, String) {
        self.seq = next_sequence(self.seq, self.handle.created_ms, now_ms());
        (self.seq, format!("{}-{}", self.handle.card_id, self.seq))
    }
}

/// The draft for `target`, or `None` when streaming is off or CardKit was refused for lack of
/// its scope less than [`SCOPE_BACKOFF`] ago. Every mode but `off` means a card (Telegram's
/// `draft`/`edit` do not apply to Lark).
pub(crate) fn open(
    config: &LarkConfig,
    core: &Arc<Core>,
    target: DraftTarget,
    log: Arc<dyn DraftLog>,
) -> Option<Box<dyn Draft>> {
    // A reply that already lives in a card is finished there, whatever the mode is now.
    let resumed = target
        .resume
        .as_ref()
        .and_then(CardHandle::from_draft_handle)
        .is_some();
    if !resumed && (config.streaming == StreamMode::Off || !core.cardkit.open_now()) {
        return None;
    }
    let card = target
        .resume
        .as_ref()
        .and_then(CardHandle::from_draft_handle)
        .map(|handle| Card {
            message_id: handle.message_id.clone(),
            handle,
            seq: 0,
            progress: None,
            answer: None,
        });
    Some(Box::new(CardDraft {
        core: Arc::clone(core),
        target,
        log,
        interval: config.stream_interval.max(MIN_INTERVAL),
        card,
        refused: false,
        stalled: false,
        ops: OpsWindow::default(),
        parts_sent: 0,
        parts_ids: Vec::new(),
    }))
}

fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

impl CardDraft {
    /// The reply as an [`OutboundMessage`] (for `uuid`s and the ordinary send path).
    fn reply_msg(&self) -> OutboundMessage {
        OutboundMessage {
            chat: self.target.chat.clone(),
            reply_to: self.target.reply_to.clone(),
            body: OutboundBody::Text(String::new()),
            idempotency_key: self.target.idempotency_key.clone(),
        }
    }

    /// Create the card with this content, record its handle, send it.
    async fn create(&mut self, progress: String, answer: String) -> Result<(), ChannelError> {
        let card_json = streaming_card(&progress, &answer).to_string();
        self.ops.take().await;
        let card_id = match self.core.api.create_card(&card_json).await {
            Ok(id) => id,
            Err(ApiError::Api { code, .. }) => {
                self.core.cardkit.refused(code);
                self.refused = true;
                return Ok(());
            }
            Err(e) => return Err(e.into()),
        };
        let handle = CardHandle {
            card_id,
            created_ms: now_ms(),
            progress_element: PROGRESS_ELEMENT.into(),
            answer_element: ANSWER_ELEMENT.into(),
            message_id: None,
        };
        if let Err(e) = self.log.record(&handle.to_draft_handle()).await {
            tracing::warn!(
                target: TARGET,
                "could not record streaming card {}: {e}; a crash now would leave it unfinished",
                handle.card_id
            );
        }
        self.card = Some(Card {
            handle,
            seq: 0,
            message_id: None,
            progress: Some(progress),
            answer: Some(answer),
        });
        self.ensure_sent().await
    }

    /// Send the card message unless this process already did (again after a restart: the same
    /// `uuid`, so Lark shows it once). A refusal makes this reply an ordinary one.
    async fn ensure_sent(&mut self) -> Result<(), ChannelError> {
        let msg = self.reply_msg();
        let Some(card) = self.card.as_mut() else {
            return Ok(());
        };
        if card.message_id.is_some() {
            return Ok(());
        }
        let content = json!({"type": "card", "data": {"card_id": card.handle.card_id}}).to_string();
        let uuid = send::uuid_for(&msg, 0, CARD_UUID_TAG, "", 0);
        match send::post_raw(&self.core, &msg, "interactive", &content, &uuid).await {
            Ok(id) => {
                card.message_id = Some(id.clone());
                card.handle.message_id = Some(id);
                let handle = card.handle.to_draft_handle();
                if let Err(e) = self.log.record(&handle).await {
                    tracing::warn!(
                        target: TARGET,
                        "could not record the message of streaming card {}: {e}",
                        card.handle.card_id
                    );
                }
                Ok(())
            }
            Err(ApiError::Api { code, .. }) => {
                self.core.cardkit.refused(code);
                self.refused = true;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Write `content` into `element` of the card (one operation).
    async fn write(&mut self, element: &str, content: &str) -> Result<(), ApiError> {
        let Some(card) = self.card.as_mut() else {
            return Ok(());
        };
        self.ops.take().await;
        let (seq, uuid) = card.next_op();
        self.core
            .api
            .put_card_element_content(&card.handle.card_id, element, content, seq, &uuid)
            .await?;
        if element == card.handle.answer_element {
            card.answer = Some(content.to_string());
        } else {
            card.progress = Some(content.to_string());
        }
        Ok(())
    }

    /// Change the card's `config` (one operation).
    async fn settings(&mut self, settings: &Value) -> Result<(), ApiError> {
        let Some(card) = self.card.as_mut() else {
            return Ok(());
        };
        self.ops.take().await;
        let (seq, uuid) = card.next_op();
        self.core
            .api
            .patch_card_settings(&card.handle.card_id, settings, seq, &uuid)
            .await
    }

    /// The final writes: answer, progress lines, streaming closed.
    async fn final_writes(
        &mut self,
        answer: &str,
        progress: &str,
        markdown: &str,
    ) -> Result<(), ApiError> {
        let Some(card) = self.card.as_ref() else {
            return Ok(());
        };
        let answer_el = card.handle.answer_element.clone();
        let progress_el = card.handle.progress_element.clone();
        if card.written(&answer_el) != Some(answer) {
            self.write(&answer_el, answer).await?;
        }
        let known = self.card.as_ref().and_then(|c| c.written(&progress_el));
        if known.map_or(!progress.is_empty(), |k| k != progress) {
            self.write(&progress_el, progress).await?;
        }
        self.settings(&closing_settings(markdown)).await
    }

    /// Send the parts of `markdown` from `first` on as ordinary reply cards, from where an
    /// earlier attempt stopped; returns the ids of every part sent from `first` on.
    async fn send_parts(&mut self, markdown: &str, first: usize) -> Result<SentRef, ChannelError> {
        let msg = self.reply_msg();
        let from = self.parts_sent.max(first);
        match send::send_text(&self.core, &msg, markdown, from).await {
            Ok(sent) => {
                self.parts_sent = from + sent.message_ids.len();
                self.parts_ids.extend(sent.message_ids);
                Ok(SentRef {
                    message_ids: self.parts_ids.clone(),
                })
            }
            Err(ChannelError::Partial {
                delivered,
                total,
                sent,
                cause,
            }) => {
                self.parts_sent = delivered;
                self.parts_ids.extend(sent.message_ids.iter().cloned());
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

    /// Close streaming, ignoring failures.
    async fn close_best_effort(&mut self, markdown: &str) {
        if self.card.as_ref().is_some_and(|c| c.message_id.is_some()) {
            if let Err(e) = self.settings(&closing_settings(markdown)).await {
                tracing::debug!(target: TARGET, "closing the streaming card failed: {e}");
            }
        }
    }
}

#[async_trait]
impl Draft for CardDraft {
    fn interval(&self) -> Duration {
        self.interval
    }

    /// Creates the card on the first view with a tool line or text; later views write the
    /// elements whose content changed (the answer first) while the operation budget allows.
    async fn update(&mut self, view: &DraftView) -> Result<(), ChannelError> {
        if self.refused || self.stalled {
            return Ok(());
        }
        let progress = progress_markdown(&view.tools);
        let answer = card_answer(&view.text);
        if self.card.is_none() {
            if progress.is_empty() && answer.trim().is_empty() {
                return Ok(());
            }
            return self.create(progress, answer).await;
        }
        self.ensure_sent().await?;
        if self.refused {
            return Ok(());
        }
        let Some(card) = self.card.as_ref() else {
            return Ok(());
        };
        let answer_el = card.handle.answer_element.clone();
        let writes = [
            (answer_el.clone(), answer),
            (card.handle.progress_element.clone(), progress),
        ];
        for (element, content) in writes {
            let unchanged = self
                .card
                .as_ref()
                .is_some_and(|c| c.written(&element) == Some(content.as_str()));
            if unchanged || (content.is_empty() && element != answer_el) {
                continue;
            }
            if self.ops.available() == 0 {
                break; // the next update writes the newer content
            }
            if let Err(e) = self.write(&element, &content).await {
                if let ApiError::Api { code, .. } = &e {
                    tracing::info!(
                        target: TARGET,
                        "the streaming card refused an update (code {code}: {}); it is finished at the end",
                        codes::meaning(*code)
                    );
                    self.stalled = true;
                }
                return Err(e.into());
            }
        }
        Ok(())
    }

    async fn finish(
        &mut self,
        markdown: &str,
        tools: &[ToolLine],
    ) -> Result<SentRef, ChannelError> {
        if !self.refused && self.card.is_some() {
            self.ensure_sent().await?;
        }
        if self.refused || self.card.is_none() {
            return self.send_parts(markdown, 0).await;
        }
        let answer = card_answer(markdown);
        let progress = progress_markdown(tools);
        let mut outcome = self.final_writes(&answer, &progress, markdown).await;
        if let Err(ApiError::Api { code, .. }) = &outcome {
            let code = *code;
            // One more try: streaming re-opened, or well past the last sequence.
            let retry = match code {
                codes::CARDKIT_STREAMING_CLOSED => self
                    .settings(&json!({"config": {"streaming_mode": true}}))
                    .await
                    .is_ok(),
                codes::CARDKIT_SEQUENCE_FAILED => {
                    if let Some(c) = self.card.as_mut() {
                        c.seq += 100_000;
                    }
                    true
                }
                _ => false,
            };
            if retry {
                if let Some(c) = self.card.as_mut() {
                    c.answer = None;
                    c.progress = None;
                }
                outcome = self.final_writes(&answer, &progress, markdown).await;
            }
        }
        match outcome {
            Ok(()) => {}
            // Busy, not refused: the daemon tries the whole finish again (it is safe to repeat).
            Err(ApiError::Api {
                code, http_status, ..
            }) if code == codes::RATE_LIMITED
                || code == codes::MESSAGE_RATE_LIMITED
                || http_status == 429
                || http_status >= 500 =>
            {
                return Err(ChannelError::Transport {
                    platform: super::PLATFORM,
                    message: format!(
                        "the streaming card is rate-limited or unavailable (code {code}, HTTP \
                         {http_status}); finishing it again later"
                    ),
                });
            }
            Err(ApiError::Api { code, .. }) => {
                tracing::warn!(
                    target: TARGET,
                    "the streaming card refused the final answer (code {code}: {}); sending it as an ordinary reply",
                    codes::meaning(code)
                );
                self.close_best_effort(markdown).await;
                self.refused = true;
                return self.send_parts(markdown, 0).await;
            }
            Err(e) => return Err(e.into()),
        }
        let mut sent = SentRef::default();
        if let Some(id) = self.card.as_ref().and_then(|c| c.message_id.clone()) {
            sent.message_ids.push(id);
        }
        if render::split_markdown(markdown, render::CARD_TEXT_LIMIT).len() > 1 {
            let more = self.send_parts(markdown, 1).await?;
            sent.message_ids.extend(more.message_ids);
        }
        Ok(sent)
    }

    /// Close streaming so the card reads as finished (the answer so far stays).
    async fn abandon(&mut self) {
        let text = self
            .card
            .as_ref()
            .and_then(|c| c.answer.clone())
            .unwrap_or_default();
        self.close_best_effort(&text).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stream::ToolState;

    #[test]
    fn card_is_json_2_with_streaming_and_two_valid_elements() {
        let card = streaming_card("⏳ `file_read` running", "Hello");
        assert_eq!(card["schema"], "2.0");
        assert_eq!(card["config"]["streaming_mode"], true);
        assert_eq!(card["config"]["update_multi"], true);
        assert!(card["config"]["summary"]["content"].is_string());
        let elements = card["body"]["elements"].as_array().unwrap();
        assert_eq!(elements.len(), 2);
        assert_eq!(elements[0]["element_id"], PROGRESS_ELEMENT);
        assert_eq!(elements[0]["content"], "⏳ `file_read` running");
        assert_eq!(elements[1]["element_id"], ANSWER_ELEMENT);
        assert_eq!(elements[1]["content"], "Hello");
        for e in elements {
            assert_eq!(e["tag"], "markdown");
            assert!(valid_element_id(e["element_id"].as_str().unwrap()), "{e}");
        }
        // The fixture's ids pass too; bad ids do not.
        assert!(valid_element_id("answer_md") && valid_element_id("status_md"));
        for bad in ["", "1abc", "_a", "a-b", "a b", "abcdefghijklmnopqrstu", "é"] {
            assert!(!valid_element_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn fixture_card_has_the_same_streaming_shape() {
        let fixture: Value = serde_json::from_str(include_str!(
            "../../../tests/fixtures/lark/card_v2_streaming_reply.json"
        ))
        .unwrap();
        let ours = streaming_card("", "");
        assert_eq!(fixture["schema"], ours["schema"]);
        assert_eq!(
            fixture["config"]["streaming_mode"],
            ours["config"]["streaming_mode"]
        );
        for e in fixture["body"]["elements"].as_array().unwrap() {
            if let Some(id) = e["element_id"].as_str() {
                assert!(valid_element_id(id));
            }
        }
    }

    #[test]
    fn sequence_increases_within_a_run_and_across_a_restart() {
        let created = 1_700_000_000_000;
        // Ten operations in one second (the budget), some in the same 10 ms.
        let mut last = 0;
        let mut seen = Vec::new();
        for t in [0, 1, 2, 150, 151, 400, 700, 701, 702, 999] {
            let s = next_sequence(last, created, created + t);
            assert!(s > last, "{s} after {last}");
            last = s;
            seen.push(s);
        }
        // A restart (which knows only created_ms) 200 ms later starts above all of them.
        let after_restart = next_sequence(0, created, created + 999 + 200);
        assert!(after_restart > *seen.iter().max().unwrap());
        // A clock before creation still gives a positive sequence.
        assert_eq!(next_sequence(0, created, created - 5_000), 1);
        // An hour later: still a small number (Lark's sequence is an int).
        assert!(next_sequence(0, created, created + 3_600_000) < i32::MAX as u64);
    }

    #[test]
    fn handle_round_trips_and_rejects_junk() {
        let h = CardHandle {
            card_id: "7355372766134157313".into(),
            created_ms: 1_700_000_000_123,
            progress_element: PROGRESS_ELEMENT.into(),
            answer_element: ANSWER_ELEMENT.into(),
            message_id: None,
        };
        let stored = h.to_draft_handle();
        assert_eq!(stored.0["card_id"], "7355372766134157313");
        assert_eq!(stored.0["created_ms"], 1_700_000_000_123i64);
        let text = serde_json::to_string(&stored).unwrap();
        let back: DraftHandle = serde_json::from_str(&text).unwrap();
        assert_eq!(CardHandle::from_draft_handle(&back), Some(h.clone()));
        for junk in [
            json!(null),
            json!({"message_ids": ["1"]}),
            json!({"card_id": "", "created_ms": 1, "progress_element": "a", "answer_element": "b"}),
            json!({"card_id": "c", "created_ms": 1, "progress_element": "a-b", "answer_element": "b"}),
        ] {
            assert_eq!(
                CardHandle::from_draft_handle(&DraftHandle(junk.clone())),
                None,
                "{junk}"
            );
        }
    }

    #[test]
    fn progress_lines_and_their_cap() {
        let tools = vec![
            ToolLine {
                name: "file_read".into(),
                state: ToolState::Done,
            },
            ToolLine {
                name: "shell".into(),
                state: ToolState::Running,
            },
        ];
        assert_eq!(
            progress_markdown(&tools),
            "✅ `file_read` done\n⏳ `shell` running"
        );
        assert_eq!(progress_markdown(&[]), "");
        let many: Vec<ToolLine> = (0..200)
            .map(|i| ToolLine {
                name: format!("tool_{i}"),
                state: ToolState::Denied,
            })
            .collect();
        let md = progress_markdown(&many);
        assert!(md.len() <= PROGRESS_LIMIT, "{}", md.len());
        assert!(md.starts_with("… "), "{md}");
        assert!(md.ends_with("⛔ `tool_199` denied"), "{md}");
    }

    #[test]
    fn card_answer_renders_like_a_reply_card() {
        let md = "Hello **world**\nsecond line";
        assert_eq!(
            card_answer(md),
            render::reply_cards(md)[0]["body"]["elements"][0]["content"]
        );
        assert_eq!(card_answer(""), "");
        let long = "word ".repeat(render::CARD_TEXT_LIMIT / 2);
        let parts = render::split_markdown(&long, render::CARD_TEXT_LIMIT);
        assert!(parts.len() > 1);
        assert_eq!(card_answer(&long), render::hard_breaks(&parts[0]));
        let closing = closing_settings("# Title\nbody");
        assert_eq!(closing["config"]["streaming_mode"], false);
        assert_eq!(closing["config"]["summary"]["content"], "Title");
    }

    #[tokio::test(start_paused = true)]
    async fn operations_are_capped_per_window() {
        let mut w = OpsWindow::default();
        let t0 = Instant::now();
        for _ in 0..OPS_PER_WINDOW {
            w.take().await;
        }
        assert_eq!(t0.elapsed(), Duration::ZERO);
        assert_eq!(w.available(), 0);
        w.take().await;
        assert_eq!(t0.elapsed(), OPS_WINDOW);
    }
}
