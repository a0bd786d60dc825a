//! The PostgreSQL store (`store.url: postgres://…`, feature `postgres`): the same tables and
//! the same semantics as the SQLite store ([`super::Store`]), for several replicas sharing one
//! database. [`PgStore`] is a pool of connections (`tokio-postgres` + `deadpool-postgres`); every
//! statement is async, so nothing blocks a runtime thread.
//!
//! One concern per file, as for SQLite: [`sessions`], [`messages`], [`inbound`], [`kv`],
//! [`audit`], [`jobs`], [`owners`], [`usage`], [`replica`] (leases for replicas); [`admin`] (backend identity); [`migrations`] builds the schema under an
//! advisory lock; [`errors`] turns the client's errors into [`StoreError`]s that say what failed
//! and why; [`import`] copies a SQLite store in (`ethan store migrate`); [`cluster`] starts a throwaway server for tests and benchmarks; [`knowledge`] is the
//! knowledge index, shared by the replicas.
//!
//! Where the engines differ, the SQLite behaviour is kept: a `LIMIT` beyond `i64::MAX` means no
//! limit, `INSERT OR IGNORE` is `ON CONFLICT DO NOTHING`, `IS` is `IS NOT DISTINCT FROM`, rows
//! listed "in insertion order" are ordered by an identity column. One difference cannot be
//! hidden: PostgreSQL text cannot hold the character U+0000, so free text (message contents,
//! tool output, replies, kv values) is stored with each U+0000 replaced by U+FFFD.

pub mod admin;
pub mod audit;
mod claim;
pub mod cluster;
pub mod errors;
pub mod import;
pub mod inbound;
pub mod jobs;
pub mod knowledge;
pub mod kv;
pub mod memory;
pub mod messages;
mod migrations;
pub mod owners;
pub mod replica;
pub mod sessions;
#[cfg(test)]
pub(crate) mod tests;
pub mod tls;
mod turn_end;
pub mod usage;

pub use migrations::SCHEMA_VERSION;

use super::StoreError;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use errors::connect_error;
use std::borrow::Cow;
use std::time::Duration;
use tokio_postgres::config::{Host, SslMode};

/// Connections in the pool: enough for the daemon's concurrent turns, few enough that three
/// replicas stay far below PostgreSQL's default `max_connections` (100).
pub const POOL_SIZE: usize = 8;

/// How long opening one connection may take when the URL sets no `connect_timeout`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A handle to a PostgreSQL database: a pool of connections. Cloning shares the pool.
#[derive(Clone)]
pub struct PgStore {
    pool: Pool,
    location: String,
    tls: std::sync::Arc<tls::Tls>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("location", &self.location)
            .finish()
    }
}

impl PgStore {
    /// Connect to `url` (`postgres://user:password@host:port/dbname?sslmode=require`, or the
    /// `key=value` form), check that the server answers, and migrate the schema (under an
    /// advisory lock, so replicas starting together apply each step once).
    ///
    /// TLS: libpq's `sslmode` (`disable`, `require`, `verify-ca`, `verify-full`; `prefer` is
    /// `require`, never plain text) and `sslrootcert` (a PEM file of CAs), read by [`tls`]. No
    /// `sslmode` is plain text, with a warning when the host is not this machine.
    ///
    /// Errors: [`StoreError::Backend`] with op `connect` for a bad URL, an unreachable server
    /// ("connection refused to 127.0.0.1:5432") or refused credentials ("password
    /// authentication failed for user …"); op `migrate` when the schema is newer than this
    /// build's [`SCHEMA_VERSION`] or a step fails.
    pub async fn connect(url: &str) -> Result<PgStore, StoreError> {
        let (url, tls) = tls::split(url)?;
        let mut config: tokio_postgres::Config = url.parse().map_err(|e| StoreError::Backend {
            op: "connect",
            message: format!("the PostgreSQL URL is not valid: {}", errors::chain(&e)),
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(CONNECT_TIMEOUT);
        }
        if config.get_application_name().is_none() {
            config.application_name("ethan");
        }
        let location = location(&config);
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = if tls.mode == tls::SslMode::Disable {
            if !is_local(&config) {
                tracing::warn!(
                    server = %location,
                    "the connection to PostgreSQL is not encrypted: add ?sslmode=verify-full \
                     (with sslrootcert=CA.pem) to store.url"
                );
            }
            config.ssl_mode(SslMode::Disable);
            Manager::from_config(config, tokio_postgres::NoTls, manager_config)
        } else {
            config.ssl_mode(SslMode::Require);
            Manager::from_config(config, tls::connector(&tls)?, manager_config)
        };
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(Duration::from_secs(30)))
            .build()
            .map_err(|e| StoreError::Backend {
                op: "connect",
                message: format!("cannot build the connection pool: {e}"),
            })?;
        let store = PgStore {
            pool,
            location,
            tls: std::sync::Arc::new(tls),
        };
        {
            let mut client = store
                .pool
                .get()
                .await
                .map_err(|e| connect_error("connect", &store.location, e))?;
            migrations::migrate(&mut client).await?;
        }
        Ok(store)
    }

    /// `host:port/dbname` of the server (never the user or the password).
    pub fn location(&self) -> &str {
        &self.location
    }

    /// The TLS settings the connections were opened with.
    pub fn tls(&self) -> &tls::Tls {
        &self.tls
    }

    /// One connection from the pool. Errors: [`StoreError::Backend`] naming the server when no
    /// connection could be opened (or none freed up within 30 s).
    pub(crate) async fn client(
        &self,
        op: &'static str,
    ) -> Result<deadpool_postgres::Object, StoreError> {
        self.pool
            .get()
            .await
            .map_err(|e| connect_error(op, &self.location, e))
    }
}

/// `host:port/dbname` of a parsed URL: the first host (a Unix socket directory as its path).
fn location(config: &tokio_postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(Host::Tcp(h)) => h.clone(),
        Some(Host::Unix(p)) => p.display().to_string(),
        None => "localhost".into(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let db = config
        .get_dbname()
        .or(config.get_user())
        .unwrap_or("postgres");
    format!("{host}:{port}/{db}")
}

/// Whether the first host of a parsed URL is this machine (a Unix socket, `localhost`, a
/// loopback address).
fn is_local(config: &tokio_postgres::Config) -> bool {
    match config.get_hosts().first() {
        None | Some(Host::Unix(_)) => true,
        Some(Host::Tcp(h)) => {
            h == "localhost"
                || h.trim_matches(|c| c == '[' || c == ']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
    }
}

/// Free text as PostgreSQL can store it: U+0000 (which `text` cannot hold) becomes U+FFFD.
pub(crate) fn text(s: &str) -> Cow<'_, str> {
    if s.contains('\0') {
        Cow::Owned(s.replace('\0', "\u{FFFD}"))
    } else {
        Cow::Borrowed(s)
    }
}

/// [`text`] of an optional value.
pub(crate) fn opt_text(s: Option<&str>) -> Option<Cow<'_, str>> {
    s.map(text)
}

/// A count or limit as PostgreSQL's `BIGINT`; beyond `i64::MAX` (SQLite's "no limit" of a
/// negative limit) it is `i64::MAX`.
pub(crate) fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod unit {
    use super::*;

    #[test]
    fn the_location_names_host_port_and_database_never_the_password() {
        let c: tokio_postgres::Config = "postgres://ethan:s3cret@db.internal:6543/bot"
            .parse()
            .unwrap();
        assert_eq!(location(&c), "db.internal:6543/bot");
        let c: tokio_postgres::Config = "host=/run/postgresql user=ethan password=x"
            .parse()
            .unwrap();
        assert_eq!(location(&c), "/run/postgresql:5432/ethan");
    }

    #[test]
    fn text_without_nul_is_borrowed_and_nul_is_replaced() {
        assert!(matches!(text("plain"), Cow::Borrowed("plain")));
        assert_eq!(text("a\0b"), "a\u{FFFD}b");
        assert_eq!(limit(usize::MAX), i64::MAX);
    }
}
