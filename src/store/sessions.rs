//! Sessions: a session key (`telegram:<chat_id>`, `terminal:<name>`) maps to its current
//! session id; `/new` retires it and starts another, so history starts empty.

use super::{now, Ctx, Db, StoreError};
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

    /// Retire the active session of `key` and start a new one; returns the new id.
    pub fn new_session(&self, key: &str) -> Result<String, StoreError> {
        self.conn()
            .execute("UPDATE sessions SET active = 0 WHERE key = ?1", [key])
            .op("retire session")?;
        self.current_session(key)
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
}
