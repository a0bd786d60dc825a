//! The keyword index: keeping SQLite in step with the files, and searching it.
//!
//! **Sync.** [`sync`] walks the knowledge folder (no symlinks, no hidden entries, `.md` files
//! only) and compares each file with what the index holds: the same mtime and size → nothing to
//! do; otherwise the file is read and hashed (SHA-256) — the same hash → only the mtime is
//! recorded, a new hash → the note is parsed and re-indexed. Indexed files that are gone are
//! removed. Changes go in short transactions, each change re-checked against the file right
//! before it is applied so a tool write that raced the scan is never overwritten by older
//! content.
//!
//! **Search.** The query is split into terms (runs of letters and digits; a run of CJK
//! characters is a term of its own, so `Rust部署` is `rust` + `部署`), and each term goes where
//! it can be matched:
//! - three characters or more → the trigram index (any substring of three characters or more
//!   matches, in any script), as an `OR` of phrases ranked by BM25 with title and tags weighted
//!   above the body; a CJK run longer than three characters is given as its overlapping
//!   trigrams, so `如何部署服务器` finds a note that says `服务器部署`;
//! - a two-character CJK word (`部署`) → the CJK bigram index, which trigrams cannot serve;
//! - anything shorter (`Go`, `猫`) → `LIKE` over title, tags and body, when the query has
//!   nothing longer (a scan of every note: correct, but the slow path).
//!
//! When both indexes answer, their lists are fused by reciprocal rank; a list shorter than the
//! limit is filled up from the bigrams of the longer CJK runs.

use super::notes::{self, MAX_DEPTH, MAX_NOTE_BYTES};
use super::KnowledgeError;
use crate::store::knowledge::{FileState, FtsIndex, IndexChange, IndexHit, IndexedNote};
use crate::store::Store;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Changes applied per transaction by [`sync`].
const SYNC_CHUNK: usize = 256;
/// Most terms taken from one query.
const MAX_TERMS: usize = 24;
/// Characters of body shown around a match.
const SNIPPET_CHARS: usize = 160;
/// Characters of context before the match in a snippet.
const SNIPPET_BEFORE: usize = 40;
/// Characters of a body searched for the snippet's anchor.
const SNIPPET_SCAN_CHARS: usize = 100_000;

/// What a [`sync`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SyncReport {
    /// Note files found.
    pub files: usize,
    /// Notes (re-)indexed because they are new or their content changed.
    pub indexed: usize,
    /// Notes whose content was unchanged (only the mtime moved).
    pub unchanged: usize,
    /// Notes removed from the index because their file is gone.
    pub removed: usize,
    /// Files left out, with the reason.
    pub skipped: Vec<String>,
}

pub use crate::store::knowledge::is_cjk;

/// A search query split for the indexes (see the module docs).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    /// Phrases for the trigram index (three characters or more).
    pub fts: Vec<String>,
    /// Two-character CJK words, for the bigram index.
    pub cjk: Vec<String>,
    /// The bigrams of longer CJK runs, for filling up.
    pub cjk_fill: Vec<String>,
    /// Shorter terms (one or two characters, not a CJK pair), for `LIKE`.
    pub short: Vec<String>,
    /// Every term, for snippets.
    pub all: Vec<String>,
}

fn push(v: &mut Vec<String>, t: String) {
    if !v.contains(&t) && v.len() < MAX_TERMS {
        v.push(t);
    }
}

fn phrases(terms: &[String]) -> String {
    terms
        .iter()
        .map(|t| format!("\"{}\"", t.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(" OR ")
}

impl Query {
    pub fn parse(q: &str) -> Query {
        let mut terms: Vec<String> = Vec::new();
        for word in q.split(|c: char| !(c.is_alphanumeric() || "_-.+#@".contains(c))) {
            let word = word.trim_matches(|c: char| "-.".contains(c)).to_lowercase();
            // Split at boundaries between CJK and other scripts.
            let mut cur = String::new();
            let mut cur_cjk = None;
            for c in word.chars() {
                let k = is_cjk(c);
                if cur_cjk.is_some_and(|p| p != k) && !cur.is_empty() {
                    terms.push(std::mem::take(&mut cur));
                }
                cur_cjk = Some(k);
                cur.push(c);
            }
            if !cur.is_empty() {
                terms.push(cur);
            }
        }
        let mut seen = HashSet::new();
        terms.retain(|t| !t.is_empty() && seen.insert(t.clone()));
        terms.truncate(MAX_TERMS);

        let mut out = Query {
            all: terms.clone(),
            ..Query::default()
        };
        for t in terms {
            let chars: Vec<char> = t.chars().collect();
            let cjk = chars.iter().copied().all(is_cjk);
            match (cjk, chars.len()) {
                (true, 2) => push(&mut out.cjk, t),
                (_, 0..=2) => push(&mut out.short, t),
                (true, n) => {
                    if n == 3 {
                        push(&mut out.fts, t);
                    } else {
                        for w in chars.windows(3) {
                            push(&mut out.fts, w.iter().collect());
                        }
                    }
                    for w in chars.windows(2) {
                        push(&mut out.cjk_fill, w.iter().collect());
                    }
                }
                (false, _) => push(&mut out.fts, t),
            }
        }
        out
    }

    /// The FTS5 expression for the trigram index: the phrases joined by `OR`, or `None`.
    pub fn fts_expression(&self) -> Option<String> {
        (!self.fts.is_empty()).then(|| phrases(&self.fts))
    }

    /// The FTS5 expression for the bigram index, or `None`.
    pub fn cjk_expression(&self) -> Option<String> {
        (!self.cjk.is_empty()).then(|| phrases(&self.cjk))
    }
}

/// Keyword search (see the module docs). Best first; at most `limit`.
pub fn keyword(
    store: &Store,
    query: &Query,
    limit: usize,
) -> Result<Vec<IndexHit>, KnowledgeError> {
    let mut lists: Vec<Vec<IndexHit>> = Vec::new();
    if let Some(expr) = query.fts_expression() {
        lists.push(store.knowledge_fts(FtsIndex::Trigram, &expr, limit)?);
    }
    if let Some(expr) = query.cjk_expression() {
        lists.push(store.knowledge_fts(FtsIndex::CjkBigram, &expr, limit)?);
    }
    lists.retain(|l| !l.is_empty());
    let mut hits = match lists.len() {
        0 => Vec::new(),
        1 => lists.pop().unwrap_or_default(),
        _ => {
            let fused = super::embed::rrf(
                &lists
                    .iter()
                    .map(|l| l.iter().map(|h| h.id).collect())
                    .collect::<Vec<_>>(),
            );
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
    };
    let fill = |hits: &mut Vec<IndexHit>, more: Vec<IndexHit>| {
        let have: HashSet<i64> = hits.iter().map(|h| h.id).collect();
        let room = limit.saturating_sub(hits.len());
        hits.extend(
            more.into_iter()
                .filter(|h| !have.contains(&h.id))
                .take(room),
        );
    };
    if hits.len() < limit && !query.cjk_fill.is_empty() {
        let more = store.knowledge_fts(
            FtsIndex::CjkBigram,
            &phrases(&query.cjk_fill),
            limit + hits.len(),
        )?;
        fill(&mut hits, more);
    }
    if hits.is_empty() && query.fts.is_empty() && query.cjk.is_empty() && !query.short.is_empty() {
        let more = store.knowledge_like(&query.short, limit)?;
        fill(&mut hits, more);
    }
    Ok(hits)
}

/// About [`SNIPPET_CHARS`] characters of `body` around the first occurrence of any of `terms`
/// (case-insensitive), on one line, with `…` where it was cut.
pub fn snippet(body: &str, terms: &[String]) -> String {
    let chars: Vec<char> = body.chars().take(SNIPPET_SCAN_CHARS).collect();
    let lower: Vec<char> = chars
        .iter()
        .map(|c| c.to_lowercase().next().unwrap_or(*c))
        .collect();
    let mut first: Option<usize> = None;
    for t in terms {
        let t: Vec<char> = t.chars().flat_map(char::to_lowercase).collect();
        if t.is_empty() || t.len() > lower.len() {
            continue;
        }
        let limit = first.unwrap_or(lower.len());
        if let Some(p) = lower
            .windows(t.len())
            .take(limit)
            .position(|w| w == t.as_slice())
        {
            first = Some(p);
        }
    }
    let start = first.map_or(0, |p| p.saturating_sub(SNIPPET_BEFORE));
    let end = (start + SNIPPET_CHARS).min(chars.len());
    let mut s = String::new();
    if start > 0 {
        s.push('…');
    }
    let piece: String = chars[start..end].iter().collect();
    s.push_str(&piece.split_whitespace().collect::<Vec<_>>().join(" "));
    if end < body.chars().count().min(SNIPPET_SCAN_CHARS + 1) {
        s.push('…');
    }
    s
}

/// `(mtime in ns since the epoch, size)` of file metadata.
pub fn stamp(m: &std::fs::Metadata) -> (i64, i64) {
    let mtime = m
        .modified()
        .ok()
        .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX));
    (mtime, i64::try_from(m.len()).unwrap_or(i64::MAX))
}

/// Hex SHA-256.
pub fn hash(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn rfc3339_of_ns(ns: i64) -> String {
    chrono::DateTime::from_timestamp(ns.div_euclid(1_000_000_000), 0)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string())
        .unwrap_or_default()
}

/// The index row of a note read from a file.
pub fn indexed(note: notes::Note, mtime_ns: i64, size: i64, hash: String) -> IndexedNote {
    IndexedNote {
        path: note.source,
        title: note.title,
        tags: note.tags,
        body: note.body,
        created: note.created,
        updated: note.updated,
        mtime_ns,
        size,
        hash,
    }
}

/// Read and parse the note file at `path` (`source` names it). Refuses files over
/// [`MAX_NOTE_BYTES`].
pub fn read_file(
    path: &Path,
    source: &str,
) -> Result<(notes::Note, i64, i64, String), KnowledgeError> {
    let io = |e: std::io::Error| {
        if e.kind() == std::io::ErrorKind::NotFound {
            KnowledgeError::NotFound(source.to_string())
        } else {
            KnowledgeError::Io {
                path: path.display().to_string(),
                source: e,
            }
        }
    };
    let meta = std::fs::symlink_metadata(path).map_err(io)?;
    if meta.file_type().is_symlink() {
        return Err(KnowledgeError::Symlink(source.to_string()));
    }
    if meta.is_dir() {
        return Err(KnowledgeError::BadSource {
            given: source.to_string(),
            reason: "it is a folder".into(),
        });
    }
    if meta.len() > MAX_NOTE_BYTES as u64 {
        return Err(KnowledgeError::TooLarge {
            given: source.to_string(),
            bytes: meta.len(),
        });
    }
    let bytes = std::fs::read(path).map_err(io)?;
    let (mtime, _) = stamp(&meta);
    let note = notes::parse(
        source,
        &String::from_utf8_lossy(&bytes),
        &rfc3339_of_ns(mtime),
    );
    Ok((note, mtime, bytes.len() as i64, hash(&bytes)))
}

/// Bring the index entry of one file up to date (re-read only when its mtime or size moved).
/// Returns whether the entry changed.
pub fn refresh_one(root: &Path, store: &Store, source: &str) -> Result<bool, KnowledgeError> {
    let path = root.join(source);
    let known = store.knowledge_file(source)?;
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if known.is_some() {
                store.knowledge_apply(&[IndexChange::Remove(source.to_string())])?;
            }
            return Ok(known.is_some());
        }
        Err(e) => {
            return Err(KnowledgeError::Io {
                path: path.display().to_string(),
                source: e,
            })
        }
    };
    let (mtime, size) = stamp(&meta);
    if known
        .as_ref()
        .is_some_and(|k| k.mtime_ns == mtime && k.size == size)
    {
        return Ok(false);
    }
    let (note, mtime, size, h) = read_file(&path, source)?;
    let change = match known {
        Some(k) if k.hash == h => IndexChange::Touch {
            path: source.to_string(),
            mtime_ns: mtime,
            size,
        },
        _ => IndexChange::Upsert(indexed(note, mtime, size, h)),
    };
    let changed = matches!(change, IndexChange::Upsert(_));
    store.knowledge_apply(&[change])?;
    Ok(changed)
}

/// Every `.md` file under `root`: `(source, path)`. Symlinks, hidden entries and folders
/// deeper than [`MAX_DEPTH`] are skipped (and listed in `skipped`).
fn walk(root: &Path, skipped: &mut Vec<String>) -> Vec<(String, PathBuf, std::fs::Metadata)> {
    let mut out = Vec::new();
    let mut stack: Vec<(PathBuf, usize)> = vec![(root.to_path_buf(), 0)];
    while let Some((dir, depth)) = stack.pop() {
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) => {
                skipped.push(format!("{}: {e}", dir.display()));
                continue;
            }
        };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let Some(name_str) = name.to_str() else {
                skipped.push(format!("{}: the name is not UTF-8", entry.path().display()));
                continue;
            };
            if name_str.starts_with('.') {
                continue;
            }
            let path = entry.path();
            let Ok(meta) = std::fs::symlink_metadata(&path) else {
                continue;
            };
            let ft = meta.file_type();
            if ft.is_symlink() {
                skipped.push(format!(
                    "{}: symbolic links are not followed",
                    path.display()
                ));
            } else if ft.is_dir() {
                if depth < MAX_DEPTH {
                    stack.push((path, depth + 1));
                } else {
                    skipped.push(format!("{}: nested too deeply", path.display()));
                }
            } else if ft.is_file() && name_str.ends_with(".md") {
                if let Some(source) = notes::source_of(root, &path) {
                    out.push((source, path, meta));
                }
            }
        }
    }
    out
}

/// Bring the index in step with the files under `root` (see the module docs).
pub fn sync(root: &Path, store: &Store) -> Result<SyncReport, KnowledgeError> {
    let known: HashMap<String, FileState> = store.knowledge_files()?;
    let mut report = SyncReport::default();
    let files = walk(root, &mut report.skipped);
    report.files = files.len();
    let mut seen: HashSet<&str> = HashSet::new();
    let mut changes = Vec::new();
    for (source, path, meta) in &files {
        let (mtime, size) = stamp(meta);
        let k = known.get(source);
        if k.is_some_and(|k| k.mtime_ns == mtime && k.size == size) {
            seen.insert(source);
            continue;
        }
        match read_file(path, source) {
            Ok((note, mtime, size, h)) => {
                seen.insert(source);
                if k.is_some_and(|k| k.hash == h) {
                    report.unchanged += 1;
                    changes.push(IndexChange::Touch {
                        path: source.clone(),
                        mtime_ns: mtime,
                        size,
                    });
                } else {
                    report.indexed += 1;
                    changes.push(IndexChange::Upsert(indexed(note, mtime, size, h)));
                }
            }
            Err(e) => report.skipped.push(format!("{source}: {e}")),
        }
    }
    for path in known.keys() {
        if !seen.contains(path.as_str()) {
            report.removed += 1;
            changes.push(IndexChange::Remove(path.clone()));
        }
    }
    if changes.is_empty() {
        return Ok(report);
    }
    let root = root.to_path_buf();
    let current = {
        let root = root.clone();
        move |path: &str, mtime: i64, size: i64| {
            std::fs::symlink_metadata(root.join(path))
                .map(|m| stamp(&m) == (mtime, size))
                .unwrap_or(false)
        }
    };
    let still_current = move |c: &IndexChange| match c {
        IndexChange::Upsert(n) => current(&n.path, n.mtime_ns, n.size),
        IndexChange::Touch {
            path,
            mtime_ns,
            size,
        } => current(path, *mtime_ns, *size),
        IndexChange::Remove(path) => std::fs::symlink_metadata(root.join(path)).is_err(),
    };
    // Short transactions, so a tool write on another connection never waits long.
    let still_current: std::sync::Arc<dyn Fn(&IndexChange) -> bool + Send + Sync> =
        std::sync::Arc::new(still_current);
    for chunk in changes.chunks(SYNC_CHUNK) {
        store.knowledge_apply_if(chunk, still_current.clone())?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(s: &str) -> Query {
        Query::parse(s)
    }

    #[test]
    fn queries_split_by_script_and_length() {
        let x = q("Deploy the server, Go!");
        assert_eq!(x.fts, ["deploy", "the", "server"]);
        assert_eq!(x.short, ["go"]);
        assert!(x.cjk.is_empty() && x.cjk_fill.is_empty());
        let x = q("Rust部署 猫");
        assert_eq!(x.fts, ["rust"]);
        assert_eq!(x.cjk, ["部署"]);
        assert_eq!(x.short, ["猫"]);
        let x = q("如何部署服务器");
        assert_eq!(x.fts, ["如何部", "何部署", "部署服", "署服务", "服务器"]);
        assert!(x.cjk_fill.contains(&"部署".to_string()));
        assert_eq!(q("服务器").fts, ["服务器"]);
        assert_eq!(
            q("say \"hi\" OR NOT x*").fts_expression().unwrap(),
            "\"say\" OR \"not\""
        );
        assert_eq!(q("   ").fts_expression(), None);
        assert_eq!(q("a\"b").all, ["a", "b"]);
    }

    #[test]
    fn snippets_centre_on_the_first_match() {
        let body = format!("{} needle {}", "word ".repeat(40), "tail ".repeat(40));
        let s = snippet(&body, &["NEEDLE".into()]);
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.contains("needle"));
        assert_eq!(snippet("short\nbody", &["zzz".into()]), "short body");
        let s = snippet("服务器部署的步骤", &["部署".into()]);
        assert_eq!(s, "服务器部署的步骤");
    }
}
