//! Small durable key/value state (Telegram offset, …).

use super::{Ctx, Db, StoreError};
use rusqlite::{Connection, OptionalExtension};

/// Set `key` to `value` on `conn` (alone, or in the caller's transaction).
pub(super) fn set(conn: &Connection, key: &str, value: &str) -> Result<(), StoreError> {
    conn.prepare_cached(
        "INSERT INTO kv(key, value) VALUES (?1, ?2)
         ON CONFLICT(key) DO UPDATE SET value = excluded.value",
    )
    .and_then(|mut st| st.execute([key, value]))
    .op("kv set")?;
    Ok(())
}

impl Db {
    pub fn kv_get(&self, key: &str) -> Result<Option<String>, StoreError> {
        self.conn()
            .prepare_cached("SELECT value FROM kv WHERE key = ?1")
            .and_then(|mut st| st.query_row([key], |r| r.get(0)))
            .optional()
            .op("kv get")
    }

    pub fn kv_set(&self, key: &str, value: &str) -> Result<(), StoreError> {
        set(&self.conn(), key, value)
    }

    pub fn kv_delete(&self, key: &str) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached("DELETE FROM kv WHERE key = ?1")
            .and_then(|mut st| st.execute([key]))
            .op("kv delete")?;
        Ok(())
    }

    /// Delete `key`, returning its value (see [`ethan_core::store::KvStore::kv_take`]).
    pub fn kv_take(&self, key: &str) -> Result<Option<String>, StoreError> {
        use rusqlite::OptionalExtension;
        self.conn()
            .query_row(
                "DELETE FROM kv WHERE key = ?1 RETURNING value",
                [key],
                |r| r.get(0),
            )
            .optional()
            .op("kv take")
    }

    /// Keys starting with `prefix`, with their values (see
    /// [`ethan_core::store::KvStore::kv_list`]).
    pub fn kv_list(&self, prefix: &str, limit: usize) -> Result<Vec<(String, String)>, StoreError> {
        // Not LIKE: SQLite's is case-insensitive.
        self.conn()
            .prepare_cached(
                "SELECT key, value FROM kv WHERE substr(key, 1, length(?1)) = ?1
                 ORDER BY key LIMIT ?2",
            )
            .and_then(|mut st| {
                st.query_map(
                    rusqlite::params![prefix, i64::try_from(limit).unwrap_or(i64::MAX)],
                    |r| Ok((r.get(0)?, r.get(1)?)),
                )?
                .collect()
            })
            .op("kv list")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_get_overwrite() {
        let s = Db::open_in_memory().unwrap();
        assert_eq!(s.kv_get("a").unwrap(), None);
        s.kv_set("a", "1").unwrap();
        s.kv_set("a", "2").unwrap();
        assert_eq!(s.kv_get("a").unwrap().as_deref(), Some("2"));
        s.kv_delete("a").unwrap();
        s.kv_delete("a").unwrap();
        assert_eq!(s.kv_get("a").unwrap(), None);
    }
}
