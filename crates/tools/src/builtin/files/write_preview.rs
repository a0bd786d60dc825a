//! What a `file_write` approval shows: the text that will be written and what happens to the
//! file, so the owner approves the content and not only a byte count.
//!
//! - The whole text, when the approval can show it: the description, as the consent rule will
//!   show it (`ethan_core::consent::display`: invisible characters escaped, line breaks marked), fits
//!   [`BUDGET`] UTF-16 units, which leaves 800 of the approval's 3,000 for what the consent rule
//!   adds (a sub-agent's or a data-egress prefix). The length is measured from above
//!   ([`shown_len_at_most`]), so a description judged to fit always does.
//! - Otherwise its first and last lines (each cut at [`LINE_CHARS`] characters), how many lines
//!   are not shown, the total size, the SHA-256 of the text, and the path of a preview file
//!   holding the whole text: `$ETHAN_HOME/previews/<first 16 hex digits of the hash>.txt`,
//!   mode 0600, which the owner can open before answering (the folder is protected: no tool
//!   can read or change it).
//! - Whether the call creates the file, replaces one (and its size), or appends to one.

use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};

/// The most UTF-16 units of the description once made visible: the approval's limit
/// (`ethan_core::consent::display::MAX_LEN`, 3,000) less room for the consent rule's prefixes.
pub const BUDGET: usize = 2_200;

/// The most characters of one line shown when the text is cut.
pub const LINE_CHARS: usize = 120;

/// The most lines shown at each end when the text is cut.
const END_LINES: usize = 8;

/// Preview files older than this are removed when a new one is written.
const PREVIEW_DAYS: u64 = 7;

/// What the file is before the call: absent, or a file of this many bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Before {
    Absent,
    File(u64),
}

impl Before {
    /// The file at `path` now (anything that is not a regular file counts as absent: the write
    /// will fail on a folder and say so).
    pub fn of(path: &Path) -> Before {
        match std::fs::metadata(path) {
            Ok(m) if m.is_file() => Before::File(m.len()),
            _ => Before::Absent,
        }
    }
}

/// The first line of the description: what will happen to which file.
fn headline(path: &Path, content: &str, append: bool, before: Before) -> String {
    let size = bytes(content.len() as u64);
    let what = match (append, before) {
        (false, Before::Absent) => "creates it".to_string(),
        (false, Before::File(n)) => format!("replaces a file of {}", bytes(n)),
        (true, Before::Absent) => "creates it".to_string(),
        (true, Before::File(n)) => format!("after its {}", bytes(n)),
    };
    let verb = if append { "append" } else { "write" };
    let lines = content.lines().count();
    let shape = if lines > 1 {
        format!("{size}, {} lines", thousands(lines as u64))
    } else {
        size
    };
    format!("{verb} {shape} to {} ({what})", path.display())
}

/// The description of the write (see the module docs); `preview_dir` is where a preview file
/// of a text too long to show goes (`None`: none is written).
pub fn describe(
    path: &Path,
    content: &str,
    append: bool,
    before: Before,
    preview_dir: Option<&Path>,
) -> String {
    let head = headline(path, content, append, before);
    let whole = if content.is_empty() {
        format!("{head}: nothing (the file is left empty)")
    } else {
        format!("{head}:\n{content}")
    };
    if fits(&whole) {
        return whole;
    }
    let hash = hex::encode(Sha256::digest(content.as_bytes()));
    let preview = preview_dir.and_then(|dir| write_preview(dir, &hash, content));
    let tail = match &preview {
        Some(p) => format!("the whole text: {}", p.display()),
        None => "no preview file could be written".to_string(),
    };
    let lines: Vec<&str> = content.lines().collect();
    let mut n = END_LINES;
    loop {
        let cut = cut_text(&head, &hash, &lines, n, &tail);
        if n == 0 || fits(&cut) {
            return cut;
        }
        n -= 1;
    }
}

/// The description of a text too long to show: `n` lines at each end (every line when there
/// are no more than `2n`), each cut at [`LINE_CHARS`] characters.
fn cut_text(head: &str, hash: &str, lines: &[&str], n: usize, tail: &str) -> String {
    let mut out = format!("{head}\nSHA-256 {hash}\n");
    let shown = |l: &&str| {
        let mut s: String = l.chars().take(LINE_CHARS).collect();
        if s.len() < l.len() {
            s.push('…');
        }
        s.push('\n');
        s
    };
    if n > 0 && lines.len() <= 2 * n {
        out.push_str(&format!(
            "its lines, each cut at {LINE_CHARS} characters:\n"
        ));
        out.extend(lines.iter().map(shown));
    } else if n > 0 {
        out.push_str("first lines:\n");
        out.extend(lines.iter().take(n).map(shown));
        out.push_str(&format!(
            "… {} lines not shown …\nlast lines:\n",
            thousands((lines.len() - 2 * n) as u64)
        ));
        out.extend(lines[lines.len() - n..].iter().map(shown));
    }
    out.push_str(tail);
    out
}

fn fits(description: &str) -> bool {
    shown_len_at_most(description) <= BUDGET
}

/// At least as many UTF-16 units as `text` takes once made visible for an approval: a line
/// break is a mark and a break (2), a character of the common scripts (printable ASCII, Latin-1
/// letters, Greek and Cyrillic, kana, CJK ideographs, Hangul syllables) is itself (1), and any
/// other character is counted as the longest escape the approval may show it as (`\u{10ffff}`,
/// 10): those ranges hold no character the approval escapes, and folding spaces only shortens.
pub fn shown_len_at_most(text: &str) -> usize {
    text.chars()
        .map(|c| match c as u32 {
            0x0a => 2,
            0x09 | 0x20..=0x7e | 0xc0..=0xff | 0x370..=0x4ff => 1,
            0x3040..=0x30ff | 0x4e00..=0x9fff | 0xac00..=0xd7af => 1,
            _ => 10,
        })
        .sum()
}

/// Write `content` to `<dir>/<16 hex digits>.txt` (0600, the folder 0700), removing previews
/// older than [`PREVIEW_DAYS`]; its path, or `None` when it cannot be written (logged).
fn write_preview(dir: &Path, hash: &str, content: &str) -> Option<PathBuf> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let made = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir);
    let path = dir.join(format!("{}.txt", &hash[..16]));
    let written = made.and_then(|()| {
        prune(dir);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&path)?;
        f.write_all(content.as_bytes())
    });
    match written {
        Ok(()) => Some(path),
        Err(e) => {
            tracing::warn!("cannot write the preview {}: {e}", path.display());
            None
        }
    }
}

/// Remove the previews of `dir` older than [`PREVIEW_DAYS`].
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let max_age = std::time::Duration::from_secs(PREVIEW_DAYS * 86_400);
    for e in entries.flatten() {
        let old = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > max_age);
        if old {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// `1 byte`, `13 bytes`, `51,200 bytes`.
fn bytes(n: u64) -> String {
    if n == 1 {
        "1 byte".into()
    } else {
        format!("{} bytes", thousands(n))
    }
}

fn thousands(n: u64) -> String {
    ethan_core::consent::display::thousands(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measure_is_never_below_what_the_approval_shows() {
        use ethan_core::consent::display;
        assert_eq!(BUDGET + 800, display::MAX_LEN);
        let samples = [
            "plain ASCII text, with punctuation!?\n\tand a tab",
            "Grüße, ça va? Ελληνικά, русский, 日本語のテキスト, 한국어, 中文",
            "\u{1b}[2J\r\u{202e}bidi\u{200b}zero\u{a0}nbsp\u{3164}\u{e0041}\u{feff}\u{ad}",
            "emoji 😀🎉 and symbols ∑ → ✓ ⏎",
        ];
        for s in samples {
            let shown = display::visible(s).encode_utf16().count();
            assert!(shown_len_at_most(s) >= shown, "{s:?}: {shown}");
        }
        // Every character the approval escapes is counted at the longest escape.
        for c in (0..=0x10ffffu32).filter_map(char::from_u32) {
            if display::is_invisible(c) && c != '\n' && c != '\t' && c != ' ' {
                assert_eq!(shown_len_at_most(&c.to_string()), 10, "{:x}", c as u32);
            }
        }
    }

    #[test]
    fn a_short_text_is_shown_whole_with_what_happens_to_the_file() {
        let p = Path::new("/ws/hello.txt");
        assert_eq!(
            describe(p, "Hello, World!", false, Before::Absent, None),
            "write 13 bytes to /ws/hello.txt (creates it):\nHello, World!"
        );
        assert_eq!(
            describe(p, "hi\nthere\n", false, Before::File(2), None),
            "write 9 bytes, 2 lines to /ws/hello.txt (replaces a file of 2 bytes):\nhi\nthere\n"
        );
        assert_eq!(
            describe(p, "more", true, Before::File(1_234), None),
            "append 4 bytes to /ws/hello.txt (after its 1,234 bytes):\nmore"
        );
        assert!(describe(p, "", false, Before::File(5), None).ends_with("left empty)"));
    }

    #[test]
    fn a_long_text_shows_its_ends_size_hash_and_a_preview_file() {
        let dir = tempfile::tempdir().unwrap();
        let previews = dir.path().join("previews");
        let content: String = (1..=1000)
            .map(|i| format!("line {i:04} {}\n", "x".repeat(40)))
            .collect();
        assert!(content.len() > 50_000);
        let d = describe(
            Path::new("/ws/big.txt"),
            &content,
            false,
            Before::Absent,
            Some(&previews),
        );
        assert!(fits(&d), "{} units", shown_len_at_most(&d));
        let hash = hex::encode(Sha256::digest(content.as_bytes()));
        assert!(
            d.starts_with("write 51,000 bytes, 1,000 lines to /ws/big.txt (creates it)"),
            "{d}"
        );
        assert!(d.contains(&format!("SHA-256 {hash}")), "{d}");
        assert!(d.contains("line 0001") && d.contains("line 1000"), "{d}");
        assert!(!d.contains("line 0500"), "{d}");
        assert!(d.contains("lines not shown"), "{d}");
        let preview = previews.join(format!("{}.txt", &hash[..16]));
        assert!(
            d.ends_with(&format!("the whole text: {}", preview.display())),
            "{d}"
        );
        assert_eq!(std::fs::read_to_string(&preview).unwrap(), content);
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&preview).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        // One enormous line: no line shown in full, and still within the budget.
        let d = describe(
            Path::new("/ws/one"),
            &"y".repeat(100_000),
            false,
            Before::Absent,
            None,
        );
        assert!(fits(&d) && d.contains("no preview file"), "{d}");
        assert!(
            d.contains(&format!("\n{}…\n", "y".repeat(LINE_CHARS))),
            "{d}"
        );
    }
}
