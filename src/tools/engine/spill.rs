//! Spill files: when a tool's output is cut for the model, the full output is written to
//! `$ETHAN_HOME/spill/<execution_id>.txt` and its path goes into the result's metadata and the
//! audit entry. Files older than `retention.spill_days` are removed at start and daily.

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
