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
//! With an index shared by replicas (PostgreSQL) the scan keeps what other replicas wrote: an
//! entry whose file is not on this disk is removed only when this folder wrote it, and a changed
//! file is re-indexed only when it is newer than the entry (another replica may hold a newer
//! copy of the note).
//!
//! **Search.** The query is split for the index by [`Query`] (see `crate::store::knowledge_query`
//! for how each kind of term is matched); snippets are cut here.

use super::notes::{self, MAX_DEPTH, MAX_NOTE_BYTES};
use super::KnowledgeError;
use crate::store::knowledge::{FileState, IndexChange, IndexedNote};
use crate::store::knowledge_index::KnowledgeIndex;
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

/// Changes applied per transaction by [`sync`].
const SYNC_CHUNK: usize = 256;
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
    /// Changed files left alone because a shared index holds a newer copy of the note, written
    /// through another replica.
    pub newer_elsewhere: usize,
    /// Files left out, with the reason.
    pub skipped: Vec<String>,
}

pub use crate::store::knowledge::is_cjk;
pub use crate::store::knowledge_query::Query;

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

/// The note of an index entry (a shared index's copy of a note written through another
/// replica).
pub fn note_of(n: IndexedNote) -> notes::Note {
    notes::Note {
        source: n.path,
        title: n.title,
        tags: n.tags,
        created: n.created,
        updated: n.updated,
        body: n.body,
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
/// Returns whether the entry changed. A file that is gone removes the entry only when this
/// folder wrote it, and a shared entry newer than the file is kept (see the module docs).
pub fn refresh_one(
    root: &Path,
    index: &dyn KnowledgeIndex,
    source: &str,
) -> Result<bool, KnowledgeError> {
    let path = root.join(source);
    let known = index.file(source)?;
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let remove = known.as_ref().is_some_and(|k| k.mine);
            if remove {
                index.apply(&[IndexChange::Remove(source.to_string())])?;
            }
            return Ok(remove);
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
    let Some(change) = change_for(known.as_ref(), index.shared(), note, mtime, size, h) else {
        return Ok(false);
    };
    let changed = matches!(change, IndexChange::Upsert(_));
    index.apply(&[change])?;
    Ok(changed)
}

/// The change a file read from disk makes to its entry `known`: none when a shared index holds
/// a different, newer copy; a touch when only the mtime or size moved; else an upsert.
fn change_for(
    known: Option<&FileState>,
    shared: bool,
    note: notes::Note,
    mtime: i64,
    size: i64,
    hash: String,
) -> Option<IndexChange> {
    match known {
        Some(k) if k.hash == hash => Some(IndexChange::Touch {
            path: note.source,
            mtime_ns: mtime,
            size,
        }),
        Some(k) if shared && k.mtime_ns > mtime => None,
        _ => Some(IndexChange::Upsert(indexed(note, mtime, size, hash))),
    }
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
pub fn sync(root: &Path, index: &dyn KnowledgeIndex) -> Result<SyncReport, KnowledgeError> {
    let known: HashMap<String, FileState> = index.files()?;
    let shared = index.shared();
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
                match change_for(k, shared, note, mtime, size, h) {
                    Some(c @ IndexChange::Touch { .. }) => {
                        report.unchanged += 1;
                        changes.push(c);
                    }
                    Some(c) => {
                        report.indexed += 1;
                        changes.push(c);
                    }
                    None => report.newer_elsewhere += 1,
                }
            }
            Err(e) => report.skipped.push(format!("{source}: {e}")),
        }
    }
    for (path, k) in &known {
        if !seen.contains(path.as_str()) && k.mine {
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
    let still_current: crate::store::knowledge_index::StillCurrent =
        std::sync::Arc::new(still_current);
    for chunk in changes.chunks(SYNC_CHUNK) {
        index.apply_if(chunk, still_current.clone())?;
    }
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

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
