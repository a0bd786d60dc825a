//! Notes as Markdown files: the front matter (`title`, `tags`, `created`, `updated`), slugs,
//! and the path checks that keep every `source` inside the knowledge folder.
//!
//! A note lives at `<knowledge>/<first tag>/<slug of the title>.md` (`untagged/` without tags).
//! Its `source` is that path relative to the knowledge folder, with `/` separators. The files
//! are the source of truth and may be edited by hand, so reading is lenient: a file without
//! front matter, or with front matter that is not valid YAML, still becomes a note (title from
//! the first heading or the file name, tags from its folder).
//!
//! A source from the model is checked before any file is touched: it must be a relative path of
//! plain components ending in `.md` — no `..`, no absolute path, no hidden component — and no
//! component under the knowledge folder may be a symbolic link.

use super::KnowledgeError;
pub use ethan_core::knowledge::{
    clean_title, split_front_matter, title_from_content, Note, MAX_TAGS, MAX_TITLE_CHARS,
};
use std::path::{Component, Path, PathBuf};
use yaml_rust2::{Yaml, YamlLoader};

/// The folder of notes without tags.
pub const UNTAGGED: &str = "untagged";
/// Longest slug (file name without `.md`), in characters.
pub const MAX_SLUG_CHARS: usize = 60;
/// Longest tag, in characters.
pub const MAX_TAG_CHARS: usize = 50;
/// Largest note file read or written, in bytes.
pub const MAX_NOTE_BYTES: usize = 1024 * 1024;
/// Largest front matter parsed as YAML, in bytes.
const MAX_FRONT_MATTER_BYTES: usize = 16 * 1024;
/// Deepest folder nesting looked at under the knowledge folder.
pub const MAX_DEPTH: usize = 8;

/// The whole file of `note`: front matter, a blank line, the body, a final newline.
pub fn render(note: &Note) -> String {
    let mut s = String::with_capacity(note.body.len() + 200);
    s.push_str("---\n");
    s.push_str(&format!("title: {}\n", yaml_scalar(&note.title, false)));
    let tags: Vec<String> = note.tags.iter().map(|t| yaml_scalar(t, true)).collect();
    s.push_str(&format!("tags: [{}]\n", tags.join(", ")));
    s.push_str(&format!("created: {}\n", yaml_scalar(&note.created, false)));
    s.push_str(&format!("updated: {}\n", yaml_scalar(&note.updated, false)));
    s.push_str("---\n\n");
    let body = note.body.trim_end();
    if !body.is_empty() {
        s.push_str(body);
        s.push('\n');
    }
    s
}

/// The text sent for an embedding of `note`: title, tags and body.
pub fn embedding_text(note: &Note) -> String {
    format!("{}\n{}\n\n{}", note.title, note.tags.join(", "), note.body)
}

/// The current time as written in front matter (`2026-05-01T09:30:00Z`).
pub fn now_stamp() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// A scalar as YAML: plain when that is unambiguous, else a double-quoted (JSON) string, which
/// YAML reads back unchanged.
fn yaml_scalar(s: &str, in_flow: bool) -> String {
    let plain_char =
        |c: char| c.is_alphanumeric() || " -_.'()/".contains(c) || (!in_flow && c == ',');
    let special = matches!(
        s.to_ascii_lowercase().as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "~" | "y" | "n"
    );
    let plain = !s.is_empty()
        && s.chars().next().is_some_and(char::is_alphanumeric)
        && !s.ends_with(' ')
        && s.chars().all(plain_char)
        && !special
        && !s.starts_with(|c: char| c.is_ascii_digit());
    if plain {
        s.to_string()
    } else {
        serde_json::Value::String(s.to_string()).to_string()
    }
}

/// Parse a note file. `source` names it; `fallback_time` stands in for missing timestamps.
pub fn parse(source: &str, text: &str, fallback_time: &str) -> Note {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let (front, body) = split_front_matter(text);
    let yaml = front
        .filter(|f| f.len() <= MAX_FRONT_MATTER_BYTES)
        .and_then(|f| YamlLoader::load_from_str(f).ok())
        .and_then(|docs| docs.into_iter().next());
    let field = |k: &str| yaml.as_ref().and_then(|y| scalar_string(&y[k]));
    let body = body.trim_start_matches(['\n', '\r']).trim_end().to_string();

    let title = field("title")
        .map(|t| clean_title(&t))
        .filter(|t| !t.is_empty())
        .or_else(|| first_heading(&body))
        .unwrap_or_else(|| title_from_source(source));
    let tags = match yaml.as_ref().map(|y| &y["tags"]) {
        Some(Yaml::Array(items)) => items.iter().filter_map(scalar_string).collect(),
        Some(y) => scalar_string(y)
            .map(|s| s.split(',').map(str::to_string).collect())
            .unwrap_or_default(),
        None => Vec::new(),
    };
    let mut tags = clean_tags_lenient(tags);
    if tags.is_empty() && yaml.is_none() {
        if let Some((folder, _)) = source.split_once('/') {
            if folder != UNTAGGED {
                tags.push(folder.to_string());
            }
        }
    }
    Note {
        source: source.to_string(),
        title,
        tags,
        created: field("created").unwrap_or_else(|| fallback_time.to_string()),
        updated: field("updated").unwrap_or_else(|| fallback_time.to_string()),
        body,
    }
}

fn scalar_string(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn first_heading(body: &str) -> Option<String> {
    body.lines()
        .map(str::trim)
        .find(|l| l.starts_with('#'))
        .map(|l| clean_title(l.trim_start_matches('#')))
        .filter(|t| !t.is_empty())
}

fn title_from_source(source: &str) -> String {
    let stem = source
        .rsplit('/')
        .next()
        .unwrap_or(source)
        .trim_end_matches(".md");
    let t = clean_title(&stem.replace(['-', '_'], " "));
    if t.is_empty() {
        "Untitled".to_string()
    } else {
        t
    }
}

/// Tags from the model: trimmed, de-duplicated, bounded. Errors name the offending tag.
pub fn clean_tags(tags: &[String]) -> Result<Vec<String>, KnowledgeError> {
    if tags.len() > MAX_TAGS {
        return Err(KnowledgeError::Invalid(format!(
            "at most {MAX_TAGS} tags, got {}",
            tags.len()
        )));
    }
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let c = t.split_whitespace().collect::<Vec<_>>().join(" ");
        if c.is_empty() {
            continue;
        }
        if c.chars().count() > MAX_TAG_CHARS {
            return Err(KnowledgeError::Invalid(format!(
                "tag {c:?} is longer than {MAX_TAG_CHARS} characters"
            )));
        }
        if slug(&c).is_empty() {
            return Err(KnowledgeError::Invalid(format!(
                "tag {c:?} has no letters or digits"
            )));
        }
        if !out.iter().any(|o| o.to_lowercase() == c.to_lowercase()) {
            out.push(c);
        }
    }
    Ok(out)
}

/// Tags from a file: like [`clean_tags`], but what cannot be used is dropped.
fn clean_tags_lenient(tags: Vec<String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in tags {
        let c: String = t
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .chars()
            .take(MAX_TAG_CHARS)
            .collect();
        if !c.is_empty() && !out.iter().any(|o| o.to_lowercase() == c.to_lowercase()) {
            out.push(c);
        }
        if out.len() == MAX_TAGS {
            break;
        }
    }
    out
}

/// A file-name-safe slug: letters and digits of any script (lowercased), runs of anything else
/// as one `-`, at most [`MAX_SLUG_CHARS`] characters. May be empty.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    let mut dash = false;
    let mut n = 0;
    for c in s.chars().flat_map(char::to_lowercase) {
        if n >= MAX_SLUG_CHARS {
            break;
        }
        if c.is_alphanumeric() {
            if dash && !out.is_empty() {
                out.push('-');
                n += 1;
            }
            dash = false;
            out.push(c);
            n += 1;
        } else {
            dash = true;
        }
    }
    out.trim_end_matches('-').to_string()
}

/// The folder for a note's tags: the slug of the first tag, or [`UNTAGGED`].
pub fn folder_for(tags: &[String]) -> String {
    tags.first()
        .map(|t| slug(t))
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| UNTAGGED.to_string())
}

/// Check a `source` from the model and return the file's path under `root` (which it need not
/// exist). Refuses anything that could leave the knowledge folder.
pub fn resolve_source(root: &Path, source: &str) -> Result<PathBuf, KnowledgeError> {
    let s = source.trim();
    let bad = |why: &str| {
        Err(KnowledgeError::BadSource {
            given: source.to_string(),
            reason: why.to_string(),
        })
    };
    if s.is_empty() {
        return bad("it is empty");
    }
    if s.contains('\0') || s.contains('\\') {
        return bad("it contains a backslash or NUL character");
    }
    let path = Path::new(s);
    if path.is_absolute() || s.starts_with('/') || s.starts_with('~') {
        return bad(
            "absolute paths are not allowed; give the path relative to the knowledge folder",
        );
    }
    let mut rel = PathBuf::new();
    for c in path.components() {
        match c {
            Component::Normal(part) => {
                let part_str = part.to_string_lossy();
                if part_str.starts_with('.') {
                    return bad("hidden files and folders are not notes");
                }
                rel.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => return bad("`..` would leave the knowledge folder"),
            Component::RootDir | Component::Prefix(_) => {
                return bad("absolute paths are not allowed")
            }
        }
    }
    if rel.components().count() > MAX_DEPTH + 1 {
        return bad("it is nested too deeply");
    }
    if rel.extension().and_then(|e| e.to_str()) != Some("md") {
        return bad("notes are `.md` files");
    }
    let full = root.join(&rel);
    check_no_symlinks(root, &rel)?;
    Ok(full)
}

/// Refuse when any existing component of `root/rel` is a symbolic link.
pub fn check_no_symlinks(root: &Path, rel: &Path) -> Result<(), KnowledgeError> {
    let mut p = root.to_path_buf();
    for c in rel.components() {
        p.push(c);
        match std::fs::symlink_metadata(&p) {
            Ok(m) if m.file_type().is_symlink() => {
                return Err(KnowledgeError::Symlink(
                    p.strip_prefix(root).unwrap_or(&p).display().to_string(),
                ))
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    Ok(())
}

/// The `source` of a path under `root` (`/`-separated), if it is valid UTF-8.
pub fn source_of(root: &Path, path: &Path) -> Option<String> {
    let rel = path.strip_prefix(root).ok()?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    Some(parts?.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_then_parse_round_trips() {
        let n = Note {
            source: "ops/x.md".into(),
            title: "Deploy: the \"server\"".into(),
            tags: vec!["ops".into(), "yes".into(), "a, b".into(), "部署".into()],
            created: "2026-01-01T00:00:00Z".into(),
            updated: "2026-01-02T00:00:00Z".into(),
            body: "# Heading\n\nSome text.\n---\nafter a rule".into(),
        };
        let text = render(&n);
        assert!(
            text.starts_with("---\ntitle: \"Deploy: the \\\"server\\\"\"\n"),
            "{text}"
        );
        assert_eq!(parse("ops/x.md", &text, "never"), n);
    }

    #[test]
    fn lenient_with_hand_written_files() {
        let n = parse("recipes/bread.md", "# Sourdough\n\nFlour and water.", "T");
        assert_eq!(n.title, "Sourdough");
        assert_eq!(n.tags, ["recipes"]);
        assert_eq!(n.created, "T");
        let n = parse(
            "untagged/my-note.md",
            "---\ntitle: [unclosed\n---\nbody",
            "T",
        );
        assert_eq!(n.title, "my note");
        assert_eq!(n.body, "body");
        let n = parse(
            "a/b.md",
            "---\ntags:\n  - x\n  - 2024\ntitle: T\n---\n",
            "T",
        );
        assert_eq!(n.tags, ["x", "2024"]);
        let n = parse("a/b.md", "---\ntags: x, y\n---\nz", "T");
        assert_eq!(n.tags, ["x", "y"]);
        assert_eq!(n.title, "b");
    }

    #[test]
    fn slugs_keep_any_script() {
        assert_eq!(slug("Deploying the Server!"), "deploying-the-server");
        assert_eq!(slug("服务器 部署"), "服务器-部署");
        assert_eq!(slug("../../etc/passwd"), "etc-passwd");
        assert_eq!(slug("!!!"), "");
        assert_eq!(folder_for(&[]), UNTAGGED);
        assert_eq!(slug(&"x".repeat(100)).len(), MAX_SLUG_CHARS);
    }

    #[test]
    fn sources_cannot_leave_the_folder() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for s in [
            "../x.md",
            "a/../../x.md",
            "/etc/passwd.md",
            "~/x.md",
            "a\\..\\x.md",
            ".hidden/x.md",
            "a/x.txt",
            "",
        ] {
            assert!(
                matches!(
                    resolve_source(root, s),
                    Err(KnowledgeError::BadSource { .. })
                ),
                "{s:?}"
            );
        }
        assert_eq!(resolve_source(root, "a/b.md").unwrap(), root.join("a/b.md"));
        let outside = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("link")).unwrap();
        assert!(matches!(
            resolve_source(root, "link/x.md"),
            Err(KnowledgeError::Symlink(_))
        ));
    }
}
