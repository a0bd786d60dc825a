//! The knowledge index behind one trait, for both stores: [`KnowledgeIndex`] is what
//! `crate::knowledge` keeps in step with the note files and searches. Two implementations:
//! the SQLite [`super::Store`] (FTS5, `super::knowledge`), private to one process and its
//! folder; and, with a `postgres://` store, the PostgreSQL tables of `super::pg::knowledge`,
//! shared by every replica, so a note saved through one is found through all of them at once.
//!
//! The calls are blocking (they wait in place for the database): the knowledge base makes them
//! from blocking threads, next to its file reads — never from async code on a runtime thread.
//!
//! A shared index holds notes whose files are on other replicas' disks. Each row names the
//! folder that last wrote it ([`FileState::mine`]): a replica's scan removes only its own rows
//! whose file is gone, and re-indexes a changed file only when it is newer than what the index
//! holds (see `crate::knowledge::index::sync`).

use super::knowledge_query::Query;
use super::StoreError;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

/// A note as indexed. `tags` are kept one per line.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexedNote {
    pub path: String,
    pub title: String,
    pub tags: Vec<String>,
    pub body: String,
    pub created: String,
    pub updated: String,
    pub mtime_ns: i64,
    pub size: i64,
    pub hash: String,
}

/// What the index knows about a file, for change detection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileState {
    pub mtime_ns: i64,
    pub size: i64,
    pub hash: String,
    /// Whether this process's knowledge folder wrote the entry (always, unless the index is
    /// shared by replicas: see the module docs).
    pub mine: bool,
}

/// One change to the index.
#[derive(Debug, Clone)]
pub enum IndexChange {
    /// Insert or replace the note (unless the index already has a newer version of the file).
    Upsert(IndexedNote),
    /// The file's content is unchanged; only its mtime and size moved.
    Touch {
        path: String,
        mtime_ns: i64,
        size: i64,
    },
    /// The file is gone.
    Remove(String),
}

/// A note found by a search, with its rank (higher is better).
#[derive(Debug, Clone)]
pub struct IndexHit {
    pub id: i64,
    pub path: String,
    pub title: String,
    pub tags: Vec<String>,
    pub body: String,
    pub score: f64,
}

/// Whether a change is still current, checked right before it is applied.
pub type StillCurrent = Arc<dyn Fn(&IndexChange) -> bool + Send + Sync>;

/// The knowledge index of a store (see the module docs). Errors are the store's.
pub trait KnowledgeIndex: Send + Sync {
    /// True when other processes share this index (PostgreSQL).
    fn shared(&self) -> bool {
        false
    }
    /// What the index is, for `ethan doctor` (`SQLite FTS5`, `PostgreSQL, pg_trgm`).
    fn describe(&self) -> String;
    /// Path → state of every indexed note.
    fn files(&self) -> Result<HashMap<String, FileState>, StoreError>;
    /// The state of one indexed note.
    fn file(&self, path: &str) -> Result<Option<FileState>, StoreError>;
    /// One indexed note in full (for a note whose file is on another replica's disk).
    fn note(&self, path: &str) -> Result<Option<IndexedNote>, StoreError>;
    /// The row id of an indexed note.
    fn id(&self, path: &str) -> Result<Option<i64>, StoreError>;
    /// Apply the changes for which `still_current` holds, in one transaction.
    fn apply_if(
        &self,
        changes: &[IndexChange],
        still_current: StillCurrent,
    ) -> Result<(), StoreError>;
    /// Apply changes in one transaction.
    fn apply(&self, changes: &[IndexChange]) -> Result<(), StoreError> {
        self.apply_if(changes, Arc::new(|_| true))
    }
    /// Number of indexed notes.
    fn count(&self) -> Result<i64, StoreError>;
    /// Keyword search: best first, at most `limit`, higher scores better.
    fn keyword(&self, query: &Query, limit: usize) -> Result<Vec<IndexHit>, StoreError>;
    /// Notes by id (any order), score 0.
    fn by_ids(&self, ids: &[i64]) -> Result<Vec<IndexHit>, StoreError>;
    /// Up to `limit` notes without a current vector for `model`: `(id, hash, text to embed)`.
    fn unembedded(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>, StoreError>;
    /// Store vectors `(note id, content hash, little-endian f32 bytes)` for `model`.
    fn put_vectors(
        &self,
        model: &str,
        vectors: &[(i64, String, Vec<u8>)],
    ) -> Result<(), StoreError>;
    /// Every current vector for `model`: `(note id, little-endian f32 bytes)`.
    fn vectors(&self, model: &str) -> Result<Vec<(i64, Vec<u8>)>, StoreError>;
    /// `(notes, notes with a current vector for model)`.
    fn vector_counts(&self, model: &str) -> Result<(i64, i64), StoreError>;
}

/// A handle to a knowledge index: the index, and the lock that lets one scan of the folder run
/// at a time through it (the start-up scan and a tool's first use would otherwise read the same
/// files twice). Cloning shares both.
#[derive(Clone)]
pub struct IndexHandle {
    index: Arc<dyn KnowledgeIndex>,
    scan: Arc<tokio::sync::Mutex<()>>,
}

impl IndexHandle {
    pub fn new(index: Arc<dyn KnowledgeIndex>) -> IndexHandle {
        IndexHandle {
            index,
            scan: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// Held while a scan of the folder runs.
    pub fn scan_lock(&self) -> &tokio::sync::Mutex<()> {
        &self.scan
    }
}

impl std::ops::Deref for IndexHandle {
    type Target = dyn KnowledgeIndex;
    fn deref(&self) -> &Self::Target {
        &*self.index
    }
}

impl From<super::Store> for IndexHandle {
    fn from(store: super::Store) -> IndexHandle {
        IndexHandle::new(Arc::new(store))
    }
}

/// The name a knowledge folder writes into a shared index: this machine's host name and the
/// folder's path (`host:/var/lib/ethan/knowledge`), the same at every start.
pub fn folder_origin(root: &Path) -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .unwrap_or_default();
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
    format!("{host}:{}", root.display())
}
