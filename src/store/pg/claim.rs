//! A session's lease and its unfinished events in one statement each (replicas): taking the
//! lease together with the events to run ([`claim`]), and letting it go unless more came in
//! ([`release_if_idle`]). Each is one round trip where a lease statement and a scan (an update
//! marking over-tried events failed, then a select) were three.
//!
//! Both read the events in the statement's snapshot. Letting the lease go in the same statement
//! as the scan leaves one window: an event committed by another replica after the snapshot,
//! whose lease attempt failed because the lease was still held, is not seen. The pump therefore
//! always claims once more after letting go (a new statement, a new snapshot), as it looked once
//! more before.

use super::errors::pg_error;
use super::StoreError;
use crate::store::backend::Pending;
use crate::store::inbound::{UnconfirmedReply, MAX_ATTEMPTS};
use crate::store::now;
use ethan_channels::InboundEvent;

/// The session's unfinished events not yet handled, as of the statement's snapshot. Parameters
/// of both statements: `$1` session key, `$2` lease, `$3` holder, `$4` handled event ids, `$5`
/// now, `$6` the most attempts, `$7` the kv key to forget; the claim's `$8` the lease's seconds.
const PENDING: &str = "p AS (
       SELECT channel, event_id, payload, state, reply, updated_at, attempts, platform_seq, seq
       FROM inbound_events
       WHERE session_key = $1 AND state IN ('received', 'processing', 'sending')
         AND event_id <> ALL($4))";

/// Take the lease (only when something is pending), mark the over-tried failed, forget `$7`,
/// and return `taken` with the events left, in the platform's order.
fn claim_sql() -> String {
    format!(
        "WITH {PENDING},
         lease AS (
           INSERT INTO leases (name, holder, expires_at)
           SELECT $2, $3, now() + make_interval(secs => $8) WHERE EXISTS (SELECT 1 FROM p)
           ON CONFLICT (name) DO UPDATE
             SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
             WHERE leases.holder = EXCLUDED.holder OR leases.expires_at < now()
           RETURNING holder),
         failed AS (
           UPDATE inbound_events e SET state = 'failed', updated_at = $5 FROM p
           WHERE e.channel = p.channel AND e.event_id = p.event_id
             AND p.state IN ('received', 'processing') AND p.attempts >= $6
             AND EXISTS (SELECT 1 FROM lease)
           RETURNING e.channel, e.event_id),
         forgot AS (DELETE FROM kv WHERE key = $7 AND EXISTS (SELECT 1 FROM lease))
         SELECT EXISTS (SELECT 1 FROM lease), p.channel, p.event_id, p.payload, p.state,
                p.reply, p.updated_at
         FROM (SELECT 1) AS one
         LEFT JOIN p ON EXISTS (SELECT 1 FROM lease)
           AND NOT EXISTS (SELECT 1 FROM failed f
                           WHERE f.channel = p.channel AND f.event_id = p.event_id)
         ORDER BY p.platform_seq, p.seq"
    )
}

/// Mark the over-tried failed; when nothing else is pending let the lease go, else forget
/// `$7`; return `released` with the events left, in the platform's order.
fn release_sql() -> String {
    format!(
        "WITH {PENDING},
         failed AS (
           UPDATE inbound_events e SET state = 'failed', updated_at = $5 FROM p
           WHERE e.channel = p.channel AND e.event_id = p.event_id
             AND p.state IN ('received', 'processing') AND p.attempts >= $6
           RETURNING e.channel, e.event_id),
         live AS (
           SELECT * FROM p WHERE NOT EXISTS (
             SELECT 1 FROM failed f WHERE f.channel = p.channel AND f.event_id = p.event_id)),
         released AS (
           DELETE FROM leases WHERE name = $2 AND holder = $3
             AND NOT EXISTS (SELECT 1 FROM live)
           RETURNING 1),
         forgot AS (DELETE FROM kv WHERE key = $7 AND EXISTS (SELECT 1 FROM live))
         SELECT NOT EXISTS (SELECT 1 FROM live), live.channel, live.event_id, live.payload,
                live.state, live.reply, live.updated_at
         FROM (SELECT 1) AS one LEFT JOIN live ON TRUE
         ORDER BY live.platform_seq, live.seq"
    )
}

/// What the pump asks of both statements.
pub(super) struct Ask<'a> {
    pub session_key: &'a str,
    pub lease: &'a str,
    pub holder: &'a str,
    pub secs: u64,
    pub handled: &'a [String],
    pub forget: &'a str,
}

/// [`crate::store::ReplicaStore::claim_pending`] on PostgreSQL.
pub(super) async fn claim(
    client: &deadpool_postgres::Object,
    ask: &Ask<'_>,
) -> Result<Option<Vec<Pending>>, StoreError> {
    let (flag, events) = run(client, &claim_sql(), ask, true).await?;
    Ok(flag.then_some(events))
}

/// [`crate::store::ReplicaStore::release_if_idle`] on PostgreSQL.
pub(super) async fn release_if_idle(
    client: &deadpool_postgres::Object,
    ask: &Ask<'_>,
) -> Result<Option<Vec<Pending>>, StoreError> {
    let (released, events) = run(client, &release_sql(), ask, false).await?;
    Ok((!released).then_some(events))
}

/// Run one of the statements: its flag (first column) and the events of its rows.
async fn run(
    client: &deadpool_postgres::Object,
    sql: &str,
    ask: &Ask<'_>,
    with_secs: bool,
) -> Result<(bool, Vec<Pending>), StoreError> {
    let op = "claim session";
    let stmt = client
        .prepare_cached(sql)
        .await
        .map_err(|e| pg_error(op, &e))?;
    let (at, secs) = (now(), ask.secs as f64);
    let mut params: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = vec![
        &ask.session_key,
        &ask.lease,
        &ask.holder,
        &ask.handled,
        &at,
        &MAX_ATTEMPTS,
        &ask.forget,
    ];
    if with_secs {
        params.push(&secs);
    }
    let rows = client
        .query(&stmt, &params)
        .await
        .map_err(|e| pg_error(op, &e))?;
    let flag = match rows.first() {
        Some(r) => r.try_get(0).map_err(|e| pg_error(op, &e))?,
        None => false,
    };
    let mut out = Vec::new();
    for r in &rows {
        let channel: Option<String> = r.try_get(1).map_err(|e| pg_error(op, &e))?;
        if channel.is_none() {
            continue;
        }
        if let Some(p) = pending_of(client, r, 1).await? {
            out.push(p);
        }
    }
    Ok((flag, out))
}

/// The pending event of a row of `channel, event_id, payload, state, reply, updated_at`
/// starting at column `at`; an unreadable one is marked failed (logged) and `None`.
pub(super) async fn pending_of(
    client: &deadpool_postgres::Object,
    r: &tokio_postgres::Row,
    at: usize,
) -> Result<Option<Pending>, StoreError> {
    let op = "scan inbound";
    let get = |e: tokio_postgres::Error| pg_error(op, &e);
    let channel: String = r.try_get(at).map_err(get)?;
    let event_id: String = r.try_get(at + 1).map_err(get)?;
    let payload: String = r.try_get(at + 2).map_err(get)?;
    let state: String = r.try_get(at + 3).map_err(get)?;
    let reply: Option<String> = r.try_get(at + 4).map_err(get)?;
    let since: i64 = r.try_get(at + 5).map_err(get)?;
    let event = match serde_json::from_str::<InboundEvent>(&payload) {
        Ok(ev) => ev,
        Err(e) => {
            tracing::warn!("{channel} event {event_id} is unreadable ({e}); marking it failed");
            mark_failed(client, &channel, &event_id).await?;
            return Ok(None);
        }
    };
    Ok(match (state.as_str(), reply) {
        ("sending", Some(reply)) => Some(Pending::Reply(UnconfirmedReply {
            event,
            reply,
            since,
        })),
        ("sending", None) => {
            tracing::warn!(
                "{channel} event {event_id} was sending a reply, but no reply text was stored; \
                 marking it failed"
            );
            mark_failed(client, &channel, &event_id).await?;
            None
        }
        (state, _) => Some(Pending::Turn {
            event,
            resumed: state == "processing",
        }),
    })
}

pub(super) async fn mark_failed(
    client: &deadpool_postgres::Object,
    channel: &str,
    event_id: &str,
) -> Result<(), StoreError> {
    client
        .execute(
            "UPDATE inbound_events SET state = 'failed', updated_at = $3
             WHERE channel = $1 AND event_id = $2",
            &[&channel, &event_id, &now()],
        )
        .await
        .map_err(|e| pg_error("update inbound", &e))?;
    Ok(())
}
