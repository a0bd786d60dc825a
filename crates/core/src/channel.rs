//! Where a message belongs: the platform or local interface ([`ChannelKind`]) and the chat
//! ([`ChatRef`]). Shared by the channel adapters, the tools and the daemon.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which platform (or local interface) a message belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    Telegram,
    Lark,
    Terminal,
    Web,
}

impl ChannelKind {
    /// The lowercase name used in session keys, config sections and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            ChannelKind::Telegram => "telegram",
            ChannelKind::Lark => "lark",
            ChannelKind::Terminal => "terminal",
            ChannelKind::Web => "web",
        }
    }
}

impl fmt::Display for ChannelKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A direct (one-to-one) chat or a group chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatKind {
    Direct,
    Group,
}

/// Where a message lives: the platform chat id and, for real topic threads only, the thread.
///
/// Telegram: `chat.id` as a decimal string; `thread` is `message_thread_id` only when
/// `is_topic_message` is true. Lark: `chat_id` (`oc_…`) and `thread_id` (`omt_…`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatRef {
    pub id: String,
    pub kind: ChatKind,
    pub thread: Option<String>,
}
