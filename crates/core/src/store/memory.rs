//! Long-term memory records: one remembered fact ([`MemoryFact`]) with its scope and subject,
//! and one stored history message found by a search ([`HistoryHit`]). Plain data; the
//! `as_str` / `parse` pairs are the stored spellings.

use crate::message::Role;
use serde::Serialize;

/// Whose a fact is: one person's ([`MemoryScope::Personal`], shown only in that person's
/// direct chats) or one group chat's ([`MemoryScope::Chat`], shown only in that chat).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum MemoryScope {
    Personal,
    Chat,
}

impl MemoryScope {
    pub fn as_str(self) -> &'static str {
        match self {
            MemoryScope::Personal => "personal",
            MemoryScope::Chat => "chat",
        }
    }
    /// The value [`Self::as_str`] gives, back.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "personal" => Some(MemoryScope::Personal),
            "chat" => Some(MemoryScope::Chat),
            _ => None,
        }
    }
}

/// One remembered fact.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryFact {
    pub id: i64,
    pub scope: MemoryScope,
    /// Whom or what it is about: `owner` (the owner, on every channel), `<channel>:<user_id>`
    /// (another person) or `<channel>:<chat_id>` (a group chat).
    pub subject: String,
    pub content: String,
    /// How it was learned: `tool` (`memory_save`), `extracted` (before a compaction), `cli`.
    pub source: String,
    /// Unix seconds.
    pub created_at: i64,
    /// Unix seconds: when it was last saved again or found by a search (decay counts from
    /// here).
    pub confirmed_at: i64,
    /// The fact that replaced it (it contradicted this one); `None` while it is current.
    pub superseded_by: Option<i64>,
}

/// A fact to store ([`crate::store::MemoryStore::save_fact`]).
#[derive(Debug, Clone, PartialEq)]
pub struct NewFact {
    pub scope: MemoryScope,
    pub subject: String,
    pub content: String,
    pub source: String,
    /// A current fact of the same subject that this one replaces; it is kept, marked
    /// superseded.
    pub replaces: Option<i64>,
}

/// One stored message of a session key's history that matched a search.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HistoryHit {
    /// The message's row id (ascending in time).
    pub id: i64,
    pub session_id: String,
    pub role: Role,
    pub content: String,
    /// Unix seconds.
    pub created_at: i64,
}
