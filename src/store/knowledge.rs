//! The knowledge index in SQLite (the [`KnowledgeIndex`] of [`super::Store`]): one row per note file (`knowledge_notes`); an FTS5 table over title,
//! tags and body with the trigram tokenizer (`knowledge_fts`); an FTS5 table over the CJK
//! bigrams of the same fields (`knowledge_cjk`), because trigrams cannot match a two-character
//! Chinese word; both kept in step by triggers; and one embedding per note
//! (`knowledge_vectors`). The Markdown files are the source of truth; these tables are rebuilt
//! from them (see `crate::knowledge`).
//!
//! BM25 is computed for at most [`RANK_CAP`] matches: when a query matches more notes than that
//! (a very common word), the most recently added [`RANK_CAP`] of them are ranked. Scoring every
//! match would cost tens of milliseconds per query on a large knowledge base, for a word too
//! common to tell notes apart anyway.

pub use super::knowledge_index::{FileState, IndexChange, IndexHit, IndexedNote};
pub use super::knowledge_query::is_cjk;

use super::knowledge_index::{KnowledgeIndex, StillCurrent};
use super::knowledge_query::{phrases, rrf, Query};
use super::{Ctx, Db, StoreError};
use rusqlite::{params, params_from_iter, OptionalExtension};
use std::collections::{HashMap, HashSet};

/// Most matches ranked by BM25 in one query (see the module docs).
pub const RANK_CAP: usize = 1000;

/// Which full-text index a query goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FtsIndex {
    /// `knowledge_fts`: trigrams of the text (phrases of three characters or more).
    Trigram,
    /// `knowledge_cjk`: CJK bigrams (two-character CJK words).
    CjkBigram,
}

impl FtsIndex {
    fn table(self) -> &'static str {
        match self {
            FtsIndex::Trigram => "knowledge_fts",
            FtsIndex::CjkBigram => "knowledge_cjk",
        }
    }
}

/// The CJK bigrams of `text`, space-separated, for `knowledge_cjk`: every two adjacent CJK
/// characters, and a lone CJK character as itself.
pub fn cjk_grams(text: &str) -> String {
    let mut out = String::new();
    let mut run: Vec<char> = Vec::new();
    let flush = |run: &mut Vec<char>, out: &mut String| {
        let pieces: Vec<String> = if run.len() == 1 {
            vec![run[0].to_string()]
        } else {
            run.windows(2).map(|w| w.iter().collect()).collect()
        };
        for p in pieces {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(&p);
        }
        run.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            run.push(c);
        } else if !run.is_empty() {
            flush(&mut run, &mut out);
        }
    }
    if !run.is_empty() {
        flush(&mut run, &mut out);
    }
    out
}

/// Columns of `knowledge_notes` selected for an [`IndexHit`] (score appended by the caller).
const HIT_COLUMNS: &str = "n.id, n.path, n.title, n.tags, n.body";

fn hit(r: &rusqlite::Row<'_>) -> rusqlite::Result<IndexHit> {
    let tags: String = r.get(3)?;
    Ok(IndexHit {
        id: r.get(0)?,
        path: r.get(1)?,
        title: r.get(2)?,
        tags: split_tags(&tags),
        body: r.get(4)?,
        score: r.get(5)?,
    })
}

pub(crate) fn split_tags(s: &str) -> Vec<String> {
    s.lines()
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect()
}

/// Escape `%`, `_` and `\` for a `LIKE … ESCAPE '\'` pattern.
pub(crate) fn like_pattern(term: &str) -> String {
    let mut p = String::with_capacity(term.len() + 2);
    p.push('%');
    for c in term.chars() {
        if matches!(c, '%' | '_' | '\\') {
            p.push('\\');
        }
        p.push(c);
    }
    p.push('%');
    p
}

fn upsert(tx: &rusqlite::Transaction<'_>, n: &IndexedNote) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT INTO knowledge_notes(path, title, tags, body, created, updated, mtime_ns, size,
                                     hash, cjk_title, cjk_tags, cjk_body)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)
         ON CONFLICT(path) DO UPDATE SET
             title = excluded.title, tags = excluded.tags, body = excluded.body,
             created = excluded.created, updated = excluded.updated,
             mtime_ns = excluded.mtime_ns, size = excluded.size, hash = excluded.hash,
             cjk_title = excluded.cjk_title, cjk_tags = excluded.cjk_tags,
             cjk_body = excluded.cjk_body",
        params![
            n.path,
            n.title,
            n.tags.join("\n"),
            n.body,
            n.created,
            n.updated,
            n.mtime_ns,
            n.size,
            n.hash,
            cjk_grams(&n.title),
            cjk_grams(&n.tags.join("\n")),
            cjk_grams(&n.body),
        ],
    )?;
    Ok(())
}

impl Db {
    /// Path → state of every indexed file.
    pub fn knowledge_files(
        &self,
    ) -> Result<std::collections::HashMap<String, FileState>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare("SELECT path, mtime_ns, size, hash FROM knowledge_notes")
            .op("knowledge files")?;
        let rows = st
            .query_map([], |r| {
                Ok((
                    r.get::<_, String>(0)?,
                    FileState {
                        mtime_ns: r.get(1)?,
                        size: r.get(2)?,
                        hash: r.get(3)?,
                        mine: true,
                    },
                ))
            })
            .op("knowledge files")?;
        rows.collect::<Result<_, _>>().op("knowledge files")
    }

    /// The state of one indexed file.
    pub fn knowledge_file(&self, path: &str) -> Result<Option<FileState>, StoreError> {
        self.conn()
            .query_row(
                "SELECT mtime_ns, size, hash FROM knowledge_notes WHERE path = ?1",
                [path],
                |r| {
                    Ok(FileState {
                        mtime_ns: r.get(0)?,
                        size: r.get(1)?,
                        hash: r.get(2)?,
                        mine: true,
                    })
                },
            )
            .optional()
            .op("knowledge file")
    }

    /// The row id of an indexed note.
    pub fn knowledge_id(&self, path: &str) -> Result<Option<i64>, StoreError> {
        self.conn()
            .query_row(
                "SELECT id FROM knowledge_notes WHERE path = ?1",
                [path],
                |r| r.get(0),
            )
            .optional()
            .op("knowledge note")
    }

    /// Apply changes in one transaction.
    pub fn knowledge_apply(&self, changes: &[IndexChange]) -> Result<(), StoreError> {
        self.knowledge_apply_if(changes, &|_| true)
    }

    /// Apply the changes for which `still_current` holds, in one transaction. `still_current`
    /// runs while the database is locked, so a scan can re-check that a file has not been
    /// rewritten (and indexed) by a tool since the scan read it.
    pub fn knowledge_apply_if(
        &self,
        changes: &[IndexChange],
        still_current: &dyn Fn(&IndexChange) -> bool,
    ) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().op("knowledge index")?;
        for c in changes.iter().filter(|c| still_current(c)) {
            match c {
                IndexChange::Upsert(n) => upsert(&tx, n),
                IndexChange::Touch {
                    path,
                    mtime_ns,
                    size,
                } => tx
                    .execute(
                        "UPDATE knowledge_notes SET mtime_ns = ?2, size = ?3 WHERE path = ?1",
                        params![path, mtime_ns, size],
                    )
                    .map(drop),
                IndexChange::Remove(path) => tx
                    .execute("DELETE FROM knowledge_notes WHERE path = ?1", [path])
                    .map(drop),
            }
            .op("knowledge index")?;
        }
        tx.commit().op("knowledge index")
    }

    /// Number of indexed notes.
    pub fn knowledge_count(&self) -> Result<i64, StoreError> {
        self.conn()
            .query_row("SELECT count(*) FROM knowledge_notes", [], |r| r.get(0))
            .op("knowledge count")
    }

    /// Full-text search: `expr` is an FTS5 query over `index`; ranked by BM25 (negated, so
    /// higher is better) with title and tags weighted above the body, over at most
    /// [`RANK_CAP`] matches (see the module docs).
    pub fn knowledge_fts(
        &self,
        index: FtsIndex,
        expr: &str,
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        let t = index.table();
        let conn = self.conn();
        let cut: Option<i64> = conn
            .prepare_cached(&format!(
                "SELECT rowid FROM {t} WHERE {t} MATCH ?1 ORDER BY rowid DESC LIMIT 1 OFFSET {}",
                RANK_CAP - 1
            ))
            .and_then(|mut st| st.query_row([expr], |r| r.get(0)).optional())
            .op("knowledge search")?;
        let mut st = conn
            .prepare_cached(&format!(
                "SELECT {HIT_COLUMNS}, -m.r FROM (
                     SELECT rowid AS id, bm25({t}, 8.0, 4.0, 1.0) AS r FROM {t}
                     WHERE {t} MATCH ?1 AND rowid >= ?2 ORDER BY r LIMIT ?3
                 ) m JOIN knowledge_notes n ON n.id = m.id ORDER BY m.r"
            ))
            .op("knowledge search")?;
        let rows = st
            .query_map(params![expr, cut.unwrap_or(i64::MIN), limit as i64], hit)
            .op("knowledge search")?;
        rows.collect::<Result<_, _>>().op("knowledge search")
    }

    /// Substring search for terms too short for the trigram index: a note scores 2 per term in
    /// its title or tags and 1 per term in its body; notes that match no term are left out.
    pub fn knowledge_like(
        &self,
        terms: &[String],
        limit: usize,
    ) -> Result<Vec<IndexHit>, StoreError> {
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let parts: Vec<String> = (1..=terms.len())
            .map(|i| {
                format!(
                    "((n.title LIKE ?{i} ESCAPE '\\' OR n.tags LIKE ?{i} ESCAPE '\\') * 2 \
                     + (n.body LIKE ?{i} ESCAPE '\\'))"
                )
            })
            .collect();
        let sql = format!(
            "SELECT * FROM (SELECT {HIT_COLUMNS}, CAST({} AS REAL) AS score
             FROM knowledge_notes n) WHERE score > 0
             ORDER BY score DESC, id DESC LIMIT {limit}",
            parts.join(" + ")
        );
        let conn = self.conn();
        let mut st = conn.prepare(&sql).op("knowledge search")?;
        let rows = st
            .query_map(params_from_iter(terms.iter().map(|t| like_pattern(t))), hit)
            .op("knowledge search")?;
        rows.collect::<Result<_, _>>().op("knowledge search")
    }

    /// Notes by id (any order), score 0.
    pub fn knowledge_by_ids(&self, ids: &[i64]) -> Result<Vec<IndexHit>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let marks = vec!["?"; ids.len()].join(",");
        let conn = self.conn();
        let mut st = conn
            .prepare(&format!(
                "SELECT {HIT_COLUMNS}, 0.0 FROM knowledge_notes n WHERE n.id IN ({marks})"
            ))
            .op("knowledge notes")?;
        let rows = st
            .query_map(params_from_iter(ids.iter()), hit)
            .op("knowledge notes")?;
        rows.collect::<Result<_, _>>().op("knowledge notes")
    }

    /// Up to `limit` notes without a current vector for `model`: `(id, hash, text for the
    /// embedding)` where the text is title, tags and body.
    pub fn knowledge_unembedded(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare_cached(
                "SELECT n.id, n.hash, n.title || char(10) || replace(n.tags, char(10), ', ')
                        || char(10) || char(10) || n.body
                 FROM knowledge_notes n
                 LEFT JOIN knowledge_vectors v
                   ON v.note_id = n.id AND v.model = ?1 AND v.hash = n.hash
                 WHERE v.note_id IS NULL ORDER BY n.id LIMIT ?2",
            )
            .op("knowledge vectors")?;
        let rows = st
            .query_map(params![model, limit as i64], |r| {
                Ok((r.get(0)?, r.get(1)?, r.get(2)?))
            })
            .op("knowledge vectors")?;
        rows.collect::<Result<_, _>>().op("knowledge vectors")
    }

    /// Store vectors `(note id, content hash, little-endian f32 bytes)` for `model`.
    pub fn knowledge_put_vectors(
        &self,
        model: &str,
        vectors: &[(i64, String, Vec<u8>)],
    ) -> Result<(), StoreError> {
        let mut conn = self.conn();
        let tx = conn.transaction().op("knowledge vectors")?;
        for (id, hash, bytes) in vectors {
            // The note may have been removed meanwhile; then there is nothing to attach to.
            tx.execute(
                "INSERT INTO knowledge_vectors(note_id, model, hash, dim, vec)
                 SELECT ?1, ?2, ?3, ?4, ?5 WHERE EXISTS (SELECT 1 FROM knowledge_notes WHERE id = ?1)
                 ON CONFLICT(note_id) DO UPDATE SET
                     model = excluded.model, hash = excluded.hash, dim = excluded.dim,
                     vec = excluded.vec",
                params![id, model, hash, (bytes.len() / 4) as i64, bytes],
            )
            .op("knowledge vectors")?;
        }
        tx.commit().op("knowledge vectors")
    }

    /// Every current vector for `model`: `(note id, little-endian f32 bytes)`.
    pub fn knowledge_vectors(&self, model: &str) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare_cached(
                "SELECT v.note_id, v.vec FROM knowledge_vectors v
                 JOIN knowledge_notes n ON n.id = v.note_id AND n.hash = v.hash
                 WHERE v.model = ?1",
            )
            .op("knowledge vectors")?;
        let rows = st
            .query_map([model], |r| Ok((r.get(0)?, r.get(1)?)))
            .op("knowledge vectors")?;
        rows.collect::<Result<_, _>>().op("knowledge vectors")
    }

    /// `(notes, notes with a current vector for model)`.
    pub fn knowledge_vector_counts(&self, model: &str) -> Result<(i64, i64), StoreError> {
        self.conn()
            .query_row(
                "SELECT (SELECT count(*) FROM knowledge_notes),
                        (SELECT count(*) FROM knowledge_vectors v
                           JOIN knowledge_notes n ON n.id = v.note_id AND n.hash = v.hash
                          WHERE v.model = ?1)",
                [model],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .op("knowledge vectors")
    }
}

impl Db {
    /// One indexed note in full.
    pub fn knowledge_note(&self, path: &str) -> Result<Option<IndexedNote>, StoreError> {
        self.conn()
            .query_row(
                "SELECT path, title, tags, body, created, updated, mtime_ns, size, hash
                 FROM knowledge_notes WHERE path = ?1",
                [path],
                |r| {
                    Ok(IndexedNote {
                        path: r.get(0)?,
                        title: r.get(1)?,
                        tags: split_tags(&r.get::<_, String>(2)?),
                        body: r.get(3)?,
                        created: r.get(4)?,
                        updated: r.get(5)?,
                        mtime_ns: r.get(6)?,
                        size: r.get(7)?,
                        hash: r.get(8)?,
                    })
                },
            )
            .optional()
            .op("knowledge note")
    }
}

/// Keyword search over the two FTS5 indexes (see `super::knowledge_query`): the trigram and the
/// bigram lists fused by reciprocal rank when both answer, a short list filled up from the
/// bigrams of the longer CJK runs, and `LIKE` for a query of short terms only.
fn keyword(db: &Db, query: &Query, limit: usize) -> Result<Vec<IndexHit>, StoreError> {
    let mut lists: Vec<Vec<IndexHit>> = Vec::new();
    if let Some(expr) = query.fts_expression() {
        lists.push(db.knowledge_fts(FtsIndex::Trigram, &expr, limit)?);
    }
    if let Some(expr) = query.cjk_expression() {
        lists.push(db.knowledge_fts(FtsIndex::CjkBigram, &expr, limit)?);
    }
    lists.retain(|l| !l.is_empty());
    let mut hits = match lists.len() {
        0 => Vec::new(),
        1 => lists.pop().unwrap_or_default(),
        _ => fuse(lists, limit),
    };
    if hits.len() < limit && !query.cjk_fill.is_empty() {
        let more = db.knowledge_fts(
            FtsIndex::CjkBigram,
            &phrases(&query.cjk_fill),
            limit + hits.len(),
        )?;
        fill(&mut hits, more, limit);
    }
    if hits.is_empty() && query.fts.is_empty() && query.cjk.is_empty() && !query.short.is_empty() {
        let more = db.knowledge_like(&query.short, limit)?;
        fill(&mut hits, more, limit);
    }
    Ok(hits)
}

/// Ranked lists fused by reciprocal rank (the fused score replaces each hit's own), at most
/// `limit`.
pub(crate) fn fuse(lists: Vec<Vec<IndexHit>>, limit: usize) -> Vec<IndexHit> {
    let fused = rrf(&lists
        .iter()
        .map(|l| l.iter().map(|h| h.id).collect())
        .collect::<Vec<_>>());
    let mut by_id: HashMap<i64, IndexHit> =
        lists.into_iter().flatten().map(|h| (h.id, h)).collect();
    fused
        .into_iter()
        .take(limit)
        .filter_map(|(id, score)| {
            let mut h = by_id.remove(&id)?;
            h.score = score;
            Some(h)
        })
        .collect()
}

/// Add the hits of `more` that `hits` lacks, up to `limit` in all.
pub(crate) fn fill(hits: &mut Vec<IndexHit>, more: Vec<IndexHit>, limit: usize) {
    let have: HashSet<i64> = hits.iter().map(|h| h.id).collect();
    let room = limit.saturating_sub(hits.len());
    hits.extend(
        more.into_iter()
            .filter(|h| !have.contains(&h.id))
            .take(room),
    );
}

/// The SQLite store's knowledge index, waiting in place ([`super::Store::call_blocking`]).
impl KnowledgeIndex for super::Store {
    fn describe(&self) -> String {
        "SQLite FTS5 (trigram and CJK bigram indexes)".into()
    }
    fn files(&self) -> Result<HashMap<String, FileState>, StoreError> {
        self.call_blocking("knowledge files", |db| db.knowledge_files())
    }
    fn file(&self, path: &str) -> Result<Option<FileState>, StoreError> {
        let path = path.to_owned();
        self.call_blocking("knowledge file", move |db| db.knowledge_file(&path))
    }
    fn note(&self, path: &str) -> Result<Option<IndexedNote>, StoreError> {
        let path = path.to_owned();
        self.call_blocking("knowledge note", move |db| db.knowledge_note(&path))
    }
    fn id(&self, path: &str) -> Result<Option<i64>, StoreError> {
        let path = path.to_owned();
        self.call_blocking("knowledge id", move |db| db.knowledge_id(&path))
    }
    /// `still_current` runs on the connection thread while the database is locked, so a scan
    /// can re-check that a file has not been rewritten (and indexed) since the scan read it.
    fn apply_if(
        &self,
        changes: &[IndexChange],
        still_current: StillCurrent,
    ) -> Result<(), StoreError> {
        let changes = changes.to_vec();
        self.call_blocking("knowledge index", move |db| {
            db.knowledge_apply_if(&changes, &*still_current)
        })
    }
    fn count(&self) -> Result<i64, StoreError> {
        self.call_blocking("knowledge count", |db| db.knowledge_count())
    }
    fn keyword(&self, query: &Query, limit: usize) -> Result<Vec<IndexHit>, StoreError> {
        let query = query.clone();
        self.call_blocking("knowledge search", move |db| keyword(db, &query, limit))
    }
    fn by_ids(&self, ids: &[i64]) -> Result<Vec<IndexHit>, StoreError> {
        let ids = ids.to_vec();
        self.call_blocking("knowledge notes", move |db| db.knowledge_by_ids(&ids))
    }
    fn unembedded(
        &self,
        model: &str,
        limit: usize,
    ) -> Result<Vec<(i64, String, String)>, StoreError> {
        let model = model.to_owned();
        self.call_blocking("knowledge vectors", move |db| {
            db.knowledge_unembedded(&model, limit)
        })
    }
    fn put_vectors(
        &self,
        model: &str,
        vectors: &[(i64, String, Vec<u8>)],
    ) -> Result<(), StoreError> {
        let (model, vectors) = (model.to_owned(), vectors.to_vec());
        self.call_blocking("knowledge vectors", move |db| {
            db.knowledge_put_vectors(&model, &vectors)
        })
    }
    fn vectors(&self, model: &str) -> Result<Vec<(i64, Vec<u8>)>, StoreError> {
        let model = model.to_owned();
        self.call_blocking("knowledge vectors", move |db| db.knowledge_vectors(&model))
    }
    fn vector_counts(&self, model: &str) -> Result<(i64, i64), StoreError> {
        let model = model.to_owned();
        self.call_blocking("knowledge vectors", move |db| {
            db.knowledge_vector_counts(&model)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(path: &str, body: &str, mtime: i64) -> IndexedNote {
        IndexedNote {
            path: path.into(),
            title: "T".into(),
            tags: vec!["a".into(), "b".into()],
            body: body.into(),
            created: "c".into(),
            updated: "u".into(),
            mtime_ns: mtime,
            size: body.len() as i64,
            hash: format!("h{mtime}"),
        }
    }

    #[test]
    fn fts5_trigram_is_available_and_kept_in_step() {
        let s = Db::open_in_memory().unwrap();
        s.knowledge_apply(&[IndexChange::Upsert(note(
            "a.md",
            "部署服务器 deployment",
            1,
        ))])
        .unwrap();
        assert_eq!(
            s.knowledge_fts(FtsIndex::Trigram, "\"服务器\"", 5)
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            s.knowledge_fts(FtsIndex::CjkBigram, "\"部署\"", 5)
                .unwrap()
                .len(),
            1
        );
        assert!(s
            .knowledge_fts(FtsIndex::CjkBigram, "\"署部\"", 5)
            .unwrap()
            .is_empty());
        assert_eq!(
            s.knowledge_fts(FtsIndex::Trigram, "\"PLOYM\"", 5)
                .unwrap()
                .len(),
            1
        );
        // A change that is no longer current is skipped.
        s.knowledge_apply_if(
            &[IndexChange::Upsert(note("a.md", "stale words", 0))],
            &|_| false,
        )
        .unwrap();
        assert!(s
            .knowledge_fts(FtsIndex::Trigram, "\"stale\"", 5)
            .unwrap()
            .is_empty());
        s.knowledge_apply(&[IndexChange::Upsert(note("a.md", "fresh words", 2))])
            .unwrap();
        assert!(s
            .knowledge_fts(FtsIndex::Trigram, "\"服务器\"", 5)
            .unwrap()
            .is_empty());
        let hits = s.knowledge_fts(FtsIndex::Trigram, "\"fresh\"", 5).unwrap();
        assert_eq!(hits[0].tags, ["a", "b"]);
        assert!(hits[0].score > 0.0);
        assert_eq!(
            s.knowledge_like(&["fr".into(), "%".into()], 5)
                .unwrap()
                .len(),
            1
        );
        assert!(s.knowledge_like(&["%".into()], 5).unwrap().is_empty());
        s.knowledge_apply(&[IndexChange::Remove("a.md".into())])
            .unwrap();
        assert!(s
            .knowledge_fts(FtsIndex::Trigram, "\"fresh\"", 5)
            .unwrap()
            .is_empty());
        assert_eq!(s.knowledge_count().unwrap(), 0);
    }

    #[test]
    fn cjk_bigrams() {
        assert_eq!(
            cjk_grams("部署服务器 and 猫, ok 日志"),
            "部署 署服 服务 务器 猫 日志"
        );
        assert_eq!(cjk_grams("plain"), "");
    }

    #[test]
    fn ranking_is_capped_to_the_newest_matches() {
        let s = Db::open_in_memory().unwrap();
        let changes: Vec<IndexChange> = (0..RANK_CAP + 10)
            .map(|i| {
                let mut n = note(&format!("{i}.md"), "common word", 1);
                if i == 0 {
                    // The oldest note has the word twice: best BM25, but outside the cap.
                    n.body = "common common word".into();
                }
                IndexChange::Upsert(n)
            })
            .collect();
        s.knowledge_apply(&changes).unwrap();
        let hits = s.knowledge_fts(FtsIndex::Trigram, "\"common\"", 5).unwrap();
        assert_eq!(hits.len(), 5);
        assert!(hits.iter().all(|h| h.path != "0.md"));
        s.knowledge_apply(&[IndexChange::Remove("5.md".into())])
            .unwrap();
        let hits = s
            .knowledge_fts(FtsIndex::Trigram, "\"twice\" OR \"common\"", 3)
            .unwrap();
        assert_eq!(hits.len(), 3);
    }

    #[test]
    fn vectors_follow_the_content_hash() {
        let s = Db::open_in_memory().unwrap();
        s.knowledge_apply(&[IndexChange::Upsert(note("a.md", "x", 1))])
            .unwrap();
        let missing = s.knowledge_unembedded("m", 10).unwrap();
        assert_eq!(missing.len(), 1);
        assert!(
            missing[0].2.starts_with("T\na, b\n\nx"),
            "{:?}",
            missing[0].2
        );
        s.knowledge_put_vectors("m", &[(missing[0].0, "h1".into(), vec![0; 8])])
            .unwrap();
        assert_eq!(s.knowledge_vectors("m").unwrap().len(), 1);
        assert_eq!(s.knowledge_vector_counts("m").unwrap(), (1, 1));
        assert!(s.knowledge_unembedded("m", 10).unwrap().is_empty());
        assert_eq!(s.knowledge_unembedded("other", 10).unwrap().len(), 1);
        s.knowledge_apply(&[IndexChange::Upsert(note("a.md", "y", 2))])
            .unwrap();
        assert!(s.knowledge_vectors("m").unwrap().is_empty());
        s.knowledge_apply(&[IndexChange::Remove("a.md".into())])
            .unwrap();
        assert_eq!(s.knowledge_vector_counts("m").unwrap(), (0, 0));
    }
}
