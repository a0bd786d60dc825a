//! `memory_forget{id}`: delete a remembered fact this chat may see, with the facts it replaced.
//! A person's own fact goes without asking; a group's fact asks the owner first.

use super::{store_of, Visible};
use crate::tools::{ErrorKind, Risk, Tool, ToolContext, ToolResult};
use async_trait::async_trait;
use serde_json::{json, Value};

pub struct MemoryForget;

#[async_trait]
impl Tool for MemoryForget {
    fn name(&self) -> &str {
        "memory_forget"
    }
    fn description(&self) -> &str {
        "Forget a remembered fact by its id (from the notes or memory_search), with the older \
         versions it replaced."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"id": {"type": "integer", "minimum": 1}},
            "required": ["id"],
            "additionalProperties": false
        })
    }
    fn risk(&self) -> Risk {
        Risk::Write
    }
    /// Its answer names the id it was given ("forgot #3", or that there is none): nothing of
    /// what was remembered.
    fn reads_private(&self) -> bool {
        false
    }
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        Visible::of_call(ctx).is_group().then(|| {
            let id = args.get("id").and_then(Value::as_i64).unwrap_or(0);
            format!("forget fact #{id} of this group chat's memory")
        })
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolResult {
        let store = match store_of(ctx) {
            Ok(s) => s,
            Err(e) => return e,
        };
        let id = args.get("id").and_then(Value::as_i64).unwrap_or(0);
        let visible = Visible::of_call(ctx);
        let (scope, subject) = visible.subject();
        match store.forget_fact(id, Some(subject)).await {
            Ok(true) => {
                super::refresh_snapshot(store, &ctx.session_key).await;
                ToolResult::ok(format!("forgot #{id}"))
            }
            Ok(false) => ToolResult::err(
                ErrorKind::Validation,
                format!(
                    "there is no fact #{id} in this {} memory; memory_search lists the ids",
                    scope.as_str()
                ),
            ),
            Err(e) => ToolResult::err(ErrorKind::Dependency, e.to_string()),
        }
    }
}
