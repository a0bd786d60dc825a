//! Storage: one SQLite file (`$ETHAN_HOME/ethan.db`, WAL, `synchronous=NORMAL`, foreign keys on)
//! whose schema comes from versioned migrations ([`migrations`]). One concern per file:
//! [`sessions`] (session key → current session), [`messages`] (the full model conversation,
//! tool calls and results included), [`inbound`] (platform events: dedupe and delivery state),
//! [`kv`] (small state such as the Telegram offset).
//!
//! The connection sits behind a mutex; every call is a short statement or transaction, so the
//! async callers hold it only briefly.

pub mod audit;
pub mod inbound;
pub mod jobs;
pub mod knowledge;
pub mod kv;
pub mod messages;
mod migrations;
pub mod owners;
pub mod sessions;

use rusqlite::Connection;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// A storage failure; the text says which operation failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database {op}: {}", describe_sqlite(source))]
    Sqlite {
        op: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    #[error("database {op}: stored data is unreadable: {message}")]
    Corrupt { op: &'static str, message: String },
    /// The file opened, but only for reading (file permissions, a read-only mount, or a
    /// `mode=ro` URI); the daemon must write it, so this is refused at open.
    #[error(
        "the database {path} is read-only: ethan must be able to write it (check the file's owner \
         and permissions, and that its file system is mounted read-write)"
    )]
    ReadOnly { path: String },
    #[error("cannot create {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

pub(crate) trait Ctx<T> {
    fn op(self, op: &'static str) -> Result<T, StoreError>;
}

impl<T> Ctx<T> for Result<T, rusqlite::Error> {
    fn op(self, op: &'static str) -> Result<T, StoreError> {
        self.map_err(|source| StoreError::Sqlite { op, source })
    }
}

/// How long a statement waits for another connection's lock before failing with "locked".
pub const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// SQLite's text, plus what "busy"/"locked" means here: another process (or connection) holds
/// the database's write lock, e.g. a `sqlite3` shell with an open transaction.
fn describe_sqlite(e: &rusqlite::Error) -> String {
    match e.sqlite_error_code() {
        Some(rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked) => format!(
            "{e} (another process held the database's write lock for more than {}s)",
            BUSY_TIMEOUT.as_secs()
        ),
        Some(rusqlite::ErrorCode::ReadOnly) => format!("{e} (the database file is read-only)"),
        _ => e.to_string(),
    }
}

/// The database handle. Cloning shares the connection.
#[derive(Clone)]
pub struct Store {
    conn: Arc<Mutex<Connection>>,
}

impl Store {
    /// Open (creating the file and its directory if needed) and migrate.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Io {
                path: dir.display().to_string(),
                source,
            })?;
        }
        let conn = Connection::open(path).op("open")?;
        // SQLite silently falls back to read-only when it may not write the file; every write
        // would then fail later. Refuse now, naming the file.
        if conn.is_readonly(rusqlite::MAIN_DB).op("open")? {
            return Err(StoreError::ReadOnly {
                path: path.display().to_string(),
            });
        }
        Self::init(conn)
    }

    /// An in-memory database (tests, benchmarks).
    pub fn open_in_memory() -> Result<Self, StoreError> {
        Self::init(Connection::open_in_memory().op("open")?)
    }

    fn init(conn: Connection) -> Result<Self, StoreError> {
        conn.busy_timeout(BUSY_TIMEOUT).op("busy_timeout")?;
        // The statements of a turn are prepared once and reused: parsing SQL showed up as
        // several per cent of the daemon's CPU per turn in a profile.
        conn.set_prepared_statement_cache_capacity(64);
        conn.pragma_update(None, "journal_mode", "WAL").op("WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .op("synchronous")?;
        conn.pragma_update(None, "foreign_keys", "ON")
            .op("foreign_keys")?;
        let mut conn = conn;
        migrations::migrate(&mut conn)?;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    pub(crate) fn conn(&self) -> MutexGuard<'_, Connection> {
        // A panic while holding the lock cannot leave SQLite inconsistent (statements are
        // atomic), so a poisoned lock is still usable.
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Write the WAL back into the database file (at shutdown).
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.conn()
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .op("checkpoint")
    }

    /// Move WAL checkpoints off the request path (the daemon): automatic checkpoints, which
    /// SQLite runs inside whichever commit crosses 1,000 WAL pages and which end in an `fsync`
    /// of the database file (milliseconds, the tail of a turn's latency), are turned off for
    /// this handle, and a thread with its own connection to `path` runs a `PASSIVE` checkpoint
    /// every `every` instead (it never blocks writers). Durability is unchanged (WAL,
    /// `synchronous=NORMAL`). Errors: opening the second connection; if the thread cannot be
    /// started, automatic checkpoints stay on (logged).
    pub fn checkpoint_in_background(
        &self,
        path: &Path,
        every: std::time::Duration,
    ) -> Result<(), StoreError> {
        let bg = Connection::open(path).op("open")?;
        bg.busy_timeout(BUSY_TIMEOUT).op("busy_timeout")?;
        let spawned = std::thread::Builder::new()
            .name("ethan-checkpoint".into())
            .spawn(move || loop {
                std::thread::sleep(every);
                if let Err(e) = bg.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(())) {
                    tracing::warn!("background WAL checkpoint failed: {}", describe_sqlite(&e));
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the checkpoint thread ({e}); SQLite checkpoints as usual");
            return Ok(());
        }
        self.conn()
            .pragma_update(None, "wal_autocheckpoint", 0)
            .op("wal_autocheckpoint")
    }

    /// The schema version (number of applied migrations).
    pub fn schema_version(&self) -> Result<i64, StoreError> {
        self.conn()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .op("schema version")
    }
}

/// Unix time in seconds.
pub(crate) fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn checkpoints_move_to_the_background_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ethan.db");
        let store = Store::open(&path).unwrap();
        store
            .checkpoint_in_background(&path, Duration::from_millis(50))
            .unwrap();
        let auto: i64 = store
            .conn()
            .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
            .unwrap();
        assert_eq!(auto, 0, "commits no longer checkpoint");
        let before = std::fs::metadata(&path).unwrap().len();
        let value = "x".repeat(2_000);
        for i in 0..500 {
            store.kv_set(&format!("k{i}"), &value).unwrap();
        }
        // Only the background thread writes pages back into the database file now.
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::fs::metadata(&path).unwrap().len() <= before {
            assert!(Instant::now() < deadline, "the database file never grew");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(store.kv_get("k499").unwrap().as_deref(), Some(&*value));
    }
}
