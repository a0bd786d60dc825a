//! Inbound platform events: recorded before the platform is acknowledged (dedupe by the
//! platform's event id) and marked as their reply is delivered, so a crash loses nothing and a
//! redelivery is recognised.
//!
//! States: `received` → `processing` → `done` | `failed` | `ignored`.

use super::{now, Ctx, Store, StoreError};
use ethan_channels::InboundEvent;

/// After this many starts, an event that never finished is marked `failed` instead of re-run.
pub const MAX_ATTEMPTS: i64 = 3;

impl Store {
    /// Record an event; `Ok(true)` when it is new, `Ok(false)` for a redelivery.
    pub fn record_inbound(&self, ev: &InboundEvent) -> Result<bool, StoreError> {
        let payload = serde_json::to_string(ev).map_err(|e| StoreError::Corrupt {
            op: "record inbound",
            message: e.to_string(),
        })?;
        let ts = now();
        let n = self
            .conn()
            .execute(
                "INSERT OR IGNORE INTO inbound_events
                 (channel, event_id, session_key, payload, state, attempts, received_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 'received', 0, ?5, ?5)",
                rusqlite::params![
                    ev.channel.as_str(),
                    ev.event_id,
                    ev.session_key(),
                    payload,
                    ts
                ],
            )
            .op("record inbound")?;
        Ok(n == 1)
    }

    /// Move an event to `state`; `processing` also counts an attempt.
    pub fn set_inbound_state(
        &self,
        channel: &str,
        event_id: &str,
        state: &str,
    ) -> Result<(), StoreError> {
        let sql = if state == "processing" {
            "UPDATE inbound_events SET state = ?3, attempts = attempts + 1, updated_at = ?4
             WHERE channel = ?1 AND event_id = ?2"
        } else {
            "UPDATE inbound_events SET state = ?3, updated_at = ?4 WHERE channel = ?1 AND event_id = ?2"
        };
        self.conn()
            .execute(sql, rusqlite::params![channel, event_id, state, now()])
            .op("update inbound")?;
        Ok(())
    }

    /// The state of one event, if recorded.
    pub fn inbound_state(
        &self,
        channel: &str,
        event_id: &str,
    ) -> Result<Option<String>, StoreError> {
        use rusqlite::OptionalExtension;
        self.conn()
            .query_row(
                "SELECT state FROM inbound_events WHERE channel = ?1 AND event_id = ?2",
                [channel, event_id],
                |r| r.get(0),
            )
            .optional()
            .op("read inbound")
    }

    /// Events recorded but not finished (a crash or stop in between), oldest first. Those that
    /// were already started [`MAX_ATTEMPTS`] times are marked `failed` and left out.
    pub fn unfinished_inbound(&self) -> Result<Vec<InboundEvent>, StoreError> {
        let conn = self.conn();
        conn.execute(
            "UPDATE inbound_events SET state = 'failed', updated_at = ?2
             WHERE state IN ('received', 'processing') AND attempts >= ?1",
            rusqlite::params![MAX_ATTEMPTS, now()],
        )
        .op("scan inbound")?;
        let mut stmt = conn
            .prepare(
                "SELECT payload FROM inbound_events WHERE state IN ('received', 'processing')
                 ORDER BY received_at, rowid",
            )
            .op("scan inbound")?;
        let rows = stmt
            .query_map([], |r| r.get::<_, String>(0))
            .op("scan inbound")?;
        let mut out = Vec::new();
        for payload in rows {
            let payload = payload.op("scan inbound")?;
            match serde_json::from_str(&payload) {
                Ok(ev) => out.push(ev),
                Err(e) => tracing::warn!("skipping an unreadable stored inbound event: {e}"),
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ethan_channels::{ChannelKind, ChatKind, ChatRef, Sender};

    fn ev(id: &str) -> InboundEvent {
        InboundEvent {
            channel: ChannelKind::Telegram,
            event_id: id.into(),
            message_id: Some("1".into()),
            chat: ChatRef {
                id: "7".into(),
                kind: ChatKind::Direct,
                thread: None,
            },
            sender: Sender {
                id: "7".into(),
                display_name: "A".into(),
                is_bot: false,
            },
            text: "hi".into(),
            addressed: true,
            reply_to: None,
            sent_at: 0,
        }
    }

    #[test]
    fn dedupe_and_unfinished() {
        let s = Store::open_in_memory().unwrap();
        assert!(s.record_inbound(&ev("1")).unwrap());
        assert!(!s.record_inbound(&ev("1")).unwrap());
        assert!(s.record_inbound(&ev("2")).unwrap());
        s.set_inbound_state("telegram", "1", "done").unwrap();
        let left = s.unfinished_inbound().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].event_id, "2");
        for _ in 0..MAX_ATTEMPTS {
            s.set_inbound_state("telegram", "2", "processing").unwrap();
        }
        assert!(s.unfinished_inbound().unwrap().is_empty());
        assert_eq!(
            s.inbound_state("telegram", "2").unwrap().as_deref(),
            Some("failed")
        );
    }
}
