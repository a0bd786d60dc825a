//! A one-shot copy of a SQLite store into an empty PostgreSQL database (`ethan store migrate
//! --to postgres://…`): sessions, messages, jobs, runs, inbound events, kv (claim codes and
//! channel state included), audit, replay keys, owners, usage, memories and the knowledge index
//! (notes and their embeddings, each note marked as written by this home's knowledge folder),
//! ids kept, in one transaction — the target gets everything or nothing.
//!
//! A target that holds any row is refused, so a second run cannot mix two stores. The SQLite
//! store is read in one read transaction (a snapshot: every table as of the same moment, even if
//! something wrote to the file meanwhile); tables are read whole, one at a time, and written row
//! by row with a prepared statement.

use super::errors::pg_error;
use super::{text, PgStore, StoreError};
use crate::store::{Ctx, Store};
use rusqlite::types::Value;
use std::collections::HashSet;
use tokio_postgres::types::ToSql;

/// How a column is carried over.
#[derive(Clone, Copy)]
enum Kind {
    Text,
    Int,
    /// SQLite's 0/1 as PostgreSQL's `BOOLEAN`.
    Bool,
    /// A BLOB as `BYTEA`.
    Bytes,
}
use Kind::{Bool, Bytes, Int, Text};

/// One table: its name, its columns in both databases, whether its `id` identity must be moved
/// past the copied ids.
struct Table {
    name: &'static str,
    columns: &'static [(&'static str, Kind)],
    identity: bool,
}

/// In foreign-key order (sessions before messages, jobs before runs).
const TABLES: &[Table] = &[
    Table {
        name: "sessions",
        columns: &[
            ("id", Text),
            ("key", Text),
            ("active", Bool),
            ("created_at", Int),
        ],
        identity: false,
    },
    Table {
        name: "messages",
        columns: &[
            ("id", Int),
            ("session_id", Text),
            ("role", Text),
            ("content", Text),
            ("tool_calls", Text),
            ("tool_call_id", Text),
            ("name", Text),
            ("opaque", Text),
            ("is_error", Bool),
            ("created_at", Int),
        ],
        identity: true,
    },
    Table {
        name: "jobs",
        columns: &[
            ("id", Text),
            ("title", Text),
            ("prompt", Text),
            ("kind", Text),
            ("spec", Text),
            ("timezone", Text),
            ("anchor", Int),
            ("end_at", Int),
            ("allowed_tools", Text),
            ("channel", Text),
            ("chat_id", Text),
            ("chat_kind", Text),
            ("thread", Text),
            ("creator", Text),
            ("created_in", Text),
            ("next_run", Int),
            ("paused", Bool),
            ("state", Text),
            ("created_at", Int),
            ("updated_at", Int),
            ("model", Text),
        ],
        identity: false,
    },
    Table {
        name: "job_runs",
        columns: &[
            ("id", Int),
            ("job_id", Text),
            ("scheduled_for", Int),
            ("trigger_kind", Text),
            ("claimed_by", Text),
            ("status", Text),
            ("started_at", Int),
            ("finished_at", Int),
            ("output", Text),
            ("error", Text),
            ("delivery", Text),
            ("delivery_attempts", Int),
            ("delivered_message_id", Text),
            ("delivery_error", Text),
        ],
        identity: true,
    },
    Table {
        name: "inbound_events",
        columns: &[
            ("channel", Text),
            ("event_id", Text),
            ("session_key", Text),
            ("payload", Text),
            ("state", Text),
            ("attempts", Int),
            ("received_at", Int),
            ("updated_at", Int),
            ("reply", Text),
        ],
        identity: false,
    },
    Table {
        name: "kv",
        columns: &[("key", Text), ("value", Text)],
        identity: false,
    },
    Table {
        name: "audit",
        columns: &[
            ("id", Int),
            ("execution_id", Text),
            ("trace_id", Text),
            ("session_key", Text),
            ("user_id", Text),
            ("channel", Text),
            ("tool", Text),
            ("args", Text),
            ("started_ms", Int),
            ("ended_ms", Int),
            ("ok", Bool),
            ("attempt", Int),
            ("error_kind", Text),
            ("error", Text),
            ("output_bytes", Int),
            ("spill_path", Text),
            ("model", Text),
        ],
        identity: true,
    },
    Table {
        name: "replay_keys",
        columns: &[
            ("key", Text),
            ("trace_id", Text),
            ("tool", Text),
            ("created_at", Int),
        ],
        identity: false,
    },
    Table {
        name: "owners",
        columns: &[
            ("channel", Text),
            ("user_id", Text),
            ("source", Text),
            ("added_at", Int),
        ],
        identity: false,
    },
    Table {
        name: "model_usage",
        columns: &[
            ("id", Int),
            ("created_at", Int),
            ("model", Text),
            ("session_key", Text),
            ("channel", Text),
            ("chat_id", Text),
            ("job_id", Text),
            ("input_tokens", Int),
            ("output_tokens", Int),
            ("cache_read_tokens", Int),
            ("cache_write_tokens", Int),
            ("estimated", Bool),
        ],
        identity: true,
    },
    Table {
        name: "memories",
        columns: &[
            ("id", Int),
            ("scope", Text),
            ("subject", Text),
            ("content", Text),
            ("source", Text),
            ("created_at", Int),
            ("confirmed_at", Int),
            ("superseded_by", Int),
        ],
        identity: true,
    },
    Table {
        name: "knowledge_notes",
        columns: &[
            ("id", Int),
            ("path", Text),
            ("title", Text),
            ("tags", Text),
            ("body", Text),
            ("created", Text),
            ("updated", Text),
            ("mtime_ns", Int),
            ("size", Int),
            ("hash", Text),
        ],
        identity: true,
    },
    Table {
        name: "knowledge_vectors",
        columns: &[
            ("note_id", Int),
            ("model", Text),
            ("hash", Text),
            ("dim", Int),
            ("vec", Bytes),
        ],
        identity: false,
    },
];

/// Rows copied per table, in copy order.
pub type ImportCounts = Vec<(&'static str, u64)>;

type PgValue = Box<dyn ToSql + Sync + Send>;

fn corrupt(message: String) -> StoreError {
    StoreError::Corrupt {
        op: "migrate store",
        message,
    }
}

/// One SQLite value as the PostgreSQL parameter of a `kind` column.
fn convert(table: &str, column: &str, kind: Kind, v: Value) -> Result<PgValue, StoreError> {
    Ok(match (kind, v) {
        (Text, Value::Null) => Box::new(None::<String>),
        (Int, Value::Null) => Box::new(None::<i64>),
        (Bool, Value::Null) => Box::new(None::<bool>),
        (Bytes, Value::Null) => Box::new(None::<Vec<u8>>),
        (Bytes, Value::Blob(b)) => Box::new(Some(b)),
        (Text, Value::Text(s)) => Box::new(Some(text(&s).into_owned())),
        (Int, Value::Integer(n)) => Box::new(Some(n)),
        (Bool, Value::Integer(n)) => Box::new(Some(n != 0)),
        (_, other) => {
            return Err(corrupt(format!(
                "{table}.{column} holds {other:?}, which this column does not take"
            )))
        }
    })
}

/// Every row of `t` in the SQLite store, in insertion order, as PostgreSQL parameters. For
/// `sessions`, only the newest active session of a key stays active (PostgreSQL allows one);
/// for `inbound_events`, the event's `sent_at` is added from its payload.
async fn read_table(store: &Store, t: &'static Table) -> Result<Vec<Vec<PgValue>>, StoreError> {
    let names: Vec<&str> = t.columns.iter().map(|(c, _)| *c).collect();
    let order = if t.name == "sessions" {
        "created_at DESC, rowid DESC"
    } else {
        "rowid"
    };
    let sql = format!(
        "SELECT {} FROM {} ORDER BY {order}",
        names.join(", "),
        t.name
    );
    let raw: Vec<Vec<Value>> = store
        .call("migrate store", move |db| {
            let conn = db.conn();
            let mut st = conn.prepare(&sql).op("migrate store")?;
            let rows = st
                .query_map([], |r| {
                    (0..names.len())
                        .map(|i| r.get::<_, Value>(i))
                        .collect::<Result<Vec<_>, _>>()
                })
                .op("migrate store")?;
            rows.collect::<Result<Vec<_>, _>>().op("migrate store")
        })
        .await?;
    let mut active_keys = HashSet::new();
    let mut out = Vec::with_capacity(raw.len());
    for mut row in raw {
        if t.name == "sessions" {
            // Newest first: a key's first active session stays active.
            let key = match &row[1] {
                Value::Text(k) => k.clone(),
                _ => String::new(),
            };
            if matches!(row[2], Value::Integer(n) if n != 0) && !active_keys.insert(key) {
                row[2] = Value::Integer(0);
            }
        }
        let payload = (t.name == "inbound_events").then(|| match &row[3] {
            Value::Text(p) => serde_json::from_str::<serde_json::Value>(p).ok(),
            _ => None,
        });
        let sent_at = payload.as_ref().map(|p| {
            p.as_ref()
                .and_then(|v| v.get("sent_at").and_then(serde_json::Value::as_i64))
        });
        let platform_seq = payload.as_ref().map(|p| {
            p.as_ref()
                .and_then(|v| v.get("seq").and_then(serde_json::Value::as_i64))
                .unwrap_or(0)
        });
        let mut values = t
            .columns
            .iter()
            .zip(row)
            .map(|((c, k), v)| convert(t.name, c, *k, v))
            .collect::<Result<Vec<_>, _>>()?;
        if let (Some(sent_at), Some(platform_seq)) = (sent_at, platform_seq) {
            values.push(Box::new(sent_at));
            values.push(Box::new(platform_seq));
        }
        out.push(values);
    }
    Ok(out)
}

/// Copy the SQLite store `from` into the PostgreSQL database of `to_url` (migrating it first);
/// `origin` names the knowledge folder whose notes these are
/// ([`crate::store::knowledge_index::folder_origin`]). Returns the rows copied per table. Errors: [`StoreError::Backend`] with op `migrate store`
/// when the target already holds rows (naming the table) or a write fails (then nothing was
/// copied); [`StoreError::Corrupt`] for a SQLite value of the wrong type; the errors of
/// [`PgStore::connect`].
pub async fn import_sqlite(
    from: &Store,
    to_url: &str,
    origin: &str,
) -> Result<ImportCounts, StoreError> {
    let target = PgStore::connect(to_url).await?;
    read_transaction(from, "BEGIN").await?;
    let copied = copy(from, &target, origin).await;
    // Read only: nothing to keep, whatever happened.
    let ended = read_transaction(from, "ROLLBACK").await;
    let counts = copied?;
    ended?;
    Ok(counts)
}

/// Begin (`BEGIN`) or end (`ROLLBACK`) the read transaction the copy reads in: from its first
/// read on, every read sees the file as of that moment (SQLite's snapshot, in WAL mode writers
/// go on meanwhile).
async fn read_transaction(from: &Store, sql: &'static str) -> Result<(), StoreError> {
    from.call("migrate store", move |db| {
        db.conn().execute_batch(sql).op("migrate store")
    })
    .await
}

/// Check that `target` is empty, then copy every table into it in one transaction.
async fn copy(from: &Store, target: &PgStore, origin: &str) -> Result<ImportCounts, StoreError> {
    let op = "migrate store";
    let mut client = target.client(op).await?;
    for t in TABLES {
        let row = client
            .query_opt(&format!("SELECT 1 FROM {} LIMIT 1", t.name), &[])
            .await
            .map_err(|e| pg_error(op, &e))?;
        if row.is_some() {
            return Err(StoreError::Backend {
                op,
                message: format!(
                    "the PostgreSQL database {} is not empty (table {} has rows); ethan store \
                     migrate copies only into an empty database",
                    target.location(),
                    t.name
                ),
            });
        }
    }
    let tx = client.transaction().await.map_err(|e| pg_error(op, &e))?;
    let mut counts = Vec::new();
    for t in TABLES {
        let rows = read_table(from, t).await?;
        let mut names: Vec<&str> = t.columns.iter().map(|(c, _)| *c).collect();
        if t.name == "inbound_events" {
            names.push("sent_at");
            names.push("platform_seq");
        }
        if t.name == "knowledge_notes" {
            names.push("origin");
        }
        let placeholders: Vec<String> = (1..=names.len()).map(|i| format!("${i}")).collect();
        let stmt = tx
            .prepare(&format!(
                "INSERT INTO {} ({}) VALUES ({})",
                t.name,
                names.join(", "),
                placeholders.join(", ")
            ))
            .await
            .map_err(|e| pg_error(op, &e))?;
        for row in &rows {
            let mut params: Vec<&(dyn ToSql + Sync)> = row
                .iter()
                .map(|v| v.as_ref() as &(dyn ToSql + Sync))
                .collect();
            if t.name == "knowledge_notes" {
                params.push(&origin);
            }
            tx.execute(&stmt, &params)
                .await
                .map_err(|e| StoreError::Backend {
                    op,
                    message: format!("copying into {}: {}", t.name, super::errors::describe(&e)),
                })?;
        }
        if t.identity {
            tx.execute(
                &format!(
                    "SELECT setval(pg_get_serial_sequence('{0}', 'id'), \
                     COALESCE((SELECT MAX(id) FROM {0}), 0) + 1, false)",
                    t.name
                ),
                &[],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        }
        counts.push((t.name, rows.len() as u64));
    }
    tx.commit().await.map_err(|e| pg_error(op, &e))?;
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use ethan_core::store::KvStore;

    fn kv_table() -> &'static Table {
        TABLES.iter().find(|t| t.name == "kv").unwrap()
    }

    #[tokio::test]
    async fn the_copy_reads_every_table_as_of_one_moment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ethan.db");
        let (reader, writer) = (Store::open(&path).unwrap(), Store::open(&path).unwrap());
        writer.kv_set("a", "1").await.unwrap();
        read_transaction(&reader, "BEGIN").await.unwrap();
        let before = read_table(&reader, kv_table()).await.unwrap().len();
        // Another process writes while the copy reads: the copy does not see it.
        writer.kv_set("b", "2").await.unwrap();
        let during = read_table(&reader, kv_table()).await.unwrap().len();
        read_transaction(&reader, "ROLLBACK").await.unwrap();
        let after = read_table(&reader, kv_table()).await.unwrap().len();
        assert_eq!((during, after), (before, before + 1));
    }
}
