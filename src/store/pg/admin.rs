//! The PostgreSQL store's identity and housekeeping ([`StoreAdmin`]): backend `postgresql`,
//! `host:port/dbname`, the server's version, the schema version. Nothing to checkpoint.

use super::errors::pg_error;
use super::{migrations, PgStore, StoreError, SCHEMA_VERSION};
use crate::store::sessions::like_prefix;
use crate::store::{BackendInfo, DaemonStoreRef, SessionSummary, StoreAdmin};
use async_trait::async_trait;

impl PgStore {
    /// The server's version as `SHOW server_version` gives it (`15.18 (Debian 15.18-0+deb12u1)`).
    pub async fn server_version(&self) -> Result<String, StoreError> {
        let op = "server version";
        let client = self.client(op).await?;
        let row = client
            .query_one("SHOW server_version", &[])
            .await
            .map_err(|e| pg_error(op, &e))?;
        row.try_get(0).map_err(|e| pg_error(op, &e))
    }

    /// How this store's connections are protected, as the server sees one of them
    /// (`pg_stat_ssl`): "encrypted (TLSv1.3), verified (sslmode=verify-full, CA …)", or "not
    /// encrypted (…)". A connection the server reports as plain text although TLS was asked
    /// for is an error (it cannot happen: the client refuses it).
    pub async fn connection_security(&self) -> Result<String, StoreError> {
        let op = "connection security";
        let client = self.client(op).await?;
        let row = client
            .query_opt(
                "SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()",
                &[],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let (ssl, version): (bool, Option<String>) = match row {
            Some(r) => (
                r.try_get(0).map_err(|e| pg_error(op, &e))?,
                r.try_get(1).map_err(|e| pg_error(op, &e))?,
            ),
            None => (false, None),
        };
        let asked = self.tls().mode != super::tls::SslMode::Disable;
        if asked && !ssl {
            return Err(StoreError::Backend {
                op,
                message: "the server reports this connection as not encrypted although \
                          store.url asks for TLS"
                    .into(),
            });
        }
        Ok(self.tls().describe(version.as_deref()))
    }

    /// This handle as the daemon's store handle.
    pub fn daemon(&self) -> DaemonStoreRef {
        std::sync::Arc::new(self.clone())
    }
}

#[async_trait]
impl StoreAdmin for PgStore {
    async fn list_sessions(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<SessionSummary>, StoreError> {
        let op = "list sessions";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT s.key, s.created_at,
                    COALESCE((SELECT MAX(m.created_at) FROM messages m WHERE m.session_id = s.id),
                             s.created_at) AS updated,
                    (SELECT m.content FROM messages m
                      WHERE m.session_id = s.id AND m.role = 'user' ORDER BY m.id LIMIT 1)
                 FROM sessions s
                 WHERE s.active AND s.key LIKE $1 ESCAPE '\\'
                 ORDER BY updated DESC, s.created_at DESC LIMIT $2",
                &[&like_prefix(prefix), &(limit as i64)],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter()
            .map(|r| {
                Ok(SessionSummary {
                    key: r.try_get(0).map_err(|e| pg_error(op, &e))?,
                    created_at: r.try_get(1).map_err(|e| pg_error(op, &e))?,
                    updated_at: r.try_get(2).map_err(|e| pg_error(op, &e))?,
                    title: r.try_get(3).map_err(|e| pg_error(op, &e))?,
                })
            })
            .collect()
    }

    async fn backend_info(&self) -> Result<BackendInfo, StoreError> {
        Ok(BackendInfo {
            backend: "postgresql",
            location: self.location().to_owned(),
            server_version: format!("PostgreSQL {}", self.server_version().await?),
            schema_version: self.schema_version().await?,
            binary_schema_version: SCHEMA_VERSION,
            connection: Some(self.connection_security().await?),
        })
    }

    async fn schema_version(&self) -> Result<i64, StoreError> {
        let op = "schema version";
        let client = self.client(op).await?;
        migrations::current_version(&**client)
            .await
            .map_err(|e| pg_error(op, &e))
    }
}
