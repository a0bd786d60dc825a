//! Sessions on PostgreSQL: a session key maps to its current session id, as in SQLite
//! (`super::super::sessions`). A partial unique index keeps one active session per key, so
//! replicas asking for the same key at once get the same session.

use super::errors::pg_error;
use super::{PgStore, StoreError};
use async_trait::async_trait;
use ethan_core::store::SessionStore;

const FIND: &str =
    "SELECT id FROM sessions WHERE key = $1 AND active ORDER BY created_at DESC LIMIT 1";
/// The active session and its kv values `<prefix><id>`, in the order of the prefixes.
const START: &str = "SELECT s.id, ARRAY(
       SELECT (SELECT value FROM kv WHERE key = u.prefix || s.id)
       FROM unnest($2::text[]) WITH ORDINALITY AS u(prefix, n) ORDER BY u.n)
     FROM sessions s WHERE s.key = $1 AND s.active ORDER BY s.created_at DESC LIMIT 1";
const CREATE: &str = "INSERT INTO sessions (id, key, active, created_at) VALUES ($1, $2, TRUE, $3)
     ON CONFLICT (key) WHERE active DO NOTHING";

#[async_trait]
impl SessionStore for PgStore {
    async fn current_session(&self, key: &str) -> Result<String, StoreError> {
        let op = "find session";
        let client = self.client(op).await?;
        let find = client
            .prepare_cached(FIND)
            .await
            .map_err(|e| pg_error(op, &e))?;
        let create = client
            .prepare_cached(CREATE)
            .await
            .map_err(|e| pg_error(op, &e))?;
        // Another replica may create it between the two statements: then the insert does
        // nothing and the second look finds theirs.
        for _ in 0..3 {
            if let Some(row) = client
                .query_opt(&find, &[&key])
                .await
                .map_err(|e| pg_error(op, &e))?
            {
                return row.try_get(0).map_err(|e| pg_error(op, &e));
            }
            let id = uuid::Uuid::new_v4().to_string();
            let n = client
                .execute(&create, &[&id, &key, &crate::store::now()])
                .await
                .map_err(|e| pg_error("create session", &e))?;
            if n == 1 {
                return Ok(id);
            }
        }
        Err(StoreError::Backend {
            op,
            message: format!("the active session of {key} kept changing; try again"),
        })
    }

    async fn start_turn(
        &self,
        key: &str,
        kv_prefixes: &[&str],
    ) -> Result<(String, Vec<Option<String>>), StoreError> {
        let op = "start turn";
        let client = self.client(op).await?;
        let start = client
            .prepare_cached(START)
            .await
            .map_err(|e| pg_error(op, &e))?;
        let prefixes: Vec<&str> = kv_prefixes.to_vec();
        if let Some(row) = client
            .query_opt(&start, &[&key, &prefixes])
            .await
            .map_err(|e| pg_error(op, &e))?
        {
            let id: String = row.try_get(0).map_err(|e| pg_error(op, &e))?;
            let values: Vec<Option<String>> = row.try_get(1).map_err(|e| pg_error(op, &e))?;
            return Ok((id, values));
        }
        // The session's first turn: made now (or found, made by another replica meanwhile).
        drop(client);
        let id = self.current_session(key).await?;
        let mut values = Vec::with_capacity(kv_prefixes.len());
        for p in kv_prefixes {
            values.push(ethan_core::store::KvStore::kv_get(self, &format!("{p}{id}")).await?);
        }
        Ok((id, values))
    }

    async fn new_session(&self, key: &str) -> Result<String, StoreError> {
        let op = "retire session";
        let mut client = self.client(op).await?;
        let tx = client.transaction().await.map_err(|e| pg_error(op, &e))?;
        tx.execute(
            "UPDATE sessions SET active = FALSE WHERE key = $1 AND active",
            &[&key],
        )
        .await
        .map_err(|e| pg_error(op, &e))?;
        let id = uuid::Uuid::new_v4().to_string();
        tx.execute(
            "INSERT INTO sessions (id, key, active, created_at) VALUES ($1, $2, TRUE, $3)",
            &[&id, &key, &crate::store::now()],
        )
        .await
        .map_err(|e| pg_error("create session", &e))?;
        tx.commit().await.map_err(|e| pg_error(op, &e))?;
        Ok(id)
    }
}
