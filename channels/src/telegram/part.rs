//! Sending one part of a message: HTML, or plain text when Telegram rejects the entities; a 429
//! waits exactly `retry_after` (at most 5 tries). Used by replies ([`super::send`]) and
//! approvals ([`super::approval`]).

use super::calls::{self, Sent};
use super::errors::map_error;
use super::render::html_to_display_text;
use crate::channel::ChannelError;
use teloxide::payloads::{SendMessage, SendMessageSetters};
use teloxide::types::{
    ChatId, LinkPreviewOptions, MessageId, ParseMode, ReplyParameters, ThreadId,
};
use teloxide::{ApiError, Bot, RequestError};

const MAX_TRIES: usize = 5;

/// Send one part as HTML, falling back to plain text when Telegram rejects the entities.
pub(super) async fn send_part(
    bot: &Bot,
    chat_id: ChatId,
    thread: Option<ThreadId>,
    reply_to: Option<i32>,
    html: &str,
) -> Result<String, ChannelError> {
    let mut plain = false;
    let mut tries = 0;
    loop {
        tries += 1;
        let text = if plain {
            html_to_display_text(html)
        } else {
            html.to_string()
        };
        let mut req = SendMessage::new(chat_id, text).link_preview_options(LinkPreviewOptions {
            is_disabled: true,
            url: None,
            prefer_small_media: false,
            prefer_large_media: false,
            show_above_text: false,
        });
        if !plain {
            req = req.parse_mode(ParseMode::Html);
        }
        if let Some(t) = thread {
            req = req.message_thread_id(t);
        }
        if let Some(r) = reply_to {
            req = req.reply_parameters(ReplyParameters {
                message_id: MessageId(r),
                allow_sending_without_reply: Some(true),
                ..ReplyParameters::new(MessageId(r))
            });
        }
        match calls::call::<_, Sent>(bot, req).await {
            Ok(m) => return Ok(m.message_id.to_string()),
            Err(RequestError::Api(ApiError::CantParseEntities(why))) if !plain => {
                tracing::warn!(
                    "telegram rejected the HTML ({why}); sending this part as plain text"
                );
                plain = true;
            }
            Err(RequestError::RetryAfter(s)) if tries < MAX_TRIES => {
                tracing::warn!("telegram 429 on sendMessage; waiting {}s", s.seconds());
                tokio::time::sleep(s.duration()).await;
            }
            Err(e) => return Err(map_error(e)),
        }
    }
}
