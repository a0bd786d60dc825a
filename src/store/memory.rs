//! Long-term memory on SQLite (table `memories`, migration 10): facts with their scope and
//! subject, replaced facts kept with the id of their successor; and the stored history as
//! compaction ([`Db::messages_after`]) and `history_search` ([`Db::search_history`]) read it.
//! The semantics are [`ethan_core::store::MemoryStore`]'s.

use super::messages::{decode_message, from_first_user, sent_at};
use super::{now, Ctx, Db, StoreError};
use ethan_core::message::{ChatMessage, Role};
use ethan_core::store::{HistoryHit, MemoryFact, MemoryScope, NewFact};

const FACT_COLUMNS: &str =
    "id, scope, subject, content, source, created_at, confirmed_at, superseded_by";

fn fact_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(MemoryFact, String)> {
    let scope: String = r.get(1)?;
    Ok((
        MemoryFact {
            id: r.get(0)?,
            scope: MemoryScope::Personal,
            subject: r.get(2)?,
            content: r.get(3)?,
            source: r.get(4)?,
            created_at: r.get(5)?,
            confirmed_at: r.get(6)?,
            superseded_by: r.get(7)?,
        },
        scope,
    ))
}

/// The fact with its stored scope spelling read back.
pub(crate) fn with_scope(
    op: &'static str,
    (mut fact, scope): (MemoryFact, String),
) -> Result<MemoryFact, StoreError> {
    fact.scope = MemoryScope::parse(&scope).ok_or_else(|| StoreError::Corrupt {
        op,
        message: format!("unknown memory scope {scope:?}"),
    })?;
    Ok(fact)
}

impl Db {
    pub fn save_fact(&self, fact: &NewFact) -> Result<i64, StoreError> {
        let op = "save memory";
        let mut conn = self.conn();
        let tx = conn.transaction().op(op)?;
        let ts = now();
        tx.execute(
            "INSERT INTO memories(scope, subject, content, source, created_at, confirmed_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?5)",
            rusqlite::params![
                fact.scope.as_str(),
                fact.subject,
                fact.content,
                fact.source,
                ts
            ],
        )
        .op(op)?;
        let id = tx.last_insert_rowid();
        if let Some(old) = fact.replaces {
            tx.execute(
                "UPDATE memories SET superseded_by = ?1
                 WHERE id = ?2 AND subject = ?3 AND superseded_by IS NULL AND id <> ?1",
                rusqlite::params![id, old, fact.subject],
            )
            .op(op)?;
        }
        tx.commit().op(op)?;
        Ok(id)
    }

    pub fn facts_of(
        &self,
        subject: &str,
        with_superseded: bool,
    ) -> Result<Vec<MemoryFact>, StoreError> {
        let op = "read memory";
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {FACT_COLUMNS} FROM memories
                 WHERE subject = ?1 AND (?2 OR superseded_by IS NULL)
                 ORDER BY confirmed_at DESC, id DESC"
            ))
            .op(op)?;
        let rows = stmt
            .query_map(rusqlite::params![subject, with_superseded], fact_row)
            .op(op)?;
        rows.map(|r| with_scope(op, r.op(op)?)).collect()
    }

    pub fn all_facts(&self) -> Result<Vec<MemoryFact>, StoreError> {
        let op = "read memory";
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&format!(
                "SELECT {FACT_COLUMNS} FROM memories ORDER BY subject, id"
            ))
            .op(op)?;
        let rows = stmt.query_map([], fact_row).op(op)?;
        rows.map(|r| with_scope(op, r.op(op)?)).collect()
    }

    pub fn confirm_facts(&self, ids: &[i64], at: i64) -> Result<(), StoreError> {
        let op = "confirm memory";
        let mut conn = self.conn();
        let tx = conn.transaction().op(op)?;
        for id in ids {
            tx.execute(
                "UPDATE memories SET confirmed_at = max(confirmed_at, ?1) WHERE id = ?2",
                rusqlite::params![at, id],
            )
            .op(op)?;
        }
        tx.commit().op(op)
    }

    pub fn forget_fact(&self, id: i64, subject: Option<&str>) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute(
                "WITH RECURSIVE chain(id) AS (
                     SELECT id FROM memories WHERE id = ?1 AND (?2 IS NULL OR subject = ?2)
                     UNION SELECT m.id FROM memories m JOIN chain c ON m.superseded_by = c.id
                 )
                 DELETE FROM memories WHERE id IN (SELECT id FROM chain)",
                rusqlite::params![id, subject],
            )
            .op("forget memory")?;
        Ok(n > 0)
    }

    pub fn messages_after(
        &self,
        session_id: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, ChatMessage)>, StoreError> {
        let op = "load history";
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(&super::messages::after_sql(limit))
            .op(op)?;
        let rows = stmt
            .query_map(rusqlite::params![session_id, after], |r| {
                Ok((
                    r.get::<_, i64>(0)?,
                    r.get::<_, String>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, Option<String>>(5)?,
                    r.get::<_, bool>(6)?,
                    r.get::<_, i64>(7)?,
                ))
            })
            .op(op)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, role, content, calls, call_id, opaque, is_error, at) = row.op(op)?;
            let m = decode_message(op, &role, content, calls, call_id, opaque, is_error)?;
            out.push((id, sent_at(m, at)));
        }
        out.reverse();
        Ok(from_first_user(out, |(_, m)| m))
    }

    pub fn search_history(
        &self,
        session_key: &str,
        needle: &str,
        with_tool_results: bool,
        limit: usize,
    ) -> Result<Vec<HistoryHit>, StoreError> {
        let op = "search history";
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT m.id, m.session_id, m.role, m.content, m.created_at
                 FROM messages m JOIN sessions s ON s.id = m.session_id
                 WHERE s.key = ?1 AND m.content IS NOT NULL
                   AND (m.role = 'user' OR (m.role = 'assistant' AND (?2 OR m.tool_calls IS NULL))
                        OR (?2 AND m.role = 'tool'))
                   AND instr(lower(m.content), lower(?3)) > 0
                 ORDER BY m.id DESC LIMIT ?4",
            )
            .op(op)?;
        let rows = stmt
            .query_map(
                rusqlite::params![session_key, with_tool_results, needle, limit as i64],
                |r| {
                    Ok((
                        r.get::<_, i64>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, String>(2)?,
                        r.get::<_, String>(3)?,
                        r.get::<_, i64>(4)?,
                    ))
                },
            )
            .op(op)?;
        let mut out = Vec::new();
        for row in rows {
            let (id, session_id, role, content, created_at) = row.op(op)?;
            let role = Role::parse(&role).ok_or_else(|| StoreError::Corrupt {
                op,
                message: format!("unknown role {role:?}"),
            })?;
            out.push(HistoryHit {
                id,
                session_id,
                role,
                content,
                created_at,
            });
        }
        Ok(out)
    }
}
