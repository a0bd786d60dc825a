//! Sessions on PostgreSQL: a session key maps to its current session id, as in SQLite
//! (`super::super::sessions`). A partial unique index keeps one active session per key, so
//! replicas asking for the same key at once get the same session.

use super::errors::pg_error;
use super::messages::decode_row;
use super::{limit, PgStore, StoreError};
use crate::store::messages::sent_at;
use async_trait::async_trait;
use ethan_core::store::{HeldWindow, SessionStore, TurnEnd, TurnStart, WindowDelta};

const FIND: &str =
    "SELECT id FROM sessions WHERE key = $1 AND active ORDER BY created_at DESC LIMIT 1";
/// The active session and its kv values `<prefix><id>`, in the order of the prefixes.
const START: &str = "SELECT s.id, ARRAY(
       SELECT (SELECT value FROM kv WHERE key = u.prefix || s.id)
       FROM unnest($2::text[]) WITH ORDINALITY AS u(prefix, n) ORDER BY u.n)
     FROM sessions s WHERE s.key = $1 AND s.active ORDER BY s.created_at DESC LIMIT 1";
/// What was stored after a held window (its newest `$4` messages after id `$3`, oldest first)
/// and how many messages are stored between its first and last ids, in one statement (a row
/// of NULL messages when nothing followed).
const DELTA: &str = "WITH held AS (
       SELECT count(*) AS n FROM messages WHERE session_id = $1 AND id >= $2 AND id <= $3)
     SELECT m.role, m.content, m.tool_calls, m.tool_call_id, m.opaque, m.is_error, m.id,
            m.created_at, held.n
     FROM held LEFT JOIN LATERAL (
       SELECT id, role, content, tool_calls, tool_call_id, opaque, is_error, created_at
       FROM messages WHERE session_id = $1 AND id > $3 ORDER BY id DESC LIMIT $4) m ON TRUE
     ORDER BY m.id";
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
        held: Option<&HeldWindow>,
        limit: usize,
    ) -> Result<TurnStart, StoreError> {
        let op = "start turn";
        let client = self.client(op).await?;
        let start = client
            .prepare_cached(START)
            .await
            .map_err(|e| pg_error(op, &e))?;
        let prefixes: Vec<&str> = kv_prefixes.to_vec();
        // The window's delta is asked for in the same round trip (pipelined on one connection)
        // and used only when the session is still the held window's.
        let (row, delta) = match held {
            Some(h) => {
                let (row, delta) = tokio::try_join!(
                    async {
                        client
                            .query_opt(&start, &[&key, &prefixes])
                            .await
                            .map_err(|e| pg_error(op, &e))
                    },
                    window_delta(&client, h, limit),
                )?;
                (row, Some(delta))
            }
            None => (
                client
                    .query_opt(&start, &[&key, &prefixes])
                    .await
                    .map_err(|e| pg_error(op, &e))?,
                None,
            ),
        };
        if let Some(row) = row {
            let session_id: String = row.try_get(0).map_err(|e| pg_error(op, &e))?;
            let values: Vec<Option<String>> = row.try_get(1).map_err(|e| pg_error(op, &e))?;
            let delta = delta.filter(|_| held.is_some_and(|h| h.session_id == session_id));
            return Ok(TurnStart {
                session_id,
                values,
                delta,
            });
        }
        // The session's first turn: made now (or found, made by another replica meanwhile).
        drop(client);
        let session_id = self.current_session(key).await?;
        let mut values = Vec::with_capacity(kv_prefixes.len());
        for p in kv_prefixes {
            let key = format!("{p}{session_id}");
            values.push(ethan_core::store::KvStore::kv_get(self, &key).await?);
        }
        Ok(TurnStart {
            session_id,
            values,
            delta: None,
        })
    }

    async fn end_turn(&self, end: &TurnEnd) -> Result<(), StoreError> {
        super::turn_end::end_turn(self, end).await
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

/// [`DELTA`] for `held`.
async fn window_delta(
    client: &deadpool_postgres::Object,
    held: &HeldWindow,
    n: usize,
) -> Result<WindowDelta, StoreError> {
    let op = "load history";
    let get = |e: tokio_postgres::Error| pg_error(op, &e);
    let stmt = client.prepare_cached(DELTA).await.map_err(get)?;
    let rows = client
        .query(
            &stmt,
            &[&held.session_id, &held.first_id, &held.last_id, &limit(n)],
        )
        .await
        .map_err(get)?;
    let mut delta = WindowDelta {
        after: Vec::with_capacity(rows.len()),
        held_now: 0,
    };
    for r in &rows {
        let n: i64 = r.try_get(8).map_err(get)?;
        delta.held_now = n.max(0) as u64;
        let Some(id) = r.try_get::<_, Option<i64>>(6).map_err(get)? else {
            continue;
        };
        let at: i64 = r.try_get(7).map_err(get)?;
        delta.after.push((id, sent_at(decode_row(op, r)?, at)));
    }
    Ok(delta)
}
