//! The audit log: one row for every tool call the model proposed, refused ones included, with
//! arguments already redacted by the caller. Also the replay-guard keys, stored with their turn.

use super::{now, Ctx, Db, StoreError};
pub use ethan_core::store::AuditEntry;

impl Db {
    pub fn insert_audit(&self, e: &AuditEntry) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                "INSERT INTO audit (execution_id, trace_id, session_key, user_id, channel, tool, args,
                 started_ms, ended_ms, ok, attempt, error_kind, error, output_bytes, spill_path, model)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            )
            .and_then(|mut st| {
                st.execute(rusqlite::params![
                    e.execution_id,
                    e.trace_id,
                    e.session_key,
                    e.user_id,
                    e.channel,
                    e.tool,
                    e.args,
                    e.started_ms,
                    e.ended_ms,
                    e.ok,
                    e.attempt,
                    e.error_kind,
                    e.error,
                    e.output_bytes as i64,
                    e.spill_path,
                    e.model
                ])
            })
            .op("write audit")?;
        Ok(())
    }

    /// The newest `n` entries (optionally of one session), newest first.
    pub fn recent_audit(
        &self,
        n: usize,
        session: Option<&str>,
    ) -> Result<Vec<AuditEntry>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare(
                "SELECT execution_id, trace_id, session_key, user_id, channel, tool, args, started_ms,
                 ended_ms, ok, attempt, error_kind, error, output_bytes, spill_path, model FROM audit
                 WHERE (?1 IS NULL OR session_key = ?1) ORDER BY id DESC LIMIT ?2",
            )
            .op("read audit")?;
        let rows = st
            .query_map(rusqlite::params![session, n as i64], |r| {
                Ok(AuditEntry {
                    execution_id: r.get(0)?,
                    trace_id: r.get(1)?,
                    session_key: r.get(2)?,
                    user_id: r.get(3)?,
                    channel: r.get(4)?,
                    tool: r.get(5)?,
                    args: r.get(6)?,
                    started_ms: r.get(7)?,
                    ended_ms: r.get(8)?,
                    ok: r.get(9)?,
                    attempt: r.get(10)?,
                    error_kind: r.get(11)?,
                    error: r.get(12)?,
                    output_bytes: r.get::<_, i64>(13)? as u64,
                    spill_path: r.get(14)?,
                    model: r.get(15)?,
                })
            })
            .op("read audit")?;
        rows.collect::<Result<Vec<_>, _>>().op("read audit")
    }

    /// Whether `key` is in the replay keys.
    pub fn replay_key_recorded(&self, key: &str) -> Result<bool, StoreError> {
        self.conn()
            .prepare_cached("SELECT 1 FROM replay_keys WHERE key = ?1")
            .and_then(|mut st| st.exists([key]))
            .op("replay key")
    }

    /// Record a replay key; `Ok(true)` when it was new.
    pub fn record_replay_key(
        &self,
        key: &str,
        trace_id: &str,
        tool: &str,
    ) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .prepare_cached(
                "INSERT OR IGNORE INTO replay_keys (key, trace_id, tool, created_at) VALUES (?1, ?2, ?3, ?4)",
            )
            .and_then(|mut st| st.execute(rusqlite::params![key, trace_id, tool, now()]))
            .op("replay key")?;
        Ok(n == 1)
    }

    /// Delete audit rows and replay keys older than `days`; returns the rows removed.
    pub fn prune_audit(&self, days: u32) -> Result<usize, StoreError> {
        let cutoff = now() - i64::from(days) * 86_400;
        let conn = self.conn();
        let a = conn
            .execute("DELETE FROM audit WHERE started_ms < ?1", [cutoff * 1000])
            .op("prune audit")?;
        conn.execute("DELETE FROM replay_keys WHERE created_at < ?1", [cutoff])
            .op("prune replay keys")?;
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(session: &str, started_ms: i64) -> AuditEntry {
        AuditEntry {
            execution_id: "e".into(),
            trace_id: "t".into(),
            session_key: session.into(),
            user_id: "u".into(),
            channel: "terminal".into(),
            tool: "shell".into(),
            args: "{}".into(),
            started_ms,
            ended_ms: started_ms + 1,
            ok: true,
            attempt: 1,
            error_kind: None,
            error: None,
            output_bytes: 3,
            spill_path: None,
            model: Some("m".into()),
        }
    }

    #[test]
    fn write_read_filter_prune() {
        let s = Db::open_in_memory().unwrap();
        let now_ms = now() * 1000;
        s.insert_audit(&entry("a", now_ms)).unwrap();
        s.insert_audit(&entry("b", now_ms)).unwrap();
        s.insert_audit(&entry("a", now_ms - 10 * 86_400_000))
            .unwrap();
        assert_eq!(s.recent_audit(10, None).unwrap().len(), 3);
        assert_eq!(s.recent_audit(10, Some("a")).unwrap().len(), 2);
        assert_eq!(s.recent_audit(1, None).unwrap()[0].session_key, "a");
        assert_eq!(s.prune_audit(5).unwrap(), 1);
        assert_eq!(s.recent_audit(10, None).unwrap().len(), 2);
    }
}
