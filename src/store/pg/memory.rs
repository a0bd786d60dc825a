//! Long-term memory and history search on PostgreSQL (table `memories`, step 3), as in SQLite
//! (`super::super::memory`): the semantics are [`ethan_core::store::MemoryStore`]'s.

use super::errors::pg_error;
use super::messages::decode_row;
use super::{limit, text, PgStore, StoreError};
use crate::store::messages::{from_first_user, sent_at};
use async_trait::async_trait;
use ethan_core::message::{ChatMessage, Role};
use ethan_core::store::{HistoryHit, MemoryFact, MemoryScope, MemoryStore, NewFact};

const FACT_COLUMNS: &str =
    "id, scope, subject, content, source, created_at, confirmed_at, superseded_by";

fn fact(op: &'static str, r: &tokio_postgres::Row) -> Result<MemoryFact, StoreError> {
    let get = |e: tokio_postgres::Error| pg_error(op, &e);
    let scope: String = r.try_get(1).map_err(get)?;
    Ok(MemoryFact {
        id: r.try_get(0).map_err(get)?,
        scope: MemoryScope::parse(&scope).ok_or_else(|| StoreError::Corrupt {
            op,
            message: format!("unknown memory scope {scope:?}"),
        })?,
        subject: r.try_get(2).map_err(get)?,
        content: r.try_get(3).map_err(get)?,
        source: r.try_get(4).map_err(get)?,
        created_at: r.try_get(5).map_err(get)?,
        confirmed_at: r.try_get(6).map_err(get)?,
        superseded_by: r.try_get(7).map_err(get)?,
    })
}

#[async_trait]
impl MemoryStore for PgStore {
    async fn save_fact(&self, f: &NewFact) -> Result<i64, StoreError> {
        let op = "save memory";
        let mut client = self.client(op).await?;
        let tx = client.transaction().await.map_err(|e| pg_error(op, &e))?;
        let ts = crate::store::now();
        let row = tx
            .query_one(
                "INSERT INTO memories (scope, subject, content, source, created_at, confirmed_at)
                 VALUES ($1, $2, $3, $4, $5, $5) RETURNING id",
                &[
                    &f.scope.as_str(),
                    &text(&f.subject),
                    &text(&f.content),
                    &text(&f.source),
                    &ts,
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let id: i64 = row.try_get(0).map_err(|e| pg_error(op, &e))?;
        if let Some(old) = f.replaces {
            tx.execute(
                "UPDATE memories SET superseded_by = $1
                 WHERE id = $2 AND subject = $3 AND superseded_by IS NULL AND id <> $1",
                &[&id, &old, &text(&f.subject)],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        }
        tx.commit().await.map_err(|e| pg_error(op, &e))?;
        Ok(id)
    }

    async fn facts_of(
        &self,
        subject: &str,
        with_superseded: bool,
    ) -> Result<Vec<MemoryFact>, StoreError> {
        let op = "read memory";
        let client = self.client(op).await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {FACT_COLUMNS} FROM memories
                     WHERE subject = $1 AND ($2 OR superseded_by IS NULL)
                     ORDER BY confirmed_at DESC, id DESC"
                ),
                &[&text(subject), &with_superseded],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter().map(|r| fact(op, r)).collect()
    }

    async fn all_facts(&self) -> Result<Vec<MemoryFact>, StoreError> {
        let op = "read memory";
        let client = self.client(op).await?;
        let rows = client
            .query(
                &format!("SELECT {FACT_COLUMNS} FROM memories ORDER BY subject, id"),
                &[],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter().map(|r| fact(op, r)).collect()
    }

    async fn confirm_facts(&self, ids: &[i64], at: i64) -> Result<(), StoreError> {
        let op = "confirm memory";
        let client = self.client(op).await?;
        client
            .execute(
                "UPDATE memories SET confirmed_at = GREATEST(confirmed_at, $1) WHERE id = ANY($2)",
                &[&at, &ids],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(())
    }

    async fn forget_fact(&self, id: i64, subject: Option<&str>) -> Result<bool, StoreError> {
        let op = "forget memory";
        let client = self.client(op).await?;
        let n = client
            .execute(
                "WITH RECURSIVE chain(id) AS (
                     SELECT id FROM memories
                     WHERE id = $1 AND ($2::TEXT IS NULL OR subject = $2::TEXT)
                     UNION SELECT m.id FROM memories m JOIN chain c ON m.superseded_by = c.id
                 )
                 DELETE FROM memories WHERE id IN (SELECT id FROM chain)",
                &[&id, &subject.map(text)],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(n > 0)
    }

    async fn messages_after(
        &self,
        session_id: &str,
        after: i64,
        n: usize,
    ) -> Result<Vec<(i64, ChatMessage)>, StoreError> {
        let op = "load history";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT role, content, tool_calls, tool_call_id, opaque, is_error, id, created_at
                 FROM messages WHERE session_id = $1 AND id > $2 ORDER BY id DESC LIMIT $3",
                &[&session_id, &after, &limit(n)],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in rows.iter().rev() {
            let id: i64 = r.try_get(6).map_err(|e| pg_error(op, &e))?;
            let at: i64 = r.try_get(7).map_err(|e| pg_error(op, &e))?;
            out.push((id, sent_at(decode_row(op, r)?, at)));
        }
        Ok(from_first_user(out, |(_, m)| m))
    }

    async fn search_history(
        &self,
        session_key: &str,
        needle: &str,
        with_tool_results: bool,
        n: usize,
    ) -> Result<Vec<HistoryHit>, StoreError> {
        let op = "search history";
        let client = self.client(op).await?;
        // `lower` on both sides, as SQLite's instr(lower(..)) (which folds ASCII only).
        let rows = client
            .query(
                "SELECT m.id, m.session_id, m.role, m.content, m.created_at
                 FROM messages m JOIN sessions s ON s.id = m.session_id
                 WHERE s.key = $1 AND m.content IS NOT NULL
                   AND (m.role = 'user' OR (m.role = 'assistant' AND ($2 OR m.tool_calls IS NULL))
                        OR ($2 AND m.role = 'tool'))
                   AND strpos(lower(m.content), lower($3)) > 0
                 ORDER BY m.id DESC LIMIT $4",
                &[
                    &text(session_key),
                    &with_tool_results,
                    &text(needle),
                    &limit(n),
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let get = |e: tokio_postgres::Error| pg_error(op, &e);
            let role: String = r.try_get(2).map_err(get)?;
            out.push(HistoryHit {
                id: r.try_get(0).map_err(get)?,
                session_id: r.try_get(1).map_err(get)?,
                role: Role::parse(&role).ok_or_else(|| StoreError::Corrupt {
                    op,
                    message: format!("unknown role {role:?}"),
                })?,
                content: r.try_get(3).map_err(get)?,
                created_at: r.try_get(4).map_err(get)?,
            });
        }
        Ok(out)
    }
}
