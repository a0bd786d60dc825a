//! `memory_forget{id}`: delete a remembered fact this chat may see, with the facts it replaced.
//! A person's own fact goes without asking; a group's fact asks the owner first. In a turn that
//! saw text from outside the conversation (a page, a file, a tool's output, a forwarded message:
//! the memory's `provenance`) every forget asks, every time, showing the fact: a page must
//! not make the owner's memory lose what the owner told it, any more than add to it.

use super::{not_your_words, outside_text, store_of, Visible};
use crate::{CallPlan, ToolDecl, ToolError, ToolOutput};
use crate::{ErrorKind, Tool, ToolContext};
use async_trait::async_trait;
use ethan_core::assessment::Assessment;
use ethan_core::store::MemoryScope;
use serde_json::{json, Value};
use std::sync::LazyLock;

pub struct MemoryForget;

/// The fact a call would forget, looked up once per call ([`Tool::assess`]) so its approval
/// shows the text: `Some(text)`, or `None` when this chat's memory holds no such fact now.
struct Target(Option<String>);

fn id_arg(args: &Value) -> i64 {
    args.get("id").and_then(Value::as_i64).unwrap_or(0)
}

/// `fact #3 of your personal memory: "Likes oolong."`, for the approval.
fn described(args: &Value, ctx: &ToolContext) -> String {
    let id = id_arg(args);
    let whose = match Visible::of_call(ctx).subject().0 {
        MemoryScope::Personal => "your personal memory",
        MemoryScope::Chat => "this group chat's memory",
    };
    match ctx.assessment.as_ref().and_then(|a| a.get::<Target>()) {
        Some(Target(Some(text))) => format!("fact #{id} of {whose}: {text:?}"),
        Some(Target(None)) => format!("fact #{id} of {whose} (there is no such fact now)"),
        None => format!("fact #{id} of {whose} (its text could not be read)"),
    }
}

#[async_trait]
impl Tool for MemoryForget {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "memory_forget",
                "Forget a remembered fact by its id (from the notes or memory_search), with the older \
                 versions it replaced.",
                json!({
                    "type": "object",
                    "properties": {"id": {"type": "integer", "minimum": 1}},
                    "required": ["id"],
                    "additionalProperties": false
                }),
            )
            // Its answer names the id it was given ("forgot #3", or that there is none): nothing of
            // what was remembered.
            .not_private()
        });
        &DECL
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            consent: self.consent_check(args, ctx),
            always: self.consent_always(args, ctx),
            ..CallPlan::of(self.decl(), args)
        }
    }
    /// The fact's text, for the approval (a store error leaves it unread: the approval says so).
    async fn assess(&self, args: &Value, ctx: &ToolContext) -> Option<Assessment> {
        let store = store_of(ctx).ok()?;
        let visible = Visible::of_call(ctx);
        let facts = store.facts_of(visible.subject().1, false).await.ok()?;
        let id = id_arg(args);
        let text = facts.into_iter().find(|f| f.id == id).map(|f| f.content);
        Some(Assessment::new(Target(text)))
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let store = store_of(ctx)?;
        let id = id_arg(&args);
        let visible = Visible::of_call(ctx);
        let (scope, subject) = visible.subject();
        match store.forget_fact(id, Some(subject)).await {
            Ok(true) => {
                super::refresh_snapshot(store, &ctx.session_key).await;
                Ok(ToolOutput::new(format!("forgot #{id}")))
            }
            Ok(false) => Err(ToolError::new(
                ErrorKind::Validation,
                format!(
                    "there is no fact #{id} in this {} memory; memory_search lists the ids",
                    scope.as_str()
                ),
            )),
            Err(e) => Err(ToolError::new(ErrorKind::Dependency, e.to_string())),
        }
    }
}

impl MemoryForget {
    /// A group's memory always asks; the person's own asks when the turn saw text from outside
    /// the conversation ([`outside_text`]).
    #[doc(hidden)]
    pub fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let group = Visible::of_call(ctx).is_group();
        let outside = outside_text(ctx);
        if !group && outside.is_none() {
            return None;
        }
        let why = outside
            .map(|source| not_your_words(&source, "you want this forgotten"))
            .unwrap_or_default();
        Some(format!("forget {}{why}", described(args, ctx)))
    }
    /// A forget after outside text is asked every time: a session grant would let the next
    /// injected one through unseen.
    #[doc(hidden)]
    pub fn consent_always(&self, _args: &Value, ctx: &ToolContext) -> bool {
        outside_text(ctx).is_some()
    }
}
