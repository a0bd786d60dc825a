//! The knowledge base: notes as Markdown files under `$ETHAN_HOME/knowledge/`, found by keyword
//! and, when `knowledge.embeddings` is configured, by meaning.
//!
//! - [`notes`]: the file format (front matter + body), slugs, and the checks that keep a
//!   `source` inside the knowledge folder.
//! - [`index`]: keeping the store's knowledge index in step with the files — re-read by mtime
//!   and hash at start ([`Knowledge::sync`]), updated on every tool write. The index is the
//!   store's ([`crate::store::knowledge_index::KnowledgeIndex`]): SQLite FTS5 in `ethan.db`, or
//!   PostgreSQL tables shared by every replica.
//! - [`embed`]: vectors from an OpenAI-compatible `/embeddings` endpoint, cosine similarity, and
//!   reciprocal rank fusion with the keyword results.
//! - [`hub`]: how the tools reach the knowledge base of their `$ETHAN_HOME`.
//!
//! The files are the source of truth; the index can always be rebuilt from them. With a shared
//! index, a note whose file is on another replica's disk (or whose newer copy is) is read from
//! the index: [`Knowledge::read`] and [`Knowledge::edit`] both go through one loader, after the
//! same path checks ([`notes::resolve_source`]).

pub mod embed;
pub mod hub;
pub mod index;
pub mod notes;

pub use ethan_core::knowledge::{EditMode, Hit, Saved, SearchMode, SearchOutcome, MAX_LIMIT};
pub use hub::KnowledgeHub;

use crate::store::knowledge::{IndexChange, IndexHit};
use crate::store::knowledge_index::{IndexHandle, KnowledgeIndex};
use crate::store::StoreError;
use embed::{EmbedError, Embedder};
use ethan_core::tool::ErrorKind;
use index::{Query, SyncReport};
use notes::Note;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// Notes without a current vector embedded before a semantic search (the rest wait for the
/// next start).
const BACKFILL_ON_SEARCH: usize = 64;

/// A knowledge-base failure, phrased so the model can act on it.
#[derive(Debug, thiserror::Error)]
pub enum KnowledgeError {
    #[error("{given:?} is not a valid note source: {reason}. A source is a path relative to the knowledge folder, like `ops/deploying-the-server.md`, as knowledge_search returns it")]
    BadSource { given: String, reason: String },
    #[error("{0:?} is a symbolic link; the knowledge base does not follow links")]
    Symlink(String),
    #[error("no note at {0:?}; use knowledge_search to find the right source")]
    NotFound(String),
    #[error("{given:?} is {bytes} bytes, over the 1 MB limit for a note")]
    TooLarge { given: String, bytes: u64 },
    #[error("{0}")]
    Invalid(String),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the knowledge index: {0}")]
    Store(#[from] StoreError),
    #[error(transparent)]
    Embed(#[from] EmbedError),
    #[error("the knowledge base is not available: {0}")]
    Unavailable(String),
}

impl KnowledgeError {
    /// How a tool reports this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            KnowledgeError::BadSource { .. }
            | KnowledgeError::NotFound(_)
            | KnowledgeError::TooLarge { .. }
            | KnowledgeError::Invalid(_) => ErrorKind::Validation,
            KnowledgeError::Symlink(_) => ErrorKind::Denied,
            KnowledgeError::Io { .. }
            | KnowledgeError::Store(_)
            | KnowledgeError::Embed(_)
            | KnowledgeError::Unavailable(_) => ErrorKind::Dependency,
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> KnowledgeError + '_ {
    move |source| KnowledgeError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Decoded vectors: `(note id, normalised vector)`.
type Vectors = Arc<Vec<(i64, Vec<f32>)>>;

/// A knowledge folder and its index.
pub struct Knowledge {
    root: PathBuf,
    index: IndexHandle,
    embedder: Option<Embedder>,
    /// Serialises tool writes.
    write_lock: tokio::sync::Mutex<()>,
    /// Decoded vectors of the current model; `None` until loaded or after a change. Not kept
    /// when the index is shared (another replica may change it at any time).
    vectors: Mutex<Option<Vectors>>,
}

impl std::fmt::Debug for Knowledge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Knowledge")
            .field("root", &self.root)
            .field("embedder", &self.embedder)
            .finish_non_exhaustive()
    }
}

impl Knowledge {
    /// Use `root` (created if missing) with `index` (a [`crate::store::Store`] or an
    /// [`IndexHandle`]). Does not scan: call [`Knowledge::sync`] for that.
    pub fn open(
        root: impl Into<PathBuf>,
        index: impl Into<IndexHandle>,
        embedder: Option<Embedder>,
    ) -> Result<Knowledge, KnowledgeError> {
        let root = root.into();
        std::fs::create_dir_all(&root).map_err(io_err(&root))?;
        Ok(Knowledge {
            root,
            index: index.into(),
            embedder,
            write_lock: tokio::sync::Mutex::new(()),
            vectors: Mutex::new(None),
        })
    }

    /// The knowledge folder.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn index(&self) -> &IndexHandle {
        &self.index
    }

    pub fn embedder(&self) -> Option<&Embedder> {
        self.embedder.as_ref()
    }

    /// Run blocking work (the index, the note files) on a blocking thread, never on the
    /// caller's runtime thread.
    async fn blocking<R, F>(&self, f: F) -> Result<R, KnowledgeError>
    where
        R: Send + 'static,
        F: FnOnce(&dyn KnowledgeIndex, &Path) -> Result<R, KnowledgeError> + Send + 'static,
    {
        let (index, root) = (self.index.clone(), self.root.clone());
        ethan_core::task::spawn_blocking(move || f(&*index, &root))
            .await
            .map_err(|e| KnowledgeError::Unavailable(format!("the knowledge index stopped: {e}")))?
    }

    /// [`Knowledge::sync`] on a blocking thread, one scan at a time through this index (the
    /// start-up scan and a tool's first use would otherwise read the same files twice).
    pub async fn sync_shared(self: Arc<Self>) -> Result<SyncReport, KnowledgeError> {
        let index = self.index.clone();
        let _one_at_a_time = index.scan_lock().lock().await;
        ethan_core::task::spawn_blocking(move || self.sync())
            .await
            .map_err(|e| KnowledgeError::Unavailable(format!("indexing stopped: {e}")))?
    }

    /// Re-index the files that changed since the index last saw them (blocking).
    pub fn sync(&self) -> Result<SyncReport, KnowledgeError> {
        let report = index::sync(&self.root, &*self.index)?;
        if report.indexed + report.removed > 0 {
            self.forget_vectors();
        }
        Ok(report)
    }

    /// Embed every note without a current vector. Returns how many were embedded.
    pub async fn embed_missing(&self) -> Result<usize, KnowledgeError> {
        self.embed_up_to(usize::MAX).await
    }

    async fn embed_up_to(&self, most: usize) -> Result<usize, KnowledgeError> {
        let Some(e) = &self.embedder else {
            return Ok(0);
        };
        let mut done = 0;
        while done < most {
            let (model, n) = (e.model().to_string(), embed::BATCH.min(most - done));
            let batch = self
                .blocking(move |s, _| Ok(s.unembedded(&model, n)?))
                .await?;
            if batch.is_empty() {
                break;
            }
            let texts: Vec<String> = batch.iter().map(|b| b.2.clone()).collect();
            let vecs = e.embed(&texts).await?;
            let rows: Vec<(i64, String, Vec<u8>)> = batch
                .into_iter()
                .zip(vecs)
                .map(|((id, hash, _), v)| (id, hash, embed::to_bytes(&v)))
                .collect();
            let (model, n) = (e.model().to_string(), rows.len());
            self.blocking(move |s, _| Ok(s.put_vectors(&model, &rows)?))
                .await?;
            self.forget_vectors();
            done += n;
        }
        Ok(done)
    }

    fn forget_vectors(&self) {
        *self.vectors.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    async fn vectors(&self, model: &str) -> Result<Vectors, KnowledgeError> {
        if let Some(v) = self
            .vectors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
        {
            return Ok(v.clone());
        }
        let model = model.to_string();
        let loaded: Vec<(i64, Vec<f32>)> = self
            .blocking(move |s, _| {
                Ok(s.vectors(&model)?
                    .into_iter()
                    .filter_map(|(id, b)| embed::from_bytes(&b).map(|v| (id, v)))
                    .collect())
            })
            .await?;
        let loaded = Arc::new(loaded);
        if !self.index.shared() {
            *self.vectors.lock().unwrap_or_else(|p| p.into_inner()) = Some(loaded.clone());
        }
        Ok(loaded)
    }

    /// Keyword search only (blocking; a few milliseconds).
    pub fn keyword_search(&self, query: &str, limit: usize) -> Result<Vec<Hit>, KnowledgeError> {
        let q = Query::parse(query);
        let limit = limit.clamp(1, MAX_LIMIT);
        let hits = self.index.keyword(&q, limit)?;
        Ok(hits.into_iter().map(|h| to_hit(h, &q, None)).collect())
    }

    /// Search by keyword and, when embeddings are configured, by meaning (fused by reciprocal
    /// rank). An embeddings failure degrades to keyword results with a warning.
    pub async fn search(&self, query: &str, limit: usize) -> Result<SearchOutcome, KnowledgeError> {
        let q = Query::parse(query);
        let limit = limit.clamp(1, MAX_LIMIT);
        let Some(e) = &self.embedder else {
            let parsed = q.clone();
            let hits = self
                .blocking(move |s, _| Ok(s.keyword(&parsed, limit)?))
                .await?;
            return Ok(SearchOutcome {
                hits: hits.into_iter().map(|h| to_hit(h, &q, None)).collect(),
                mode: SearchMode::Keyword,
                warning: None,
            });
        };
        let pool = (limit * 4).max(20);
        let parsed = q.clone();
        let keyword = self
            .blocking(move |s, _| Ok(s.keyword(&parsed, pool)?))
            .await?;
        let semantic = async {
            self.embed_up_to(BACKFILL_ON_SEARCH).await?;
            let qv = e
                .embed(&[query.to_string()])
                .await?
                .into_iter()
                .next()
                .unwrap_or_default();
            let vectors = self.vectors(e.model()).await?;
            Ok::<_, KnowledgeError>(embed::nearest(&qv, &vectors, pool))
        }
        .await;
        let near = match semantic {
            Ok(n) => n,
            Err(err) => {
                tracing::warn!("knowledge: semantic search failed: {err}");
                let mut hits: Vec<Hit> = keyword.into_iter().map(|h| to_hit(h, &q, None)).collect();
                hits.truncate(limit);
                return Ok(SearchOutcome {
                    hits,
                    mode: SearchMode::Keyword,
                    warning: Some(format!(
                        "semantic search is unavailable ({err}); these are keyword results only"
                    )),
                });
            }
        };
        let similarity: HashMap<i64, f32> = near.iter().copied().collect();
        let fused = embed::rrf(&[
            keyword.iter().map(|h| h.id).collect(),
            near.iter().map(|n| n.0).collect(),
        ]);
        let mut by_id: HashMap<i64, IndexHit> = keyword.into_iter().map(|h| (h.id, h)).collect();
        let top: Vec<(i64, f64)> = fused.into_iter().take(limit).collect();
        let missing: Vec<i64> = top
            .iter()
            .map(|t| t.0)
            .filter(|id| !by_id.contains_key(id))
            .collect();
        let found = self.blocking(move |s, _| Ok(s.by_ids(&missing)?)).await?;
        by_id.extend(found.into_iter().map(|h| (h.id, h)));
        let hits = top
            .into_iter()
            .filter_map(|(id, score)| {
                let mut h = by_id.remove(&id)?;
                h.score = score;
                Some(to_hit(h, &q, similarity.get(&id).copied()))
            })
            .collect();
        Ok(SearchOutcome {
            hits,
            mode: SearchMode::Hybrid,
            warning: None,
        })
    }

    /// The note at `source`: read from its file (the index entry is refreshed if the file
    /// changed by hand), or from a shared index that holds a newer copy (see [`load`]).
    pub async fn read(&self, source: &str) -> Result<Note, KnowledgeError> {
        let source = source.to_string();
        let (note, changed) = self
            .blocking(move |index, root| load(root, index, &source))
            .await?;
        if changed {
            self.forget_vectors();
        }
        Ok(note)
    }

    /// Save a new note: `<first tag>/<slug of the title>.md` (a number is added to the slug if
    /// taken). Without a title, the first line of the content is used.
    pub async fn add(
        &self,
        content: &str,
        title: Option<&str>,
        tags: &[String],
    ) -> Result<Saved, KnowledgeError> {
        let body = content.trim();
        if body.is_empty() {
            return Err(KnowledgeError::Invalid("content is empty".into()));
        }
        let title = match title.map(notes::clean_title) {
            Some(t) if !t.is_empty() => t,
            Some(_) => return Err(KnowledgeError::Invalid("title is empty".into())),
            None => notes::title_from_content(body),
        };
        let tags = notes::clean_tags(tags)?;
        let _guard = self.write_lock.lock().await;
        let folder = notes::folder_for(&tags);
        let base = match notes::slug(&title) {
            s if s.is_empty() => "note".to_string(),
            s => s,
        };
        let (f, b) = (folder.clone(), base.clone());
        let name = self
            .blocking(move |index, root| free_name(root, index, &f, &b))
            .await?;
        let name = name.ok_or_else(|| {
            KnowledgeError::Invalid(format!("too many notes named {base:?} in {folder}/"))
        })?;
        let now = notes::now_stamp();
        let numbered = name != format!("{base}.md");
        let note = Note {
            source: format!("{folder}/{name}"),
            title,
            tags,
            created: now.clone(),
            updated: now,
            body: body.to_string(),
        };
        let saved = self.save(note).await?;
        Ok(Saved { numbered, ..saved })
    }

    /// Change the note at `source` (see [`EditMode`]). `title` and `tags` are for `Replace`.
    pub async fn edit(
        &self,
        source: &str,
        content: &str,
        mode: EditMode,
        title: Option<&str>,
        tags: Option<&[String]>,
    ) -> Result<Saved, KnowledgeError> {
        if content.trim().is_empty() {
            return Err(KnowledgeError::Invalid("content is empty".into()));
        }
        if mode == EditMode::Append && (title.is_some() || tags.is_some()) {
            return Err(KnowledgeError::Invalid(
                "append keeps the title and tags; to change them use mode \"replace\"".into(),
            ));
        }
        let title = match title.map(notes::clean_title) {
            Some(t) if t.is_empty() => {
                return Err(KnowledgeError::Invalid("title is empty".into()))
            }
            t => t,
        };
        let tags = tags.map(notes::clean_tags).transpose()?;
        let _guard = self.write_lock.lock().await;
        let source = source.to_string();
        let (mut note, _) = self
            .blocking(move |index, root| load(root, index, &source))
            .await?;
        match mode {
            EditMode::Append => {
                let old = note.body.trim_end();
                note.body = if old.is_empty() {
                    content.trim().to_string()
                } else {
                    format!("{old}\n\n{}", content.trim())
                };
            }
            EditMode::Replace => {
                note.body = content.trim().to_string();
                if let Some(t) = title {
                    note.title = t;
                }
                if let Some(t) = tags {
                    note.tags = t;
                }
            }
        }
        note.updated = notes::now_stamp();
        self.save(note).await
    }

    /// Write the file (atomically: a temporary file renamed over it), index it, embed it.
    async fn save(&self, note: Note) -> Result<Saved, KnowledgeError> {
        let path = self.root.join(&note.source);
        let text = notes::render(&note);
        if text.len() > notes::MAX_NOTE_BYTES {
            return Err(KnowledgeError::TooLarge {
                given: note.source.clone(),
                bytes: text.len() as u64,
            });
        }
        let dir = path.parent().unwrap_or(&self.root);
        // A note saved through another replica may be in a folder this disk does not have yet
        // (the source's components were checked: none is a symbolic link).
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let tmp = dir.join(format!(".{}.tmp", uuid::Uuid::new_v4().simple()));
        let written = std::fs::write(&tmp, text.as_bytes())
            .and_then(|()| std::fs::rename(&tmp, &path))
            .and_then(|()| std::fs::metadata(&path));
        let meta = match written {
            Ok(m) => m,
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                return Err(io_err(&path)(e));
            }
        };
        let (mtime, size) = index::stamp(&meta);
        let hash = index::hash(text.as_bytes());
        let change = IndexChange::Upsert(index::indexed(note.clone(), mtime, size, hash.clone()));
        self.blocking(move |s, _| Ok(s.apply(&[change])?)).await?;
        self.forget_vectors();
        let mut warning = None;
        if let Some(e) = &self.embedder {
            let done = async {
                let v = e.embed(&[notes::embedding_text(&note)]).await?;
                let source = note.source.clone();
                let id = self.blocking(move |s, _| Ok(s.id(&source)?)).await?;
                if let (Some(id), Some(v)) = (id, v.first()) {
                    let (model, row) = (
                        e.model().to_string(),
                        (id, hash.clone(), embed::to_bytes(v)),
                    );
                    self.blocking(move |s, _| Ok(s.put_vectors(&model, &[row])?))
                        .await?;
                }
                Ok::<_, KnowledgeError>(())
            }
            .await;
            if let Err(err) = done {
                tracing::warn!("knowledge: embedding {}: {err}", note.source);
                warning = Some(format!(
                    "the note is saved and keyword search finds it, but its embedding failed \
                     ({err}); it is retried later"
                ));
            }
        }
        Ok(Saved {
            note,
            warning,
            numbered: false,
        })
    }

    /// `(notes, notes with a current vector)` — vectors are 0 without embeddings.
    pub async fn counts(&self) -> Result<(i64, i64), KnowledgeError> {
        let model = self.embedder.as_ref().map(|e| e.model().to_string());
        self.blocking(move |s, _| match model {
            Some(m) => Ok(s.vector_counts(&m)?),
            None => Ok((s.count()?, 0)),
        })
        .await
    }
}

/// The note at `source`, after the path checks of [`notes::resolve_source`] (every read and
/// edit comes through here): its file; or, when the index is shared by replicas, the index's
/// copy if the file is not on this disk or is older than that copy (written through another
/// replica). Returns the note and whether the index entry changed (a hand edit re-indexed).
fn load(
    root: &Path,
    index: &dyn KnowledgeIndex,
    source: &str,
) -> Result<(Note, bool), KnowledgeError> {
    let path = notes::resolve_source(root, source)?;
    let source = notes::source_of(root, &path).unwrap_or_else(|| source.to_string());
    let from_file = index::read_file(&path, &source);
    if index.shared() {
        if let Some(stored) = index.note(&source)? {
            let newer = match &from_file {
                Err(KnowledgeError::NotFound(_)) => true,
                Ok((_, mtime, _, hash)) => stored.mtime_ns > *mtime && stored.hash != *hash,
                Err(_) => false,
            };
            if newer {
                return Ok((index::note_of(stored), false));
            }
        }
    }
    let (note, ..) = from_file?;
    let changed = match index::refresh_one(root, index, &source) {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!("knowledge: re-indexing {source}: {e}");
            false
        }
    };
    Ok((note, changed))
}

/// A file name for a new note in `folder` (created if missing): `<base>.md`, else `<base>-2.md`
/// and so on, free both on this disk and in the index (a shared index holds other replicas'
/// notes). `None` when 10,000 are taken.
fn free_name(
    root: &Path,
    index: &dyn KnowledgeIndex,
    folder: &str,
    base: &str,
) -> Result<Option<String>, KnowledgeError> {
    notes::check_no_symlinks(root, Path::new(folder))?;
    let dir = root.join(folder);
    std::fs::create_dir_all(&dir).map_err(io_err(&dir))?;
    for n in 1..10_000 {
        let candidate = if n == 1 {
            format!("{base}.md")
        } else {
            format!("{base}-{n}.md")
        };
        if std::fs::symlink_metadata(dir.join(&candidate)).is_err()
            && index.file(&format!("{folder}/{candidate}"))?.is_none()
        {
            return Ok(Some(candidate));
        }
    }
    Ok(None)
}

fn to_hit(h: IndexHit, q: &Query, similarity: Option<f32>) -> Hit {
    Hit {
        snippet: index::snippet(&h.body, &q.all),
        source: h.path,
        title: h.title,
        tags: h.tags,
        score: h.score,
        similarity,
    }
}

/// At start: re-index changed files and embed notes without vectors, in the background.
/// `home` is `$ETHAN_HOME`; the notes are in `home/knowledge`.
pub fn spawn_start_sync(home: &Path, index: IndexHandle, config: &crate::config::KnowledgeConfig) {
    let Ok(rt) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let root = home.join("knowledge");
    let embedder = Embedder::from_config(&config.embeddings);
    rt.spawn(async move {
        let k = match Knowledge::open(root, index, embedder) {
            Ok(k) => Arc::new(k),
            Err(e) => return tracing::warn!("knowledge: {e}"),
        };
        match k.clone().sync_shared().await {
            Ok(r) => {
                for s in &r.skipped {
                    tracing::warn!("knowledge: skipped {s}");
                }
                tracing::info!(
                    "knowledge: {} note file(s); {} re-indexed, {} removed, {} newer in the \
                     shared index",
                    r.files,
                    r.indexed,
                    r.removed,
                    r.newer_elsewhere
                );
            }
            Err(e) => return tracing::warn!("knowledge: indexing at start: {e}"),
        }
        match k.embed_missing().await {
            Ok(0) => {}
            Ok(n) => tracing::info!("knowledge: embedded {n} note(s)"),
            Err(e) => tracing::warn!("knowledge: embedding at start: {e}"),
        }
    });
}
