//! Owners added at run time and one-time claim codes on PostgreSQL, as in SQLite
//! (`super::super::owners`). Claim codes live in the kv table (`claim:<code>` → expiry in Unix
//! seconds); taking one is a single `DELETE … RETURNING`, so two replicas never both use it.

use super::errors::pg_error;
use super::{PgStore, StoreError};
use async_trait::async_trait;
use ethan_core::store::{KvStore, OwnerStore};

#[async_trait]
impl OwnerStore for PgStore {
    async fn add_owner(
        &self,
        channel: &str,
        user_id: &str,
        source: &str,
    ) -> Result<bool, StoreError> {
        let op = "add owner";
        let client = self.client(op).await?;
        let n = client
            .execute(
                "INSERT INTO owners (channel, user_id, source, added_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (channel, user_id) DO NOTHING",
                &[&channel, &user_id, &source, &crate::store::now()],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(n == 1)
    }

    async fn remove_owner(&self, channel: &str, user_id: &str) -> Result<bool, StoreError> {
        let op = "remove owner";
        let client = self.client(op).await?;
        let n = client
            .execute(
                "DELETE FROM owners WHERE channel = $1 AND user_id = $2",
                &[&channel, &user_id],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(n == 1)
    }

    async fn list_owners(&self) -> Result<Vec<(String, String, String, i64)>, StoreError> {
        let op = "list owners";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT channel, user_id, source, added_at FROM owners ORDER BY added_at, seq",
                &[],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?, r.try_get(3)?)))
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()
            .map_err(|e| pg_error(op, &e))
    }

    async fn is_stored_owner(&self, channel: &str, user_id: &str) -> Result<bool, StoreError> {
        let op = "check owner";
        let client = self.client(op).await?;
        let row = client
            .query_opt(
                "SELECT 1 FROM owners WHERE channel = $1 AND user_id = $2",
                &[&channel, &user_id],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(row.is_some())
    }

    async fn has_stored_owner(&self, channel: &str) -> Result<bool, StoreError> {
        let op = "check owner";
        let client = self.client(op).await?;
        let row = client
            .query_opt(
                "SELECT 1 FROM owners WHERE channel = $1 LIMIT 1",
                &[&channel],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(row.is_some())
    }

    async fn put_claim_code(&self, code: &str, expires_at: i64) -> Result<(), StoreError> {
        self.kv_set(&format!("claim:{code}"), &expires_at.to_string())
            .await
    }

    async fn take_claim_code(&self, code: &str) -> Result<bool, StoreError> {
        let op = "use claim code";
        let client = self.client(op).await?;
        let row = client
            .query_opt(
                "DELETE FROM kv WHERE key = $1 RETURNING value",
                &[&format!("claim:{code}")],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let Some(row) = row else {
            return Ok(false);
        };
        let value: String = row.try_get(0).map_err(|e| pg_error(op, &e))?;
        Ok(value
            .parse::<i64>()
            .is_ok_and(|exp| exp >= crate::store::now()))
    }
}
