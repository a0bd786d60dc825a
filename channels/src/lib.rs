//! `ethan-channels`: the unified message model Ethan's daemon speaks, and one adapter per chat
//! platform.
//!
//! What this crate owns:
//! - [`InboundEvent`] — a message from a person, normalised from a platform payload (Telegram
//!   `Update`, later Lark `im.message.receive_v1`), with the platform's native event id
//!   (Telegram `update_id`) for deduplication and the chat/thread it belongs to, and the files
//!   it carried ([`Attachment`]), which the daemon downloads through [`Channel::media_source`];
//!   its sender's own words are kept apart from text someone else wrote ([`Relayed`]: a
//!   forward) and from what is not fetched ([`Unfetched`]: a video and its author's name for it);
//! - [`OutboundMessage`] — what the daemon wants shown in a chat (Markdown text, a typing
//!   indicator);
//! - [`stream`]: the optional draft capability that shows a reply while it is written;
//! - [`delivery`]: sending a message with retries that resume at the part that failed;
//! - the [`Channel`] trait that every adapter implements, and [`InboundSink`] / [`StateStore`],
//!   the two services an adapter receives from the daemon (publish an event durably; remember a
//!   small piece of state such as the Telegram offset).
//!
//! What it does not own: sessions, access policy, the agent, tools or storage. Adapters never
//! decide trust; the daemon derives who is the owner from its own records.

pub mod channel;
pub mod delivery;
pub mod error;
pub mod lark;
pub mod model;
pub mod net;
pub mod stream;
pub mod telegram;

pub use channel::{Channel, ChannelError, InboundSink, KvState, PublishOutcome, StateStore};
pub use model::{
    ApprovalAck, ApprovalChoice, ApprovalDecision, ApprovalRequest, Attachment, AttachmentKind,
    ChannelKind, ChatKind, ChatRef, FileRef, InboundEvent, MediaSource, OutboundBody,
    OutboundMessage, Relay, Relayed, Sender, SentRef, Unfetched,
};
pub use stream::{
    Draft, DraftHandle, DraftLog, DraftTarget, DraftView, StreamMode, ToolLine, ToolState,
};
