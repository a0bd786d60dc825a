//! The conversation of each session in the provider-neutral form ([`ethan_core::message`]):
//! user, assistant (with its tool calls as `[{id, name, arguments}]` JSON and a provider's
//! `opaque` value, kept as given), and tool messages (with `tool_call_id`).

use super::{now, Ctx, Db, StoreError};
use ethan_core::message::{ChatMessage, Role};
use ethan_core::store::{HeldWindow, WindowDelta};
use rusqlite::Connection;

impl Db {
    /// Append messages to a session in one transaction (an assistant message and its tool results
    /// land together or not at all).
    pub fn append_messages(
        &self,
        session_id: &str,
        msgs: &[ChatMessage],
    ) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().op("append messages")?;
        insert_messages(&tx, session_id, msgs)?;
        tx.commit().op("append messages")
    }

    /// The last `limit` messages of a session, oldest first, cut so the window starts at a user
    /// message: no tool result or assistant tool call is left without its partner.
    pub fn load_window(
        &self,
        session_id: &str,
        limit: usize,
    ) -> Result<Vec<ChatMessage>, StoreError> {
        let conn = self.conn();
        let mut stmt = conn
            .prepare_cached(
                "SELECT role, content, tool_calls, tool_call_id, opaque, is_error, created_at
                 FROM messages WHERE session_id = ?1 ORDER BY id DESC LIMIT ?2",
            )
            .op("load history")?;
        let rows = stmt
            .query_map(rusqlite::params![session_id, limit as i64], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    r.get::<_, Option<String>>(1)?,
                    r.get::<_, Option<String>>(2)?,
                    r.get::<_, Option<String>>(3)?,
                    r.get::<_, Option<String>>(4)?,
                    r.get::<_, bool>(5)?,
                    r.get::<_, i64>(6)?,
                ))
            })
            .op("load history")?;
        let mut out = Vec::new();
        for row in rows {
            let (role, content, calls, tool_call_id, opaque, is_error, at) =
                row.op("load history")?;
            let m = decode_message(
                "load history",
                &role,
                content,
                calls,
                tool_call_id,
                opaque,
                is_error,
            )?;
            out.push(sent_at(m, at));
        }
        out.reverse();
        Ok(from_first_user(out, |m| m))
    }
}

impl Db {
    /// What was stored in `held`'s session after it (see [`WindowDelta`]), in one transaction:
    /// the newest `limit` messages after its last one, oldest first, and how many messages are
    /// stored now between its first and last ids (a savepoint: inside the turn's start too).
    pub fn window_delta(&self, held: &HeldWindow, limit: usize) -> Result<WindowDelta, StoreError> {
        let op = "load history";
        let mut conn = self.conn();
        let tx = conn.savepoint().op(op)?;
        let held_now: i64 = tx
            .prepare_cached(
                "SELECT COUNT(*) FROM messages WHERE session_id = ?1 AND id >= ?2 AND id <= ?3",
            )
            .and_then(|mut st| {
                st.query_row(
                    rusqlite::params![held.session_id, held.first_id, held.last_id],
                    |r| r.get(0),
                )
            })
            .op(op)?;
        let mut after = Vec::new();
        {
            let mut stmt = tx.prepare_cached(&after_sql(limit)).op(op)?;
            let mut rows = stmt
                .query(rusqlite::params![held.session_id, held.last_id])
                .op(op)?;
            while let Some(r) = rows.next().op(op)? {
                let m = decode_message(
                    op,
                    &r.get::<_, String>(1).op(op)?,
                    r.get(2).op(op)?,
                    r.get(3).op(op)?,
                    r.get(4).op(op)?,
                    r.get(5).op(op)?,
                    r.get(6).op(op)?,
                )?;
                after.push((r.get(0).op(op)?, sent_at(m, r.get(7).op(op)?)));
            }
        }
        tx.commit().op(op)?;
        after.reverse();
        Ok(WindowDelta {
            after,
            held_now: held_now.max(0) as u64,
        })
    }
}

/// The newest `limit` messages of session `?1` after id `?2`, newest first. The limit is written
/// into the statement, not bound: SQLite plans a `LIMIT` with the value bound to it and
/// prepares such a statement again whenever the parameter is bound, which is every turn.
pub(crate) fn after_sql(limit: usize) -> String {
    format!(
        "SELECT id, role, content, tool_calls, tool_call_id, opaque, is_error, created_at
         FROM messages WHERE session_id = ?1 AND id > ?2 ORDER BY id DESC LIMIT {limit}"
    )
}

/// A stored message from its columns (`role`, `content`, `tool_calls` JSON, `tool_call_id`,
/// `opaque` JSON, `is_error`), for both stores. Errors: [`StoreError::Corrupt`] for an unknown
/// role or unreadable JSON.
pub(crate) fn decode_message(
    op: &'static str,
    role: &str,
    content: Option<String>,
    calls: Option<String>,
    tool_call_id: Option<String>,
    opaque: Option<String>,
    is_error: bool,
) -> Result<ChatMessage, StoreError> {
    let corrupt = |message: String| StoreError::Corrupt { op, message };
    let role = Role::parse(role).ok_or_else(|| corrupt(format!("unknown role {role:?}")))?;
    let tool_calls = match calls {
        Some(c) => serde_json::from_str(&c).map_err(|e| corrupt(e.to_string()))?,
        None => Vec::new(),
    };
    let opaque = match opaque {
        Some(o) => Some(serde_json::from_str(&o).map_err(|e| corrupt(format!("opaque: {e}")))?),
        None => None,
    };
    Ok(ChatMessage {
        role,
        content,
        tool_calls,
        tool_call_id,
        opaque,
        is_error,
        images: Vec::new(),
        sent_at: None,
        derived: Default::default(),
    })
}

/// A message's tool calls as the JSON the `tool_calls` column holds (`None` without any), for
/// both stores.
pub(crate) fn tool_calls_json(
    m: &ChatMessage,
    op: &'static str,
) -> Result<Option<String>, StoreError> {
    if m.tool_calls.is_empty() {
        return Ok(None);
    }
    serde_json::to_string(&m.tool_calls)
        .map(Some)
        .map_err(|e| StoreError::Corrupt {
            op,
            message: e.to_string(),
        })
}

/// Insert `msgs` into session `session_id` in their order, on `conn` (in the caller's
/// transaction).
pub(super) fn insert_messages(
    conn: &Connection,
    session_id: &str,
    msgs: &[ChatMessage],
) -> Result<(), StoreError> {
    let op = "append messages";
    let mut stmt = conn
        .prepare_cached(
            "INSERT INTO messages(session_id, role, content, tool_calls, tool_call_id, opaque, is_error, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )
        .op(op)?;
    let ts = now();
    for m in msgs {
        let calls = tool_calls_json(m, op)?;
        let opaque = m.opaque.as_ref().map(|v| v.to_string());
        stmt.execute(rusqlite::params![
            session_id,
            m.role.as_str(),
            m.content,
            calls,
            m.tool_call_id,
            opaque,
            m.is_error,
            stored_at(m, ts)
        ])
        .op(op)?;
    }
    Ok(())
}

/// The `created_at` a message is stored with: a user message's own [`ChatMessage::sent_at`],
/// else `now`.
pub(crate) fn stored_at(m: &ChatMessage, now: i64) -> i64 {
    match (m.role, m.sent_at) {
        (Role::User, Some(at)) => at,
        _ => now,
    }
}

/// `m` with its [`ChatMessage::sent_at`] from the row's `created_at` (user messages only).
pub(crate) fn sent_at(mut m: ChatMessage, created_at: i64) -> ChatMessage {
    if m.role == Role::User {
        m.sent_at = Some(created_at);
    }
    m
}

/// `items` (oldest first) from the first user message on: a window never starts with a tool
/// result or a tool call cut from its partner. Empty when there is no user message.
pub(crate) fn from_first_user<T>(
    mut items: Vec<T>,
    message: impl Fn(&T) -> &ChatMessage,
) -> Vec<T> {
    match items.iter().position(|m| message(m).role == Role::User) {
        Some(i) => items.split_off(i),
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ethan_core::message::ToolCall;

    fn call(id: &str) -> ChatMessage {
        ChatMessage {
            role: Role::Assistant,
            content: None,
            tool_calls: vec![ToolCall::new(id, "file_read", "{}")],
            tool_call_id: None,
            opaque: None,
            is_error: false,
            images: Vec::new(),
            sent_at: None,
            derived: Default::default(),
        }
    }

    #[test]
    fn round_trip_and_window_cut_at_user() {
        let s = Db::open_in_memory().unwrap();
        let sid = s.current_session("t:1").unwrap();
        s.append_messages(
            &sid,
            &[
                ChatMessage::user("one"),
                call("c1"),
                ChatMessage::tool("c1", "result"),
                ChatMessage::assistant("answer one"),
                ChatMessage::user("two"),
                ChatMessage::assistant("answer two"),
            ],
        )
        .unwrap();
        let all = s.load_window(&sid, 100).unwrap();
        assert_eq!(all.len(), 6);
        assert_eq!(all[1].tool_calls[0].id, "c1");
        assert_eq!(all[2].tool_call_id.as_deref(), Some("c1"));
        // A window of 4 would start at the tool result: it is cut to the next user message.
        let w = s.load_window(&sid, 4).unwrap();
        assert_eq!(w.len(), 2);
        assert_eq!(w[0].content.as_deref(), Some("two"));
        let w = s.load_window(&sid, 1).unwrap();
        assert!(w.is_empty());
    }

    #[test]
    fn a_providers_opaque_value_survives_the_store() {
        let s = Db::open_in_memory().unwrap();
        let sid = s.current_session("t:1").unwrap();
        let mut thinking = call("c9");
        thinking.content = Some("let me look".into());
        thinking.opaque = Some(serde_json::json!({
            "anthropic": {"thinking": "…", "signature": "EqQBCkYIBxgCKkB+sig=="}
        }));
        s.append_messages(
            &sid,
            &[
                ChatMessage::user("q"),
                thinking.clone(),
                ChatMessage::tool_error("c9", "r"),
            ],
        )
        .unwrap();
        let back = s.load_window(&sid, 10).unwrap();
        assert_eq!(back[1], thinking);
        assert_eq!(back[2].opaque, None);
        assert!(back[2].is_error, "a failed tool result stays marked");
        assert!(!back[1].is_error);
    }
}
