//! The usage ledger on PostgreSQL, as in SQLite (`super::super::usage`): counts clamped to
//! `MAX_TOKENS_PER_CALL` on the way in, reports grouped in Rust by the same
//! [`crate::store::usage::group`].

use super::errors::pg_error;
use super::{PgStore, StoreError};
use crate::store::usage::{group, MAX_TOKENS_PER_CALL};
use async_trait::async_trait;
use ethan_core::store::{UsageGrouping, UsageRecord, UsageRow, UsageStore};

/// A count as stored, clamped to [`MAX_TOKENS_PER_CALL`].
fn int(n: u64) -> i64 {
    n.min(MAX_TOKENS_PER_CALL) as i64
}

/// A stored count back (a negative one, written by hand, reads as 0).
fn count(n: i64) -> u64 {
    u64::try_from(n).unwrap_or(0)
}

impl PgStore {
    /// The calls made at or after `since` (Unix seconds), oldest first.
    pub async fn usage_since(&self, since: i64) -> Result<Vec<UsageRecord>, StoreError> {
        let op = "read usage";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "SELECT created_at, model, session_key, channel, chat_id, job_id, input_tokens,
                 output_tokens, cache_read_tokens, cache_write_tokens, estimated FROM model_usage
                 WHERE created_at >= $1 ORDER BY created_at, id",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let rows = client
            .query(&stmt, &[&since])
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter()
            .map(|r| {
                Ok(UsageRecord {
                    created_at: r.try_get(0)?,
                    model: r.try_get(1)?,
                    session_key: r.try_get(2)?,
                    channel: r.try_get(3)?,
                    chat_id: r.try_get(4)?,
                    job_id: r.try_get(5)?,
                    input_tokens: count(r.try_get(6)?),
                    output_tokens: count(r.try_get(7)?),
                    cache_read_tokens: count(r.try_get(8)?),
                    cache_write_tokens: count(r.try_get(9)?),
                    estimated: r.try_get(10)?,
                })
            })
            .collect::<Result<Vec<_>, tokio_postgres::Error>>()
            .map_err(|e| pg_error(op, &e))
    }
}

#[async_trait]
impl UsageStore for PgStore {
    async fn record_usage(&self, r: &UsageRecord) -> Result<(), StoreError> {
        let op = "record usage";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO model_usage (created_at, model, session_key, channel, chat_id,
                 job_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
                 estimated)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        client
            .execute(
                &stmt,
                &[
                    &r.created_at,
                    &r.model,
                    &r.session_key,
                    &r.channel,
                    &r.chat_id,
                    &r.job_id,
                    &int(r.input_tokens),
                    &int(r.output_tokens),
                    &int(r.cache_read_tokens),
                    &int(r.cache_write_tokens),
                    &r.estimated,
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(())
    }

    async fn tokens_since(
        &self,
        since: i64,
        chat: Option<(&str, &str)>,
    ) -> Result<u64, StoreError> {
        let op = "sum usage";
        let (channel, chat_id) = chat.unzip();
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "SELECT COALESCE(SUM(input_tokens + output_tokens), 0)::BIGINT FROM model_usage
                 WHERE created_at >= $1
                   AND ($2::TEXT IS NULL OR (channel = $2 AND chat_id = $3::TEXT))",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let row = client
            .query_one(&stmt, &[&since, &channel, &chat_id])
            .await
            .map_err(|e| pg_error(op, &e))?;
        let total: i64 = row.try_get(0).map_err(|e| pg_error(op, &e))?;
        Ok(count(total))
    }

    async fn usage_report(
        &self,
        since: i64,
        by: UsageGrouping,
    ) -> Result<Vec<UsageRow>, StoreError> {
        Ok(group(&self.usage_since(since).await?, &by))
    }
}
