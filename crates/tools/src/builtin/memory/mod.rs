//! Long-term memory tools (`memory_save`, `memory_search`, `memory_forget`) and
//! `history_search`, and the rule they share: whose memory a turn may see ([`Visible`]).
//!
//! Memory has two scopes. *Personal* memory belongs to one person (the owner, on every
//! channel; anyone else per channel and user id) and is seen only in that person's direct
//! chats, the terminal and the web chat. *Chat* memory belongs to one group chat and is seen
//! only there. A group never sees anyone's personal memory, so a fact one person told the bot
//! cannot surface in front of others.
//!
//! Risk: saving writes text that later turns read in their system prompt, so a prompt
//! injection that reaches `memory_save` would persist. A person's own personal memory is saved
//! without asking (it reaches only their own direct chats); a group's memory, and forgetting it,
//! asks the owner, and only the owner's yes counts (consent refuses anyone else outright). After
//! text from outside the conversation came in ([`outside_text`]), saving or forgetting any fact
//! asks the owner every time, showing the fact: the write may be what a page told the model.
//! Credential-shaped text is never saved. Reading memory or the stored history marks the turn
//! as holding private data, so a later call that could carry it off the machine asks first.

pub mod history_search;
pub mod memory_forget;
pub mod memory_save;
pub mod memory_search;

use crate::ToolError;
use crate::{ErrorKind, ToolContext};
use ethan_core::store::{MemoryFact, MemoryScope, StorageRef};
use ethan_core::{ChannelKind, ChatKind};

/// The subject of the owner's personal memory, the same on every channel.
pub const OWNER_SUBJECT: &str = "owner";

/// Whose memory one turn may see and write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Visible {
    /// The asker's personal memory (`owner` or `<channel>:<user_id>`): `None` in a group.
    pub personal: Option<String>,
    /// The group's memory (`<channel>:<chat_id>`): `None` outside a group.
    pub chat: Option<String>,
}

impl Visible {
    /// What a turn in `channel` sees: in a group chat (`group`), that chat's memory only; in
    /// any other chat (a direct chat, the terminal, the web), the asker's personal memory only.
    pub fn of(
        channel: ChannelKind,
        group: bool,
        chat_id: &str,
        user_id: &str,
        owner: bool,
    ) -> Self {
        if group {
            Visible {
                personal: None,
                chat: Some(format!("{channel}:{chat_id}")),
            }
        } else {
            let personal = if owner {
                OWNER_SUBJECT.to_string()
            } else {
                format!("{channel}:{user_id}")
            };
            Visible {
                personal: Some(personal),
                chat: None,
            }
        }
    }

    /// What the turn of a tool call sees.
    pub fn of_call(ctx: &ToolContext) -> Self {
        let group = ctx.chat.as_ref().is_some_and(|c| c.kind == ChatKind::Group);
        Self::of(ctx.channel, group, &ctx.chat_id, &ctx.user_id, ctx.is_owner)
    }

    /// The one subject of this turn and its scope (exactly one of the two is set).
    pub fn subject(&self) -> (MemoryScope, &str) {
        match (&self.personal, &self.chat) {
            (Some(p), _) => (MemoryScope::Personal, p),
            (None, Some(c)) => (MemoryScope::Chat, c),
            (None, None) => (MemoryScope::Personal, OWNER_SUBJECT),
        }
    }

    /// Whether this is a group's memory (saving and forgetting it asks the owner).
    pub fn is_group(&self) -> bool {
        self.personal.is_none()
    }
}

/// What brought text from outside the conversation into this call's turn (a page, a file, a
/// tool's output, a forwarded message: the memory's `provenance`), if anything did. A write
/// to memory then may be an injected one, so it asks the owner every time, showing the fact.
pub(crate) fn outside_text(ctx: &ToolContext) -> Option<String> {
    ctx.taint.untrusted()
}

/// The sentence an approval of a memory write adds after outside text came in from `source`:
/// the conversation read words that are not the person's, so the write may be an injected one.
pub(crate) fn not_your_words(source: &str, what: &str) -> String {
    format!(
        "\nThis conversation has read text that is not yours ({source}): say yes only if {what}."
    )
}

/// The prefix of a session's memory snapshot key (the memory's `snapshot`).
pub const SNAPSHOT_PREFIX: &str = "memory.snapshot:";

/// The kv key of a session's memory snapshot.
pub fn snapshot_key(session_id: &str) -> String {
    format!("{SNAPSHOT_PREFIX}{session_id}")
}

/// Drop the snapshot of the current session of `session_key`, so its next turn shows memory as
/// it is now (after a fact was forgotten or replaced). Failures are logged.
pub(crate) async fn refresh_snapshot(store: &StorageRef, session_key: &str) {
    match store.current_session(session_key).await {
        Ok(id) => {
            if let Err(e) = store.kv_delete(&snapshot_key(&id)).await {
                tracing::warn!("cannot refresh the memory snapshot of {session_key}: {e}");
            }
        }
        Err(e) => tracing::warn!("cannot refresh the memory snapshot of {session_key}: {e}"),
    }
}

/// The store a memory tool works on, or the error the model reads.
pub(crate) fn store_of(ctx: &ToolContext) -> Result<&StorageRef, ToolError> {
    ctx.services.store.as_ref().ok_or_else(|| {
        ToolError::new(
            ErrorKind::Dependency,
            "memory is not available here (no store)",
        )
    })
}

/// One fact as the tools list it: `#12 (2026-11-02) text`.
pub fn fact_line(f: &MemoryFact) -> String {
    let day = chrono::DateTime::from_timestamp(f.confirmed_at, 0)
        .map(|t| t.format("%Y-%m-%d").to_string())
        .unwrap_or_default();
    format!("#{} ({day}) {}", f.id, f.content)
}

/// Lower-cased words of `text` (letters and digits; CJK characters one by one), for matching.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    for c in text.chars() {
        if is_cjk(c) {
            if !cur.is_empty() {
                out.push(std::mem::take(&mut cur));
            }
            out.push(c.to_string());
        } else if c.is_alphanumeric() {
            cur.extend(c.to_lowercase());
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30ff | 0x3400..=0x4dbf | 0x4e00..=0x9fff | 0xac00..=0xd7af)
}

/// How many of `query`'s words `text` contains (0 = no match).
pub fn score(query: &[String], text: &str) -> usize {
    let have = words(text);
    query.iter().filter(|q| have.contains(q)).count()
}

/// Text normalised for "is this the same fact": lower-case words joined by single spaces.
pub fn normalised(text: &str) -> String {
    words(text).join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_sees_only_its_own_memory_and_a_direct_chat_only_the_persons() {
        let g = Visible::of(ChannelKind::Telegram, true, "-100", "7", true);
        assert_eq!(g.personal, None);
        assert_eq!(g.chat.as_deref(), Some("telegram:-100"));
        assert_eq!(g.subject(), (MemoryScope::Chat, "telegram:-100"));
        assert!(g.is_group());
        let dm = Visible::of(ChannelKind::Lark, false, "oc_1", "ou_9", false);
        assert_eq!(dm.subject(), (MemoryScope::Personal, "lark:ou_9"));
        // The owner is one person on every channel.
        let owner_tg = Visible::of(ChannelKind::Telegram, false, "7", "7", true);
        let owner_term = Visible::of(ChannelKind::Terminal, false, "", "local", true);
        assert_eq!(owner_tg, owner_term);
        assert_eq!(owner_tg.subject().1, OWNER_SUBJECT);
    }

    #[test]
    fn words_and_scores() {
        assert_eq!(
            words("Likes Tea, hates coffee!"),
            ["likes", "tea", "hates", "coffee"]
        );
        assert_eq!(words("喜欢茶"), ["喜", "欢", "茶"]);
        let q = words("tea coffee");
        assert_eq!(score(&q, "I drink tea"), 1);
        assert_eq!(score(&q, "tea or coffee"), 2);
        assert_eq!(score(&q, "water"), 0);
        assert_eq!(normalised("  My  Cat is  Tom. "), "my cat is tom");
    }
}
