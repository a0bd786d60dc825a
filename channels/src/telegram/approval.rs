//! Approval requests on Telegram: an HTML message with an inline keyboard (Approve once /
//! Approve for this session / Deny; `callback_data` = `ap:<o|s|d>:<request_id>`, ≤ 64 bytes), the
//! `callback_query` of a press handed to the daemon ([`crate::InboundSink::decide`]) and answered
//! with `answerCallbackQuery`, and the request message edited to show the outcome
//! (`editMessageText`, keyboard removed). A text fallback `/approve <id>` / `/deny <id>` is shown
//! in the message and handled by the daemon.

use super::errors::map_error;
use super::part::send_part;
use super::wire::CallbackQuery;
use super::{calls, TelegramChannel};
use crate::channel::{ChannelError, InboundSink};
use crate::model::{ApprovalChoice, ApprovalDecision, ApprovalRequest, ChannelKind, SentRef};
use teloxide::payloads::{
    AnswerCallbackQuerySetters, EditMessageText, EditMessageTextSetters, SendMessage,
    SendMessageSetters,
};
use teloxide::prelude::Requester;
use teloxide::types::{
    CallbackQueryId, ChatId, InlineKeyboardButton, InlineKeyboardMarkup, LinkPreviewOptions,
    MessageId, ParseMode, ThreadId,
};

/// Prefix of our `callback_data`.
const PREFIX: &str = "ap:";

/// A sent request, remembered so its message can be edited later.
#[derive(Debug, Clone)]
pub(super) struct SentApproval {
    chat_id: ChatId,
    message_id: MessageId,
    html: String,
}

/// Link previews disabled.
fn no_preview() -> LinkPreviewOptions {
    LinkPreviewOptions {
        is_disabled: true,
        url: None,
        prefer_small_media: false,
        prefer_large_media: false,
        show_above_text: false,
    }
}

/// Parse `ap:<choice>:<request_id>`.
pub fn parse_callback_data(data: &str) -> Option<(ApprovalChoice, String)> {
    let rest = data.strip_prefix(PREFIX)?;
    let (code, id) = rest.split_once(':')?;
    let choice = ApprovalChoice::from_code(code)?;
    (!id.is_empty() && id.len() <= 24).then(|| (choice, id.to_string()))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn keyboard(req: &ApprovalRequest) -> InlineKeyboardMarkup {
    let data = |c: ApprovalChoice| format!("{PREFIX}{}:{}", c.code(), req.request_id);
    let mut row = vec![InlineKeyboardButton::callback(
        "✅ Approve once",
        data(ApprovalChoice::Once),
    )];
    if !req.always {
        row.push(InlineKeyboardButton::callback(
            "✅ For this session",
            data(ApprovalChoice::Session),
        ));
    }
    row.push(InlineKeyboardButton::callback(
        "❌ Deny",
        data(ApprovalChoice::Deny),
    ));
    InlineKeyboardMarkup::new(vec![row])
}

/// The request message: the tool name and the whole description, HTML-escaped and never cut
/// (the daemon sends descriptions already made visible and short enough to fit one message; see
/// `consent::display`), inside `<pre>` so every space and line break shows as sent.
fn request_html(req: &ApprovalRequest) -> String {
    format!(
        "🔐 <b>Approval needed</b>: <code>{}</code>\n<pre>{}</pre>\n{}Reply /approve {} or /deny {} if the buttons do not work.",
        escape(&req.tool),
        escape(&req.description),
        if req.always { "<i>This kind of call is asked every time.</i>\n" } else { "" },
        req.request_id,
        req.request_id,
    )
}

pub(super) async fn send_request(
    chan: &TelegramChannel,
    chat_id: ChatId,
    thread: Option<ThreadId>,
    req: &ApprovalRequest,
) -> Result<SentRef, ChannelError> {
    let html = request_html(req);
    // Link previews off: Telegram would fetch a URL of the call (with its query) and show a
    // card of it under the question.
    let mut r = SendMessage::new(chat_id, html.clone())
        .parse_mode(ParseMode::Html)
        .link_preview_options(no_preview())
        .reply_markup(keyboard(req));
    if let Some(t) = thread {
        r = r.message_thread_id(t);
    }
    let sent = match calls::call::<_, calls::Sent>(chan.bot(), r).await {
        Ok(m) => m,
        Err(e) => {
            let e = map_error(e);
            // A person the bot may not write to: no fallback will reach them either.
            if e.is_recipient_unreachable() {
                return Err(e);
            }
            // Without buttons the text fallback still works.
            tracing::warn!("approval keyboard refused ({e}); sending the text fallback");
            let html = format!(
                "Approval needed for <code>{}</code>:\n<pre>{}</pre>\nReply /approve {} or /deny {}.",
                escape(&req.tool),
                escape(&req.description),
                req.request_id,
                req.request_id
            );
            let id = send_part(chan.bot(), chat_id, thread, None, &html).await?;
            return Ok(SentRef {
                message_ids: vec![id],
            });
        }
    };
    chan.approvals().insert(
        req.request_id.clone(),
        SentApproval {
            chat_id,
            message_id: MessageId(sent.message_id),
            html,
        },
    );
    Ok(SentRef {
        message_ids: vec![sent.message_id.to_string()],
    })
}

/// Edit the request message to show `outcome` (buttons removed). Unknown ids are ignored.
pub(super) async fn resolve(chan: &TelegramChannel, request_id: &str, outcome: &str) {
    let Some(sent) = chan.approvals().remove(request_id) else {
        return;
    };
    let html = format!("{}\n\n<b>{}</b>", sent.html, escape(outcome));
    let edit = EditMessageText::new(sent.chat_id, sent.message_id, html)
        .parse_mode(ParseMode::Html)
        .link_preview_options(no_preview());
    if let Err(e) = calls::call::<_, calls::Unread>(chan.bot(), edit).await {
        tracing::debug!("cannot edit the approval message: {}", map_error(e));
    }
}

/// Handle a `callback_query`: ours go to the daemon; every query is answered so the client's
/// spinner stops.
pub(super) async fn on_callback(chan: &TelegramChannel, sink: &dyn InboundSink, q: &CallbackQuery) {
    let Some((choice, request_id)) = q.data.as_deref().and_then(parse_callback_data) else {
        let _ = chan
            .bot()
            .answer_callback_query(CallbackQueryId(q.id.clone()))
            .await;
        return;
    };
    let chat_id = q
        .message
        .as_ref()
        .map(|m| m.chat.id.to_string())
        .unwrap_or_default();
    let ack = sink
        .decide(ApprovalDecision {
            channel: ChannelKind::Telegram,
            request_id: request_id.clone(),
            choice,
            user_id: q.from.id.to_string(),
            chat_id,
        })
        .await;
    let mut toast: String = ack.toast.chars().take(190).collect();
    if toast.is_empty() {
        toast = "OK".into();
    }
    if let Err(e) = chan
        .bot()
        .answer_callback_query(CallbackQueryId(q.id.clone()))
        .text(toast)
        .show_alert(!ack.accepted)
        .await
    {
        tracing::debug!("answerCallbackQuery failed: {}", map_error(e));
    }
    if let Some(outcome) = ack.outcome {
        resolve(chan, &request_id, &outcome).await;
    }
}

#[cfg(test)]
mod tests {
    use super::super::render::html_to_display_text;
    use super::*;

    #[test]
    fn the_request_shows_the_whole_description_escaped() {
        let description = format!("{} &lt; <b>x</b> *y* _z_ ; touch X", "a".repeat(2950));
        let req = ApprovalRequest {
            request_id: "abcdef123456".into(),
            tool: "shell".into(),
            description: description.clone(),
            always: true,
        };
        let html = request_html(&req);
        assert!(
            html.contains("&amp;lt; &lt;b&gt;x&lt;/b&gt; *y* _z_ ; touch X</pre>"),
            "{html}"
        );
        // What the owner reads, once Telegram has parsed the HTML, holds every character.
        assert!(html_to_display_text(&html).contains(&description));
    }

    #[test]
    fn callback_data_round_trip_and_limits() {
        let req = ApprovalRequest {
            request_id: "abcdef123456".into(),
            tool: "shell".into(),
            description: "touch x".into(),
            always: false,
        };
        let kb = keyboard(&req);
        assert_eq!(kb.inline_keyboard[0].len(), 3);
        for b in &kb.inline_keyboard[0] {
            if let teloxide::types::InlineKeyboardButtonKind::CallbackData(d) = &b.kind {
                assert!(d.len() <= 64);
                assert!(parse_callback_data(d).is_some());
            }
        }
        let always = ApprovalRequest {
            always: true,
            ..req
        };
        assert_eq!(
            keyboard(&always).inline_keyboard[0].len(),
            2,
            "no session button"
        );
        assert_eq!(
            parse_callback_data("ap:o:abc"),
            Some((ApprovalChoice::Once, "abc".into()))
        );
        assert_eq!(parse_callback_data("ap:x:abc"), None);
        assert_eq!(parse_callback_data("other"), None);
        assert_eq!(parse_callback_data("ap:d:"), None);
    }
}
