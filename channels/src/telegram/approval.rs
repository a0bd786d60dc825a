//! Approval requests on Telegram: an HTML message with an inline keyboard (Approve once /
//! Approve for this session / Deny; `callback_data` = `ap:<o|s|d>:<request_id>`, ≤ 64 bytes), the
//! `callback_query` of a press handed to the daemon ([`crate::InboundSink::decide`]) and answered
//! with `answerCallbackQuery`, and the request message edited to show the outcome
//! (`editMessageText`, keyboard removed). A text fallback `/approve <id>` / `/deny <id>` is shown
//! in the message and handled by the daemon.

use super::render::markdown_to_html;
use super::send::{map_error, send_part};
use super::TelegramChannel;
use crate::channel::{ChannelError, InboundSink};
use crate::model::{ApprovalChoice, ApprovalDecision, ApprovalRequest, ChannelKind, SentRef};
use teloxide::payloads::{AnswerCallbackQuerySetters, EditMessageTextSetters, SendMessageSetters};
use teloxide::prelude::Requester;
use teloxide::types::{
    CallbackQuery, ChatId, InlineKeyboardButton, InlineKeyboardMarkup, MessageId, ParseMode,
    ThreadId,
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

pub(super) async fn send_request(
    chan: &TelegramChannel,
    chat_id: ChatId,
    thread: Option<ThreadId>,
    req: &ApprovalRequest,
) -> Result<SentRef, ChannelError> {
    let mut description: String = req.description.chars().take(3000).collect();
    if description.len() < req.description.len() {
        description.push('…');
    }
    let html = format!(
        "🔐 <b>Approval needed</b>: <code>{}</code>\n<pre>{}</pre>\n{}Reply /approve {} or /deny {} if the buttons do not work.",
        escape(&req.tool),
        escape(&description),
        if req.always { "<i>This kind of call is asked every time.</i>\n" } else { "" },
        req.request_id,
        req.request_id,
    );
    let mut r = chan
        .bot()
        .send_message(chat_id, html.clone())
        .parse_mode(ParseMode::Html)
        .reply_markup(keyboard(req));
    if let Some(t) = thread {
        r = r.message_thread_id(t);
    }
    let sent = match r.await {
        Ok(m) => m,
        Err(e) => {
            // Without buttons the text fallback still works.
            tracing::warn!("approval keyboard refused ({e}); sending the text fallback");
            let text = format!(
                "Approval needed for {}: {}\nReply /approve {} or /deny {}.",
                req.tool, req.description, req.request_id, req.request_id
            );
            let id = send_part(chan, chat_id, thread, None, &markdown_to_html(&text)).await?;
            return Ok(SentRef {
                message_ids: vec![id],
            });
        }
    };
    chan.approvals().insert(
        req.request_id.clone(),
        SentApproval {
            chat_id,
            message_id: sent.id,
            html,
        },
    );
    Ok(SentRef {
        message_ids: vec![sent.id.0.to_string()],
    })
}

/// Edit the request message to show `outcome` (buttons removed). Unknown ids are ignored.
pub(super) async fn resolve(chan: &TelegramChannel, request_id: &str, outcome: &str) {
    let Some(sent) = chan.approvals().remove(request_id) else {
        return;
    };
    let html = format!("{}\n\n<b>{}</b>", sent.html, escape(outcome));
    if let Err(e) = chan
        .bot()
        .edit_message_text(sent.chat_id, sent.message_id, html)
        .parse_mode(ParseMode::Html)
        .await
    {
        tracing::debug!("cannot edit the approval message: {}", map_error(e));
    }
}

/// Handle a `callback_query`: ours go to the daemon; every query is answered so the client's
/// spinner stops.
pub(super) async fn on_callback(chan: &TelegramChannel, sink: &dyn InboundSink, q: &CallbackQuery) {
    let Some((choice, request_id)) = q.data.as_deref().and_then(parse_callback_data) else {
        let _ = chan.bot().answer_callback_query(q.id.clone()).await;
        return;
    };
    let chat_id = q
        .message
        .as_ref()
        .map(|m| m.chat().id.0.to_string())
        .unwrap_or_default();
    let ack = sink
        .decide(ApprovalDecision {
            channel: ChannelKind::Telegram,
            request_id: request_id.clone(),
            choice,
            user_id: q.from.id.0.to_string(),
            chat_id,
        })
        .await;
    let mut toast: String = ack.toast.chars().take(190).collect();
    if toast.is_empty() {
        toast = "OK".into();
    }
    if let Err(e) = chan
        .bot()
        .answer_callback_query(q.id.clone())
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
    use super::*;

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
