//! The adapter contract: [`Channel`] is implemented by each platform adapter; [`InboundSink`] and
//! [`StateStore`] are the services the daemon hands to an adapter.

use crate::model::{
    ApprovalAck, ApprovalDecision, ChannelKind, InboundEvent, OutboundMessage, SentRef,
};
use async_trait::async_trait;
use std::sync::Arc;

/// Errors an adapter reports. The text is for logs and, shortened, for people.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The platform refused the request (its error code and description).
    #[error("{platform} API error {code}: {description}")]
    Api {
        platform: &'static str,
        code: i64,
        description: String,
    },
    /// The platform could not be reached or answered with something unreadable.
    #[error("{platform} transport error: {message}")]
    Transport {
        platform: &'static str,
        message: String,
    },
    /// The credentials are missing or rejected; retrying will not help.
    #[error("{platform} credentials rejected: {message}")]
    Unauthorized {
        platform: &'static str,
        message: String,
    },
    /// The daemon's sink or state store failed (e.g. the database is unavailable).
    #[error("daemon storage error: {0}")]
    Storage(String),
    /// A message split into `total` parts stopped at part `delivered` (0-based): parts
    /// `..delivered` are shown (`sent` holds the ids of those this send delivered), and `cause`
    /// is why part `delivered` failed. Send the rest with [`Channel::send_from`]`(msg,
    /// delivered)`; sending the whole message again would show the first parts twice.
    #[error("{cause} (the first {delivered} of {total} parts were delivered)")]
    Partial {
        delivered: usize,
        total: usize,
        sent: SentRef,
        cause: Box<ChannelError>,
    },
}

impl ChannelError {
    /// The error behind a [`ChannelError::Partial`]; any other error itself.
    pub fn cause(&self) -> &ChannelError {
        match self {
            ChannelError::Partial { cause, .. } => cause.cause(),
            other => other,
        }
    }

    /// What an adapter returns when part `failed` (0-based) of a message split into `total`
    /// parts could not be sent, in a send that started at part `first`: [`ChannelError::Partial`]
    /// when this send delivered at least one part (their ids in `sent`), else `cause` alone.
    pub fn stopped_at(
        first: usize,
        failed: usize,
        total: usize,
        sent: SentRef,
        cause: ChannelError,
    ) -> ChannelError {
        if failed <= first {
            return cause;
        }
        ChannelError::Partial {
            delivered: failed,
            total,
            sent,
            cause: Box::new(cause),
        }
    }
}

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
