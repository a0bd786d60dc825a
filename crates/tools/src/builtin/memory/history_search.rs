//! `history_search{query, limit?}`: find messages of this chat's stored conversation, including
//! the parts summarised away by compaction and sessions before `/new`. In a group, and for
//! anyone but the owner, tool results are never searched (they may hold the owner's private
//! data); the user's and the bot's visible messages are. Read-only; private data.

use super::store_of;
use crate::{ErrorKind, Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use ethan_core::ChatKind;
use serde_json::{json, Value};
use std::sync::LazyLock;

/// Characters of context shown around each match.
const SNIPPET_CHARS: usize = 300;

pub struct HistorySearch;

/// Up to `SNIPPET_CHARS` characters of `text` around the first case-insensitive match of
/// `needle`, with `…` where it was cut.
pub fn snippet(text: &str, needle: &str) -> String {
    let lower = text.to_lowercase();
    let chars: Vec<char> = text.chars().collect();
    // The match's character position (lower-casing can change byte lengths, not char counts
    // for the scripts that matter here; fall back to the start).
    let at = lower
        .find(&needle.to_lowercase())
        .map(|b| lower[..b].chars().count())
        .unwrap_or(0)
        .min(chars.len());
    let start = at.saturating_sub(SNIPPET_CHARS / 3);
    let end = (start + SNIPPET_CHARS).min(chars.len());
    let mut out: String = chars[start..end].iter().collect();
    out = out.split_whitespace().collect::<Vec<_>>().join(" ");
    if start > 0 {
        out.insert(0, '…');
    }
    if end < chars.len() {
        out.push('…');
    }
    out
}

#[async_trait]
impl Tool for HistorySearch {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "history_search",
                "Search this chat's earlier messages, including those summarised away and earlier \
                 sessions; returns dated snippets, newest first.",
                json!({
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "minLength": 1, "description": "Text to find (case-insensitive)."},
                        "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "Default 10."}
                    },
                    "required": ["query"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
        });
        &DECL
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let store = store_of(ctx)?;
        let query = args
            .get("query")
            .and_then(Value::as_str)
            .unwrap_or("")
            .trim();
        if query.is_empty() {
            return Err(ToolError::new(ErrorKind::Validation, "query is empty"));
        }
        let limit = args
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(10)
            .min(50) as usize;
        let group = ctx.chat.as_ref().is_some_and(|c| c.kind == ChatKind::Group);
        let with_tools = ctx.is_owner && !group;
        let hits = match store
            .search_history(&ctx.session_key, query, with_tools, limit)
            .await
        {
            Ok(h) => h,
            Err(e) => return Err(ToolError::new(ErrorKind::Dependency, e.to_string())),
        };
        if hits.is_empty() {
            return Ok(ToolOutput::new(format!(
                "no earlier message of this chat contains {query:?}"
            )));
        }
        let lines: Vec<String> = hits
            .iter()
            .map(|h| {
                let when = chrono::DateTime::from_timestamp(h.created_at, 0)
                    .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
                    .unwrap_or_default();
                format!(
                    "[{when}, {}] {}",
                    h.role.as_str(),
                    snippet(&h.content, query)
                )
            })
            .collect();
        Ok(ToolOutput::new(format!(
            "{} message(s), newest first:\n{}",
            lines.len(),
            lines.join("\n")
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_snippet_is_centred_on_the_match_and_marked_where_cut() {
        let text = format!("{} the KEY detail {}", "a ".repeat(400), "b ".repeat(400));
        let s = snippet(&text, "key detail");
        assert!(s.contains("KEY detail"), "{s}");
        assert!(s.starts_with('…') && s.ends_with('…'), "{s}");
        assert!(s.chars().count() <= SNIPPET_CHARS + 2);
        assert_eq!(snippet("short", "x"), "short");
    }
}
