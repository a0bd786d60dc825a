//! Inbound platform events: recorded before the platform is acknowledged (dedupe by the
//! platform's event id) and marked as their reply is delivered, so a crash loses nothing and a
//! redelivery is recognised.
//!
//! States: `received` → `processing` → `sending` → `done` | `failed` | `ignored` |
//! `unconfirmed`.
//!
//! - `received` / `processing`: the turn has not produced a reply yet; at start the event is
//!   handled again ([`Db::unfinished_inbound`]).
//! - `sending`: the reply (stored in the `reply` column, in the same write) is being delivered.
//!   The turn is complete and its answer is in the history, so at start it is *not* run again;
//!   [`Db::unconfirmed_replies`] lists these for the daemon to re-send (platforms with
//!   idempotent sends) or report.
//! - `unconfirmed`: a reply whose delivery was cut off and that was not sent again, because the
//!   platform could have shown it twice; final, like `done`.
//! - `answering` (replicas only): a command answered outside its session's queue (`/approve`,
//!   `/claim`, a refused `/stop`) while its reply goes out; never taken over by another
//!   replica, which would answer it twice.
//!
//! Dedupe is bounded in time: a finished record older than [`DEDUPE_WINDOW_SECS`] no longer
//! makes an event with the same id a duplicate (Telegram may restart its `update_id` numbering
//! after a week without updates). Finished records are removed by [`Db::prune_inbound`] under
//! `retention.inbound_days`, together with the Lark adapter's `lark.seen:*` keys.

use super::{now, Ctx, Db, StoreError};
use ethan_channels::InboundEvent;

/// After this many starts, an event that never finished is marked `failed` instead of re-run.
pub const MAX_ATTEMPTS: i64 = 3;

/// How long, in seconds, a finished event's id makes a new event with the same id a duplicate:
/// 3 days. Longer than any platform's redelivery (Telegram keeps an update for 24 hours, Lark
/// redelivers for some hours), shorter than the week without updates after which Telegram may
/// restart `update_id` numbering at a random value, so a reused id is answered.
pub const DEDUPE_WINDOW_SECS: i64 = 3 * 86_400;

/// Prefix of the Lark adapter's "published once" keys in the `kv` table (values: Unix seconds).
pub(crate) const LARK_SEEN_PREFIX: &str = "lark.seen:";

/// Rows in each table that retention prunes (see [`Db::retention_counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionCounts {
    /// Rows of `inbound_events` (every state).
    pub inbound_events: i64,
    /// Rows of the tool audit log.
    pub audit_rows: i64,
    /// Replay-guard keys.
    pub replay_keys: i64,
    /// The Lark adapter's `lark.seen:*` keys.
    pub lark_seen: i64,
}

/// A reply whose send had started but was not confirmed when the daemon stopped (state
/// `sending`).
#[derive(Debug, Clone, PartialEq)]
pub struct UnconfirmedReply {
    /// The event the reply answers.
    pub event: InboundEvent,
    /// The reply text (Markdown), exactly as it was being sent.
    pub reply: String,
    /// Unix seconds at which the send started.
    pub since: i64,
}

impl Db {
    /// Record an event; `Ok(true)` when it is new, `Ok(false)` for a redelivery. A finished
    /// record (not `received`, `processing` or `sending`) of the same id received more than
    /// [`DEDUPE_WINDOW_SECS`] ago, for a message sent at another time, is replaced: the id was
    /// reused, the event is new. The same message delivered again late stays a duplicate.
    pub fn record_inbound(&self, ev: &InboundEvent) -> Result<bool, StoreError> {
        let payload = serde_json::to_string(ev).map_err(|e| StoreError::Corrupt {
            op: "record inbound",
            message: e.to_string(),
        })?;
        let ts = now();
        // One transaction for both statements: one write lock taken, one commit.
        let mut conn = self.conn();
        let tx = conn.transaction().op("record inbound")?;
        tx.prepare_cached(
            "DELETE FROM inbound_events
                 WHERE channel = ?1 AND event_id = ?2 AND received_at < ?3
                   AND state NOT IN ('received', 'processing', 'sending')
                   AND json_extract(payload, '$.sent_at') IS NOT ?4",
        )
        .and_then(|mut st| {
            st.execute(rusqlite::params![
                ev.channel.as_str(),
                ev.event_id,
                ts - DEDUPE_WINDOW_SECS,
                ev.sent_at
            ])
        })
        .op("record inbound")?;
        let n = tx
            .prepare_cached(
                "INSERT OR IGNORE INTO inbound_events
                 (channel, event_id, session_key, payload, state, attempts, received_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, 'received', 0, ?5, ?5)",
            )
            .and_then(|mut st| {
                st.execute(rusqlite::params![
                    ev.channel.as_str(),
                    ev.event_id,
                    ev.session_key(),
                    payload,
                    ts
                ])
            })
            .op("record inbound")?;
        tx.commit().op("record inbound")?;
        Ok(n == 1)
    }

    /// Move an event to `state`; `processing` also counts an attempt, `done` forgets the stored
    /// reply text (it is in the history). For `sending` use [`Db::set_inbound_sending`].
    pub fn set_inbound_state(
        &self,
        channel: &str,
        event_id: &str,
        state: &str,
    ) -> Result<(), StoreError> {
        let sql = match state {
            "processing" => {
                "UPDATE inbound_events SET state = ?3, attempts = attempts + 1, updated_at = ?4
                 WHERE channel = ?1 AND event_id = ?2"
            }
            "done" => {
                "UPDATE inbound_events SET state = ?3, reply = NULL, updated_at = ?4
                 WHERE channel = ?1 AND event_id = ?2"
            }
            _ => {
                "UPDATE inbound_events SET state = ?3, updated_at = ?4
                 WHERE channel = ?1 AND event_id = ?2"
            }
        };
        self.conn()
            .prepare_cached(sql)
            .and_then(|mut st| st.execute(rusqlite::params![channel, event_id, state, now()]))
            .op("update inbound")?;
        Ok(())
    }

    /// Record, in one write, that `reply` is about to be sent for an event: state `sending` and
    /// the reply text. Called just before the send, so a crash during it leaves the event in
    /// `sending` (see [`Db::unconfirmed_replies`]) rather than unfinished. An unknown event
    /// changes nothing. Errors: [`StoreError::Sqlite`] when the database cannot be written.
    pub fn set_inbound_sending(
        &self,
        channel: &str,
        event_id: &str,
        reply: &str,
    ) -> Result<(), StoreError> {
        self.conn()
            .prepare_cached(
                "UPDATE inbound_events SET state = 'sending', reply = ?3, updated_at = ?4
                 WHERE channel = ?1 AND event_id = ?2",
            )
            .and_then(|mut st| st.execute(rusqlite::params![channel, event_id, reply, now()]))
            .op("update inbound")?;
        Ok(())
    }

    /// Replies left in `sending` by a crash or kill (sent, not confirmed), oldest first. Rows
    /// whose stored event or reply cannot be read are marked `failed` and logged, not returned.
    /// The caller moves each returned event on (`done`, `failed` or `unconfirmed`); until then
    /// it is listed again. Errors: [`StoreError::Sqlite`] when the database cannot be read.
    pub fn unconfirmed_replies(&self) -> Result<Vec<UnconfirmedReply>, StoreError> {
        let conn = self.conn();
        let rows: Vec<(String, String, String, Option<String>, i64)> = {
            let mut stmt = conn
                .prepare(
                    "SELECT channel, event_id, payload, reply, updated_at FROM inbound_events
                     WHERE state = 'sending' ORDER BY updated_at, rowid",
                )
                .op("scan inbound")?;
            let rows = stmt
                .query_map([], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
                })
                .op("scan inbound")?;
            rows.collect::<Result<_, _>>().op("scan inbound")?
        };
        let mut out = Vec::new();
        for (channel, event_id, payload, reply, since) in rows {
            let event = serde_json::from_str::<InboundEvent>(&payload);
            match (event, reply) {
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
                    conn.execute(
                        "UPDATE inbound_events SET state = 'failed', updated_at = ?3
                         WHERE channel = ?1 AND event_id = ?2",
                        rusqlite::params![channel, event_id, now()],
                    )
                    .op("update inbound")?;
                }
            }
        }
        Ok(out)
    }

    /// Delete finished inbound events last changed more than `days` days ago (at least
    /// [`DEDUPE_WINDOW_SECS`], so a redelivery is still recognised), and the Lark adapter's
    /// `lark.seen:*` keys written before the same cutoff. Events still `received`,
    /// `processing` or `sending` are kept whatever their age. Returns `(events, seen keys)`
    /// removed. Errors: [`StoreError::Sqlite`] when the database cannot be written.
    pub fn prune_inbound(&self, days: u32) -> Result<(usize, usize), StoreError> {
        let keep = (i64::from(days) * 86_400).max(DEDUPE_WINDOW_SECS);
        let cutoff = now() - keep;
        let conn = self.conn();
        let events = conn
            .execute(
                "DELETE FROM inbound_events WHERE updated_at < ?1
                   AND state NOT IN ('received', 'processing', 'sending')",
                [cutoff],
            )
            .op("prune inbound")?;
        // A value that is not a number casts to 0 and goes too.
        let seen = conn
            .execute(
                "DELETE FROM kv WHERE substr(key, 1, ?1) = ?2 AND CAST(value AS INTEGER) < ?3",
                rusqlite::params![LARK_SEEN_PREFIX.len() as i64, LARK_SEEN_PREFIX, cutoff],
            )
            .op("prune lark seen")?;
        Ok((events, seen))
    }

    /// How many rows each table pruned by retention holds (for `ethan doctor`). Errors:
    /// [`StoreError::Sqlite`] when the database cannot be read.
    pub fn retention_counts(&self) -> Result<RetentionCounts, StoreError> {
        let conn = self.conn();
        let count = |sql: &str| -> Result<i64, StoreError> {
            conn.query_row(sql, [], |r| r.get(0)).op("count rows")
        };
        let lark_seen = conn
            .query_row(
                "SELECT COUNT(*) FROM kv WHERE substr(key, 1, ?1) = ?2",
                rusqlite::params![LARK_SEEN_PREFIX.len() as i64, LARK_SEEN_PREFIX],
                |r| r.get(0),
            )
            .op("count rows")?;
        Ok(RetentionCounts {
            inbound_events: count("SELECT COUNT(*) FROM inbound_events")?,
            audit_rows: count("SELECT COUNT(*) FROM audit")?,
            replay_keys: count("SELECT COUNT(*) FROM replay_keys")?,
            lark_seen,
        })
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
            relayed: None,
            unfetched: None,
            addressed: true,
            reply_to: None,
            sent_at: 0,
            seq: 0,
            attachments: Vec::new(),
        }
    }

    #[test]
    fn dedupe_and_unfinished() {
        let s = Db::open_in_memory().unwrap();
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

    #[test]
    fn a_reply_being_sent_is_not_rerun_but_listed_as_unconfirmed() {
        let s = Db::open_in_memory().unwrap();
        assert!(s.record_inbound(&ev("1")).unwrap());
        assert!(s.record_inbound(&ev("2")).unwrap());
        s.set_inbound_state("telegram", "1", "processing").unwrap();
        s.set_inbound_sending("telegram", "1", "the answer")
            .unwrap();
        assert_eq!(
            s.inbound_state("telegram", "1").unwrap().as_deref(),
            Some("sending")
        );
        // Only the event without a reply is run again.
        let left = s.unfinished_inbound().unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].event_id, "2");
        let pending = s.unconfirmed_replies().unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].event, ev("1"));
        assert_eq!(pending[0].reply, "the answer");
        assert!(pending[0].since > 0);
        // `unconfirmed` is final: neither re-run nor listed again.
        s.set_inbound_state("telegram", "1", "unconfirmed").unwrap();
        assert!(s.unconfirmed_replies().unwrap().is_empty());
        assert_eq!(s.unfinished_inbound().unwrap().len(), 1);
        // `done` forgets the reply text.
        s.set_inbound_sending("telegram", "2", "second").unwrap();
        s.set_inbound_state("telegram", "2", "done").unwrap();
        let reply: Option<String> = s
            .conn()
            .query_row(
                "SELECT reply FROM inbound_events WHERE event_id = '2'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(reply, None);
        assert!(s.unconfirmed_replies().unwrap().is_empty());
    }

    #[test]
    fn an_unreadable_sending_row_is_marked_failed() {
        let s = Db::open_in_memory().unwrap();
        assert!(s.record_inbound(&ev("1")).unwrap());
        s.set_inbound_sending("telegram", "1", "x").unwrap();
        s.conn()
            .execute("UPDATE inbound_events SET payload = '{not json'", [])
            .unwrap();
        assert!(s.unconfirmed_replies().unwrap().is_empty());
        assert_eq!(
            s.inbound_state("telegram", "1").unwrap().as_deref(),
            Some("failed")
        );
    }

    /// Backdate an event's record by `secs`.
    fn age(s: &Db, id: &str, secs: i64) {
        s.conn()
            .execute(
                "UPDATE inbound_events SET received_at = received_at - ?2,
                 updated_at = updated_at - ?2 WHERE event_id = ?1",
                rusqlite::params![id, secs],
            )
            .unwrap();
    }

    #[test]
    fn retention_prunes_old_finished_events_and_a_recent_redelivery_is_still_a_duplicate() {
        let s = Db::open_in_memory().unwrap();
        let day = 86_400;
        for id in ["old", "recent", "old-unfinished"] {
            assert!(s.record_inbound(&ev(id)).unwrap());
        }
        s.set_inbound_state("telegram", "old", "done").unwrap();
        s.set_inbound_state("telegram", "recent", "done").unwrap();
        s.set_inbound_state("telegram", "old-unfinished", "processing")
            .unwrap();
        age(&s, "old", 8 * day);
        age(&s, "recent", day);
        age(&s, "old-unfinished", 8 * day);
        let t = now();
        s.kv_set("lark.seen:om_old", &(t - 8 * day).to_string())
            .unwrap();
        s.kv_set("lark.seen:om_new", &(t - day).to_string())
            .unwrap();
        s.kv_set("telegram.offset", "1").unwrap();

        let before = s.retention_counts().unwrap();
        assert_eq!((before.inbound_events, before.lark_seen), (3, 2));
        assert_eq!(s.prune_inbound(7).unwrap(), (1, 1));
        assert_eq!(s.inbound_state("telegram", "old").unwrap(), None);
        assert_eq!(
            s.inbound_state("telegram", "old-unfinished")
                .unwrap()
                .as_deref(),
            Some("processing")
        );
        assert!(s.kv_get("lark.seen:om_old").unwrap().is_none());
        assert!(s.kv_get("lark.seen:om_new").unwrap().is_some());
        assert!(s.kv_get("telegram.offset").unwrap().is_some());
        // The redelivery of a recent event is still recognised.
        assert!(!s.record_inbound(&ev("recent")).unwrap());
        // A setting below the dedupe window keeps the window.
        assert_eq!(s.prune_inbound(0).unwrap(), (0, 0));
        assert!(!s.record_inbound(&ev("recent")).unwrap());
    }

    #[test]
    fn a_finished_record_older_than_the_dedupe_window_does_not_make_a_duplicate() {
        let s = Db::open_in_memory().unwrap();
        assert!(s.record_inbound(&ev("5")).unwrap());
        s.set_inbound_state("telegram", "5", "done").unwrap();
        age(&s, "5", DEDUPE_WINDOW_SECS + 60);
        // The same message delivered again late is still a duplicate.
        assert!(!s.record_inbound(&ev("5")).unwrap());
        // The id was reused by another message: a new event, recorded afresh.
        let reused = InboundEvent {
            sent_at: 1_700_000_000,
            seq: 0,
            attachments: Vec::new(),
            ..ev("5")
        };
        assert!(s.record_inbound(&reused).unwrap());
        assert_eq!(
            s.inbound_state("telegram", "5").unwrap().as_deref(),
            Some("received")
        );
        assert!(!s.record_inbound(&reused).unwrap());
        // An old record that is not finished still counts.
        age(&s, "5", DEDUPE_WINDOW_SECS + 60);
        assert!(!s.record_inbound(&ev("5")).unwrap());
    }
}
