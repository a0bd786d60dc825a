//! The audit log and the replay-guard keys on PostgreSQL, as in SQLite
//! (`super::super::audit`): entries newest first by insertion, a replay key recorded once.

use super::errors::pg_error;
use super::{limit, opt_text, text, PgStore, StoreError};
use async_trait::async_trait;
use ethan_core::store::{AuditEntry, AuditStore};

#[async_trait]
impl AuditStore for PgStore {
    async fn insert_audit(&self, e: &AuditEntry) -> Result<(), StoreError> {
        let op = "write audit";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO audit (execution_id, trace_id, session_key, user_id, channel, tool,
                 args, started_ms, ended_ms, ok, attempt, error_kind, error, output_bytes,
                 spill_path, model)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16)",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        client
            .execute(
                &stmt,
                &[
                    &e.execution_id,
                    &e.trace_id,
                    &e.session_key,
                    &e.user_id,
                    &e.channel,
                    &e.tool,
                    &text(&e.args),
                    &e.started_ms,
                    &e.ended_ms,
                    &e.ok,
                    &i64::from(e.attempt),
                    &e.error_kind,
                    &opt_text(e.error.as_deref()),
                    &(e.output_bytes as i64),
                    &e.spill_path,
                    &e.model,
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(())
    }

    async fn recent_audit(
        &self,
        n: usize,
        session: Option<&str>,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let op = "read audit";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "SELECT execution_id, trace_id, session_key, user_id, channel, tool, args,
                 started_ms, ended_ms, ok, attempt, error_kind, error, output_bytes, spill_path,
                 model FROM audit
                 WHERE ($1::TEXT IS NULL OR session_key = $1) ORDER BY id DESC LIMIT $2",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let rows = client
            .query(&stmt, &[&session, &limit(n)])
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter()
            .map(|r| {
                let attempt: i64 = r.try_get(10)?;
                Ok(AuditEntry {
                    execution_id: r.try_get(0)?,
                    trace_id: r.try_get(1)?,
                    session_key: r.try_get(2)?,
                    user_id: r.try_get(3)?,
                    channel: r.try_get(4)?,
                    tool: r.try_get(5)?,
                    args: r.try_get(6)?,
                    started_ms: r.try_get(7)?,
                    ended_ms: r.try_get(8)?,
                    ok: r.try_get(9)?,
                    attempt: attempt as u32,
                    error_kind: r.try_get(11)?,
                    error: r.try_get(12)?,
                    output_bytes: r.try_get::<_, i64>(13)? as u64,
                    spill_path: r.try_get(14)?,
                    model: r.try_get(15)?,
                })
            })
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()
            .map_err(|e| pg_error(op, &e))
    }

    async fn replay_key_recorded(&self, key: &str) -> Result<bool, StoreError> {
        let op = "replay key";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached("SELECT 1 FROM replay_keys WHERE key = $1")
            .await
            .map_err(|e| pg_error(op, &e))?;
        let row = client
            .query_opt(&stmt, &[&key])
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(row.is_some())
    }

    async fn record_replay_key(
        &self,
        key: &str,
        trace_id: &str,
        tool: &str,
    ) -> Result<bool, StoreError> {
        let op = "replay key";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO replay_keys (key, trace_id, tool, created_at) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (key) DO NOTHING",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let n = client
            .execute(&stmt, &[&key, &trace_id, &tool, &crate::store::now()])
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(n == 1)
    }
}

impl PgStore {
    /// Delete audit rows and replay keys older than `days` days; returns the audit rows
    /// removed. Errors: [`StoreError::Backend`] when the database cannot be written.
    pub async fn prune_audit(&self, days: u32) -> Result<usize, StoreError> {
        let op = "prune audit";
        let cutoff = crate::store::now() - i64::from(days) * 86_400;
        let client = self.client(op).await?;
        let a = client
            .execute(
                "DELETE FROM audit WHERE started_ms < $1",
                &[&(cutoff * 1000)],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        client
            .execute("DELETE FROM replay_keys WHERE created_at < $1", &[&cutoff])
            .await
            .map_err(|e| pg_error("prune replay keys", &e))?;
        Ok(a as usize)
    }
}
