//! `knowledge_search{query, limit=5}`: notes from the knowledge base by keyword (and by meaning
//! when `knowledge.embeddings` is configured), each with its title, tags, a snippet around the
//! match, its `source` (for `knowledge_read` / `knowledge_edit`) and a score.

use crate::args::{opt_u64, req_str};
use crate::{ErrorKind, Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use ethan_core::knowledge::{KnowledgeBase, SearchMode, MAX_LIMIT};
use serde_json::{json, Value};
use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

/// Results when `limit` is not given.
pub const DEFAULT_LIMIT: u64 = 5;

pub struct KnowledgeSearch(pub Arc<dyn KnowledgeBase>);

#[async_trait]
impl Tool for KnowledgeSearch {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "knowledge_search",
                "Search the knowledge base (notes saved with knowledge_add or written by the user) by \
                 keywords in any language; returns titles, tags, snippets and each note's `source` for \
                 knowledge_read and knowledge_edit.",
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "description": "Words to look for (English, Chinese, …)"},
                        "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            .timeout(Duration::from_secs(60))
            .max_retries(1)
        });
        &DECL
    }
    async fn run(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = match req_str(&args, "query") {
            Ok(q) if !q.trim().is_empty() => q.trim().to_string(),
            Ok(_) => return Err(ToolError::new(ErrorKind::Validation, "`query` is empty")),
            Err(e) => return Err(e),
        };
        let limit = match opt_u64(&args, "limit") {
            Ok(l) => l.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT as u64) as usize,
            Err(e) => return Err(e),
        };
        let outcome = self.0.search(&query, limit).await?;
        let mode = match outcome.mode {
            SearchMode::Keyword => "keyword",
            SearchMode::Hybrid => "keyword + semantic",
        };
        let mut out = String::new();
        if let Some(w) = &outcome.warning {
            out.push_str(&format!("Note: {w}\n"));
        }
        if outcome.hits.is_empty() {
            let total = self.0.note_count().await.unwrap_or(0);
            out.push_str(&format!(
                "No note matches {query:?} ({mode} search over {total} notes). Try other or \
                 fewer words; save new knowledge with knowledge_add."
            ));
        } else {
            out.push_str(&format!(
                "{} note(s) for {query:?} ({mode} search):\n",
                outcome.hits.len()
            ));
            for (i, h) in outcome.hits.iter().enumerate() {
                let tags = if h.tags.is_empty() {
                    "none".to_string()
                } else {
                    h.tags.join(", ")
                };
                let sim = h
                    .similarity
                    .map(|s| format!(", similarity {s:.2}"))
                    .unwrap_or_default();
                out.push_str(&format!(
                    "{}. {}\n   source: {}\n   tags: {tags}; score {:.4}{sim}\n   {}\n",
                    i + 1,
                    h.title,
                    h.source,
                    h.score,
                    h.snippet
                ));
            }
        }
        let results: Vec<Value> = outcome
            .hits
            .iter()
            .map(|h| {
                json!({
                    "source": h.source, "title": h.title, "tags": h.tags,
                    "snippet": h.snippet, "score": h.score, "similarity": h.similarity
                })
            })
            .collect();
        Ok(
            ToolOutput::new(out.trim_end().to_string()).with_metadata(json!({
                "mode": mode,
                "warning": outcome.warning,
                "results": results,
            })),
        )
    }
}
