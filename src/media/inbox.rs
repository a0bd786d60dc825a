//! Where received files are kept.
//!
//! - The owner's files: `<workspace>/inbox/<YYYY-MM-DD>/<name>` (the date in the configured
//!   time zone), where the owner's file tools find them later. A name already taken by other
//!   bytes gets `-2`, `-3`, … before its extension; the same bytes again reuse the file.
//! - Anyone else's files: a directory of its own under the system temporary directory
//!   (`ethan-turn-<random>`, mode 0700), outside the workspace, removed when the turn ends
//!   ([`Scratch`] on drop; a daemon killed mid-turn leaves one, removed at the next start once
//!   an hour old, [`sweep_stale_scratch`]): nothing a non-owner sends is left where the owner's
//!   tools would later read it as the owner's own.

use std::path::{Path, PathBuf};

/// Longest file name kept, in characters (the extension is kept whole).
const MAX_NAME_CHARS: usize = 100;

/// A file name as it will be written: letters, digits, `.`, `-`, `_` (other characters and
/// spaces become `_`), no leading dot (no hidden files, no `..`), at most
/// [`MAX_NAME_CHARS`] characters; `fallback` when nothing is left.
pub fn sanitise(name: &str, fallback: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or("");
    let mut out: String = base
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    while out.contains("__") {
        out = out.replace("__", "_");
    }
    let out = out
        .trim_start_matches(['.', '_'])
        .trim_end_matches(['.', '_']);
    if out.is_empty() {
        return fallback.to_string();
    }
    if out.chars().count() <= MAX_NAME_CHARS {
        return out.to_string();
    }
    let (stem, ext) = match out.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() && e.chars().count() <= 10 => (s, format!(".{e}")),
        _ => (out, String::new()),
    };
    let keep = MAX_NAME_CHARS - ext.chars().count();
    format!("{}{ext}", stem.chars().take(keep).collect::<String>())
}

/// Write `bytes` as `name` in `dir` (created if missing), not overwriting a different file:
/// the path written, or the existing file holding the same bytes.
pub fn save(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let (stem, ext) = match name.rsplit_once('.') {
        Some((s, e)) if !s.is_empty() => (s.to_string(), format!(".{e}")),
        _ => (name.to_string(), String::new()),
    };
    for n in 1..1000 {
        let candidate = if n == 1 {
            dir.join(name)
        } else {
            dir.join(format!("{stem}-{n}{ext}"))
        };
        match std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&candidate)
        {
            Ok(mut f) => {
                use std::io::Write;
                f.write_all(bytes)?;
                return Ok(candidate);
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                // Never follow a link planted in the inbox; only a regular file can match.
                let same = std::fs::symlink_metadata(&candidate)
                    .map(|m| m.is_file() && m.len() == bytes.len() as u64)
                    .unwrap_or(false)
                    && std::fs::read(&candidate).is_ok_and(|b| b == bytes);
                if same {
                    return Ok(candidate);
                }
            }
            Err(e) => return Err(e),
        }
    }
    Err(std::io::Error::other("too many files of that name"))
}

/// A non-owner's files for one turn: a private directory outside the workspace, removed with
/// everything in it when dropped.
#[derive(Debug)]
pub struct Scratch {
    dir: PathBuf,
}

/// The name prefix of a [`Scratch`] directory.
const SCRATCH_PREFIX: &str = "ethan-turn-";

/// Remove the scratch directories in `tmp` older than `older_than` (left by a daemon that was
/// killed mid-turn; a live turn's directory is younger). Links and files are left alone.
/// Returns how many were removed.
pub fn sweep_stale_scratch(tmp: &Path, older_than: std::time::Duration) -> usize {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return 0;
    };
    let mut removed = 0;
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(SCRATCH_PREFIX) {
            continue;
        }
        let Ok(meta) = std::fs::symlink_metadata(e.path()) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age > older_than);
        if meta.is_dir() && old && std::fs::remove_dir_all(e.path()).is_ok() {
            removed += 1;
        }
    }
    removed
}

impl Scratch {
    pub fn new() -> std::io::Result<Scratch> {
        let dir =
            std::env::temp_dir().join(format!("{SCRATCH_PREFIX}{}", uuid::Uuid::new_v4().simple()));
        let mut b = std::fs::DirBuilder::new();
        #[cfg(unix)]
        {
            use std::os::unix::fs::DirBuilderExt;
            b.mode(0o700);
        }
        b.create(&dir)?;
        Ok(Scratch { dir })
    }

    pub fn path(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = std::fs::remove_dir_all(&self.dir) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!("could not remove {}: {e}", self.dir.display());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_made_safe() {
        assert_eq!(sanitise("../../etc/passwd", "f"), "passwd");
        assert_eq!(sanitise("..", "f"), "f");
        assert_eq!(sanitise(".bashrc", "f"), "bashrc");
        assert_eq!(
            sanitise("My Report (final).pdf", "f"),
            "My_Report_final_.pdf"
        );
        assert_eq!(sanitise("报告.pdf", "f"), "报告.pdf");
        assert_eq!(sanitise("a\0b;rm -rf.txt", "f"), "a_b_rm_-rf.txt");
        let long = format!("{}.pdf", "x".repeat(300));
        let s = sanitise(&long, "f");
        assert_eq!(s.chars().count(), MAX_NAME_CHARS);
        assert!(s.ends_with(".pdf"));
    }

    #[test]
    fn save_never_overwrites_and_reuses_the_same_bytes() {
        let d = tempfile::tempdir().unwrap();
        let a = save(d.path(), "r.txt", b"one").unwrap();
        let again = save(d.path(), "r.txt", b"one").unwrap();
        assert_eq!(a, again);
        let b = save(d.path(), "r.txt", b"two").unwrap();
        assert_eq!(b, d.path().join("r-2.txt"));
        assert_eq!(std::fs::read(&a).unwrap(), b"one");
    }

    #[test]
    fn only_old_scratch_directories_are_swept() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("ethan-turn-abc")).unwrap();
        std::fs::create_dir(d.path().join("other")).unwrap();
        let hour = std::time::Duration::from_secs(3600);
        assert_eq!(sweep_stale_scratch(d.path(), hour), 0, "a young one stays");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert_eq!(sweep_stale_scratch(d.path(), std::time::Duration::ZERO), 1);
        assert!(!d.path().join("ethan-turn-abc").exists());
        assert!(d.path().join("other").exists());
    }

    #[test]
    fn scratch_is_removed_on_drop() {
        let s = Scratch::new().unwrap();
        let p = s.path().to_path_buf();
        std::fs::write(p.join("x"), b"y").unwrap();
        drop(s);
        assert!(!p.exists());
    }
}
