//! Replicas on PostgreSQL ([`ReplicaStore`]): leases in the `leases` table, timed by the
//! server's clock (`now()`), so the replicas' own clocks do not matter. Taking a lease is one
//! upsert that succeeds only when the lease is free, expired, or already the taker's; the
//! primary key makes two takers exclude each other.

use super::errors::pg_error;
use super::{PgStore, StoreError};
use crate::store::backend::{Pending, ReplicaStore};
use crate::store::inbound::{UnconfirmedReply, MAX_ATTEMPTS};
use crate::store::now;
use async_trait::async_trait;
use ethan_channels::InboundEvent;

#[async_trait]
impl ReplicaStore for PgStore {
    fn replicated(&self) -> bool {
        true
    }

    async fn try_lease(&self, name: &str, holder: &str, secs: u64) -> Result<bool, StoreError> {
        let op = "take lease";
        let client = self.client(op).await?;
        let row = client
            .query_opt(
                "INSERT INTO leases (name, holder, expires_at)
                 VALUES ($1, $2, now() + make_interval(secs => $3))
                 ON CONFLICT (name) DO UPDATE
                   SET holder = EXCLUDED.holder, expires_at = EXCLUDED.expires_at
                   WHERE leases.holder = EXCLUDED.holder OR leases.expires_at < now()
                 RETURNING holder",
                &[&name, &holder, &(secs as f64)],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(row.is_some())
    }

    async fn renew_leases(
        &self,
        names: &[String],
        holder: &str,
        secs: u64,
    ) -> Result<Vec<String>, StoreError> {
        let op = "renew leases";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "UPDATE leases SET expires_at = now() + make_interval(secs => $3)
                 WHERE name = ANY($1) AND holder = $2 AND expires_at > now() RETURNING name",
                &[&names, &holder, &(secs as f64)],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let kept: Vec<String> = rows.iter().filter_map(|r| r.try_get(0).ok()).collect();
        Ok(names
            .iter()
            .filter(|n| !kept.contains(n))
            .cloned()
            .collect())
    }

    async fn confirm_lease(&self, name: &str, holder: &str, secs: u64) -> Result<bool, StoreError> {
        let op = "confirm lease";
        let client = self.client(op).await?;
        let row = client
            .query_opt(
                "UPDATE leases SET expires_at = now() + make_interval(secs => $3)
                 WHERE name = $1 AND holder = $2 AND expires_at > now() RETURNING name",
                &[&name, &holder, &(secs as f64)],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(row.is_some())
    }

    async fn release_lease(&self, name: &str, holder: &str) -> Result<(), StoreError> {
        let op = "release lease";
        let client = self.client(op).await?;
        client
            .execute(
                "DELETE FROM leases WHERE name = $1 AND holder = $2",
                &[&name, &holder],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(())
    }

    async fn pending_inbound(&self, session_key: &str) -> Result<Vec<Pending>, StoreError> {
        let op = "scan inbound";
        let client = self.client(op).await?;
        client
            .execute(
                "UPDATE inbound_events SET state = 'failed', updated_at = $3
                 WHERE session_key = $1 AND state IN ('received', 'processing')
                   AND attempts >= $2",
                &[&session_key, &MAX_ATTEMPTS, &now()],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        // The platform's order (the event's `seq`, in a column: the payload is never cast to
        // jsonb, which refuses text holding U+0000), then arrival.
        let rows = client
            .query(
                "SELECT channel, event_id, payload, state, reply, updated_at FROM inbound_events
                 WHERE session_key = $1 AND state IN ('received', 'processing', 'sending')
                 ORDER BY platform_seq, seq",
                &[&session_key],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let mut out = Vec::new();
        for r in &rows {
            let get = |e: tokio_postgres::Error| pg_error(op, &e);
            let channel: String = r.try_get(0).map_err(get)?;
            let event_id: String = r.try_get(1).map_err(get)?;
            let payload: String = r.try_get(2).map_err(get)?;
            let state: String = r.try_get(3).map_err(get)?;
            let reply: Option<String> = r.try_get(4).map_err(get)?;
            let since: i64 = r.try_get(5).map_err(get)?;
            let event = match serde_json::from_str::<InboundEvent>(&payload) {
                Ok(ev) => ev,
                Err(e) => {
                    tracing::warn!(
                        "{channel} event {event_id} is unreadable ({e}); marking it failed"
                    );
                    mark_failed(&client, &channel, &event_id).await?;
                    continue;
                }
            };
            match (state.as_str(), reply) {
                ("sending", Some(reply)) => out.push(Pending::Reply(UnconfirmedReply {
                    event,
                    reply,
                    since,
                })),
                ("sending", None) => {
                    tracing::warn!(
                        "{channel} event {event_id} was sending a reply, but no reply text was \
                         stored; marking it failed"
                    );
                    mark_failed(&client, &channel, &event_id).await?;
                }
                (state, _) => out.push(Pending::Turn {
                    event,
                    resumed: state == "processing",
                }),
            }
        }
        Ok(out)
    }

    async fn lease_holders(&self) -> Result<Vec<(String, String)>, StoreError> {
        let op = "read leases";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT name, holder FROM leases WHERE expires_at > now() ORDER BY name",
                &[],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(rows
            .iter()
            .filter_map(|r| Some((r.try_get(0).ok()?, r.try_get(1).ok()?)))
            .collect())
    }

    async fn unleased_sessions(&self) -> Result<Vec<String>, StoreError> {
        let op = "scan inbound";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT e.session_key FROM inbound_events e
                 WHERE e.state IN ('received', 'processing', 'sending')
                   AND NOT EXISTS (
                     SELECT 1 FROM leases l
                     WHERE l.name = 'session:' || e.session_key AND l.expires_at > now())
                 GROUP BY e.session_key
                 ORDER BY MIN(e.received_at), MIN(e.seq)
                 LIMIT 1000",
                &[],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok(rows.iter().filter_map(|r| r.try_get(0).ok()).collect())
    }
}

async fn mark_failed(
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
