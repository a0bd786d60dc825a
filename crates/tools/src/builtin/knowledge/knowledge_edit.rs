//! `knowledge_edit{source, content, mode: append|replace, title?, tags?}`: change a note of the
//! knowledge base. `append` adds the content at the end and keeps title and tags; `replace`
//! replaces the body and keeps title and tags unless given. The note keeps its `source`.

use crate::args::req_str;
use crate::knowledge_add::{opt_str, opt_tags, saved_result};
use crate::{CallPlan, ToolDecl, ToolError, ToolOutput};
use crate::{ErrorKind, Tool, ToolContext};
use async_trait::async_trait;
use ethan_core::knowledge::{EditMode, KnowledgeBase, MAX_TAGS};
use serde_json::{json, Value};
use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

pub struct KnowledgeEdit(pub Arc<dyn KnowledgeBase>);

#[async_trait]
impl Tool for KnowledgeEdit {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "knowledge_edit",
                "Change a note of the knowledge base by its `source`: mode `append` adds the content at \
                 the end (title and tags stay); mode `replace` replaces the text (title and tags stay \
                 unless given).",
                json!({
                    "type": "object",
                    "properties": {
                        "source": {"type": "string", "description": "The note's path, as knowledge_search returns it"},
                        "content": {"type": "string", "minLength": 1},
                        "mode": {"type": "string", "enum": ["append", "replace"]},
                        "title": {"type": "string", "description": "New title (replace only)"},
                        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_TAGS, "description": "New tags (replace only)"}
                    },
                    "required": ["source", "content", "mode"],
                    "additionalProperties": false
                }),
            )
            // Private (the default): its answers name existing notes (titles, tags).
            .timeout(Duration::from_secs(60))
        });
        &DECL
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            consent: self.consent_check(args, ctx),
            ..CallPlan::of(self.decl(), args)
        }
    }
    async fn run(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let parsed = (|| {
            Ok::<_, ToolError>((
                req_str(&args, "source")?,
                req_str(&args, "content")?,
                req_str(&args, "mode")?,
                opt_str(&args, "title")?,
                opt_tags(&args)?,
            ))
        })();
        let (source, content, mode, title, tags) = match parsed {
            Ok(p) => p,
            Err(e) => return Err(e),
        };
        let mode = match mode {
            "append" => EditMode::Append,
            "replace" => EditMode::Replace,
            other => {
                return Err(ToolError::new(
                    ErrorKind::Validation,
                    format!("`mode` must be \"append\" or \"replace\", got {other:?}"),
                ))
            }
        };
        let saved = self
            .0
            .edit(source, content, mode, title, tags.as_deref())
            .await?;
        let verb = if mode == EditMode::Append {
            "Appended to"
        } else {
            "Replaced"
        };
        saved_result(verb, saved)
    }
}

impl KnowledgeEdit {
    fn consent_check(&self, args: &Value, _ctx: &ToolContext) -> Option<String> {
        let source = args.get("source").and_then(Value::as_str).unwrap_or("?");
        let bytes = args
            .get("content")
            .and_then(Value::as_str)
            .map_or(0, str::len);
        Some(match args.get("mode").and_then(Value::as_str) {
            Some("append") => format!("append {bytes} bytes to the note {source}"),
            _ => format!("replace the note {source} ({bytes} bytes)"),
        })
    }
}
