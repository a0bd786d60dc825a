//! The unified message model: what every adapter produces ([`InboundEvent`]) and consumes
//! ([`OutboundMessage`]). Field names follow the platforms' own terms (Telegram `update_id`,
//! `message_thread_id`; Lark `message_id`, `open_id`, `chat_id`).

use serde::{Deserialize, Serialize};

pub use ethan_core::channel::{ChannelKind, ChatKind, ChatRef};

/// Who sent a message: the platform user id (Telegram `from.id`, Lark `open_id`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sender {
    pub id: String,
    pub display_name: String,
    pub is_bot: bool,
}

/// A message from a person, normalised. Trust (owner, unattended) is deliberately absent: a
/// platform payload cannot set it; the daemon derives it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InboundEvent {
    pub channel: ChannelKind,
    /// Platform-native id used for deduplication (Telegram `update_id`, Lark `message_id`).
    pub event_id: String,
    /// The platform's id of the message itself (Telegram `message_id`), for replies.
    pub message_id: Option<String>,
    pub chat: ChatRef,
    pub sender: Sender,
    /// The sender's own words (a caption included), with mentions of the bot removed and other
    /// mentions resolved to names. Nothing else: text someone else wrote is in [`Self::relayed`],
    /// a file's name in its [`Attachment`], what the daemon does not fetch in
    /// [`Self::unfetched`] — memory takes only this field's words as the sender's.
    pub text: String,
    /// Text the message carries that its sender did not write: a forwarded message, an inline
    /// bot's result. `text` is then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relayed: Option<Relayed>,
    /// Something the message holds that the daemon does not fetch (a sticker, a video, a
    /// location…), as the adapter describes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unfetched: Option<Unfetched>,
    /// True for a DM, a mention of the bot, or a reply to one of the bot's messages.
    pub addressed: bool,
    /// The platform id of the message this one replies to, if any.
    pub reply_to: Option<String>,
    /// Unix seconds at which the platform says the message was sent.
    pub sent_at: i64,
    /// The event's place in the platform's order (Telegram `update_id`, Lark `create_time` in
    /// milliseconds): several replicas handle a chat's events in this order. 0 when unknown.
    #[serde(default)]
    pub seq: i64,
    /// Files that came with the message (a photo, a document, a voice note…), not downloaded
    /// yet: the daemon fetches them for the turn through [`crate::Channel::media_source`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

/// Text in a message that its sender did not write ([`InboundEvent::relayed`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Relayed {
    pub how: Relay,
    /// Who wrote it, as the platform names them: a person's name and id, a chat's or channel's
    /// title, a bot's username. Chosen by that account, so it is someone's words too.
    pub author: String,
    /// The text (a forwarded caption too), mentions of the bot removed as in `text`; may be
    /// empty (a forwarded photo without a caption).
    pub text: String,
}

/// How text someone else wrote came into a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Relay {
    /// Forwarded from another message (Telegram `forward_origin`).
    Forwarded,
    /// A result of an inline bot the sender picked (Telegram `via_bot`).
    InlineBot,
}

/// Something a message holds that the daemon does not fetch ([`InboundEvent::unfetched`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Unfetched {
    /// What it is, in the adapter's words: `a sticker 👍`, `a video`, `a location`,
    /// `merged forwarded messages`.
    pub what: String,
    /// The name its author gave it (a video's file name), if any: metadata, never the
    /// sender's words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Unfetched {
    pub fn new(what: impl Into<String>) -> Self {
        Self {
            what: what.into(),
            name: None,
        }
    }

    /// With the name its author gave it, when it has one (blank names are none).
    pub fn named(mut self, name: Option<&str>) -> Self {
        self.name = name
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_string);
        self
    }
}

/// What kind of file a message carried.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttachmentKind {
    /// A picture (Telegram `photo`, Lark `image` or a `post`'s `img`).
    Image,
    /// Any file (Telegram `document`, Lark `file`).
    Document,
    /// A voice note or recorded audio (Telegram `voice` and the sound of a `video_note`, Lark
    /// `audio`).
    Voice,
    /// A music or audio file (Telegram `audio`).
    Audio,
}

/// A file attached to a message, as the platform described it. The bytes are fetched later.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attachment {
    pub kind: AttachmentKind,
    /// The platform's handles for the file; several for a Telegram photo (one per size,
    /// smallest first), else one.
    pub files: Vec<FileRef>,
    /// The file's name (Telegram `document.file_name`, Lark `file_name`), if any: chosen by
    /// whoever made the file, so never taken as the sender's words.
    #[serde(default)]
    pub file_name: Option<String>,
    /// The MIME type the platform announced (Telegram `mime_type`), if any.
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// One downloadable file of an [`Attachment`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRef {
    /// Telegram `file_id` (for `getFile`); Lark `image_key` / `file_key`.
    pub id: String,
    /// The same file whoever sent it (Telegram `file_unique_id`; Lark the key again): the key
    /// downloads are deduplicated by.
    pub unique_id: String,
    /// Bytes, as the platform announced it (Telegram `file_size`); `None` when unknown.
    #[serde(default)]
    pub size: Option<u64>,
    /// Pixels, for pictures (Telegram `PhotoSize.width`/`height`); 0 when unknown.
    #[serde(default)]
    pub width: u32,
    #[serde(default)]
    pub height: u32,
}

/// Where the bytes of a file are: a URL to `GET`, and the bearer token it needs (Lark's
/// `tenant_access_token`; Telegram puts the bot token in the URL). Both are secrets: the
/// `Debug` text hides them.
#[derive(Clone)]
pub struct MediaSource {
    pub url: String,
    pub bearer: Option<String>,
    /// The size the platform gave when asked (Telegram `getFile` `file_size`), if any.
    pub size: Option<u64>,
}

impl std::fmt::Debug for MediaSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MediaSource")
            .field("url", &"<redacted>")
            .field("bearer", &self.bearer.as_ref().map(|_| "<redacted>"))
            .field("size", &self.size)
            .finish()
    }
}

impl InboundEvent {
    /// Session key: `{channel}:{chat_id}` plus `:{thread}` for real topic threads (docs/channels.md).
    pub fn session_key(&self) -> String {
        match &self.chat.thread {
            Some(t) => format!("{}:{}:{}", self.channel, self.chat.id, t),
            None => format!("{}:{}", self.channel, self.chat.id),
        }
    }
}

/// What the daemon asks an adapter to show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum OutboundBody {
    /// Markdown from the model (or the daemon); each adapter renders it for its platform.
    Text(String),
    /// A "typing…" indicator (Telegram `sendChatAction`), best effort.
    Typing,
    /// Ask the owner to approve a tool call, with buttons (Telegram inline keyboard, Lark card
    /// with `behaviors: callback`). The press comes back through [`crate::InboundSink::decide`].
    Approval(ApprovalRequest),
    /// A card from the `ui_card` tool, rendered per platform (Lark interactive card, Telegram
    /// HTML, plain text) by `ethan-cards`.
    Ui(ethan_cards::Ui),
    /// Show how an approval request ended (e.g. timed out) in place of its buttons. Adapters
    /// edit the request message they sent for `request_id`; unknown ids are ignored.
    ResolveApproval { request_id: String, outcome: String },
}

/// A request for the owner's approval of one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// Short opaque id (≤ 24 ASCII characters, fits Telegram's 64-byte `callback_data`).
    pub request_id: String,
    /// The tool's name, e.g. `shell`.
    pub tool: String,
    /// What the call will do, in the tool's words (e.g. the command line).
    pub description: String,
    /// A `consent_always` call: only "Approve once" and "Deny" are offered.
    pub always: bool,
}

/// The button a person pressed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalChoice {
    /// Allow this call only.
    Once,
    /// Allow this call and remember the grant for the session's scope.
    Session,
    Deny,
}

impl ApprovalChoice {
    /// The short code used in callback payloads (`o`, `s`, `d`).
    pub fn code(self) -> &'static str {
        match self {
            ApprovalChoice::Once => "o",
            ApprovalChoice::Session => "s",
            ApprovalChoice::Deny => "d",
        }
    }

    pub fn from_code(code: &str) -> Option<Self> {
        Some(match code {
            "o" => ApprovalChoice::Once,
            "s" => ApprovalChoice::Session,
            "d" => ApprovalChoice::Deny,
            _ => return None,
        })
    }
}

/// A button press, as the adapter received it. `user_id` is the platform id of whoever pressed
/// (Telegram `from.id`, Lark `operator.open_id`); the daemon decides whether it counts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalDecision {
    pub channel: ChannelKind,
    pub request_id: String,
    pub choice: ApprovalChoice,
    pub user_id: String,
    pub chat_id: String,
}

/// The daemon's answer to a press, for the adapter to show: a short toast (Telegram
/// `answerCallbackQuery` text, Lark callback `toast`) and the text that replaces the buttons.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalAck {
    /// Whether the press counted (the owner, a pending request).
    pub accepted: bool,
    pub toast: String,
    /// The outcome to show in place of the buttons (e.g. "✅ Approved once by the owner"); `None`
    /// leaves the message as it is (a press that did not count).
    pub outcome: Option<String>,
}

/// A message for one chat (and thread), optionally as a reply to a platform message id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboundMessage {
    pub chat: ChatRef,
    pub reply_to: Option<String>,
    pub body: OutboundBody,
    /// Identifies this message across sends, e.g. `reply:lark:om_…` for the reply to one inbound
    /// event: sending it again with the same key after a crash must not show it twice. Adapters
    /// whose platform dedupes requests use it ([`crate::Channel::idempotent_send_window`]; Lark
    /// derives each request's `uuid` from it); others ignore it. `None`: the adapter picks its
    /// own dedupe, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// What the platform returned for a delivered message: the ids of every part it was split into.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SentRef {
    pub message_ids: Vec<String>,
}
