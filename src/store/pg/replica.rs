//! Replicas on PostgreSQL ([`ReplicaStore`]): leases in the `leases` table, timed by the
//! server's clock (`now()`), so the replicas' own clocks do not matter. Taking a lease is one
//! upsert that succeeds only when the lease is free, expired, or already the taker's; the
//! primary key makes two takers exclude each other.

use super::errors::pg_error;
use super::{claim, PgStore, StoreError};
use crate::store::backend::{Pending, ReplicaStore};
use crate::store::inbound::MAX_ATTEMPTS;
use crate::store::now;
use async_trait::async_trait;

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
        // One statement: the over-tried marked failed, the rest returned in the platform's
        // order (the event's `seq`, in a column: the payload is never cast to jsonb, which
        // refuses text holding U+0000), then arrival. The select reads the snapshot from before
        // the update, so the events it marked are left out by name.
        let stmt = client
            .prepare_cached(
                "WITH failed AS (
                   UPDATE inbound_events SET state = 'failed', updated_at = $3
                   WHERE session_key = $1 AND state IN ('received', 'processing')
                     AND attempts >= $2
                   RETURNING channel, event_id)
                 SELECT channel, event_id, payload, state, reply, updated_at FROM inbound_events e
                 WHERE session_key = $1 AND state IN ('received', 'processing', 'sending')
                   AND NOT EXISTS (SELECT 1 FROM failed f
                                   WHERE f.channel = e.channel AND f.event_id = e.event_id)
                 ORDER BY platform_seq, seq",
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let rows = client
            .query(&stmt, &[&session_key, &MAX_ATTEMPTS, &now()])
            .await
            .map_err(|e| pg_error(op, &e))?;
        let mut out = Vec::new();
        for r in &rows {
            if let Some(p) = claim::pending_of(&client, r, 0).await? {
                out.push(p);
            }
        }
        Ok(out)
    }

    async fn claim_pending(
        &self,
        session_key: &str,
        lease: &str,
        holder: &str,
        secs: u64,
        handled: &[String],
        forget: &str,
    ) -> Result<Option<Vec<Pending>>, StoreError> {
        let client = self.client("claim session").await?;
        let ask = claim::Ask {
            session_key,
            lease,
            holder,
            secs,
            handled,
            forget,
        };
        claim::claim(&client, &ask).await
    }

    async fn release_if_idle(
        &self,
        session_key: &str,
        lease: &str,
        holder: &str,
        handled: &[String],
        forget: &str,
    ) -> Result<Option<Vec<Pending>>, StoreError> {
        let client = self.client("claim session").await?;
        let ask = claim::Ask {
            session_key,
            lease,
            holder,
            secs: 0,
            handled,
            forget,
        };
        claim::release_if_idle(&client, &ask).await
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
