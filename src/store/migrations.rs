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
    // 4: scheduled jobs and their runs (a run is claimed by UNIQUE(job_id, scheduled_for))
    r#"
    CREATE TABLE jobs (
        id             TEXT PRIMARY KEY,
        title          TEXT NOT NULL,
        prompt         TEXT NOT NULL,
        kind           TEXT NOT NULL,
        spec           TEXT NOT NULL,
        timezone       TEXT,
        anchor         INTEGER NOT NULL,
        end_at         INTEGER,
        allowed_tools  TEXT NOT NULL DEFAULT '[]',
        channel        TEXT NOT NULL,
        chat_id        TEXT NOT NULL,
        chat_kind      TEXT NOT NULL,
        thread         TEXT,
        creator        TEXT NOT NULL,
        created_in     TEXT NOT NULL,
        next_run       INTEGER,
        paused         INTEGER NOT NULL DEFAULT 0,
        state          TEXT NOT NULL DEFAULT 'active',
        created_at     INTEGER NOT NULL,
        updated_at     INTEGER NOT NULL
    );
    CREATE INDEX jobs_due ON jobs(state, paused, next_run);
    CREATE TABLE job_runs (
        id                    INTEGER PRIMARY KEY AUTOINCREMENT,
        job_id                TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,
        scheduled_for         INTEGER NOT NULL,
        trigger_kind          TEXT NOT NULL,
        claimed_by            TEXT NOT NULL,
        status                TEXT NOT NULL,
        started_at            INTEGER NOT NULL,
        finished_at           INTEGER,
        output                TEXT,
        error                 TEXT,
        delivery              TEXT NOT NULL DEFAULT 'pending',
        delivery_attempts     INTEGER NOT NULL DEFAULT 0,
        delivered_message_id  TEXT,
        delivery_error        TEXT,
        UNIQUE (job_id, scheduled_for)
    );
    CREATE INDEX job_runs_job ON job_runs(job_id, id);
    CREATE INDEX job_runs_status ON job_runs(status);
    "#,
    // 5: knowledge index: one row per note file (path relative to $ETHAN_HOME/knowledge); FTS5
    // over title, tags and body with the trigram tokenizer (any substring of 3+ characters, in
    // any script); a second FTS5 table over the CJK bigrams of the same fields, for two-character
    // Chinese/Japanese/Korean words; both kept in step by triggers; one embedding per note (valid
    // while its hash matches the note's)
    r#"
    CREATE TABLE knowledge_notes (
        id         INTEGER PRIMARY KEY,
        path       TEXT NOT NULL UNIQUE,
        title      TEXT NOT NULL,
        tags       TEXT NOT NULL,
        body       TEXT NOT NULL,
        created    TEXT NOT NULL,
        updated    TEXT NOT NULL,
        mtime_ns   INTEGER NOT NULL,
        size       INTEGER NOT NULL,
        hash       TEXT NOT NULL,
        cjk_title  TEXT NOT NULL,
        cjk_tags   TEXT NOT NULL,
        cjk_body   TEXT NOT NULL
    );
    CREATE VIRTUAL TABLE knowledge_fts USING fts5(
        title, tags, body,
        content = 'knowledge_notes', content_rowid = 'id',
        tokenize = 'trigram remove_diacritics 1'
    );
    CREATE VIRTUAL TABLE knowledge_cjk USING fts5(
        cjk_title, cjk_tags, cjk_body,
        content = 'knowledge_notes', content_rowid = 'id',
        tokenize = 'unicode61'
    );
    CREATE TRIGGER knowledge_notes_ai AFTER INSERT ON knowledge_notes BEGIN
        INSERT INTO knowledge_fts(rowid, title, tags, body)
        VALUES (new.id, new.title, new.tags, new.body);
        INSERT INTO knowledge_cjk(rowid, cjk_title, cjk_tags, cjk_body)
        VALUES (new.id, new.cjk_title, new.cjk_tags, new.cjk_body);
    END;
    CREATE TRIGGER knowledge_notes_ad AFTER DELETE ON knowledge_notes BEGIN
        INSERT INTO knowledge_fts(knowledge_fts, rowid, title, tags, body)
        VALUES ('delete', old.id, old.title, old.tags, old.body);
        INSERT INTO knowledge_cjk(knowledge_cjk, rowid, cjk_title, cjk_tags, cjk_body)
        VALUES ('delete', old.id, old.cjk_title, old.cjk_tags, old.cjk_body);
    END;
    CREATE TRIGGER knowledge_notes_au AFTER UPDATE OF title, tags, body ON knowledge_notes BEGIN
        INSERT INTO knowledge_fts(knowledge_fts, rowid, title, tags, body)
        VALUES ('delete', old.id, old.title, old.tags, old.body);
        INSERT INTO knowledge_fts(rowid, title, tags, body)
        VALUES (new.id, new.title, new.tags, new.body);
        INSERT INTO knowledge_cjk(knowledge_cjk, rowid, cjk_title, cjk_tags, cjk_body)
        VALUES ('delete', old.id, old.cjk_title, old.cjk_tags, old.cjk_body);
        INSERT INTO knowledge_cjk(rowid, cjk_title, cjk_tags, cjk_body)
        VALUES (new.id, new.cjk_title, new.cjk_tags, new.cjk_body);
    END;
    CREATE TABLE knowledge_vectors (
        note_id  INTEGER PRIMARY KEY REFERENCES knowledge_notes(id) ON DELETE CASCADE,
        model    TEXT NOT NULL,
        hash     TEXT NOT NULL,
        dim      INTEGER NOT NULL,
        vec      BLOB NOT NULL
    );
    "#,
    // 6: the reply being delivered for an inbound event (state `sending`), so a reply whose send
    // was cut off by a crash is neither produced again nor, where the platform cannot dedupe,
    // sent twice
    r#"
    ALTER TABLE inbound_events ADD COLUMN reply TEXT;
    "#,
    // 7: the history in the provider-neutral form (ethan_core::message): tool calls as
    // `[{id, name, arguments}]` instead of the Chat Completions wire shape
    // `[{id, type, function: {name, arguments}}]`, and a provider's opaque value per message
    r#"
    ALTER TABLE messages ADD COLUMN opaque TEXT;
    UPDATE messages SET tool_calls = (
        SELECT json_group_array(json_object(
            'id', coalesce(json_extract(c.value, '$.id'), ''),
            'name', coalesce(json_extract(c.value, '$.function.name'), ''),
            'arguments', coalesce(json_extract(c.value, '$.function.arguments'), '')))
        FROM json_each(messages.tool_calls) AS c
    )
    WHERE tool_calls IS NOT NULL AND json_valid(tool_calls);
    "#,
    // 8: a tool result's failure flag (Anthropic `tool_result.is_error`), and the usage ledger:
    // one row per model call with the tokens the provider reported (created_at in Unix seconds)
    r#"
    ALTER TABLE messages ADD COLUMN is_error INTEGER NOT NULL DEFAULT 0;
    CREATE TABLE model_usage (
        id                  INTEGER PRIMARY KEY,
        created_at          INTEGER NOT NULL,
        model               TEXT NOT NULL,
        session_key         TEXT NOT NULL DEFAULT '',
        channel             TEXT NOT NULL DEFAULT '',
        chat_id             TEXT NOT NULL DEFAULT '',
        job_id              TEXT,
        input_tokens        INTEGER NOT NULL DEFAULT 0,
        output_tokens       INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens   INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens  INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX model_usage_time ON model_usage(created_at);
    CREATE INDEX model_usage_chat ON model_usage(channel, chat_id, created_at);
    "#,
    // 9: the model a job's runs ask first, and the model that proposed an audited tool call
    r#"
    ALTER TABLE jobs ADD COLUMN model TEXT;
    ALTER TABLE audit ADD COLUMN model TEXT;
    "#,
    // 10: long-term memory: facts with their scope (`personal` | `chat`) and subject (`owner`,
    // `<channel>:<user_id>`, `<channel>:<chat_id>`); a fact that was replaced keeps the id of
    // the one that replaced it. Times in Unix seconds.
    r#"
    CREATE TABLE memories (
        id             INTEGER PRIMARY KEY AUTOINCREMENT,
        scope          TEXT NOT NULL,
        subject        TEXT NOT NULL,
        content        TEXT NOT NULL,
        source         TEXT NOT NULL,
        created_at     INTEGER NOT NULL,
        confirmed_at   INTEGER NOT NULL,
        superseded_by  INTEGER
    );
    CREATE INDEX memories_subject ON memories(subject, superseded_by);
    "#,
    // 11: a ledger row whose tokens are estimated (the server reported no usage)
    r#"
    ALTER TABLE model_usage ADD COLUMN estimated INTEGER NOT NULL DEFAULT 0;
    "#,
];

/// The schema version this build migrates to (the number of steps).
pub(super) fn latest_version() -> i64 {
    STEPS.len() as i64
}

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
