//! Spill files: when a tool's output is cut for the model, the full output is written to
//! `$ETHAN_HOME/spill/<execution_id>.txt` and its path goes into the result's metadata and the
//! audit entry. Files older than `retention.spill_days` are removed at start and daily.
//!
//! Pictures a tool saves from what it was given (browser screenshots, an MCP server's images)
//! are kept the same way everywhere: each folder holds at most [`SAVED_PICTURES_BYTES`], the
//! oldest removed first after each save ([`keep_within`]), so whatever a page or a server sends,
//! a folder cannot grow past it.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Write `text` for `execution_id` under `dir`; returns the path. On failure (a full disk, a
/// file-size limit: `EFBIG` once `SIGXFSZ` is ignored) nothing is left behind: a partial file
/// would pass for the full output.
pub fn write(dir: &Path, execution_id: &str, text: &str) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let safe: String = execution_id
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .collect();
    let path = dir.join(format!("{safe}.txt"));
    if let Err(e) = std::fs::write(&path, text) {
        let _ = std::fs::remove_file(&path);
        return Err(e);
    }
    Ok(path)
}

/// The most a folder of saved pictures holds, bytes (64 MiB).
pub const SAVED_PICTURES_BYTES: u64 = 64 * 1024 * 1024;

/// Remove the oldest files of `dir` (by modification time, then name) until the rest take at
/// most `max_bytes`; returns how many were removed. Not a folder: nothing.
pub fn keep_within(dir: &Path, max_bytes: u64) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut files: Vec<(SystemTime, PathBuf, u64)> = rd
        .flatten()
        .filter_map(|e| {
            let m = e.metadata().ok().filter(|m| m.is_file())?;
            Some((
                m.modified().unwrap_or(SystemTime::UNIX_EPOCH),
                e.path(),
                m.len(),
            ))
        })
        .collect();
    ethan_core::sort::sort(&mut files);
    let mut total: u64 = files.iter().map(|f| f.2).sum();
    let mut removed = 0;
    for (_, path, len) in files {
        if total <= max_bytes {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
            removed += 1;
        }
    }
    removed
}

/// Remove spill files older than `days`; returns how many were removed.
pub fn prune(dir: &Path, days: u32) -> usize {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return 0;
    };
    let cutoff = SystemTime::now() - Duration::from_secs(u64::from(days) * 86_400);
    let mut n = 0;
    for e in rd.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .is_ok_and(|t| t < cutoff);
        if old
            && e.path().extension().is_some_and(|x| x == "txt")
            && std::fs::remove_file(e.path()).is_ok()
        {
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_folder_of_pictures_keeps_its_newest_within_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        for (i, name) in ["a", "b", "c", "d"].iter().enumerate() {
            let path = dir.path().join(name);
            std::fs::write(&path, vec![0u8; 100]).unwrap();
            let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000 + i as u64);
            std::fs::File::options()
                .write(true)
                .open(&path)
                .unwrap()
                .set_modified(t)
                .unwrap();
        }
        assert_eq!(keep_within(dir.path(), 250), 2);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["c", "d"]);
        assert_eq!(keep_within(dir.path(), 250), 0);
        assert_eq!(keep_within(&dir.path().join("none"), 0), 0);
    }

    #[test]
    fn writes_and_prunes() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(dir.path(), "abc-123/../x", "full").unwrap();
        assert_eq!(p.file_name().unwrap(), "abc-123x.txt");
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "full");
        assert_eq!(prune(dir.path(), 1), 0);
        let old = SystemTime::now() - Duration::from_secs(3 * 86_400);
        std::fs::File::options()
            .write(true)
            .open(&p)
            .unwrap()
            .set_modified(old)
            .unwrap();
        assert_eq!(prune(dir.path(), 1), 1);
        assert!(!p.exists());
    }
}
