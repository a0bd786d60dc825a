//! Sessions: a session key (`telegram:<chat_id>`, `terminal:<name>`) maps to its current
//! session id; `/new` retires it and starts another, so history starts empty.

use super::backend::SessionSummary;
use super::{now, Ctx, Db, StoreError};
use ethan_core::store::TurnEnd;
use rusqlite::OptionalExtension;

impl Db {
    /// The active session id for `key`, created on first use.
    pub fn current_session(&self, key: &str) -> Result<String, StoreError> {
        let conn = self.conn();
        let found: Option<String> = conn
            .prepare_cached(
                "SELECT id FROM sessions WHERE key = ?1 AND active = 1 ORDER BY created_at DESC LIMIT 1",
            )
            .and_then(|mut st| st.query_row([key], |r| r.get(0)))
            .optional()
            .op("find session")?;
        if let Some(id) = found {
            return Ok(id);
        }
        let id = uuid::Uuid::new_v4().to_string();
        conn.execute(
            "INSERT INTO sessions(id, key, active, created_at) VALUES (?1, ?2, 1, ?3)",
            rusqlite::params![id, key, now()],
        )
        .op("create session")?;
        Ok(id)
    }

    /// What a turn leaves, in one transaction: its messages, the model calls not yet in the
    /// ledger, the session's marks (see [`ethan_core::store::SessionStore::end_turn`]).
    pub fn end_turn(&self, end: &TurnEnd) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().op("end turn")?;
        super::messages::insert_messages(&tx, &end.session_id, &end.messages)?;
        for r in &end.usage {
            super::usage::insert_usage(&tx, r)?;
        }
        for (key, value) in &end.marks {
            super::kv::set(&tx, key, value)?;
        }
        tx.commit().op("end turn")
    }

    /// Retire the active session of `key` and start a new one; returns the new id.
    pub fn new_session(&self, key: &str) -> Result<String, StoreError> {
        self.conn()
            .execute("UPDATE sessions SET active = 0 WHERE key = ?1", [key])
            .op("retire session")?;
        self.current_session(key)
    }
}

/// The SQL of [`Db::list_sessions`] (and, with `$n` parameters and `active` a boolean, of the
/// PostgreSQL store): a key prefix as a `LIKE` pattern with `\` escaping `%`, `_` and itself.
pub(crate) fn like_prefix(prefix: &str) -> String {
    let mut p = String::with_capacity(prefix.len() + 1);
    for c in prefix.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

impl Db {
    /// The active sessions whose key starts with `prefix`, most recently used first (see
    /// [`crate::store::StoreAdmin::list_sessions`]).
    pub fn list_sessions(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<SessionSummary>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare_cached(
                "SELECT s.key, s.created_at,
                    COALESCE((SELECT MAX(m.created_at) FROM messages m WHERE m.session_id = s.id),
                             s.created_at) AS updated,
                    (SELECT m.content FROM messages m
                      WHERE m.session_id = s.id AND m.role = 'user' ORDER BY m.id LIMIT 1)
                 FROM sessions s
                 WHERE s.active = 1 AND s.key LIKE ?1 ESCAPE '\\'
                 ORDER BY updated DESC, s.created_at DESC LIMIT ?2",
            )
            .op("list sessions")?;
        let rows = st
            .query_map(rusqlite::params![like_prefix(prefix), limit as i64], |r| {
                Ok(SessionSummary {
                    key: r.get(0)?,
                    created_at: r.get(1)?,
                    updated_at: r.get(2)?,
                    title: r.get(3)?,
                })
            })
            .op("list sessions")?;
        rows.collect::<Result<Vec<_>, _>>().op("list sessions")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_is_stable_until_new() {
        let s = Db::open_in_memory().unwrap();
        let a = s.current_session("telegram:1").unwrap();
        assert_eq!(a, s.current_session("telegram:1").unwrap());
        let b = s.new_session("telegram:1").unwrap();
        assert_ne!(a, b);
        assert_eq!(b, s.current_session("telegram:1").unwrap());
        assert_ne!(b, s.current_session("telegram:2").unwrap());
    }

    #[test]
    fn sessions_are_listed_by_a_literal_prefix_newest_first() {
        use ethan_core::message::ChatMessage;
        let s = Db::open_in_memory().unwrap();
        let a = s.current_session("web:a").unwrap();
        s.current_session("web_x").unwrap();
        s.current_session("telegram:1").unwrap();
        s.append_messages(
            &a,
            &[
                ChatMessage::user("first question"),
                ChatMessage::assistant("hi"),
            ],
        )
        .unwrap();
        s.append_messages(&a, &[ChatMessage::user("second")])
            .unwrap();
        let b = s.current_session("web:b").unwrap();
        let listed = s.list_sessions("web:", 10).unwrap();
        let keys: Vec<&str> = listed.iter().map(|l| l.key.as_str()).collect();
        assert_eq!(keys.len(), 2, "{keys:?}");
        assert!(keys.contains(&"web:a") && keys.contains(&"web:b"));
        let a_row = listed.iter().find(|l| l.key == "web:a").unwrap();
        assert_eq!(a_row.title.as_deref(), Some("first question"));
        assert_eq!(
            listed.iter().find(|l| l.key == "web:b").unwrap().title,
            None
        );
        // A retired session is not listed; `_` is not a wildcard.
        s.new_session("web:a").unwrap();
        let _ = b;
        let listed = s.list_sessions("web:", 10).unwrap();
        assert!(listed.iter().all(|l| l.title.is_none()), "{listed:?}");
        assert_eq!(s.list_sessions("web_", 10).unwrap().len(), 1);
    }
}
