//! Owners claimed at run time (`/claim <code>`) or added with `ethan owner add`, and one-time
//! claim codes. Owners from the config's `owners:` are not stored here; they are always owners.

use super::{now, Ctx, Db, StoreError};
use rusqlite::OptionalExtension;

impl Db {
    /// Add an owner; `Ok(false)` when already present.
    pub fn add_owner(
        &self,
        channel: &str,
        user_id: &str,
        source: &str,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute(
                "INSERT OR IGNORE INTO owners (channel, user_id, source, added_at) VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![channel, user_id, source, now()],
            )
            .op("add owner")?;
        Ok(n == 1)
    }

    /// Remove an owner; `Ok(false)` when there was none.
    pub fn remove_owner(&self, channel: &str, user_id: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute(
                "DELETE FROM owners WHERE channel = ?1 AND user_id = ?2",
                [channel, user_id],
            )
            .op("remove owner")?;
        Ok(n == 1)
    }

    /// Stored owners as (channel, user_id, source, added_at).
    pub fn list_owners(&self) -> Result<Vec<(String, String, String, i64)>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare("SELECT channel, user_id, source, added_at FROM owners ORDER BY added_at")
            .op("list owners")?;
        let rows = st
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
            .op("list owners")?;
        rows.collect::<Result<Vec<_>, _>>().op("list owners")
    }

    pub fn is_stored_owner(&self, channel: &str, user_id: &str) -> Result<bool, StoreError> {
        self.conn()
            .query_row(
                "SELECT 1 FROM owners WHERE channel = ?1 AND user_id = ?2",
                [channel, user_id],
                |_| Ok(()),
            )
            .optional()
            .map(|o| o.is_some())
            .op("check owner")
    }

    pub fn has_stored_owner(&self, channel: &str) -> Result<bool, StoreError> {
        self.conn()
            .query_row(
                "SELECT 1 FROM owners WHERE channel = ?1 LIMIT 1",
                [channel],
                |_| Ok(()),
            )
            .optional()
            .map(|o| o.is_some())
            .op("check owner")
    }

    /// Store a claim code valid until `expires_at` (Unix seconds).
    pub fn put_claim_code(&self, code: &str, expires_at: i64) -> Result<(), StoreError> {
        self.kv_set(&format!("claim:{code}"), &expires_at.to_string())
    }

    /// Use a claim code: `Ok(true)` when it existed and had not expired; it is deleted either way.
    pub fn take_claim_code(&self, code: &str) -> Result<bool, StoreError> {
        let key = format!("claim:{code}");
        let found = self.kv_get(&key)?;
        if found.is_none() {
            return Ok(false);
        }
        self.conn()
            .execute("DELETE FROM kv WHERE key = ?1", [&key])
            .op("use claim code")?;
        Ok(found
            .and_then(|v| v.parse::<i64>().ok())
            .is_some_and(|exp| exp >= now()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn owners_and_claim_codes() {
        let s = Db::open_in_memory().unwrap();
        assert!(!s.has_stored_owner("telegram").unwrap());
        assert!(s.add_owner("telegram", "42", "claim").unwrap());
        assert!(!s.add_owner("telegram", "42", "claim").unwrap());
        assert!(s.is_stored_owner("telegram", "42").unwrap());
        assert!(!s.is_stored_owner("lark", "42").unwrap());
        assert_eq!(s.list_owners().unwrap().len(), 1);
        assert!(s.remove_owner("telegram", "42").unwrap());
        assert!(!s.has_stored_owner("telegram").unwrap());

        s.put_claim_code("ABC", now() + 600).unwrap();
        assert!(s.take_claim_code("ABC").unwrap());
        assert!(!s.take_claim_code("ABC").unwrap(), "one time only");
        s.put_claim_code("OLD", now() - 1).unwrap();
        assert!(!s.take_claim_code("OLD").unwrap(), "expired");
    }
}
