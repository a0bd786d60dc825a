//! Delivering replies: Markdown → Telegram HTML ([`super::render`]), split so that each part is
//! at most 4096 UTF-16 code units ([`super::chunk`]), sent in order with `sendMessage`
//! (`parse_mode: HTML`). When Telegram rejects the entities (400 "can't parse entities") the same
//! part goes out as plain text. 429 waits exactly `retry_after` (at most 5 tries per part). A part
//! failing after earlier ones were shown ends the send with [`ChannelError::Partial`], and a
//! send can start at a later part ([`crate::Channel::send_from`]): the split is deterministic,
//! so the parts are the same each time.

use super::chunk::{chunk_html, TELEGRAM_TEXT_LIMIT};
use super::errors::map_error;
use super::part::send_part;
use super::render::{html_to_display_text, markdown_to_html};
use super::{TelegramChannel, PLATFORM};
use crate::channel::ChannelError;
use crate::model::{ChatKind, OutboundBody, OutboundMessage, SentRef};
use teloxide::payloads::SendChatActionSetters;
use teloxide::prelude::Requester;
use teloxide::types::{ChatAction, ChatId, MessageId, ThreadId};
use teloxide::Bot;

pub(super) fn parse_chat_id(id: &str) -> Result<ChatId, ChannelError> {
    id.parse::<i64>()
        .map(ChatId)
        .map_err(|_| ChannelError::Api {
            platform: PLATFORM,
            code: 400,
            description: format!("not a Telegram chat id: {id:?}"),
        })
}

pub(super) fn parse_i32(id: &Option<String>) -> Option<i32> {
    id.as_deref().and_then(|s| s.parse().ok())
}

/// Send `msg` from part `first` (0-based) on; see [`crate::Channel::send_from`]. Only text and
/// cards are split; every other body is one part.
pub(super) async fn send(
    chan: &TelegramChannel,
    msg: &OutboundMessage,
    first: usize,
) -> Result<SentRef, ChannelError> {
    let single = !matches!(msg.body, OutboundBody::Text(_) | OutboundBody::Ui(_));
    if single && first > 0 {
        return Ok(SentRef::default());
    }
    let chat_id = parse_chat_id(&msg.chat.id)?;
    let thread = parse_i32(&msg.chat.thread).map(|t| ThreadId(MessageId(t)));
    match &msg.body {
        OutboundBody::Typing => {
            let mut req = chan.bot().send_chat_action(chat_id, ChatAction::Typing);
            if let Some(t) = thread {
                req = req.message_thread_id(t);
            }
            req.await.map_err(map_error)?;
            Ok(SentRef::default())
        }
        OutboundBody::Approval(req) => {
            super::approval::send_request(chan, chat_id, thread, req).await
        }
        OutboundBody::Ui(ui) => {
            let parts = ethan_cards::render_telegram(ui);
            let mut sent = SentRef::default();
            for (i, part) in parts.iter().enumerate().skip(first) {
                match send_part(chan.bot(), chat_id, thread, None, part).await {
                    Ok(id) => sent.message_ids.push(id),
                    Err(e) => return Err(ChannelError::stopped_at(first, i, parts.len(), sent, e)),
                }
            }
            Ok(sent)
        }
        OutboundBody::ResolveApproval {
            request_id,
            outcome,
        } => {
            super::approval::resolve(chan, request_id, outcome).await;
            Ok(SentRef::default())
        }
        OutboundBody::Text(markdown) => send_text(chan.bot(), msg, markdown, first).await,
    }
}

/// Send the Markdown reply `markdown` of `msg` from part `first` on: rendered to HTML, split at
/// [`TELEGRAM_TEXT_LIMIT`] UTF-16 units, each part with [`send_part`]. In groups the first part
/// answers `msg.reply_to`. Parts without visible text are skipped (their index still counts).
///
/// # Errors
/// As [`send`]: [`ChannelError::Partial`] when a part fails after this call delivered one.
pub(super) async fn send_text(
    bot: &Bot,
    msg: &OutboundMessage,
    markdown: &str,
    first: usize,
) -> Result<SentRef, ChannelError> {
    let chat_id = parse_chat_id(&msg.chat.id)?;
    let thread = parse_i32(&msg.chat.thread).map(|t| ThreadId(MessageId(t)));
    let html = markdown_to_html(markdown);
    // Replies are threaded under the asker's message only in groups.
    // The first part only: the rest follow it.
    let mut reply_to = match msg.chat.kind {
        ChatKind::Group if first == 0 => parse_i32(&msg.reply_to),
        _ => None,
    };
    let parts = chunk_html(&html, TELEGRAM_TEXT_LIMIT);
    let mut sent = SentRef::default();
    for (i, part) in parts.iter().enumerate().skip(first) {
        // Telegram refuses a message with no visible text.
        if html_to_display_text(part).trim().is_empty() {
            continue;
        }
        match send_part(bot, chat_id, thread, reply_to.take(), part).await {
            Ok(id) => sent.message_ids.push(id),
            Err(e) => return Err(ChannelError::stopped_at(first, i, parts.len(), sent, e)),
        }
    }
    Ok(sent)
}
