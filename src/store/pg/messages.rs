//! The conversation of each session on PostgreSQL, as in SQLite (`super::super::messages`):
//! tool calls as `[{id, name, arguments}]` JSON text and a provider's `opaque` value as JSON
//! text, both read back exactly as written.

use super::errors::pg_error;
use super::{limit, opt_text, PgStore, StoreError};
use crate::store::messages::{decode_message, from_first_user, sent_at, stored_at};
use async_trait::async_trait;
use ethan_core::message::ChatMessage;
use ethan_core::store::MessageStore;

#[async_trait]
impl MessageStore for PgStore {
    async fn append_messages(
        &self,
        session_id: &str,
        msgs: &[ChatMessage],
    ) -> Result<(), StoreError> {
        let op = "append messages";
        let mut client = self.client(op).await?;
        let tx = client.transaction().await.map_err(|e| pg_error(op, &e))?;
        let stmt = tx
            .prepare_cached(
                "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, opaque,
                 is_error, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let ts = crate::store::now();
        for m in msgs {
            let calls = if m.tool_calls.is_empty() {
                None
            } else {
                Some(
                    serde_json::to_string(&m.tool_calls).map_err(|e| StoreError::Corrupt {
                        op,
                        message: e.to_string(),
                    })?,
                )
            };
            let opaque = m.opaque.as_ref().map(|v| v.to_string());
            tx.execute(
                &stmt,
                &[
                    &session_id,
                    &m.role.as_str(),
                    &opt_text(m.content.as_deref()),
                    &calls,
                    &m.tool_call_id,
                    &opaque,
                    &m.is_error,
                    &stored_at(m, ts),
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        }
        tx.commit().await.map_err(|e| pg_error(op, &e))
    }

    async fn load_window(
        &self,
        session_id: &str,
        n: usize,
    ) -> Result<Vec<ChatMessage>, StoreError> {
        let op = "load history";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "SELECT role, content, tool_calls, tool_call_id, opaque, is_error, created_at
                 FROM messages WHERE session_id = $1 ORDER BY id DESC LIMIT $2",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let rows = client
            .query(&stmt, &[&session_id, &limit(n)])
            .await
            .map_err(|e| pg_error(op, &e))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows.iter().rev() {
            let at: i64 = r.try_get(6).map_err(|e| pg_error(op, &e))?;
            out.push(sent_at(decode_row(op, r)?, at));
        }
        Ok(from_first_user(out, |m| m))
    }
}

/// A message from a row of `role, content, tool_calls, tool_call_id, opaque, is_error`
/// (starting at column `0`).
pub(super) fn decode_row(
    op: &'static str,
    r: &tokio_postgres::Row,
) -> Result<ChatMessage, StoreError> {
    let get = |e: tokio_postgres::Error| pg_error(op, &e);
    let role: String = r.try_get(0).map_err(get)?;
    decode_message(
        op,
        &role,
        r.try_get(1).map_err(get)?,
        r.try_get(2).map_err(get)?,
        r.try_get(3).map_err(get)?,
        r.try_get(4).map_err(get)?,
        r.try_get(5).map_err(get)?,
    )
}
