//! `memory_save{content, scope?, replaces?}`: remember a fact for later sessions. In a direct
//! chat the fact is the asker's personal memory and is saved without asking; in a group it is
//! the chat's memory, which asks the owner first (see the module docs of [`super`]). In a turn
//! that saw text from outside the conversation (a page, a file, a tool's output:
//! the memory's `provenance`) every save asks, every time, showing the fact: a fact about a
//! person comes from that person, not from an injected page. A fact the owner was shown and
//! approved so is stored as `confirmed`; any other as `tool`. A fact
//! that corrects or contradicts a remembered one names it in `replaces`: the old one is kept,
//! marked superseded, and leaves the snapshot. Saving text already remembered confirms it.
//! Credential-shaped text is refused.

use super::{fact_line, normalised, not_your_words, outside_text, store_of, Visible};
use crate::redact::redact_shapes;
use crate::{CallPlan, ToolDecl};
use crate::{ErrorKind, Tool, ToolContext};
use crate::{ToolError, ToolOutput};
use async_trait::async_trait;
use ethan_core::store::{MemoryScope, NewFact};
use ethan_core::tool::CONSENTED;
use serde_json::{json, Value};
use std::sync::LazyLock;

/// The longest fact, in characters.
pub const MAX_FACT_CHARS: usize = 500;

pub struct MemorySave;

/// How the fact came to be, as the store keeps it (`source`): `confirmed` when the owner was
/// shown this very fact and said yes (an always-asked save that ran), else `tool` (saved by
/// the model in a conversation).
fn source_of(ctx: &ToolContext) -> &'static str {
    if outside_text(ctx).is_some() && ctx.approved_actions.iter().any(|a| a == CONSENTED) {
        "confirmed"
    } else {
        "tool"
    }
}

fn scope_arg(args: &Value) -> Option<&str> {
    args.get("scope").and_then(Value::as_str)
}

#[async_trait]
impl Tool for MemorySave {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "memory_save",
                "Remember one short fact for later conversations (a preference, a name, a decision). In a \
                 direct chat it is the person's own memory; in a group it is the group's memory and the \
                 owner is asked first. If it corrects a remembered fact, pass that fact's id in replaces.",
                json!({
                    "type": "object",
                    "properties": {
                        "content": {
                            "type": "string", "minLength": 1, "maxLength": MAX_FACT_CHARS,
                            "description": "The fact, as one self-contained sentence."
                        },
                        "scope": {
                            "type": "string", "enum": ["personal", "chat"],
                            "description": "personal (the person you are talking to; direct chats) or \
                                            chat (this group); default: the one this chat has."
                        },
                        "replaces": {
                            "type": "integer", "minimum": 1,
                            "description": "The id of a remembered fact this one corrects or contradicts."
                        }
                    },
                    "required": ["content"],
                    "additionalProperties": false
                }),
            )
            // Its answer acknowledges what the model passed in (and the new fact's id); only when the
            // fact was remembered already does it show a stored fact, and that call marks the turn.
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
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let store = store_of(ctx)?;
        let visible = Visible::of_call(ctx);
        if visible.is_group() && scope_arg(&args) == Some("personal") {
            return Err(ToolError::new(
                ErrorKind::Validation,
                "personal memory is kept only in a direct chat with me, never in a group; save \
                 it with scope chat (the group's memory, everyone here sees it) or ask the \
                 person to tell me in a direct chat",
            ));
        }
        let content = args
            .get("content")
            .and_then(Value::as_str)
            .unwrap_or("")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        if content.is_empty() {
            return Err(ToolError::new(ErrorKind::Validation, "content is empty"));
        }
        if redact_shapes(&content) != content {
            return Err(ToolError::new(
                ErrorKind::Validation,
                "this looks like a password, key or token; I do not keep secrets in memory",
            ));
        }
        let (scope, subject) = visible.subject();
        let current = match store.facts_of(subject, false).await {
            Ok(f) => f,
            Err(e) => return Err(ToolError::new(ErrorKind::Dependency, e.to_string())),
        };
        let replaces = args.get("replaces").and_then(Value::as_i64);
        if let Some(id) = replaces {
            if !current.iter().any(|f| f.id == id) {
                return Err(ToolError::new(
                    ErrorKind::Validation,
                    format!(
                        "there is no current fact #{id} in this {} memory; memory_search lists \
                         the ids",
                        scope.as_str()
                    ),
                ));
            }
        }
        let now = ctx.services.clock.unix_secs();
        let same = current
            .iter()
            .find(|f| normalised(&f.content) == normalised(&content));
        if let (Some(f), None) = (same, replaces) {
            if let Err(e) = store.confirm_facts(&[f.id], now).await {
                return Err(ToolError::new(ErrorKind::Dependency, e.to_string()));
            }
            // A remembered fact, as stored: private data.
            ctx.taint.mark("memory_save (a remembered fact)");
            return Ok(ToolOutput::new(format!(
                "already remembered: {}",
                fact_line(f)
            )));
        }
        let fact = NewFact {
            scope,
            subject: subject.to_string(),
            content: content.clone(),
            source: source_of(ctx).into(),
            replaces,
        };
        match store.save_fact(&fact).await {
            Ok(id) => {
                if replaces.is_some() {
                    // The replaced fact must not stay in this session's notes.
                    super::refresh_snapshot(store, &ctx.session_key).await;
                }
                let whose = match scope {
                    MemoryScope::Personal => "this person's memory",
                    MemoryScope::Chat => "this group's memory",
                };
                let replaced = replaces
                    .map(|r| format!(" (replaces #{r}, kept as superseded)"))
                    .unwrap_or_default();
                Ok(ToolOutput::new(format!(
                    "saved as #{id} in {whose}{replaced}; it appears in the next session's notes"
                ))
                .with_metadata(json!({"id": id, "scope": scope.as_str()})))
            }
            Err(e) => Err(ToolError::new(ErrorKind::Dependency, e.to_string())),
        }
    }
}

impl MemorySave {
    /// A group's memory always asks; the person's own asks when the turn saw text from
    /// outside the conversation (see [`outside_text`]).
    #[doc(hidden)]
    pub fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let group = Visible::of_call(ctx).is_group();
        let outside = outside_text(ctx);
        if !group && outside.is_none() {
            return None;
        }
        let content = args.get("content").and_then(Value::as_str).unwrap_or("");
        let replaces = match args.get("replaces").and_then(Value::as_i64) {
            Some(id) => format!(", replacing fact #{id}"),
            None => String::new(),
        };
        let whom = if group {
            "for everyone in this group chat"
        } else {
            "about you, in your personal memory"
        };
        let why = outside
            .map(|source| not_your_words(&source, "this is true and you want it remembered"))
            .unwrap_or_default();
        Some(format!("remember {whom}{replaces}: {content:?}{why}"))
    }
    /// A fact written after outside text is asked every time: a session grant would let the
    /// next injected "fact" through unseen.
    #[doc(hidden)]
    pub fn consent_always(&self, _args: &Value, ctx: &ToolContext) -> bool {
        outside_text(ctx).is_some()
    }
}
