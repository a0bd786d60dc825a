//! Inbound platform events on PostgreSQL, as in SQLite (`super::super::inbound`, which
//! explains the states): recorded under their unique `(channel, event_id)` before the platform
//! is acknowledged, so a redelivery — to this replica or another — is recognised by the
//! constraint; a finished record older than [`DEDUPE_WINDOW_SECS`] of a message sent at another
//! time is replaced (the platform reused the id); [`MAX_ATTEMPTS`] starts at most.
//!
//! The event's `sent_at` is kept in a column of its own beside the JSON payload (SQLite reads it
//! out of the payload), and `seq` gives rows their insertion order.

use super::errors::pg_error;
use super::{text, PgStore, StoreError};
use crate::store::inbound::{
    RetentionCounts, UnconfirmedReply, DEDUPE_WINDOW_SECS, LARK_SEEN_PREFIX, MAX_ATTEMPTS,
};
use crate::store::now;
use crate::store::InboundStore;
use async_trait::async_trait;
use ethan_channels::InboundEvent;

/// A stored kv value as SQLite's `CAST(value AS INTEGER)` reads it: optional blanks and sign,
/// then the leading digits (saturating); anything else is 0.
pub(crate) fn sqlite_int(value: &str) -> i64 {
    let s = value.trim_start();
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut n: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        let d = i64::from(b - b'0');
        n = if neg {
            n.saturating_mul(10).saturating_sub(d)
        } else {
            n.saturating_mul(10).saturating_add(d)
        };
    }
    n
}

#[async_trait]
impl InboundStore for PgStore {
    /// Record an event; `Ok(true)` when it is new, `Ok(false)` for a redelivery (see the module
    /// doc for the dedupe window). Errors: [`StoreError::Backend`] when the database cannot be
    /// written.
    async fn record_inbound(&self, ev: &InboundEvent) -> Result<bool, StoreError> {
        let op = "record inbound";
        let payload = serde_json::to_string(ev).map_err(|e| StoreError::Corrupt {
            op,
            message: e.to_string(),
        })?;
        let ts = now();
        let channel = ev.channel.as_str();
        // One statement: a new event is inserted; a finished one of a message sent at another
        // time, older than the dedupe window, is replaced in place (the platform reused the id;
        // `seq` is drawn anew, so it sorts as the arrival it is); anything else is a redelivery
        // and changes nothing.
        let client = self.client(op).await?;
        let upsert = client
            .prepare_cached(
                "INSERT INTO inbound_events
                 (channel, event_id, session_key, payload, sent_at, state, attempts, received_at,
                  updated_at, platform_seq)
                 VALUES ($1, $2, $3, $4, $5, 'received', 0, $6, $6, $7)
                 ON CONFLICT (channel, event_id) DO UPDATE SET
                   seq = DEFAULT, session_key = EXCLUDED.session_key,
                   payload = EXCLUDED.payload, sent_at = EXCLUDED.sent_at, state = 'received',
                   attempts = 0, received_at = EXCLUDED.received_at,
                   updated_at = EXCLUDED.updated_at, reply = NULL,
                   platform_seq = EXCLUDED.platform_seq
                 WHERE inbound_events.received_at < $8
                   AND inbound_events.state NOT IN ('received', 'processing', 'sending')
                   AND inbound_events.sent_at IS DISTINCT FROM EXCLUDED.sent_at",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let n = client
            .execute(
                &upsert,
                &[
                    &channel,
                    &ev.event_id,
                    &ev.session_key(),
                    &payload,
                    &ev.sent_at,
                    &ts,
                    &ev.seq,
                    &(ts - DEDUPE_WINDOW_SECS),
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(n == 1)
    }

    /// Move an event to `state`; `processing` also counts an attempt, `done` forgets the stored
    /// reply. For `sending` use [`InboundStore::set_inbound_sending`]. An unknown event changes
    /// nothing.
    async fn set_inbound_state(
        &self,
        channel: &str,
        event_id: &str,
        state: &str,
    ) -> Result<(), StoreError> {
        let op = "update inbound";
        let sql = match state {
            "processing" => {
                "UPDATE inbound_events SET state = $3, attempts = attempts + 1, updated_at = $4
                 WHERE channel = $1 AND event_id = $2"
            }
            "done" => {
                "UPDATE inbound_events SET state = $3, reply = NULL, updated_at = $4
                 WHERE channel = $1 AND event_id = $2"
            }
            _ => {
                "UPDATE inbound_events SET state = $3, updated_at = $4
                 WHERE channel = $1 AND event_id = $2"
            }
        };
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(sql)
            .await
            .map_err(|e| pg_error(op, &e))?;
        client
            .execute(&stmt, &[&channel, &event_id, &state, &now()])
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(())
    }

    /// Written before it returns (a pool's connections keep no order between calls).
    async fn queue_kv_delete(&self, key: &str) {
        if let Err(e) = ethan_core::store::KvStore::kv_delete(self, key).await {
            tracing::warn!("cannot delete {key}: {e}");
        }
    }

    /// Record, in one write, that `reply` is about to be sent for an event: state `sending` and
    /// the reply text. An unknown event changes nothing.
    async fn set_inbound_sending(
        &self,
        channel: &str,
        event_id: &str,
        reply: &str,
    ) -> Result<(), StoreError> {
        let op = "update inbound";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "UPDATE inbound_events SET state = 'sending', reply = $3, updated_at = $4
                 WHERE channel = $1 AND event_id = $2",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        client
            .execute(&stmt, &[&channel, &event_id, &text(reply), &now()])
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(())
    }

    /// One statement: the lease confirmed (and extended) and, only when it was, the event
    /// moved to `sending` with its reply.
    async fn set_inbound_sending_fenced(
        &self,
        channel: &str,
        event_id: &str,
        reply: &str,
        lease: &str,
        holder: &str,
        secs: u64,
    ) -> Result<bool, StoreError> {
        let op = "update inbound";
        let client = self.client(op).await?;
        let stmt = client
            .prepare_cached(
                "WITH held AS (
                   UPDATE leases SET expires_at = now() + make_interval(secs => $7)
                   WHERE name = $5 AND holder = $6 AND expires_at > now() RETURNING 1),
                 sending AS (
                   UPDATE inbound_events SET state = 'sending', reply = $3, updated_at = $4
                   WHERE channel = $1 AND event_id = $2 AND EXISTS (SELECT 1 FROM held))
                 SELECT EXISTS (SELECT 1 FROM held)",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let row = client
            .query_one(
                &stmt,
                &[
                    &channel,
                    &event_id,
                    &text(reply),
                    &now(),
                    &lease,
                    &holder,
                    &(secs as f64),
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        row.try_get(0).map_err(|e| pg_error(op, &e))
    }

    /// Replies left in `sending` (sent, not confirmed), oldest first. Rows whose stored event or
    /// reply cannot be read are marked `failed` and logged, not returned.
    async fn unconfirmed_replies(&self) -> Result<Vec<UnconfirmedReply>, StoreError> {
        let op = "scan inbound";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT channel, event_id, payload, reply, updated_at FROM inbound_events
                 WHERE state = 'sending' ORDER BY updated_at, seq",
                &[],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let mut out = Vec::new();
        for r in &rows {
            let get = |e: tokio_postgres::Error| pg_error(op, &e);
            let channel: String = r.try_get(0).map_err(get)?;
            let event_id: String = r.try_get(1).map_err(get)?;
            let payload: String = r.try_get(2).map_err(get)?;
            let reply: Option<String> = r.try_get(3).map_err(get)?;
            let since: i64 = r.try_get(4).map_err(get)?;
            match (serde_json::from_str::<InboundEvent>(&payload), reply) {
                (Ok(event), Some(reply)) => out.push(UnconfirmedReply {
                    event,
                    reply,
                    since,
                }),
                (event, _) => {
                    let why = match event {
                        Err(e) => format!("its stored event is unreadable ({e})"),
                        Ok(_) => "no reply text was stored".to_string(),
                    };
                    tracing::warn!(
                        "{channel} event {event_id} was sending a reply when the daemon \
                         stopped, but {why}; marking it failed"
                    );
                    client
                        .execute(
                            "UPDATE inbound_events SET state = 'failed', updated_at = $3
                             WHERE channel = $1 AND event_id = $2",
                            &[&channel, &event_id, &now()],
                        )
                        .await
                        .map_err(|e| pg_error("update inbound", &e))?;
                }
            }
        }
        Ok(out)
    }

    /// The state of one event, if recorded.
    async fn inbound_state(
        &self,
        channel: &str,
        event_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let op = "read inbound";
        let client = self.client(op).await?;
        let row = client
            .query_opt(
                "SELECT state FROM inbound_events WHERE channel = $1 AND event_id = $2",
                &[&channel, &event_id],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        row.map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| pg_error(op, &e))
    }

    /// Events recorded but not finished, oldest first. Those already started
    /// [`MAX_ATTEMPTS`] times are marked `failed` and left out.
    async fn unfinished_inbound(&self) -> Result<Vec<InboundEvent>, StoreError> {
        let op = "scan inbound";
        let client = self.client(op).await?;
        client
            .execute(
                "UPDATE inbound_events SET state = 'failed', updated_at = $2
                 WHERE state IN ('received', 'processing') AND attempts >= $1",
                &[&MAX_ATTEMPTS, &now()],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let rows = client
            .query(
                "SELECT payload FROM inbound_events WHERE state IN ('received', 'processing')
                 ORDER BY received_at, seq",
                &[],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let mut out = Vec::new();
        for r in &rows {
            let payload: String = r.try_get(0).map_err(|e| pg_error(op, &e))?;
            match serde_json::from_str(&payload) {
                Ok(ev) => out.push(ev),
                Err(e) => tracing::warn!("skipping an unreadable stored inbound event: {e}"),
            }
        }
        Ok(out)
    }

    /// Delete finished inbound events last changed more than `days` days ago (at least
    /// [`DEDUPE_WINDOW_SECS`]) and the Lark adapter's `lark.seen:*` keys written before the same
    /// cutoff; returns `(events, seen keys)` removed.
    async fn prune_inbound(&self, days: u32) -> Result<(usize, usize), StoreError> {
        let op = "prune inbound";
        let keep = (i64::from(days) * 86_400).max(DEDUPE_WINDOW_SECS);
        let cutoff = now() - keep;
        let client = self.client(op).await?;
        let events = client
            .execute(
                "DELETE FROM inbound_events WHERE updated_at < $1
                   AND state NOT IN ('received', 'processing', 'sending')",
                &[&cutoff],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        // The values are read as SQLite's CAST reads them (not a number: 0, so it goes too).
        let op = "prune lark seen";
        let rows = client
            .query(
                "SELECT key, value FROM kv WHERE left(key, $1) = $2",
                &[
                    &(LARK_SEEN_PREFIX.chars().count() as i32),
                    &LARK_SEEN_PREFIX,
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let mut old = Vec::new();
        for r in &rows {
            let value: String = r.try_get(1).map_err(|e| pg_error(op, &e))?;
            if sqlite_int(&value) < cutoff {
                old.push(r.try_get::<_, String>(0).map_err(|e| pg_error(op, &e))?);
            }
        }
        let seen = client
            .execute("DELETE FROM kv WHERE key = ANY($1)", &[&old])
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok((events as usize, seen as usize))
    }

    /// How many rows each table pruned by retention holds (for `ethan doctor`).
    async fn retention_counts(&self) -> Result<RetentionCounts, StoreError> {
        let op = "count rows";
        let client = self.client(op).await?;
        let row = client
            .query_one(
                "SELECT (SELECT COUNT(*) FROM inbound_events), (SELECT COUNT(*) FROM audit),
                        (SELECT COUNT(*) FROM replay_keys),
                        (SELECT COUNT(*) FROM kv WHERE left(key, $1) = $2)",
                &[
                    &(LARK_SEEN_PREFIX.chars().count() as i32),
                    &LARK_SEEN_PREFIX,
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let get = |i: usize| row.try_get::<_, i64>(i).map_err(|e| pg_error(op, &e));
        Ok(RetentionCounts {
            inbound_events: get(0)?,
            audit_rows: get(1)?,
            replay_keys: get(2)?,
            lark_seen: get(3)?,
        })
    }

    async fn prune_audit(&self, days: u32) -> Result<usize, StoreError> {
        PgStore::prune_audit(self, days).await
    }
}

#[cfg(test)]
mod tests {
    use super::sqlite_int;

    #[test]
    fn kv_values_read_as_sqlite_casts_them() {
        assert_eq!(sqlite_int("1700000000"), 1_700_000_000);
        assert_eq!(sqlite_int("  -42abc"), -42);
        assert_eq!(sqlite_int("+7"), 7);
        assert_eq!(sqlite_int("not a number"), 0);
        assert_eq!(sqlite_int(""), 0);
        assert_eq!(sqlite_int("99999999999999999999"), i64::MAX);
    }
}
