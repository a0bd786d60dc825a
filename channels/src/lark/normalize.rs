//! Lark event payloads → [`InboundEvent`].
//!
//! Source: the `im.message.receive_v1` event (PROTOCOLS §3; Go SDK `service/im/v1`
//! `P2MessageReceiveV1Data`; the open.feishu.cn "receive message" event doc) and the schema-2.0
//! envelope (Go `event/model.go` `EventHeader`).
//!
//! What happens here:
//! - `text` content (`{"text":"@_user_1 hello"}`) and `post` rich text (paragraphs of `text`,
//!   `a`, `at`, `img`, `code_block`, `md`, … elements) become Markdown-ish text; `image`,
//!   `file` and `audio` messages and a post's `img`s become [`Attachment`]s, fetched later by
//!   the daemon; other message types become an [`Unfetched`] description (`a sticker`; a
//!   `media` video's author-chosen `file_name` kept apart as its name), never text.
//! - `@_user_N` placeholders are resolved from `mentions[]`: the bot's own mention is removed
//!   (and makes the message *addressed*), other people become `@Name`, `@_all` becomes `@all`.
//!   The bot is recognised by its open_id (from `/open-apis/bot/v3/info`); before that is known,
//!   by `mentioned_type == "bot"`.
//! - `addressed` = a p2p chat or a mention of the bot; "a reply to the bot's message" needs the
//!   sender of `parent_id` and is decided by the caller ([`super::inbound`]).
//! - `event_id` is the `message_id` (`om_…`) so that dedupe survives restarts and both modes;
//!   the chat is `chat_id` with `thread_id` (`omt_…`) as its thread, so a topic gets its own
//!   session while a plain reply (`root_id`/`parent_id` only) stays in the chat's session.

use crate::model::{
    Attachment, AttachmentKind, ChannelKind, ChatKind, ChatRef, FileRef, InboundEvent, Sender,
    Unfetched,
};
use serde::Deserialize;
use serde_json::Value;

/// Content as text (`post` rich text, `@` mentions, placeholders) is shared with the Lark tools
/// and lives in `ethan-lark-api`; it keeps its paths here.
pub use ethan_lark_api::content::{placeholder, post_to_text, resolve_mentions, Mention, UserId};

/// The schema-2.0 envelope header.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct EnvelopeHeader {
    pub event_id: String,
    pub event_type: String,
    /// Milliseconds (events) or microseconds (card callbacks), as a string.
    pub create_time: String,
    /// The app's Verification Token (`""` over the long connection).
    pub token: String,
    pub app_id: String,
    pub tenant_key: String,
}

/// An event envelope as it arrives (webhook body after decryption, or a long-connection
/// payload). Also covers `url_verification` (`type`, `challenge`, `token`) and schema-1.0
/// events (`type: event_callback`, top-level `token`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Envelope {
    pub schema: String,
    pub header: Option<EnvelopeHeader>,
    pub event: Value,
    #[serde(rename = "type")]
    pub kind: String,
    pub challenge: String,
    pub token: String,
}

impl Envelope {
    /// Parse a payload; `None` when it is not a JSON object.
    pub fn parse(payload: &[u8]) -> Option<Envelope> {
        let v: Value = serde_json::from_slice(payload).ok()?;
        if !v.is_object() {
            return None;
        }
        serde_json::from_value(v).ok()
    }

    /// `header.event_type` (schema 2.0), or `event.type` (schema 1.0), or `""`.
    pub fn event_type(&self) -> &str {
        match &self.header {
            Some(h) if !h.event_type.is_empty() => &h.event_type,
            _ => self.event.get("type").and_then(Value::as_str).unwrap_or(""),
        }
    }

    /// The verification token the sender put in the envelope (`header.token` for schema 2.0,
    /// the top-level `token` for schema 1.0 and url_verification).
    pub fn verification_token(&self) -> &str {
        match &self.header {
            Some(h) if !h.token.is_empty() => &h.token,
            _ => &self.token,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct MessageBody {
    message_id: String,
    parent_id: Option<String>,
    thread_id: Option<String>,
    create_time: Option<String>,
    chat_id: String,
    chat_type: String,
    message_type: String,
    content: String,
    mentions: Option<Vec<Mention>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct SenderBody {
    sender_id: UserId,
    sender_type: String,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
struct ReceiveV1 {
    sender: SenderBody,
    message: MessageBody,
}

/// Why an `im.message.receive_v1` event gives no [`InboundEvent`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NormalizeError {
    #[error("the event has no message_id or chat_id")]
    Incomplete,
    #[error("the event body is not an im.message.receive_v1 object")]
    Malformed,
}

/// Normalise the `event` object of an `im.message.receive_v1` envelope. `bot_open_id` is the
/// bot's own open_id when known. `header_create_time_ms` (the envelope's) is used when the
/// message carries none.
pub fn normalize_message(
    event: &Value,
    bot_open_id: Option<&str>,
    header_create_time_ms: Option<i64>,
) -> Result<InboundEvent, NormalizeError> {
    if !event.is_object() {
        return Err(NormalizeError::Malformed);
    }
    let ev: ReceiveV1 =
        serde_json::from_value(event.clone()).map_err(|_| NormalizeError::Malformed)?;
    let msg = &ev.message;
    if msg.message_id.is_empty() || msg.chat_id.is_empty() {
        return Err(NormalizeError::Incomplete);
    }
    let mentions = msg.mentions.as_deref().unwrap_or(&[]);
    let content: Value = serde_json::from_str(&msg.content).unwrap_or(Value::Null);
    let (text, mentioned) = match msg.message_type.as_str() {
        "text" => {
            let raw = content.get("text").and_then(Value::as_str).unwrap_or("");
            resolve_mentions(raw, mentions, bot_open_id)
        }
        "post" => post_to_text(&content, mentions, bot_open_id),
        // The file itself is the message: the daemon fetches it ([`attachments_of`]); anything
        // else is described apart ([`unfetched`]), never as the sender's words.
        _ => (String::new(), false),
    };
    let unfetched = match msg.message_type.as_str() {
        "text" | "post" | "image" | "file" | "audio" => None,
        other => Some(unfetched(other, &content)),
    };
    let attachments = attachments_of(&msg.message_type, &content);
    let direct = msg.chat_type == "p2p";
    let sender_open_id = ev.sender.sender_id.open_id.clone().unwrap_or_default();
    let is_bot = (ev.sender.sender_type != "user" && !ev.sender.sender_type.is_empty())
        || bot_open_id.is_some_and(|b| b == sender_open_id);
    let sent_ms = msg
        .create_time
        .as_deref()
        .and_then(|t| t.trim().parse::<i64>().ok())
        .or(header_create_time_ms)
        .unwrap_or(0);
    let non_empty = |s: &Option<String>| s.clone().filter(|s| !s.trim().is_empty());
    Ok(InboundEvent {
        channel: ChannelKind::Lark,
        event_id: msg.message_id.clone(),
        message_id: Some(msg.message_id.clone()),
        chat: ChatRef {
            id: msg.chat_id.clone(),
            kind: if direct {
                ChatKind::Direct
            } else {
                ChatKind::Group
            },
            thread: non_empty(&msg.thread_id),
        },
        sender: Sender {
            id: sender_open_id.clone(),
            display_name: sender_open_id,
            is_bot,
        },
        text,
        // Lark marks no forward of a single message in this event; a merged forward is
        // `merge_forward`, whose messages are not fetched.
        relayed: None,
        unfetched,
        addressed: direct || mentioned,
        reply_to: non_empty(&msg.parent_id),
        sent_at: sent_ms.div_euclid(1000),
        seq: sent_ms,
        attachments,
    })
}

/// The files of a message, fetched later with the message resources API: an `image`
/// (`image_key`), a `file` (`file_key`, `file_name`), an `audio` note (`file_key`; Opus in an
/// Ogg container), and every `img` of a `post`.
pub fn attachments_of(message_type: &str, content: &Value) -> Vec<Attachment> {
    let key = |k: &str| {
        content
            .get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
            .map(str::to_string)
    };
    let file = |id: String| FileRef {
        unique_id: id.clone(),
        id,
        size: None,
        width: 0,
        height: 0,
    };
    let one = |kind, id: String, name: Option<String>, mime: Option<&str>| Attachment {
        kind,
        files: vec![file(id)],
        file_name: name,
        mime_type: mime.map(str::to_string),
    };
    match message_type {
        "image" => key("image_key")
            .map(|k| one(AttachmentKind::Image, k, None, None))
            .into_iter()
            .collect(),
        "file" => key("file_key")
            .map(|k| one(AttachmentKind::Document, k, key("file_name"), None))
            .into_iter()
            .collect(),
        "audio" => key("file_key")
            .map(|k| {
                let name = Some("audio.ogg".to_string());
                one(AttachmentKind::Voice, k, name, Some("audio/ogg"))
            })
            .into_iter()
            .collect(),
        "post" => {
            let body = if content.get("content").is_some() {
                content
            } else {
                content
                    .as_object()
                    .and_then(|o| o.values().find(|v| v.get("content").is_some()))
                    .unwrap_or(content)
            };
            body.get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_array)
                .flatten()
                .filter(|el| el.get("tag").and_then(Value::as_str) == Some("img"))
                .filter_map(|el| el.get("image_key").and_then(Value::as_str))
                .filter(|k| !k.is_empty())
                .map(|k| one(AttachmentKind::Image, k.to_string(), None, None))
                .collect()
        }
        _ => Vec::new(),
    }
}

/// What a message the daemon does not fetch holds, for the agent: `a video` (with its file
/// name apart, as its name), `a sticker`, `merged forwarded messages`, … .
pub fn unfetched(message_type: &str, content: &Value) -> Unfetched {
    let name = content.get("file_name").and_then(Value::as_str);
    match message_type {
        "media" => Unfetched::new("a video").named(name),
        "sticker" => Unfetched::new("a sticker"),
        "interactive" => Unfetched::new("a card"),
        "share_chat" => Unfetched::new("a shared chat"),
        "share_user" => Unfetched::new("a shared contact"),
        "merge_forward" => Unfetched::new("merged forwarded messages"),
        "location" => Unfetched::new("a location"),
        "" => Unfetched::new("a message"),
        other => Unfetched::new(format!("a message of type {other}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const BOT: &str = "ou_27ade7346f1dc5a485d4de0c5944dd13";

    fn fixture(name: &str) -> Value {
        let path = format!(
            "{}/../tests/fixtures/lark/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
    }

    fn normalize_fixture(name: &str, bot: Option<&str>) -> InboundEvent {
        let v = fixture(name);
        let env: Envelope = serde_json::from_value(v).unwrap();
        assert_eq!(env.event_type(), "im.message.receive_v1");
        normalize_message(&env.event, bot, None).unwrap()
    }

    #[test]
    fn p2p_text_is_addressed() {
        let ev = normalize_fixture("im_message_receive_v1_text_p2p.json", Some(BOT));
        assert_eq!(ev.channel, ChannelKind::Lark);
        assert_eq!(ev.event_id, "om_5ce6d572455d361153b7cb51da133945");
        assert_eq!(
            ev.message_id.as_deref(),
            Some("om_5ce6d572455d361153b7cb51da133945")
        );
        assert_eq!(ev.chat.id, "oc_5ce6d572455d361153b7xx51da133945");
        assert_eq!(ev.chat.kind, ChatKind::Direct);
        assert_eq!(ev.chat.thread, None);
        assert_eq!(ev.sender.id, "ou_84aad35d084aa403a838cf73ee18467");
        assert!(!ev.sender.is_bot);
        assert_eq!(ev.text, "hello, what is on my calendar today?");
        assert!(ev.addressed);
        assert_eq!(ev.sent_at, 1609073151);
        assert_eq!(ev.session_key(), "lark:oc_5ce6d572455d361153b7xx51da133945");
    }

    #[test]
    fn group_mention_of_the_bot_is_removed_and_addresses() {
        let ev = normalize_fixture("im_message_receive_v1_text_group_at_bot.json", Some(BOT));
        assert_eq!(ev.chat.kind, ChatKind::Group);
        assert_eq!(ev.text, "hello");
        assert!(ev.addressed);
        // A plain reply stays in the chat's session; parent_id is the reply reference.
        assert_eq!(ev.chat.thread, None);
        assert_eq!(
            ev.reply_to.as_deref(),
            Some("om_5ce6d572455d361153b7cb5xxfsdfsdfdsf")
        );
        // Without the bot's open_id the mention type decides.
        let ev = normalize_fixture("im_message_receive_v1_text_group_at_bot.json", None);
        assert!(ev.addressed);
    }

    #[test]
    fn mention_of_someone_else_is_not_addressed() {
        let ev = normalize_fixture(
            "im_message_receive_v1_text_group_at_bot.json",
            Some("ou_other"),
        );
        assert!(!ev.addressed);
        assert_eq!(ev.text, "@Sophia hello");
    }

    #[test]
    fn post_with_image_becomes_text() {
        let ev = normalize_fixture("im_message_receive_v1_post_group_at_bot_ws.json", Some(BOT));
        assert!(ev.addressed);
        assert_eq!(ev.text, "你能看到这个图片吗？\n\n[image]");
        assert_eq!(ev.event_id, "om_x100b517979b120a0b4afbe6ae3d697c");
    }

    #[test]
    fn thread_id_makes_its_own_session() {
        let mut v = fixture("im_message_receive_v1_text_group_at_bot.json");
        v["event"]["message"]["thread_id"] = json!("omt_1a2b");
        let ev = normalize_message(&v["event"], Some(BOT), None).unwrap();
        assert_eq!(ev.chat.thread.as_deref(), Some("omt_1a2b"));
        assert_eq!(
            ev.session_key(),
            "lark:oc_5ce6d572455d361153b7xx51da133945:omt_1a2b"
        );
    }

    #[test]
    fn files_images_and_audio_are_attachments_and_other_types_described_apart() {
        let mut v = fixture("im_message_receive_v1_text_p2p.json");
        v["event"]["message"]["message_type"] = json!("file");
        v["event"]["message"]["content"] =
            json!("{\"file_key\":\"file_x\",\"file_name\":\"a.pdf\"}");
        let ev = normalize_message(&v["event"], Some(BOT), None).unwrap();
        assert_eq!(ev.text, "");
        assert_eq!(ev.attachments[0].kind, AttachmentKind::Document);
        assert_eq!(ev.attachments[0].files[0].id, "file_x");
        assert_eq!(ev.attachments[0].file_name.as_deref(), Some("a.pdf"));
        v["event"]["message"]["message_type"] = json!("image");
        v["event"]["message"]["content"] = json!("{\"image_key\":\"img_x\"}");
        let ev = normalize_message(&v["event"], Some(BOT), None).unwrap();
        assert_eq!(ev.attachments[0].kind, AttachmentKind::Image);
        assert_eq!(ev.attachments[0].files[0].id, "img_x");
        v["event"]["message"]["message_type"] = json!("audio");
        v["event"]["message"]["content"] = json!("{\"file_key\":\"file_a\",\"duration\":2000}");
        let ev = normalize_message(&v["event"], Some(BOT), None).unwrap();
        assert_eq!(ev.attachments[0].kind, AttachmentKind::Voice);
        v["event"]["message"]["message_type"] = json!("sticker");
        v["event"]["message"]["content"] = json!("{\"file_key\":\"s\"}");
        let ev = normalize_message(&v["event"], Some(BOT), None).unwrap();
        assert_eq!(ev.text, "");
        assert_eq!(ev.unfetched, Some(Unfetched::new("a sticker")));
        assert!(ev.attachments.is_empty());
        // A video's name is its author's, never the sender's words.
        v["event"]["message"]["message_type"] = json!("media");
        v["event"]["message"]["content"] = json!(
            "{\"file_key\":\"file_v\",\"image_key\":\"img_v\",\"file_name\":\"I prefer evil.mp4\"}"
        );
        let ev = normalize_message(&v["event"], Some(BOT), None).unwrap();
        assert_eq!(ev.text, "");
        let video = ev.unfetched.unwrap();
        assert_eq!(video.what, "a video");
        assert_eq!(video.name.as_deref(), Some("I prefer evil.mp4"));
        // A merged forward: other people's messages, not fetched, not the sender's words.
        v["event"]["message"]["message_type"] = json!("merge_forward");
        v["event"]["message"]["content"] = json!("{\"content\":\"Merged and Forwarded Message\"}");
        let ev = normalize_message(&v["event"], Some(BOT), None).unwrap();
        assert_eq!(ev.text, "");
        assert_eq!(ev.relayed, None);
        assert_eq!(ev.unfetched.unwrap().what, "merged forwarded messages");
    }

    #[test]
    fn a_posts_images_are_attachments() {
        let content = json!({"title": "", "content": [
            [{"tag": "text", "text": "see"}],
            [{"tag": "img", "image_key": "img_v3_a", "width": 10, "height": 10}],
        ]});
        let a = attachments_of("post", &content);
        assert_eq!(a.len(), 1);
        assert_eq!(a[0].files[0].id, "img_v3_a");
    }

    #[test]
    fn the_bots_own_message_is_flagged() {
        let mut v = fixture("im_message_receive_v1_text_p2p.json");
        v["event"]["sender"]["sender_id"]["open_id"] = json!(BOT);
        assert!(
            normalize_message(&v["event"], Some(BOT), None)
                .unwrap()
                .sender
                .is_bot
        );
        v["event"]["sender"]["sender_type"] = json!("app");
        assert!(
            normalize_message(&v["event"], None, None)
                .unwrap()
                .sender
                .is_bot
        );
    }

    #[test]
    fn malformed_events_are_errors() {
        assert_eq!(
            normalize_message(&json!("x"), None, None),
            Err(NormalizeError::Malformed)
        );
        assert_eq!(
            normalize_message(&json!({}), None, None),
            Err(NormalizeError::Incomplete)
        );
        assert_eq!(
            normalize_message(&json!({"message": {"message_id": 5}}), None, None),
            Err(NormalizeError::Malformed)
        );
        // Unreadable content is not fatal.
        let ev = normalize_message(
            &json!({"message": {"message_id": "om_1", "chat_id": "oc_1", "chat_type": "p2p", "message_type": "text", "content": "{not json"}}),
            None,
            Some(5_000),
        )
        .unwrap();
        assert_eq!(ev.text, "");
        assert_eq!(ev.sent_at, 5);
    }

    #[test]
    fn envelope_accessors() {
        let env =
            Envelope::parse(br#"{"challenge":"c","token":"t","type":"url_verification"}"#).unwrap();
        assert_eq!(env.kind, "url_verification");
        assert_eq!(env.verification_token(), "t");
        assert_eq!(env.event_type(), "");
        assert!(Envelope::parse(b"[1,2]").is_none());
        assert!(Envelope::parse(b"nope").is_none());
        let env: Envelope = serde_json::from_value(fixture("card_action_trigger.json")).unwrap();
        assert_eq!(env.event_type(), "card.action.trigger");
        assert_eq!(env.verification_token(), "066zT6pS4QCbgj5Do145GfDbbag*****");
    }
}
