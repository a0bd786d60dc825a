//! The knowledge index on PostgreSQL (tables `knowledge_notes` and `knowledge_vectors`, step 5),
//! shared by every replica: a note saved through one is found through all of them at once.
//!
//! - **Keyword search** matches each (lower-case) term as a substring of the note's title, tags
//!   and body in lower case (the generated column `search`) with `LIKE` — served by `pg_trgm`'s
//!   GIN index when the extension could be created, a scan otherwise — in any script, CJK
//!   included. Terms are split as for SQLite ([`crate::store::knowledge_query`]): the main terms
//!   first, a short list filled up from the bigrams of longer CJK runs, one- and two-character
//!   terms only when the query has nothing longer. A note scores, per term, 8 when its title
//!   holds it, 4 for its tags, and `ln(1 + occurrences)` over the whole text; as in SQLite, at
//!   most the [`RANK_CAP`] most recently added matches are ranked.
//! - **Embeddings** are stored as in SQLite (little-endian `f32` in `bytea`, with the note's
//!   hash) and scanned in the daemon (pgvector is not used).
//! - **Writes** take a transaction-level advisory lock ([`LOCK_KEY`]), so a scan's re-check of a
//!   file and its write happen while no other knowledge write (of any replica) runs — what
//!   SQLite's database lock gives.
//!
//! [`PgKnowledge`] is this index behind [`KnowledgeIndex`], whose calls are blocking: each waits
//! in place for its statement on the runtime it was built on (callers are blocking threads).

use super::errors::pg_error;
use super::{limit, text, PgStore, StoreError};
use crate::store::knowledge::{
    fill, like_pattern, split_tags, FileState, IndexChange, IndexHit, IndexedNote, RANK_CAP,
};
use crate::store::knowledge_index::{KnowledgeIndex, StillCurrent};
use crate::store::knowledge_query::Query;
use std::collections::HashMap;
use tokio_postgres::Row;

/// The advisory lock knowledge writes hold: "ethan_kn" as a number.
pub const LOCK_KEY: i64 = 0x6574_6861_6e5f_6b6e;

const HIT_COLUMNS: &str = "n.id, n.path, n.title, n.tags, n.body";

fn hit(op: &'static str, r: &Row) -> Result<IndexHit, StoreError> {
    let get = |e: tokio_postgres::Error| pg_error(op, &e);
    Ok(IndexHit {
        id: r.try_get(0).map_err(get)?,
        path: r.try_get(1).map_err(get)?,
        title: r.try_get(2).map_err(get)?,
        tags: split_tags(&r.try_get::<_, String>(3).map_err(get)?),
        body: r.try_get(4).map_err(get)?,
        score: r.try_get(5).map_err(get)?,
    })
}

impl PgStore {
    /// Path → state of every indexed note; `mine` where `origin` wrote it.
    pub async fn knowledge_files(
        &self,
        origin: &str,
    ) -> Result<HashMap<String, FileState>, StoreError> {
        let op = "knowledge files";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT path, mtime_ns, size, hash, origin = $1 FROM knowledge_notes",
                &[&origin],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, file_state(r)?)))
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(|e| pg_error(op, &e))
    }

    /// The state of one indexed note.
    pub async fn knowledge_file(
        &self,
        path: &str,
        origin: &str,
    ) -> Result<Option<FileState>, StoreError> {
        let op = "knowledge file";
        let client = self.client(op).await?;
        let row = client
            .query_opt(
                "SELECT path, mtime_ns, size, hash, origin = $2 FROM knowledge_notes
                 WHERE path = $1",
                &[&path, &origin],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        row.as_ref()
            .map(file_state)
            .transpose()
            .map_err(|e| pg_error(op, &e))
    }

    /// One indexed note in full.
    pub async fn knowledge_note(&self, path: &str) -> Result<Option<IndexedNote>, StoreError> {
        let op = "knowledge note";
        let client = self.client(op).await?;
        let row = client
            .query_opt(
                "SELECT path, title, tags, body, created, updated, mtime_ns, size, hash
                 FROM knowledge_notes WHERE path = $1",
                &[&path],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        let note = |r: &Row| -> Result<IndexedNote, tokio_postgres::Error> {
            Ok(IndexedNote {
                path: r.try_get(0)?,
                title: r.try_get(1)?,
                tags: split_tags(&r.try_get::<_, String>(2)?),
                body: r.try_get(3)?,
                created: r.try_get(4)?,
                updated: r.try_get(5)?,
                mtime_ns: r.try_get(6)?,
                size: r.try_get(7)?,
                hash: r.try_get(8)?,
            })
        };
        row.as_ref()
            .map(note)
            .transpose()
            .map_err(|e| pg_error(op, &e))
    }

    /// The row id of an indexed note.
    pub async fn knowledge_id(&self, path: &str) -> Result<Option<i64>, StoreError> {
        let op = "knowledge note";
        let client = self.client(op).await?;
        let row = client
            .query_opt("SELECT id FROM knowledge_notes WHERE path = $1", &[&path])
            .await
            .map_err(|e| pg_error(op, &e))?;
        row.map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| pg_error(op, &e))
    }

    /// Apply the changes for which `still_current` holds, in one transaction under
    /// [`LOCK_KEY`]; upserts record `origin` as the note's writer.
    pub async fn knowledge_apply(
        &self,
        changes: &[IndexChange],
        still_current: &(dyn Fn(&IndexChange) -> bool + Send + Sync),
        origin: &str,
    ) -> Result<(), StoreError> {
        let op = "knowledge index";
        let mut client = self.client(op).await?;
        let tx = client.transaction().await.map_err(|e| pg_error(op, &e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&LOCK_KEY])
            .await
            .map_err(|e| pg_error(op, &e))?;
        for c in changes.iter().filter(|c| still_current(c)) {
            match c {
                IndexChange::Upsert(n) => {
                    let tags = n.tags.join("\n");
                    tx.execute(
                        "INSERT INTO knowledge_notes (path, title, tags, body, created, updated,
                                                      mtime_ns, size, hash, origin)
                         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                         ON CONFLICT (path) DO UPDATE SET
                             title = excluded.title, tags = excluded.tags, body = excluded.body,
                             created = excluded.created, updated = excluded.updated,
                             mtime_ns = excluded.mtime_ns, size = excluded.size,
                             hash = excluded.hash, origin = excluded.origin",
                        &[
                            &text(&n.path),
                            &text(&n.title),
                            &text(&tags),
                            &text(&n.body),
                            &text(&n.created),
                            &text(&n.updated),
                            &n.mtime_ns,
                            &n.size,
                            &n.hash,
                            &origin,
                        ],
                    )
                    .await
                }
                IndexChange::Touch {
                    path,
                    mtime_ns,
                    size,
                } => {
                    tx.execute(
                        "UPDATE knowledge_notes SET mtime_ns = $2, size = $3 WHERE path = $1",
                        &[path, mtime_ns, size],
                    )
                    .await
                }
                IndexChange::Remove(path) => {
                    tx.execute("DELETE FROM knowledge_notes WHERE path = $1", &[path])
                        .await
                }
            }
            .map_err(|e| pg_error(op, &e))?;
        }
        tx.commit().await.map_err(|e| pg_error(op, &e))
    }

    /// Number of indexed notes.
    pub async fn knowledge_count(&self) -> Result<i64, StoreError> {
        let op = "knowledge count";
        let client = self.client(op).await?;
        let row = client
            .query_one("SELECT count(*) FROM knowledge_notes", &[])
            .await
            .map_err(|e| pg_error(op, &e))?;
        row.try_get(0).map_err(|e| pg_error(op, &e))
    }

    /// Whether the trigram index exists (`pg_trgm` could be created).
    pub async fn knowledge_trigram_index(&self) -> Result<bool, StoreError> {
        let op = "knowledge index";
        let client = self.client(op).await?;
        let row = client
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_indexes WHERE indexname = 'knowledge_notes_trgm')",
                &[],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        row.try_get(0).map_err(|e| pg_error(op, &e))
    }

    /// The notes holding any of `terms` (lowercase) as a substring of title, tags or body,
    /// ranked as the module docs say; at most `limit`.
    pub async fn knowledge_match(
        &self,
        terms: &[String],
        limit_to: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        let op = "knowledge search";
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let patterns: Vec<String> = terms.iter().map(|t| like_pattern(t)).collect();
        let terms: Vec<String> = terms.iter().map(|t| text(t).into_owned()).collect();
        let sql = format!(
            "WITH m AS (
                 SELECT id FROM knowledge_notes WHERE search LIKE ANY($1)
                 ORDER BY id DESC LIMIT {RANK_CAP}
             )
             SELECT {HIT_COLUMNS}, s.score FROM m JOIN knowledge_notes n ON n.id = m.id
             CROSS JOIN LATERAL (
                 SELECT sum(
                     CASE WHEN lower(n.title) LIKE u.p THEN 8 ELSE 0 END
                     + CASE WHEN lower(n.tags) LIKE u.p THEN 4 ELSE 0 END
                     + ln(1 + (length(n.search) - length(replace(n.search, u.t, '')))
                              / length(u.t)::float8)
                 )::float8 AS score
                 FROM unnest($1::text[], $2::text[]) AS u(p, t)
             ) s
             WHERE s.score > 0
             ORDER BY s.score DESC, n.id DESC LIMIT $3"
        );
        let client = self.client(op).await?;
        let rows = client
            .query(&sql, &[&patterns, &terms, &limit(limit_to)])
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter().map(|r| hit(op, r)).collect()
    }

    /// Keyword search for a parsed query (see the module docs).
    pub async fn knowledge_keyword(
        &self,
        query: &Query,
        limit_to: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        let main: Vec<String> = query.fts.iter().chain(&query.cjk).cloned().collect();
        let mut hits = self.knowledge_match(&main, limit_to).await?;
        if hits.len() < limit_to && !query.cjk_fill.is_empty() {
            let more = self
                .knowledge_match(&query.cjk_fill, limit_to + hits.len())
                .await?;
            fill(&mut hits, more, limit_to);
        }
        if hits.is_empty() && main.is_empty() && !query.short.is_empty() {
            hits = self.knowledge_match(&query.short, limit_to).await?;
        }
        Ok(hits)
    }

    /// Notes by id (any order), score 0.
    pub async fn knowledge_by_ids(&self, ids: &[i64]) -> Result<Vec<IndexHit>, StoreError> {
        let op = "knowledge notes";
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let client = self.client(op).await?;
        let rows = client
            .query(
                &format!(
                    "SELECT {HIT_COLUMNS}, 0::float8 FROM knowledge_notes n WHERE n.id = ANY($1)"
                ),
                &[&ids],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter().map(|r| hit(op, r)).collect()
    }

    /// Up to `limit` notes without a current vector for `model`: `(id, hash, text to embed)`.
    pub async fn knowledge_unembedded(
        &self,
        model: &str,
        limit_to: usize,
    ) -> Result<Vec<(i64, String, String)>, StoreError> {
        let op = "knowledge vectors";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT n.id, n.hash, n.title || E'\\n' || replace(n.tags, E'\\n', ', ')
                        || E'\\n\\n' || n.body
                 FROM knowledge_notes n
                 LEFT JOIN knowledge_vectors v
                   ON v.note_id = n.id AND v.model = $1 AND v.hash = n.hash
                 WHERE v.note_id IS NULL ORDER BY n.id LIMIT $2",
                &[&model, &limit(limit_to)],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?, r.try_get(2)?)))
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(|e| pg_error(op, &e))
    }

    /// Store vectors `(note id, content hash, little-endian f32 bytes)` for `model`.
    pub async fn knowledge_put_vectors(
        &self,
        model: &str,
        vectors: &[(i64, String, Vec<u8>)],
    ) -> Result<(), StoreError> {
        let op = "knowledge vectors";
        let mut client = self.client(op).await?;
        let tx = client.transaction().await.map_err(|e| pg_error(op, &e))?;
        for (id, hash, bytes) in vectors {
            // The note may have been removed meanwhile; then there is nothing to attach to.
            tx.execute(
                "INSERT INTO knowledge_vectors (note_id, model, hash, dim, vec)
                 SELECT $1, $2, $3, $4, $5
                 WHERE EXISTS (SELECT 1 FROM knowledge_notes WHERE id = $1)
                 ON CONFLICT (note_id) DO UPDATE SET
                     model = excluded.model, hash = excluded.hash, dim = excluded.dim,
                     vec = excluded.vec",
                &[id, &model, hash, &((bytes.len() / 4) as i64), bytes],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        }
        tx.commit().await.map_err(|e| pg_error(op, &e))
    }

    /// Every current vector for `model`: `(note id, little-endian f32 bytes)`.
    pub async fn knowledge_vectors(&self, model: &str) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
        let op = "knowledge vectors";
        let client = self.client(op).await?;
        let rows = client
            .query(
                "SELECT v.note_id, v.vec FROM knowledge_vectors v
                 JOIN knowledge_notes n ON n.id = v.note_id AND n.hash = v.hash
                 WHERE v.model = $1",
                &[&model],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter()
            .map(|r| Ok((r.try_get(0)?, r.try_get(1)?)))
            .collect::<Result<_, tokio_postgres::Error>>()
            .map_err(|e| pg_error(op, &e))
    }

    /// `(notes, notes with a current vector for model)`.
    pub async fn knowledge_vector_counts(&self, model: &str) -> Result<(i64, i64), StoreError> {
        let op = "knowledge vectors";
        let client = self.client(op).await?;
        let row = client
            .query_one(
                "SELECT (SELECT count(*) FROM knowledge_notes),
                        (SELECT count(*) FROM knowledge_vectors v
                           JOIN knowledge_notes n ON n.id = v.note_id AND n.hash = v.hash
                          WHERE v.model = $1)",
                &[&model],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        Ok((
            row.try_get(0).map_err(|e| pg_error(op, &e))?,
            row.try_get(1).map_err(|e| pg_error(op, &e))?,
        ))
    }
}

/// `(mtime_ns, size, hash, mine)` in columns 1–4.
fn file_state(r: &Row) -> Result<FileState, tokio_postgres::Error> {
    Ok(FileState {
        mtime_ns: r.try_get(1)?,
        size: r.try_get(2)?,
        hash: r.try_get(3)?,
        mine: r.try_get(4)?,
    })
}

/// The PostgreSQL knowledge index of one knowledge folder, behind [`KnowledgeIndex`].
pub struct PgKnowledge {
    pg: PgStore,
    rt: tokio::runtime::Handle,
    /// The folder's name in the index (`crate::store::knowledge_index::folder_origin`).
    origin: String,
}

impl PgKnowledge {
    /// The index in `pg` for the folder named `origin`. Call within the runtime whose threads
    /// the statements will run on.
    pub fn new(pg: PgStore, origin: String) -> PgKnowledge {
        PgKnowledge {
            pg,
            rt: tokio::runtime::Handle::current(),
            origin,
        }
    }

    fn wait<R>(&self, f: impl std::future::Future<Output = R>) -> R {
        self.rt.block_on(f)
    }
}

impl KnowledgeIndex for PgKnowledge {
    fn shared(&self) -> bool {
        true
    }
    fn describe(&self) -> String {
        match self.wait(self.pg.knowledge_trigram_index()) {
            Ok(true) => "PostgreSQL, shared by the replicas (pg_trgm)".into(),
            Ok(false) => "PostgreSQL, shared by the replicas (no pg_trgm: searches scan)".into(),
            Err(e) => format!("PostgreSQL ({e})"),
        }
    }
    fn files(&self) -> Result<HashMap<String, FileState>, StoreError> {
        self.wait(self.pg.knowledge_files(&self.origin))
    }
    fn file(&self, path: &str) -> Result<Option<FileState>, StoreError> {
        self.wait(self.pg.knowledge_file(path, &self.origin))
    }
    fn note(&self, path: &str) -> Result<Option<IndexedNote>, StoreError> {
        self.wait(self.pg.knowledge_note(path))
    }
    fn id(&self, path: &str) -> Result<Option<i64>, StoreError> {
        self.wait(self.pg.knowledge_id(path))
    }
    fn apply_if(
        &self,
        changes: &[IndexChange],
        still_current: StillCurrent,
    ) -> Result<(), StoreError> {
        self.wait(
            self.pg
                .knowledge_apply(changes, &*still_current, &self.origin),
        )
    }
    fn count(&self) -> Result<i64, StoreError> {
        self.wait(self.pg.knowledge_count())
    }
    fn keyword(&self, query: &Query, limit: usize) -> Result<Vec<IndexHit>, StoreError> {
        self.wait(self.pg.knowledge_keyword(query, limit))
    }
    fn by_ids(&self, ids: &[i64]) -> Result<Vec<IndexHit>, StoreError> {
        self.wait(self.pg.knowledge_by_ids(ids))
    }
    fn unembedded(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>, StoreError> {
        self.wait(self.pg.knowledge_unembedded(model, limit))
    }
    fn put_vectors(
        &self,
        model: &str,
        vectors: &[(i64, String, Vec<u8>)],
    ) -> Result<(), StoreError> {
        self.wait(self.pg.knowledge_put_vectors(model, vectors))
    }
    fn vectors(&self, model: &str) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
        self.wait(self.pg.knowledge_vectors(model))
    }
    fn vector_counts(&self, model: &str) -> Result<(i64, i64), StoreError> {
        self.wait(self.pg.knowledge_vector_counts(model))
    }
}
