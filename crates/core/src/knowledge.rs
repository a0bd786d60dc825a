//! What the knowledge tools need from the knowledge base ([`KnowledgeBase`]) and the values they
//! exchange with it: notes, search results, what a write saved. The daemon's knowledge base
//! (notes as Markdown files under `$ETHAN_HOME/knowledge/`, an index in the store) implements
//! it; the tools receive it from the daemon's wiring step.
//!
//! Also the few rules of the note format both sides agree on: the front matter's boundaries,
//! a note's title and its limits.

use crate::tool::ToolError;
use async_trait::async_trait;

/// Most results of one search.
pub const MAX_LIMIT: usize = 50;
/// Most tags on one note.
pub const MAX_TAGS: usize = 20;
/// Longest title, in characters.
pub const MAX_TITLE_CHARS: usize = 200;

/// One note: its metadata and Markdown body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// Path relative to the knowledge folder, `/`-separated, e.g. `ops/deploying.md`.
    pub source: String,
    pub title: String,
    pub tags: Vec<String>,
    /// RFC 3339 (UTC) as written in the front matter; may be anything a person typed.
    pub created: String,
    pub updated: String,
    pub body: String,
}

/// One search result.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    pub source: String,
    pub title: String,
    pub tags: Vec<String>,
    pub snippet: String,
    /// Higher is better: BM25 (negated) for keyword search, the fused reciprocal-rank score
    /// when semantic search took part.
    pub score: f64,
    /// Cosine similarity to the query, when semantic search took part and ranked this note.
    pub similarity: Option<f32>,
}

/// How a search was answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SearchMode {
    Keyword,
    /// Keyword and semantic results fused by reciprocal rank.
    Hybrid,
}

/// The results of a search.
#[derive(Debug, Clone)]
pub struct SearchOutcome {
    pub hits: Vec<Hit>,
    pub mode: SearchMode,
    /// Set when semantic search was configured but failed (keyword results only then).
    pub warning: Option<String>,
}

/// A note just written, and anything the caller should know.
#[derive(Debug, Clone)]
pub struct Saved {
    pub note: Note,
    /// Set when the embedding of the note failed (it is retried at the next start).
    pub warning: Option<String>,
    /// Set by an add whose file could not be named after the title alone (a note of that name
    /// was there already, so a number was added): the name then tells of an existing note.
    pub numbered: bool,
}

/// How an edit changes the body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EditMode {
    /// Add the content as a new paragraph at the end; title and tags stay.
    Append,
    /// Replace the body; title and tags stay unless given.
    Replace,
}

/// The knowledge base as the `knowledge_*` tools use it. Every failure is a [`ToolError`] whose
/// kind and text the model can act on (a bad source is `validation`, a symbolic link `denied`,
/// the files or the index failing `dependency`).
#[async_trait]
pub trait KnowledgeBase: Send + Sync {
    /// The best `limit` notes for `query` (at most [`MAX_LIMIT`]).
    async fn search(&self, query: &str, limit: usize) -> Result<SearchOutcome, ToolError>;
    /// The note at `source` (a path relative to the knowledge folder).
    async fn read(&self, source: &str) -> Result<Note, ToolError>;
    /// Save a new note; without a title, [`title_from_content`] names it.
    async fn add(
        &self,
        content: &str,
        title: Option<&str>,
        tags: &[String],
    ) -> Result<Saved, ToolError>;
    /// Change the note at `source`; `title` and `tags` are for [`EditMode::Replace`].
    async fn edit(
        &self,
        source: &str,
        content: &str,
        mode: EditMode,
        title: Option<&str>,
        tags: Option<&[String]>,
    ) -> Result<Saved, ToolError>;
    /// How many notes there are.
    async fn note_count(&self) -> Result<i64, ToolError>;
}

/// `(front matter, rest)`: the front matter is the YAML between a first line `---` and the next
/// line `---` (or `...`). Notes and skills (`SKILL.md`) both begin with one.
pub fn split_front_matter(text: &str) -> (Option<&str>, &str) {
    let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    else {
        return (None, text);
    };
    let mut pos = 0;
    for line in rest.split_inclusive('\n') {
        let bare = line.trim_end_matches(['\n', '\r']);
        if bare == "---" || bare == "..." {
            return (Some(&rest[..pos]), &rest[pos + line.len()..]);
        }
        pos += line.len();
    }
    (None, text)
}

/// A title on one line, trimmed, at most [`MAX_TITLE_CHARS`] characters.
pub fn clean_title(t: &str) -> String {
    let one_line: String = t
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .take(MAX_TITLE_CHARS)
        .collect();
    one_line.trim().to_string()
}

/// A title derived from the content: its first non-empty line without heading marks, cut at 80
/// characters.
pub fn title_from_content(content: &str) -> String {
    let line = content
        .lines()
        .map(|l| l.trim().trim_start_matches('#').trim())
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let mut t: String = line.chars().take(80).collect();
    if line.chars().count() > 80 {
        t.push('…');
    }
    let t = clean_title(&t);
    if t.is_empty() {
        "Untitled".to_string()
    } else {
        t
    }
}
