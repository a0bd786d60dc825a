//! Small durable key/value state on PostgreSQL, as in SQLite (`super::super::kv`).

use super::errors::pg_error;
use super::{text, PgStore, StoreError};
use crate::store::sessions::like_prefix;
use async_trait::async_trait;
use ethan_core::store::KvStore;

#[async_trait]
impl KvStore for PgStore {
    async fn kv_get(&self, key: &str) -> Result<Option<String>, StoreError> {
        let op = "kv get";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached("SELECT value FROM kv WHERE key = $1")
            .await
            .map_err(|e| pg_error(op, &e))?;
        match client
            .query_opt(&stmt, &[&key])
            .await
            .map_err(|e| pg_error(op, &e))?
        {
            Some(row) => row.try_get(0).map_err(|e| pg_error(op, &e)),
            None => Ok(None),
        }
    }

    async fn kv_set(&self, key: &str, value: &str) -> Result<(), StoreError> {
        let op = "kv set";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO kv (key, value) VALUES ($1, $2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        client
            .execute(&stmt, &[&key, &text(value)])
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(())
    }

    async fn kv_delete(&self, key: &str) -> Result<(), StoreError> {
        let op = "kv delete";
        let client = self.client(op).await?;
        client
            .execute("DELETE FROM kv WHERE key = $1", &[&key])
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(())
    }

    async fn kv_take(&self, key: &str) -> Result<Option<String>, StoreError> {
        let op = "kv take";
        let client = self.client(op).await?;
        let row = client
            .query_opt("DELETE FROM kv WHERE key = $1 RETURNING value", &[&key])
            .await
            .map_err(|e| pg_error(op, &e))?;
        row.map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| pg_error(op, &e))
    }

    async fn kv_list(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let op = "kv list";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT key, value FROM kv WHERE key LIKE $1 ESCAPE '\\' ORDER BY key LIMIT $2",
                &[&like_prefix(prefix), &super::limit(limit)],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(|e| pg_error(op, &e))
    }
}
