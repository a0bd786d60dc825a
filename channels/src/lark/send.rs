//! Delivering an [`OutboundMessage`] to Lark.
//!
//! Protocol: `POST /open-apis/im/v1/messages/{message_id}/reply` when the message answers one
//! (so the answer is threaded under it; `reply_in_thread` inside a topic), otherwise
//! `POST /open-apis/im/v1/messages?receive_id_type=chat_id` (PROTOCOLS §5.1, Go SDK
//! `service/im/v1/resource.go`).
//!
//! - Text is rendered as one or more cards ([`render`]); a part failing after earlier ones were
//!   shown ends the send with [`ChannelError::Partial`], and a send can start at a later part
//!   ([`crate::Channel::send_from`]; the split is deterministic). When Lark refuses a card
//!   ([`codes::CARD_REJECTED`], e.g. 230099 or 11310) the same part goes out as a `post` with an
//!   `md` element, and if that is refused too, as plain `text`.
//! - Every request carries a `uuid` so a send retried after a lost answer is not shown twice
//!   (Lark keeps a `uuid` for an hour). With an [`OutboundMessage::idempotency_key`] (the
//!   daemon's replies) it is derived from the key, the chat, the part index and the `msg_type`
//!   only, so the same reply re-sent after a restart gets the same `uuid`. Without a key it is
//!   derived from the chat, the replied message, the part and the content; sends without a
//!   replied message also include the current 10-minute window, so the same digest can be
//!   posted again later.
//! - At most 5 messages per second go to one chat ([`super::api::Pacer`]); rate-limit answers
//!   are waited out by the API client.
//! - `Typing` is a no-op: Lark has no typing indicator for bots.
//! - `ResolveApproval` replaces the approval card sent for that request with its outcome
//!   (`PATCH /open-apis/im/v1/messages/{message_id}`); an unknown request id is ignored.

use super::api::ApiError;
use super::render::{
    approval_card, outcome_card, post_content, reply_card, split_markdown, text_content,
};
use super::{codes, render, Core, LarkChannel};
use crate::channel::ChannelError;
use crate::model::{ChatKind, ChatRef, OutboundBody, OutboundMessage, SentRef};
use sha2::{Digest, Sha256};

const TARGET: &str = "ethan_channels::lark";

/// Send `msg` from part `first` (0-based) on; see [`crate::Channel::send_from`]. Only text is
/// split; every other body is one part.
pub(super) async fn send(
    chan: &LarkChannel,
    msg: &OutboundMessage,
    first: usize,
) -> Result<SentRef, ChannelError> {
    let mut sent = SentRef::default();
    if first > 0 && !matches!(msg.body, OutboundBody::Text(_)) {
        return Ok(sent);
    }
    match &msg.body {
        OutboundBody::Typing => {}
        OutboundBody::Text(markdown) => return send_text(&chan.core, msg, markdown, first).await,
        OutboundBody::Approval(req) => {
            let fallback = render::approval_fallback(req);
            let id = deliver(&chan.core, msg, 0, &approval_card(req), &fallback).await?;
            chan.remember_approval(req, &id);
            sent.message_ids.push(id);
        }
        OutboundBody::Ui(ui) => {
            let text = ethan_cards::render_text(ui);
            let card = match ethan_cards::render_lark(ui) {
                Ok(card) => card,
                Err(e) => {
                    tracing::warn!(target: TARGET, "card not renderable for Lark ({e}); sending text");
                    reply_card(&render::hard_breaks(&text))
                }
            };
            let id = deliver(&chan.core, msg, 0, &card, &text).await?;
            sent.message_ids.push(id);
        }
        OutboundBody::ResolveApproval {
            request_id,
            outcome,
        } => {
            let Some((req, message_id)) = chan.approval(request_id) else {
                tracing::debug!(target: TARGET, "no approval card known for {request_id}; nothing to update");
                return Ok(sent);
            };
            let card = outcome_card(Some(&req), None, outcome).to_string();
            match chan.api().update_card(&message_id, &card).await {
                Ok(()) => sent.message_ids.push(message_id),
                Err(e) => {
                    tracing::warn!(target: TARGET, "could not update the approval card {message_id}: {e}");
                    return Err(e.into());
                }
            }
        }
    }
    Ok(sent)
}

/// Send the Markdown reply `markdown` of `msg` (whose body is not looked at) from part `first`
/// on: one reply card per [`render::CARD_TEXT_LIMIT`] part, as [`send`] does for a text body.
pub(crate) async fn send_text(
    core: &Core,
    msg: &OutboundMessage,
    markdown: &str,
    first: usize,
) -> Result<SentRef, ChannelError> {
    let mut sent = SentRef::default();
    let parts = split_markdown(markdown, render::CARD_TEXT_LIMIT);
    for (i, part) in parts.iter().enumerate().skip(first) {
        let card = reply_card(&render::hard_breaks(part));
        match deliver(core, msg, i, &card, part).await {
            Ok(id) => sent.message_ids.push(id),
            Err(e) => return Err(ChannelError::stopped_at(first, i, parts.len(), sent, e)),
        }
    }
    Ok(sent)
}

/// Send one card, falling back to `post` and then `text` when the card is refused.
async fn deliver(
    chan: &Core,
    msg: &OutboundMessage,
    index: usize,
    card: &serde_json::Value,
    markdown: &str,
) -> Result<String, ChannelError> {
    let card_json = card.to_string();
    let err = match post_one(chan, msg, index, "interactive", &card_json).await {
        Ok(id) => return Ok(id),
        Err(ApiError::Api { code, msg: m, .. }) if codes::is_card_rejected(code) => {
            tracing::warn!(
                target: TARGET,
                "lark refused the card (code {code}: {m}; {}); sending it as a post",
                codes::meaning(code)
            );
            match post_one(chan, msg, index, "post", &post_content(markdown)).await {
                Ok(id) => return Ok(id),
                Err(e @ ApiError::Api { .. }) => {
                    tracing::warn!(target: TARGET, "lark refused the post too ({e}); sending plain text");
                    post_one(chan, msg, index, "text", &text_content(markdown)).await
                }
                Err(e) => Err(e),
            }
        }
        Err(e) => Err(e),
    };
    match err {
        Ok(id) => Ok(id),
        Err(e) => {
            tracing::warn!(target: TARGET, "lark send to {} failed: {e}", msg.chat.id);
            Err(e.into())
        }
    }
}

/// One create/reply request (paced per chat).
async fn post_one(
    chan: &Core,
    msg: &OutboundMessage,
    index: usize,
    msg_type: &str,
    content: &str,
) -> Result<String, ApiError> {
    let uuid = uuid_for(msg, index, msg_type, content, super::unix_now());
    let id = post_raw(chan, msg, msg_type, content, &uuid).await?;
    Ok(id)
}

/// One create/reply request with a given `uuid` (paced per chat): a reply to `msg.reply_to`
/// (`POST /open-apis/im/v1/messages/{id}/reply`, in its thread when the chat is a thread), or a
/// new message in `msg.chat` (`POST /open-apis/im/v1/messages?receive_id_type=chat_id`, or
/// `open_id` for a person's direct chat, see [`receive_id_type`]).
/// Returns the `message_id` and remembers it as sent by the bot.
pub(crate) async fn post_raw(
    chan: &Core,
    msg: &OutboundMessage,
    msg_type: &str,
    content: &str,
    uuid: &str,
) -> Result<String, ApiError> {
    chan.pacer.wait(&msg.chat.id).await;
    let id = match msg.reply_to.as_deref().filter(|r| !r.is_empty()) {
        Some(parent) => {
            chan.api
                .reply_message(parent, msg_type, content, msg.chat.thread.is_some(), uuid)
                .await?
        }
        None => {
            chan.api
                .send_message(
                    receive_id_type(&msg.chat),
                    &msg.chat.id,
                    msg_type,
                    content,
                    uuid,
                )
                .await?
        }
    };
    chan.remember_sent(&id);
    Ok(id)
}

/// Whether `id` is a user's `open_id` (`ou_…`; chat ids are `oc_…`).
pub(crate) fn is_open_id(id: &str) -> bool {
    id.len() > 3 && id.starts_with("ou_")
}

/// The `receive_id_type` of a new message to `chat`: `open_id` for a direct chat addressed by
/// the person's `open_id` ([`crate::Channel::direct_chat`]), else `chat_id`.
pub(crate) fn receive_id_type(chat: &ChatRef) -> &'static str {
    if chat.kind == ChatKind::Direct && is_open_id(&chat.id) {
        "open_id"
    } else {
        "chat_id"
    }
}

/// The idempotency `uuid` of one request: 32 hex characters (Lark allows up to 50). `index` is
/// the part of a split message, `msg_type` the type actually sent (a card refused and sent as a
/// `post` must not reuse the card's `uuid`), `now` Unix seconds. With
/// [`OutboundMessage::idempotency_key`] set, `content` and `now` are not used (see the module
/// docs).
pub fn uuid_for(
    msg: &OutboundMessage,
    index: usize,
    msg_type: &str,
    content: &str,
    now: i64,
) -> String {
    let mut h = Sha256::new();
    if let Some(key) = msg.idempotency_key.as_deref() {
        h.update(b"key\0");
        h.update(key.as_bytes());
        h.update([0]);
        h.update(msg.chat.id.as_bytes());
        h.update([0]);
        h.update(index.to_le_bytes());
        h.update(msg_type.as_bytes());
        return hex::encode(&h.finalize()[..16]);
    }
    h.update(msg.chat.id.as_bytes());
    h.update([0]);
    h.update(msg.chat.thread.as_deref().unwrap_or("").as_bytes());
    h.update([0]);
    match msg.reply_to.as_deref().filter(|r| !r.is_empty()) {
        Some(r) => h.update(r.as_bytes()),
        None => h.update(format!("window:{}", now.div_euclid(600)).as_bytes()),
    }
    h.update([0]);
    h.update(index.to_le_bytes());
    h.update(msg_type.as_bytes());
    h.update([0]);
    h.update(content.as_bytes());
    hex::encode(&h.finalize()[..16])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(reply_to: Option<&str>) -> OutboundMessage {
        OutboundMessage {
            chat: ChatRef {
                id: "oc_1".into(),
                kind: ChatKind::Group,
                thread: None,
            },
            reply_to: reply_to.map(String::from),
            body: OutboundBody::Text("hi".into()),
            idempotency_key: None,
        }
    }

    #[test]
    fn a_direct_chat_by_open_id_is_sent_by_open_id() {
        let chat = |id: &str, kind| ChatRef {
            id: id.into(),
            kind,
            thread: None,
        };
        assert_eq!(
            receive_id_type(&chat("ou_abc", ChatKind::Direct)),
            "open_id"
        );
        assert_eq!(
            receive_id_type(&chat("oc_abc", ChatKind::Direct)),
            "chat_id"
        );
        assert_eq!(receive_id_type(&chat("oc_abc", ChatKind::Group)), "chat_id");
        // A group id never goes out as an open_id, whatever it looks like.
        assert_eq!(receive_id_type(&chat("ou_abc", ChatKind::Group)), "chat_id");
        assert!(!is_open_id("ou_"));
    }

    #[test]
    fn uuids_are_stable_per_request_and_distinct_otherwise() {
        let m = msg(Some("om_1"));
        let a = uuid_for(&m, 0, "interactive", "{}", 1000);
        assert_eq!(a.len(), 32);
        assert_eq!(a, uuid_for(&m, 0, "interactive", "{}", 999_999));
        assert_ne!(a, uuid_for(&m, 1, "interactive", "{}", 1000));
        assert_ne!(a, uuid_for(&m, 0, "post", "{}", 1000));
        assert_ne!(
            a,
            uuid_for(&msg(Some("om_2")), 0, "interactive", "{}", 1000)
        );
        // Without a replied message the 10-minute window counts.
        let n = msg(None);
        assert_eq!(
            uuid_for(&n, 0, "text", "x", 600),
            uuid_for(&n, 0, "text", "x", 1199)
        );
        assert_ne!(
            uuid_for(&n, 0, "text", "x", 600),
            uuid_for(&n, 0, "text", "x", 1200)
        );
    }

    #[test]
    fn keyed_uuids_ignore_time_and_content_but_not_part_or_type() {
        let keyed = |key: &str, reply_to: Option<&str>| OutboundMessage {
            idempotency_key: Some(key.into()),
            ..msg(reply_to)
        };
        let m = keyed("reply:lark:om_1", None);
        let a = uuid_for(&m, 0, "interactive", "{\"a\":1}", 600);
        assert_eq!(a.len(), 32);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()), "{a}");
        // The same reply sent again hours later (a restart), rendered anew: the same uuid.
        assert_eq!(a, uuid_for(&m, 0, "interactive", "{\"a\":2}", 600 + 7200));
        // Other parts, types and keys differ.
        assert_ne!(a, uuid_for(&m, 1, "interactive", "{\"a\":1}", 600));
        assert_ne!(a, uuid_for(&m, 0, "post", "{\"a\":1}", 600));
        assert_ne!(
            a,
            uuid_for(&keyed("reply:lark:om_2", None), 0, "interactive", "{}", 600)
        );
        // A key replaces the unkeyed derivation, whether or not the message is a reply.
        assert_ne!(a, uuid_for(&msg(None), 0, "interactive", "{\"a\":1}", 600));
        let r = keyed("reply:lark:om_1", Some("om_1"));
        assert_eq!(
            uuid_for(&r, 0, "text", "x", 0),
            uuid_for(&r, 0, "text", "y", 99_999)
        );
    }
}
