//! The conversation of each session on PostgreSQL, as in SQLite (`super::super::messages`):
//! tool calls as `[{id, name, arguments}]` JSON text and a provider's `opaque` value as JSON
//! text, both read back exactly as written.

use super::errors::pg_error;
use super::{limit, opt_text, PgStore, StoreError};
use crate::store::messages::{decode_message, from_first_user, sent_at, stored_at};
use async_trait::async_trait;
use ethan_core::message::ChatMessage;
use ethan_core::store::MessageStore;
use tokio_postgres::types::ToSql;

/// The insert of a turn's messages: one statement for all of them (atomic by itself), in the
/// given order: the rows are numbered by `unnest … WITH ORDINALITY` and inserted in that order,
/// so their ids keep it. `$1` the session, `$2`–`$8` the arrays of [`Columns`].
pub(super) const INSERT: &str = "INSERT INTO messages (session_id, role, content, tool_calls,
     tool_call_id, opaque, is_error, created_at)
     SELECT $1, role, content, tool_calls, tool_call_id, opaque, is_error, created_at
     FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                 $7::bool[], $8::bigint[])
          WITH ORDINALITY AS m(role, content, tool_calls, tool_call_id, opaque,
                               is_error, created_at, n)
     ORDER BY n";

/// Messages as the column arrays of [`INSERT`].
pub(super) struct Columns<'a> {
    roles: Vec<&'a str>,
    contents: Vec<Option<String>>,
    calls: Vec<Option<String>>,
    call_ids: Vec<Option<String>>,
    opaques: Vec<Option<String>>,
    errors: Vec<bool>,
    ats: Vec<i64>,
}

impl<'a> Columns<'a> {
    pub(super) fn of(op: &'static str, msgs: &'a [ChatMessage]) -> Result<Self, StoreError> {
        let ts = crate::store::now();
        let n = msgs.len();
        let mut c = Columns {
            roles: Vec::with_capacity(n),
            contents: Vec::with_capacity(n),
            calls: Vec::with_capacity(n),
            call_ids: Vec::with_capacity(n),
            opaques: Vec::with_capacity(n),
            errors: Vec::with_capacity(n),
            ats: Vec::with_capacity(n),
        };
        for m in msgs {
            c.calls
                .push(crate::store::messages::tool_calls_json(m, op)?);
            c.roles.push(m.role.as_str());
            c.contents
                .push(opt_text(m.content.as_deref()).map(|c| c.into_owned()));
            c.call_ids.push(m.tool_call_id.clone());
            c.opaques.push(m.opaque.as_ref().map(|v| v.to_string()));
            c.errors.push(m.is_error);
            c.ats.push(stored_at(m, ts));
        }
        Ok(c)
    }

    /// The parameters `$2`–`$8` of [`INSERT`].
    pub(super) fn params(&self) -> [&(dyn ToSql + Sync); 7] {
        [
            &self.roles,
            &self.contents,
            &self.calls,
            &self.call_ids,
            &self.opaques,
            &self.errors,
            &self.ats,
        ]
    }
}

#[async_trait]
impl MessageStore for PgStore {
    async fn append_messages(
        &self,
        session_id: &str,
        msgs: &[ChatMessage],
    ) -> Result<(), StoreError> {
        let op = "append messages";
        let columns = Columns::of(op, msgs)?;
        if msgs.is_empty() {
            return Ok(());
        }
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(INSERT)
            .await
            .map_err(|e| pg_error(op, &e))?;
        let mut params: Vec<&(dyn ToSql + Sync)> = vec![&session_id];
        params.extend(columns.params());
        client
            .execute(&stmt, &params)
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
