//! The Bot API objects the adapter reads, narrowed to the fields it uses: an `Update` holding a
//! `message` or a `callback_query`, and what [`super::normalize`] and [`super::approval`] read of
//! them. Field names are the Bot API's. Every other field, and every other kind of update
//! (`edited_message`, `channel_post`, `message_reaction`, kinds added later…), is skipped
//! unread: an update Ethan does not handle is [`UpdateKind::Other`], never an error.
//!
//! Updates are read from JSON already parsed into a [`serde_json::Value`] ([`Update::read`]), one
//! at a time: a malformed update becomes [`UpdateKind::Malformed`] with its `update_id` kept, so
//! the updates around it are read and the offset moves past it.
//!
//! teloxide's own `Update`/`Message` know every Bot API object; reading them put their
//! deserialisers, most of the Bot API, into the binary (BENCHMARKS.md, 2026-12-06).

use serde::de::IgnoredAny;
use serde::Deserialize;
use serde_json::Value;

/// One update: its id and what Ethan handles of it.
#[derive(Debug, Clone)]
pub struct Update {
    /// `update_id`.
    pub id: u32,
    pub kind: UpdateKind,
}

/// What an update holds, as far as Ethan handles it.
#[derive(Debug, Clone)]
pub enum UpdateKind {
    /// A new `message`.
    Message(Box<Message>),
    /// A `callback_query` (an inline keyboard button pressed).
    CallbackQuery(CallbackQuery),
    /// Any other kind of update (an edit, a channel post, a reaction, a kind added later).
    Other,
    /// An update whose `message` or `callback_query` could not be read: why.
    Malformed(String),
}

/// The fields of an update Ethan reads past its id; all others are ignored.
#[derive(Deserialize)]
struct RawUpdate {
    message: Option<Box<Message>>,
    callback_query: Option<CallbackQuery>,
}

impl Update {
    /// Read one update. `Err` only when it has no `update_id` (then it cannot be acknowledged
    /// on its own either); a message or callback query that does not read is
    /// [`UpdateKind::Malformed`].
    pub fn read(value: Value) -> Result<Update, String> {
        let id = value
            .get("update_id")
            .and_then(Value::as_u64)
            .and_then(|id| u32::try_from(id).ok())
            .ok_or_else(|| "an update without a valid update_id".to_string())?;
        let kind = match serde_json::from_value::<RawUpdate>(value) {
            Ok(RawUpdate {
                message: Some(m), ..
            }) => UpdateKind::Message(m),
            Ok(RawUpdate {
                callback_query: Some(q),
                ..
            }) => UpdateKind::CallbackQuery(q),
            Ok(_) => UpdateKind::Other,
            Err(e) => UpdateKind::Malformed(e.to_string()),
        };
        Ok(Update { id, kind })
    }

    /// Read one update from JSON text (a webhook post's body).
    pub fn from_slice(body: &[u8]) -> Result<Update, String> {
        let value: Value = serde_json::from_slice(body).map_err(|e| e.to_string())?;
        Update::read(value)
    }
}

/// A Bot API `User` (`from`, `via_bot`, a forward's `sender_user`).
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    pub id: u64,
    /// Required, as the Bot API always sends it: a user without it is malformed, not a person.
    pub is_bot: bool,
    #[serde(default)]
    pub first_name: String,
    pub last_name: Option<String>,
    pub username: Option<String>,
}

/// A Bot API `Chat`: its id, `type` and `title` (groups and channels).
#[derive(Debug, Clone, Deserialize)]
pub struct Chat {
    pub id: i64,
    #[serde(rename = "type", default)]
    pub kind: String,
    pub title: Option<String>,
}

impl Chat {
    /// A private chat with a user.
    pub fn is_private(&self) -> bool {
        self.kind == "private"
    }
}

/// A `MessageEntity`: its `type` and UTF-16 range.
#[derive(Debug, Clone, Deserialize)]
pub struct Entity {
    #[serde(rename = "type")]
    pub kind: String,
    pub offset: usize,
    pub length: usize,
}

/// A `MessageOrigin`: who wrote a forwarded message.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Origin {
    User {
        sender_user: User,
    },
    HiddenUser {
        sender_user_name: String,
    },
    Chat {
        sender_chat: Chat,
        author_signature: Option<String>,
    },
    Channel {
        chat: Chat,
        author_signature: Option<String>,
    },
    /// An origin type added to the Bot API later: still a forward.
    #[serde(other)]
    Unknown,
}

/// A `PhotoSize`.
#[derive(Debug, Clone, Deserialize)]
pub struct PhotoSize {
    pub file_id: String,
    #[serde(default)]
    pub file_unique_id: String,
    pub file_size: Option<u64>,
    #[serde(default)]
    pub width: u32,
    #[serde(default)]
    pub height: u32,
}

/// A `Document`, `Audio`, `Voice`, `VideoNote`, `Video` or `Animation`: the file and, where
/// the object has them, its name and MIME type.
#[derive(Debug, Clone, Deserialize)]
pub struct Media {
    pub file_id: String,
    #[serde(default)]
    pub file_unique_id: String,
    pub file_size: Option<u64>,
    pub file_name: Option<String>,
    pub mime_type: Option<String>,
}

/// A `Sticker`: only its emoji is read.
#[derive(Debug, Clone, Deserialize)]
pub struct Sticker {
    pub emoji: Option<String>,
}

/// The message a `reply_to_message` points at: its id and sender.
#[derive(Debug, Clone, Deserialize)]
pub struct Replied {
    pub message_id: i32,
    pub from: Option<User>,
}

/// A Bot API `Message`, with the fields Ethan reads.
#[derive(Debug, Clone, Deserialize)]
pub struct Message {
    pub message_id: i32,
    pub date: i64,
    pub chat: Chat,
    pub from: Option<User>,
    pub text: Option<String>,
    pub caption: Option<String>,
    pub entities: Option<Vec<Entity>>,
    pub caption_entities: Option<Vec<Entity>>,
    pub reply_to_message: Option<Replied>,
    pub forward_origin: Option<Origin>,
    pub via_bot: Option<User>,
    #[serde(default)]
    pub is_topic_message: bool,
    pub message_thread_id: Option<i32>,
    pub photo: Option<Vec<PhotoSize>>,
    pub document: Option<Media>,
    pub voice: Option<Media>,
    pub audio: Option<Media>,
    pub video_note: Option<Media>,
    pub video: Option<Media>,
    pub animation: Option<Media>,
    pub sticker: Option<Sticker>,
    pub location: Option<IgnoredAny>,
    pub venue: Option<IgnoredAny>,
    pub contact: Option<IgnoredAny>,
}

impl Message {
    /// The `document`, unless the message is an animation (which the Bot API also sends as a
    /// `document`, for older clients).
    pub fn document(&self) -> Option<&Media> {
        self.document.as_ref().filter(|_| self.animation.is_none())
    }

    /// Whether it is a shared location (a venue also carries its `location`, and is not one).
    pub fn is_location(&self) -> bool {
        self.location.is_some() && self.venue.is_none()
    }

    /// The `text`, or the `caption` of a media message.
    pub fn text_or_caption(&self) -> Option<&str> {
        self.text.as_deref().or(self.caption.as_deref())
    }

    /// The entities of the text, or of the caption.
    pub fn entities(&self) -> &[Entity] {
        let e = if self.text.is_some() {
            &self.entities
        } else {
            &self.caption_entities
        };
        e.as_deref().unwrap_or(&[])
    }
}

/// The message a callback query's button was on: only its chat is read (an inaccessible
/// message has it too).
#[derive(Debug, Clone, Deserialize)]
pub struct ButtonMessage {
    pub chat: Chat,
}

/// A `CallbackQuery`.
#[derive(Debug, Clone, Deserialize)]
pub struct CallbackQuery {
    pub id: String,
    pub from: User,
    pub message: Option<ButtonMessage>,
    pub data: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn read(v: Value) -> Update {
        Update::read(v).unwrap()
    }

    #[test]
    fn other_kinds_and_unknown_fields_are_not_errors() {
        let u = read(json!({"update_id": 7, "message_reaction": {"chat": {"id": 1}}}));
        assert!(matches!((u.id, &u.kind), (7, UpdateKind::Other)), "{u:?}");
        // An edit is not read at all, even one that would not read as a message.
        let u = read(json!({"update_id": 8, "edited_message": {"message_id": "x"}}));
        assert!(matches!(u.kind, UpdateKind::Other), "{u:?}");
        let u = read(json!({"update_id": 9, "message": {
            "message_id": 1, "date": 0, "chat": {"id": 2, "type": "private", "new": [1]},
            "text": "hi", "a_field_of_2030": {"x": 1}}}));
        let UpdateKind::Message(m) = u.kind else {
            panic!("{u:?}")
        };
        assert_eq!(
            (m.text_or_caption(), m.chat.is_private()),
            (Some("hi"), true)
        );
    }

    #[test]
    fn a_malformed_message_keeps_its_update_id() {
        let u = read(json!({"update_id": 10, "message": {"message_id": 1, "date": "soon"}}));
        assert_eq!(u.id, 10);
        assert!(matches!(u.kind, UpdateKind::Malformed(_)), "{u:?}");
        assert!(Update::read(json!({"message": {}})).is_err());
        assert!(Update::read(json!([1])).is_err());
        assert!(Update::from_slice(b"{not json").is_err());
    }

    #[test]
    fn an_animation_is_no_document_and_a_venue_no_location() {
        let file = json!({"file_id": "a", "file_unique_id": "b", "file_name": "x.gif.mp4"});
        let u = read(json!({"update_id": 1, "message": {
            "message_id": 1, "date": 0, "chat": {"id": 2, "type": "private"},
            "animation": file, "document": file,
            "venue": {"title": "t"}, "location": {"latitude": 1.0, "longitude": 2.0}}}));
        let UpdateKind::Message(m) = u.kind else {
            panic!("{u:?}")
        };
        assert!(m.document().is_none());
        assert!(!m.is_location());
    }

    #[test]
    fn an_origin_of_a_later_type_is_still_a_forward() {
        let u = read(json!({"update_id": 1, "message": {
            "message_id": 1, "date": 0, "chat": {"id": 2, "type": "private"}, "text": "x",
            "forward_origin": {"type": "bot_2030", "date": 1}}}));
        let UpdateKind::Message(m) = u.kind else {
            panic!("{u:?}")
        };
        assert!(matches!(m.forward_origin, Some(Origin::Unknown)));
    }
}
