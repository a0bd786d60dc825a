//! The PostgreSQL store's identity and housekeeping ([`StoreAdmin`]): backend `postgresql`,
//! `host:port/dbname`, the server's version, the schema version. Nothing to checkpoint.

use super::errors::pg_error;
use super::{migrations, PgStore, StoreError, SCHEMA_VERSION};
use crate::store::{BackendInfo, DaemonStoreRef, StoreAdmin};
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

    /// This handle as the daemon's store handle.
    pub fn daemon(&self) -> DaemonStoreRef {
        std::sync::Arc::new(self.clone())
    }
}

#[async_trait]
impl StoreAdmin for PgStore {
    async fn backend_info(&self) -> Result<BackendInfo, StoreError> {
        Ok(BackendInfo {
            backend: "postgresql",
            location: self.location().to_owned(),
            server_version: format!("PostgreSQL {}", self.server_version().await?),
            schema_version: self.schema_version().await?,
            binary_schema_version: SCHEMA_VERSION,
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
