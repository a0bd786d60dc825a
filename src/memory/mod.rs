//! What Ethan keeps beyond one window of messages:
//! - [`snapshot`]: the remembered facts a session's system prompt carries, chosen once when the
//!   session starts (a person's own facts in their direct chats, a group's facts in the group,
//!   never anyone's personal facts in a group) and then fixed, so the prompt prefix stays the
//!   same for the provider's cache;
//! - [`compact`]: a session whose history would pass 70 % of `model.context_tokens` has its
//!   oldest turns summarised into one summary message, after a silent step that saves the facts
//!   worth keeping; the original messages stay in the store for `history_search`;
//! - [`summarise`]: the model requests behind both, and the summaries of long tool outputs;
//! - [`provenance`]: whose words a fact may come from (the person's own, never a page's).
//!
//! Sizes are estimated in characters, at [`CHARS_PER_TOKEN`] characters a token.
//! The facts themselves, their scopes and the tools that change them are
//! [`crate::tools::builtin::memory`]; the tables are the store's
//! ([`ethan_core::store::MemoryStore`]).

pub mod compact;
pub mod provenance;
pub mod snapshot;
pub mod summarise;

use crate::config::MemoryConfig;
use crate::tools::builtin::memory::{fact_line, Visible};
use ethan_core::message::ChatMessage;
use ethan_core::store::{MemoryScope, StorageRef};

/// The estimate of characters per token that every budget here uses.
pub const CHARS_PER_TOKEN: usize = 4;

/// The characters of one message that count toward a request: its text, and each tool call's
/// name and arguments ([`weighted_chars`]).
pub fn message_chars(m: &ChatMessage) -> usize {
    m.content.as_deref().map_or(0, weighted_chars)
        + m.tool_calls
            .iter()
            .map(|c| weighted_chars(&c.name) + weighted_chars(&c.arguments))
            .sum::<usize>()
}

/// Characters of `text` for the budget: a CJK character (about a token on its own) counts as
/// [`CHARS_PER_TOKEN`] characters, any other as one.
pub fn weighted_chars(text: &str) -> usize {
    text.chars()
        .map(|c| match c as u32 {
            0x3040..=0x30ff
            | 0x3400..=0x4dbf
            | 0x4e00..=0x9fff
            | 0xac00..=0xd7af
            | 0xf900..=0xfaff
            | 0xff00..=0xffef => CHARS_PER_TOKEN,
            _ => 1,
        })
        .sum()
}

/// The characters of a list of messages ([`message_chars`] summed).
pub fn chars_of(messages: &[ChatMessage]) -> usize {
    messages.iter().map(message_chars).sum()
}

/// What `/memory` shows: the facts `visible` may see, newest confirmed first, those that left
/// the snapshot by decay marked; or a sentence saying there are none (or that the store failed).
pub async fn listing(store: &StorageRef, visible: &Visible, config: &MemoryConfig) -> String {
    let (scope, subject) = visible.subject();
    let facts = match store.facts_of(subject, false).await {
        Ok(f) => f,
        Err(e) => {
            tracing::error!("/memory failed: {e}");
            return "I couldn't read my memory (database error).".to_string();
        }
    };
    let whom = match scope {
        MemoryScope::Personal => "you",
        MemoryScope::Chat => "this group",
    };
    if facts.is_empty() {
        return format!("I don't remember anything about {whom} yet.");
    }
    let cutoff = match config.decay_days {
        0 => i64::MIN,
        d => chrono::Utc::now().timestamp() - i64::from(d) * 86_400,
    };
    let lines: Vec<String> = facts
        .iter()
        .map(|f| {
            let faded = if f.confirmed_at < cutoff {
                " (not recalled lately: searchable, not in my notes)"
            } else {
                ""
            };
            format!("- {}{faded}", fact_line(f))
        })
        .collect();
    format!(
        "What I remember about {whom} ({} fact(s)); ask me to forget one by its number:\n{}",
        facts.len(),
        lines.join("\n")
    )
}

#[cfg(test)]
mod tests {
    #[test]
    fn cjk_characters_weigh_a_token_each() {
        assert_eq!(super::weighted_chars("abcd"), 4);
        assert_eq!(super::weighted_chars("你好"), 2 * super::CHARS_PER_TOKEN);
        assert_eq!(super::weighted_chars("a你"), 1 + super::CHARS_PER_TOKEN);
    }
}
