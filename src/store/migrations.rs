//! Versioned schema migrations. `PRAGMA user_version` holds the number of applied steps; each
//! step runs in its own transaction. Append new steps; never edit an applied one.

use super::{Ctx, StoreError};
use rusqlite::Connection;

const STEPS: &[&str] = &[
    // 1: sessions, messages, inbound events, kv
    r#"
    CREATE TABLE sessions (
        id          TEXT PRIMARY KEY,
        key         TEXT NOT NULL,
        active      INTEGER NOT NULL DEFAULT 1,
        created_at  INTEGER NOT NULL
    );
    CREATE INDEX sessions_key ON sessions(key, active);
    CREATE TABLE messages (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        session_id    TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        role          TEXT NOT NULL,
        content       TEXT,
        tool_calls    TEXT,
        tool_call_id  TEXT,
        name          TEXT,
        created_at    INTEGER NOT NULL
    );
    CREATE INDEX messages_session ON messages(session_id, id);
    CREATE TABLE inbound_events (
        channel      TEXT NOT NULL,
        event_id     TEXT NOT NULL,
        session_key  TEXT NOT NULL,
        payload      TEXT NOT NULL,
        state        TEXT NOT NULL,
        attempts     INTEGER NOT NULL DEFAULT 0,
        received_at  INTEGER NOT NULL,
        updated_at   INTEGER NOT NULL,
        PRIMARY KEY (channel, event_id)
    );
    CREATE INDEX inbound_state ON inbound_events(state, received_at);
    CREATE TABLE kv (
        key    TEXT PRIMARY KEY,
        value  TEXT NOT NULL
    );
    "#,
    // 2: tool audit log and replay-guard keys
    r#"
    CREATE TABLE audit (
        id            INTEGER PRIMARY KEY AUTOINCREMENT,
        execution_id  TEXT NOT NULL,
        trace_id      TEXT NOT NULL,
        session_key   TEXT NOT NULL,
        user_id       TEXT NOT NULL,
        channel       TEXT NOT NULL,
        tool          TEXT NOT NULL,
        args          TEXT NOT NULL,
        started_ms    INTEGER NOT NULL,
        ended_ms      INTEGER NOT NULL,
        ok            INTEGER NOT NULL,
        attempt       INTEGER NOT NULL,
        error_kind    TEXT,
        error         TEXT,
        output_bytes  INTEGER NOT NULL,
        spill_path    TEXT
    );
    CREATE INDEX audit_session ON audit(session_key, id);
    CREATE INDEX audit_started ON audit(started_ms);
    CREATE TABLE replay_keys (
        key         TEXT PRIMARY KEY,
        trace_id    TEXT NOT NULL,
        tool        TEXT NOT NULL,
        created_at  INTEGER NOT NULL
    );
    CREATE INDEX replay_created ON replay_keys(created_at);
    "#,
    // 3: owners claimed at run time or added by hand
    r#"
    CREATE TABLE owners (
        channel   TEXT NOT NULL,
        user_id   TEXT NOT NULL,
        source    TEXT NOT NULL,
        added_at  INTEGER NOT NULL,
        PRIMARY KEY (channel, user_id)
    );
    "#,
];

pub(super) fn migrate(conn: &mut Connection) -> Result<(), StoreError> {
    let current: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .op("read schema version")?;
    if current > STEPS.len() as i64 {
        return Err(StoreError::Corrupt {
            op: "migrate",
            message: format!(
                "the database has schema version {current}, newer than this build knows ({}); \
                 use a newer ethan",
                STEPS.len()
            ),
        });
    }
    for (i, sql) in STEPS.iter().enumerate().skip(current as usize) {
        let tx = conn.transaction().op("migrate")?;
        tx.execute_batch(sql).op("migrate")?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .op("migrate")?;
        tx.commit().op("migrate")?;
    }
    Ok(())
}
