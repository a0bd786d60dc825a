//! Storage: one SQLite file (`$ETHAN_HOME/ethan.db`, WAL, `synchronous=NORMAL`, foreign keys on)
//! whose schema comes from versioned migrations ([`migrations`]). One concern per file:
//! [`sessions`] (session key → current session), [`messages`] (the full model conversation,
//! tool calls and results included), [`inbound`] (platform events: dedupe and delivery state),
//! [`kv`] (small state such as the Telegram offset), [`audit`], [`jobs`], [`owners`],
//! [`knowledge`] (the knowledge index in SQLite; [`knowledge_index`] is the trait both stores'
//! indexes implement, [`knowledge_query`] the query they take), [`usage`] (the tokens of every model call), [`memory`] (long-term facts, history search); [`traits`] implements the store traits of
//! [`ethan_core::store`] on top of them.
//!
//! The connection lives on a thread of its own ([`Store`] is a handle to it): async code sends a
//! closure there and awaits the answer ([`Store::call`]), so a statement — even one waiting up
//! to [`BUSY_TIMEOUT`] for another process's lock — never blocks a runtime worker thread. Code
//! that is already off the runtime (the knowledge indexer, one-shot CLI commands) waits for the
//! answer in place ([`Store::call_blocking`]). Statements run one at a time, in the order sent.

pub mod audit;
pub mod backend;
#[cfg(test)]
mod conformance;
pub mod inbound;
pub mod jobs;
pub mod knowledge;
pub mod knowledge_index;
pub mod knowledge_query;
pub mod kv;
pub mod memory;
pub mod messages;
mod migrations;
pub mod owners;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod sessions;
mod traits;
pub mod usage;

pub use backend::{
    session_lease, BackendInfo, DaemonStore, DaemonStoreRef, InboundStore, OpenStore, Pending,
    ReplicaStore, SessionSummary, SharedStorage, StoreAdmin,
};
pub use ethan_channels::KvState;

/// The store traits, for code that calls them on a [`Store`].
pub mod prelude {
    pub use super::backend::{InboundStore, SharedStorage, StoreAdmin};
    pub use ethan_core::store::{
        AuditStore, JobStore, KvStore, MemoryStore, MessageStore, OwnerStore, SessionStore,
        UsageStore,
    };
}

pub use ethan_core::store::StoreError;
use rusqlite::Connection;
use std::cell::{RefCell, RefMut};
use std::path::Path;
use std::sync::mpsc;

pub(crate) trait Ctx<T> {
    fn op(self, op: &'static str) -> Result<T, StoreError>;
}

impl<T> Ctx<T> for Result<T, rusqlite::Error> {
    fn op(self, op: &'static str) -> Result<T, StoreError> {
        self.map_err(|e| StoreError::Backend {
            op,
            message: describe_sqlite(&e),
        })
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

/// A job for the connection thread.
type Job = Box<dyn FnOnce(&Db) + Send>;

/// The database handle: a channel to the thread that owns the connection. Cloning shares the
/// connection; the thread ends (closing the database) when the last handle is dropped.
#[derive(Clone)]
pub struct Store {
    jobs: mpsc::Sender<Job>,
}

impl Store {
    /// Open (creating the file and its directory if needed) and migrate, then start the
    /// connection thread.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        Self::start(Db::open(path)?)
    }

    /// An in-memory database (tests, benchmarks).
    pub fn open_in_memory() -> Result<Self, StoreError> {
        Self::start(Db::open_in_memory()?)
    }

    fn start(db: Db) -> Result<Self, StoreError> {
        let (jobs, rx) = mpsc::channel::<Job>();
        std::thread::Builder::new()
            .name("ethan-db".into())
            .spawn(move || {
                for job in rx {
                    // A panic in one statement's closure fails that call (its caller sees the
                    // store as closed for it); the thread and the connection go on.
                    if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| job(&db))).is_err()
                    {
                        tracing::error!("a database statement panicked; the store goes on");
                    }
                }
            })
            .map_err(|e| StoreError::Io {
                path: "the database thread".into(),
                message: e.to_string(),
            })?;
        Ok(Self { jobs })
    }

    /// Run `f` on the connection thread and await its answer. Never blocks the caller's thread.
    /// Errors: `f`'s own, or [`StoreError::Closed`] when the thread is gone.
    pub async fn call<R, F>(&self, op: &'static str, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Db) -> Result<R, StoreError> + Send + 'static,
    {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.jobs
            .send(Box::new(move |db| {
                let _ = tx.send(f(db));
            }))
            .map_err(|_| StoreError::Closed { op })?;
        rx.await.map_err(|_| StoreError::Closed { op })?
    }

    /// Queue `f` on the connection thread without waiting for it: it runs after every call made
    /// before and before every call made after (one thread takes the jobs in order), so the
    /// caller's next call of this store sees its write. A failure is logged there.
    pub fn post<F>(&self, op: &'static str, f: F)
    where
        F: FnOnce(&Db) -> Result<(), StoreError> + Send + 'static,
    {
        let job: Job = Box::new(move |db| {
            if let Err(e) = f(db) {
                tracing::error!("{op}: {e}");
            }
        });
        if self.jobs.send(job).is_err() {
            tracing::error!("{op}: the store is closed");
        }
    }

    /// Run `f` on the connection thread and wait for its answer in place: for code that is not
    /// on a runtime worker thread (a blocking task, a one-shot CLI command, a test).
    pub fn call_blocking<R, F>(&self, op: &'static str, f: F) -> Result<R, StoreError>
    where
        R: Send + 'static,
        F: FnOnce(&Db) -> Result<R, StoreError> + Send + 'static,
    {
        let (tx, rx) = mpsc::sync_channel(1);
        self.jobs
            .send(Box::new(move |db| {
                let _ = tx.send(f(db));
            }))
            .map_err(|_| StoreError::Closed { op })?;
        rx.recv().map_err(|_| StoreError::Closed { op })?
    }

    /// This handle as the store traits' shared handle (what the agent, the tool engine, the tools
    /// and the scheduler take).
    pub fn shared(&self) -> ethan_core::store::StorageRef {
        std::sync::Arc::new(self.clone())
    }

    /// This handle as the daemon's store handle (see [`backend::DaemonStore`]).
    pub fn daemon(&self) -> DaemonStoreRef {
        std::sync::Arc::new(self.clone())
    }

    /// See [`Db::checkpoint_in_background`].
    pub async fn checkpoint_in_background(
        &self,
        path: &Path,
        every: std::time::Duration,
    ) -> Result<(), StoreError> {
        let path = path.to_path_buf();
        self.call("wal_autocheckpoint", move |db| {
            db.checkpoint_in_background(&path, every)
        })
        .await
    }
}

/// The connection, as the connection thread owns it; every statement of the store is a method
/// of `Db` (one file per concern), reached through [`Store::call`].
pub struct Db {
    conn: RefCell<Connection>,
}

impl Db {
    /// Open (creating the file and its directory if needed) and migrate.
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| StoreError::Io {
                path: dir.display().to_string(),
                message: e.to_string(),
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

    /// An in-memory database (tests).
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
            conn: RefCell::new(conn),
        })
    }

    /// The connection. Only the connection thread holds a `Db`, and each method takes the
    /// connection once, so the borrow never clashes.
    pub(crate) fn conn(&self) -> RefMut<'_, Connection> {
        self.conn.borrow_mut()
    }

    /// Run `f`'s statements in one transaction: one snapshot for all of them, and the
    /// database's locks taken and released once instead of once per statement. `IMMEDIATE`, as
    /// `f` may write (it waits for another writer as a single statement would); rolled back when
    /// `f` fails.
    pub(crate) fn in_transaction<R>(
        &self,
        op: &'static str,
        f: impl FnOnce(&Db) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        self.conn().execute_batch("BEGIN IMMEDIATE").op(op)?;
        match f(self) {
            Ok(r) => {
                if let Err(e) = self.conn().execute_batch("COMMIT").op(op) {
                    let _ = self.conn().execute_batch("ROLLBACK");
                    return Err(e);
                }
                Ok(r)
            }
            Err(e) => {
                let _ = self.conn().execute_batch("ROLLBACK");
                Err(e)
            }
        }
    }

    /// Write the WAL back into the database file.
    pub fn checkpoint(&self) -> Result<(), StoreError> {
        self.conn()
            .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
            .op("checkpoint")
    }

    /// Move WAL checkpoints off the request path (the daemon): automatic checkpoints, which
    /// SQLite runs inside whichever commit crosses 1,000 WAL pages and which end in an `fsync`
    /// of the database file (milliseconds, the tail of a turn's latency), are turned off for
    /// this connection, and a thread with its own connection to `path` runs a `PASSIVE`
    /// checkpoint every `every` instead (it never blocks writers). Durability is unchanged (WAL,
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

    /// The database file's path (empty for an in-memory database).
    pub fn path(&self) -> String {
        self.conn().path().unwrap_or_default().to_owned()
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
    use ethan_core::store::KvStore;
    use std::time::{Duration, Instant};

    #[tokio::test]
    async fn a_queued_write_is_seen_by_every_later_call() {
        use ethan_channels::{ChannelKind, ChatKind, ChatRef, InboundEvent, Sender};
        let store = Store::open_in_memory().unwrap();
        let ev = InboundEvent {
            channel: ChannelKind::Telegram,
            event_id: "7".into(),
            message_id: Some("1".into()),
            chat: ChatRef {
                id: "1".into(),
                kind: ChatKind::Direct,
                thread: None,
            },
            sender: Sender {
                id: "2".into(),
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
        };
        assert!(store.record_inbound(&ev).await.unwrap());
        for state in ["processing", "sending", "done"] {
            store.queue_inbound_state("telegram", "7", state).await;
            let now = store.inbound_state("telegram", "7").await.unwrap();
            assert_eq!(now.as_deref(), Some(state));
        }
        store.kv_set("draft:telegram:7", "{}").await.unwrap();
        store.queue_kv_delete("draft:telegram:7").await;
        assert_eq!(store.kv_get("draft:telegram:7").await.unwrap(), None);
        // A reply's end: its state and its draft handle at once.
        store.queue_inbound_state("telegram", "7", "sending").await;
        store.kv_set("draft:telegram:7", "{}").await.unwrap();
        store
            .queue_reply_settled("telegram", "7", "done", "draft:telegram:7")
            .await;
        assert_eq!(store.kv_get("draft:telegram:7").await.unwrap(), None);
        // A failing queued write is logged, and the store goes on.
        store.post("a failing write", |_| {
            Err(StoreError::Closed {
                op: "a failing write",
            })
        });
        assert_eq!(
            store
                .inbound_state("telegram", "7")
                .await
                .unwrap()
                .as_deref(),
            Some("done")
        );
    }

    #[test]
    fn checkpoints_move_to_the_background_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ethan.db");
        let store = Db::open(&path).unwrap();
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

    /// A statement waiting for another process's write lock waits on the connection thread:
    /// the runtime thread that awaits it goes on running other tasks. Here the task that holds
    /// the lock (as another process would) runs on the same single-threaded runtime, and only
    /// lets go after the store call started waiting; were the call blocking that thread, the
    /// lock would never be released and the call would fail as busy after `BUSY_TIMEOUT`.
    #[tokio::test(flavor = "current_thread")]
    async fn a_locked_database_does_not_block_the_runtime_thread() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ethan.db");
        let store = Store::open(&path).unwrap();
        let other = Connection::open(&path).unwrap();
        other
            .execute_batch("BEGIN IMMEDIATE; INSERT INTO kv(key, value) VALUES ('other', '1');")
            .unwrap();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
        let holder = tokio::spawn(async move {
            // Runs only when the runtime thread is free: after the write below was sent.
            started_rx.await.unwrap();
            tokio::time::sleep(Duration::from_millis(200)).await;
            other.execute_batch("COMMIT").unwrap();
        });
        let write = store.call("kv set", |db| db.kv_set("mine", "2"));
        let write = async {
            let _ = started_tx.send(());
            write.await
        };
        write
            .await
            .expect("the write went through once the lock was released");
        holder.await.unwrap();
        assert_eq!(
            store
                .call("kv get", |db| db.kv_get("other"))
                .await
                .unwrap()
                .as_deref(),
            Some("1")
        );
    }

    #[test]
    fn a_panicking_statement_fails_alone_and_the_store_goes_on() {
        let store = Store::open_in_memory().unwrap();
        let e = store
            .call_blocking::<(), _>("boom", |_| panic!("a bug in a statement"))
            .unwrap_err();
        assert_eq!(e, StoreError::Closed { op: "boom" });
        store
            .call_blocking("kv set", |db| db.kv_set("k", "v"))
            .unwrap();
        assert_eq!(
            store
                .call_blocking("kv get", |db| db.kv_get("k"))
                .unwrap()
                .as_deref(),
            Some("v")
        );
    }

    #[test]
    fn a_closed_store_says_so() {
        let (jobs, rx) = mpsc::channel::<Job>();
        drop(rx);
        let store = Store { jobs };
        let e = store
            .call_blocking("kv get", |db| db.kv_get("k"))
            .unwrap_err();
        assert_eq!(e, StoreError::Closed { op: "kv get" });
        assert!(e.to_string().contains("closed"), "{e}");
    }
}
