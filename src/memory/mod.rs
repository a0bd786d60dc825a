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
//! Sizes are estimated in characters, at [`CHARS_PER_TOKEN`] characters a token
//! ([`crate::tokens`], the estimate the usage ledger also uses).
//! The facts themselves, their scopes and the tools that change them are
//! [`crate::tools::builtin::memory`]; the tables are the store's
//! ([`ethan_core::store::MemoryStore`]).

pub mod compact;
pub mod provenance;
pub mod snapshot;
pub mod summarise;

use crate::config::MemoryConfig;
use crate::tools::builtin::memory::{fact_line, Visible};
use ethan_core::store::{MemoryScope, StorageRef};

pub use crate::tokens::{chars_of, message_chars, weighted_chars, CHARS_PER_TOKEN};

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
