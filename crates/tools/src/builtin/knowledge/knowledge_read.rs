//! `knowledge_read{source}`: one note of the knowledge base — title, tags, dates and the full
//! text — read from its file.

use crate::args::req_str;
use crate::{Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use ethan_core::knowledge::KnowledgeBase;
use serde_json::{json, Value};
use std::sync::Arc;
use std::sync::LazyLock;

pub struct KnowledgeRead(pub Arc<dyn KnowledgeBase>);

#[async_trait]
impl Tool for KnowledgeRead {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "knowledge_read",
                "Read a note of the knowledge base in full, by the `source` that knowledge_search or \
                 knowledge_add returned (a path like `ops/deploying-the-server.md`).",
                json!({
                    "type": "object",
                    "properties": {
                        "source": {"type": "string", "description": "The note's path relative to the knowledge folder"}
                    },
                    "required": ["source"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            .no_compress()
            .max_retries(1)
        });
        &DECL
    }
    async fn run(&self, args: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let source = req_str(&args, "source")?;
        let note = self.0.read(source).await?;
        let tags = if note.tags.is_empty() {
            "none".to_string()
        } else {
            note.tags.join(", ")
        };
        Ok(ToolOutput::new(format!(
            "# {}\nsource: {}\ntags: {tags}\ncreated: {}; updated: {}\n\n{}",
            note.title, note.source, note.created, note.updated, note.body
        ))
        .with_metadata(json!({
            "source": note.source, "title": note.title, "tags": note.tags,
            "created": note.created, "updated": note.updated, "bytes": note.body.len()
        })))
    }
}
