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
        // One statement for all of them (atomic by itself), in the given order: the rows are
        // numbered by `unnest … WITH ORDINALITY` and inserted in that order, so their ids keep it.
        let ts = crate::store::now();
        let n = msgs.len();
        let (mut roles, mut contents, mut calls, mut call_ids, mut opaques, mut errors, mut ats) = (
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
            Vec::with_capacity(n),
        );
        for m in msgs {
            calls.push(if m.tool_calls.is_empty() {
                None
            } else {
                Some(
                    serde_json::to_string(&m.tool_calls).map_err(|e| StoreError::Corrupt {
                        op,
                        message: e.to_string(),
                    })?,
                )
            });
            roles.push(m.role.as_str());
            contents.push(opt_text(m.content.as_deref()).map(|c| c.into_owned()));
            call_ids.push(m.tool_call_id.clone());
            opaques.push(m.opaque.as_ref().map(|v| v.to_string()));
            errors.push(m.is_error);
            ats.push(stored_at(m, ts));
        }
        if msgs.is_empty() {
            return Ok(());
        }
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "INSERT INTO messages (session_id, role, content, tool_calls, tool_call_id, opaque,
                 is_error, created_at)
                 SELECT $1, role, content, tool_calls, tool_call_id, opaque, is_error, created_at
                 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                             $7::bool[], $8::bigint[])
                      WITH ORDINALITY AS m(role, content, tool_calls, tool_call_id, opaque,
                                           is_error, created_at, n)
                 ORDER BY n",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        client
            .execute(
                &stmt,
                &[
                    &session_id,
                    &roles,
                    &contents,
                    &calls,
                    &call_ids,
                    &opaques,
                    &errors,
                    &ats,
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(())
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
