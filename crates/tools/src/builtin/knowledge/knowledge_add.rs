//! `knowledge_add{content, title?, tags?}`: save a new note as a Markdown file in
//! `$ETHAN_HOME/knowledge/<first tag>/<slug of the title>.md` and index it; returns its `source`.

use crate::args::{req_str, type_name};
use crate::{CallPlan, ToolDecl, ToolError, ToolOutput};
use crate::{ErrorKind, Tool, ToolContext};
use async_trait::async_trait;
use ethan_core::knowledge::{title_from_content, KnowledgeBase, Saved, MAX_TAGS};
use serde_json::{json, Value};
use std::sync::Arc;
use std::sync::LazyLock;
use std::time::Duration;

/// Optional string argument `key`.
pub(crate) fn opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(ToolError::new(
            ErrorKind::Validation,
            format!(
                "argument `{key}` must be a string, got {}",
                type_name(other)
            ),
        )),
    }
}

/// Optional array-of-strings argument `tags`.
pub(crate) fn opt_tags(args: &Value) -> Result<Option<Vec<String>>, ToolError> {
    let bad = |what: &str| {
        Err(ToolError::new(
            ErrorKind::Validation,
            format!("argument `tags` must be an array of strings, got {what}"),
        ))
    };
    match args.get("tags") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => {
            let mut out = Vec::with_capacity(items.len());
            for i in items {
                match i {
                    Value::String(s) => out.push(s.clone()),
                    other => return bad(&format!("an array containing {}", type_name(other))),
                }
            }
            Ok(Some(out))
        }
        Some(other) => bad(type_name(other)),
    }
}

/// The text a write tool answers with.
pub(crate) fn saved_result(verb: &str, saved: Saved) -> Result<ToolOutput, ToolError> {
    let n = &saved.note;
    let tags = if n.tags.is_empty() {
        "none".to_string()
    } else {
        n.tags.join(", ")
    };
    let mut out = format!("{verb} {:?}: source {} (tags: {tags})", n.title, n.source);
    if let Some(w) = &saved.warning {
        out.push_str(&format!("\nNote: {w}"));
    }
    Ok(ToolOutput::new(out).with_metadata(json!({
        "source": n.source, "title": n.title, "tags": n.tags, "updated": n.updated,
        "warning": saved.warning
    })))
}

pub struct KnowledgeAdd(pub Arc<dyn KnowledgeBase>);

#[async_trait]
impl Tool for KnowledgeAdd {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "knowledge_add",
                "Save a new note (Markdown) to the knowledge base, to be found later with \
                 knowledge_search. Give a short title and a few tags; the first tag is its folder.",
                json!({
                    "type": "object",
                    "properties": {
                        "content": {"type": "string", "minLength": 1, "description": "The note in Markdown"},
                        "title": {"type": "string", "description": "Default: the first line of the content"},
                        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": MAX_TAGS}
                    },
                    "required": ["content"],
                    "additionalProperties": false
                }),
            )
            // Its answer acknowledges the title and tags it was given and names the new note's file;
            // only when that name had to differ from the title's (a note of that name was there
            // already) does it tell something of the knowledge base, and that call marks the turn.
            .not_private()
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
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let parsed = (|| {
            Ok::<_, ToolError>((
                req_str(&args, "content")?,
                opt_str(&args, "title")?,
                opt_tags(&args)?,
            ))
        })();
        let (content, title, tags) = match parsed {
            Ok(p) => p,
            Err(e) => return Err(e),
        };
        let saved = self
            .0
            .add(content, title, &tags.unwrap_or_default())
            .await?;
        if saved.numbered {
            ctx.taint
                .mark("knowledge_add (the name of an existing note)");
        }
        saved_result("Saved", saved)
    }
}

impl KnowledgeAdd {
    fn consent_check(&self, args: &Value, _ctx: &ToolContext) -> Option<String> {
        let content = args.get("content").and_then(Value::as_str).unwrap_or("");
        let title = args
            .get("title")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| title_from_content(content));
        Some(format!(
            "save the note {title:?} ({} bytes) to the knowledge base",
            content.len()
        ))
    }
}
