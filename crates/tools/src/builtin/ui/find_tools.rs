//! `find_tools{query}`: searches the tools this turn may use but that were not sent up front, and
//! activates the matches for the rest of the turn. The agent loop reads the names to activate
//! from the result's `metadata.activate`.

use crate::args::req_str;
use crate::{Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::sync::LazyLock;

pub struct FindTools;

/// Score a tool against the query words: name hits count double.
fn score(words: &[String], name: &str, description: &str) -> usize {
    let name = name.to_lowercase();
    let desc = description.to_lowercase();
    words
        .iter()
        .map(|w| {
            2 * usize::from(name.contains(w.as_str())) + usize::from(desc.contains(w.as_str()))
        })
        .sum()
}

#[async_trait]
impl Tool for FindTools {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "find_tools",
                "Find more tools by what you need (e.g. \"search the web\", \"list files\", \"schedule\"). \
                 The matching tools become available for the rest of this turn. Use \"*\" to see them all.",
                json!({
                    "type": "object",
                    "properties": {"query": {"type": "string", "description": "Words describing the capability"}},
                    "required": ["query"],
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            // It lists tool names and descriptions.
            .not_private()
            .fast_path()
            .no_compress()
        });
        &DECL
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = match req_str(&args, "query") {
            Ok(q) => q.to_lowercase(),
            Err(e) => return Err(e),
        };
        let words: Vec<String> = query
            .split(|c: char| !c.is_alphanumeric() && c != '_')
            .filter(|w| w.len() >= 2)
            .map(str::to_string)
            .collect();
        let all = query.trim() == "*" || words.is_empty();
        let mut hits: Vec<(usize, &crate::ToolSummary)> = ctx
            .catalog
            .iter()
            .filter(|t| t.name != self.decl().name)
            .map(|t| {
                (
                    if all {
                        1
                    } else {
                        score(&words, &t.name, &t.description)
                    },
                    t,
                )
            })
            .filter(|(s, _)| *s > 0)
            .collect();
        ethan_core::sort::sort_by(&mut hits, |a, b| {
            b.0.cmp(&a.0).then(a.1.name.cmp(&b.1.name))
        });
        if hits.is_empty() {
            let names: Vec<&str> = ctx.catalog.iter().map(|t| t.name.as_str()).collect();
            return Ok(ToolOutput::new(format!(
                "No tool matches {query:?}. Tools available in this chat: {}",
                names.join(", ")
            ))
            .with_metadata(json!({"activate": []})));
        }
        let mut out = String::from("These tools are now available:\n");
        let mut names = Vec::new();
        for (_, t) in hits {
            let first = t.description.split(". ").next().unwrap_or("");
            out.push_str(&format!("- {}: {first}\n", t.name));
            names.push(t.name.clone());
        }
        Ok(ToolOutput::new(out.trim_end()).with_metadata(json!({"activate": names})))
    }
}
