//! The adapter contract: [`Channel`] is implemented by each platform adapter; [`InboundSink`] and
//! [`StateStore`] are the services the daemon hands to an adapter ([`KvState`]: the store's kv
//! table as one).

use crate::model::{
    ApprovalAck, ApprovalDecision, AttachmentKind, ChannelKind, FileRef, InboundEvent, MediaSource,
    OutboundMessage, SentRef,
};
use async_trait::async_trait;
use ethan_core::store::KvStore;
use std::sync::Arc;

pub use crate::error::ChannelError;

/// Result of publishing an inbound event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PublishOutcome {
    /// Persisted for the first time and queued for the agent.
    Accepted,
    /// Already known (a platform redelivery); nothing was queued.
    Duplicate,
    /// Not for the agent (e.g. a group message not addressed to the bot); nothing was queued.
    Ignored,
}

/// Where adapters hand inbound events. `publish` returns only after the event is durably
/// recorded, so an adapter may acknowledge the platform (advance the Telegram offset, ACK a Lark
/// frame) as soon as it returns `Ok`.
#[async_trait]
pub trait InboundSink: Send + Sync {
    async fn publish(&self, event: InboundEvent) -> Result<PublishOutcome, ChannelError>;

    /// An approval button was pressed. Answers at once (it only resolves a waiting request), so
    /// an adapter can put the result in a callback response that is due within 3 s (Lark).
    async fn decide(&self, decision: ApprovalDecision) -> ApprovalAck {
        let _ = decision;
        ApprovalAck {
            accepted: false,
            toast: "Approvals are not handled here.".into(),
            outcome: None,
        }
    }
}

/// A small durable key/value store for adapter state (Telegram `getUpdates` offset, …).
#[async_trait]
pub trait StateStore: Send + Sync {
    async fn get(&self, key: &str) -> Result<Option<String>, ChannelError>;
    async fn set(&self, key: &str, value: &str) -> Result<(), ChannelError>;
}

/// Any store's kv table as the adapters' state (the Telegram offset, Lark's seen events):
/// `KvState(store.shared())` for an adapter, `KvState(&**storage)` for a borrowed one.
pub struct KvState<K>(pub K);

#[async_trait]
impl<K> StateStore for KvState<K>
where
    K: std::ops::Deref + Send + Sync,
    K::Target: KvStore,
{
    async fn get(&self, key: &str) -> Result<Option<String>, ChannelError> {
        self.0
            .kv_get(key)
            .await
            .map_err(|e| ChannelError::Storage(e.to_string()))
    }
    async fn set(&self, key: &str, value: &str) -> Result<(), ChannelError> {
        self.0
            .kv_set(key, value)
            .await
            .map_err(|e| ChannelError::Storage(e.to_string()))
    }
}

/// A chat platform adapter.
#[async_trait]
pub trait Channel: Send + Sync {
    fn kind(&self) -> ChannelKind;

    /// Check the credentials and learn the bot's identity (Telegram `getMe`). Returns a short
    /// description such as `@my_bot (id 123)`.
    async fn probe(&self) -> Result<String, ChannelError>;

    /// Receive events until `shutdown` fires, publishing each to `sink`. Transient platform errors
    /// are retried inside; only a fatal one (rejected credentials) ends the loop with `Err`.
    async fn run(
        self: Arc<Self>,
        sink: Arc<dyn InboundSink>,
        state: Arc<dyn StateStore>,
        shutdown: tokio::sync::watch::Receiver<bool>,
    ) -> Result<(), ChannelError>;

    /// Deliver one outbound message (rendered and split as the platform requires). When a
    /// later part fails after earlier ones were shown, the error is [`ChannelError::Partial`].
    async fn send(&self, msg: &OutboundMessage) -> Result<SentRef, ChannelError>;

    /// Deliver the parts of `msg` from part `first_part` (0-based, in the order [`Channel::send`]
    /// splits it) to the end: the rest of a message whose send stopped with
    /// [`ChannelError::Partial`]. The message must be the same, so it splits the same way.
    /// `SentRef` holds the ids of the parts this call sent; a failure after at least one of them
    /// is again [`ChannelError::Partial`], counting parts from the start of the message.
    ///
    /// Adapters that split messages override this (Telegram, Lark). The default is for adapters
    /// that send every message whole and so never report `Partial`: part 0 is the whole
    /// message, and there is nothing after it.
    async fn send_from(
        &self,
        msg: &OutboundMessage,
        first_part: usize,
    ) -> Result<SentRef, ChannelError> {
        if first_part == 0 {
            self.send(msg).await
        } else {
            Ok(SentRef::default())
        }
    }

    /// Whether the adapter is connected and receiving (for `GET /healthz`). Default: up.
    fn is_up(&self) -> bool {
        true
    }

    /// How long the platform recognises a repeated send: a message sent again with the same
    /// [`OutboundMessage::idempotency_key`] within this time after the first attempt is shown
    /// at most once. `None` when sends are not idempotent (Telegram's `sendMessage`), so a send
    /// whose outcome is unknown must not be repeated.
    ///
    /// Default `None` (Telegram has no idempotent send); the Lark adapter answers one hour.
    fn idempotent_send_window(&self) -> Option<std::time::Duration> {
        None
    }

    /// Where to download `file`, one of the files of an attachment of `event` (Telegram:
    /// `getFile`, then `{api_url}/file/bot<token>/<file_path>`; Lark: `GET
    /// /open-apis/im/v1/messages/{message_id}/resources/{file_key}?type=image|file` with the
    /// tenant token). The daemon does the download itself, bounded in size and time.
    ///
    /// Default: an error (the adapter has no files).
    async fn media_source(
        &self,
        event: &InboundEvent,
        kind: AttachmentKind,
        file: &FileRef,
    ) -> Result<MediaSource, ChannelError> {
        let _ = (event, kind, file);
        Err(ChannelError::Transport {
            platform: "channel",
            message: "this channel does not download files".into(),
        })
    }

    /// The largest file a bot may download from this platform, in bytes, when it has such a
    /// limit (the Telegram Bot API: 20 MB). Default `None`.
    fn max_download_bytes(&self) -> Option<u64> {
        None
    }

    /// The bot's direct chat with `user_id` (Telegram: the private chat whose id is the user
    /// id; Lark: the user's `open_id`, sent with `receive_id_type=open_id`), where something
    /// only that person may see is sent (an approval carrying private data asked in a group).
    /// Whether the platform lets the bot write there is known only by sending: a person who
    /// never opened a chat with the bot, or blocked it, makes the send fail with an error for
    /// which [`ChannelError::is_recipient_unreachable`] is true.
    ///
    /// Default `None`: this channel has no direct chats to offer.
    fn direct_chat(&self, user_id: &str) -> Option<crate::model::ChatRef> {
        let _ = user_id;
        None
    }

    /// Start showing a reply to `target` while it is written ([`crate::stream`]), or `None` when
    /// this channel (or its configuration, or this chat) does not stream: the daemon then sends
    /// one final message. `log` is where the draft records its handle before the first update of
    /// a message it created.
    ///
    /// Default `None`.
    fn open_draft(
        &self,
        target: crate::stream::DraftTarget,
        log: Arc<dyn crate::stream::DraftLog>,
    ) -> Option<Box<dyn crate::stream::Draft>> {
        let _ = (target, log);
        None
    }
}
