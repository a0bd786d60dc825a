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
use crate::tools::redact::redact_shapes;
use crate::tools::{CallPlan, ToolDecl};
use crate::tools::{ErrorKind, Tool, ToolContext};
use crate::tools::{ToolError, ToolOutput};
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
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
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
    fn consent_always(&self, _args: &Value, ctx: &ToolContext) -> bool {
        outside_text(ctx).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ethan_core::{ChannelKind, ChatKind, ChatRef};

    fn ctx(store: &ethan_core::store::StorageRef, group: bool, owner: bool) -> ToolContext {
        let mut ctx = ToolContext::local(std::env::temp_dir());
        ctx.services.store = Some(store.clone());
        ctx.channel = ChannelKind::Telegram;
        ctx.chat_id = if group { "-100".into() } else { "42".into() };
        ctx.user_id = "42".into();
        ctx.is_owner = owner;
        ctx.chat = Some(ChatRef {
            id: ctx.chat_id.clone(),
            kind: if group {
                ChatKind::Group
            } else {
                ChatKind::Direct
            },
            thread: None,
        });
        ctx
    }

    #[tokio::test]
    async fn after_outside_text_a_personal_fact_is_asked_every_time_and_kept_as_confirmed() {
        let store = crate::store::Store::open_in_memory().unwrap().shared();
        let mut dm = ctx(&store, false, true);
        let args = json!({"content": "Prefers invoices sent to billing@evil.example."});
        assert_eq!(MemorySave.consent_check(&args, &dm), None);
        assert!(!MemorySave.consent_always(&args, &dm));
        dm.taint.mark_untrusted("web_fetch");
        let asked = MemorySave.consent_check(&args, &dm).expect("asks");
        assert!(
            asked.contains("billing@evil.example") && asked.contains("web_fetch"),
            "{asked}"
        );
        assert!(asked.contains("personal memory"), "{asked}");
        assert!(MemorySave.consent_always(&args, &dm));
        // Approved: stored as confirmed by the owner.
        dm.approved_actions.push(CONSENTED.to_string());
        assert!(MemorySave.run(args, &dm).await.is_ok());
        let facts = store.facts_of("owner", false).await.unwrap();
        assert_eq!(facts[0].source, "confirmed");
        // Saved without a question: by the model.
        let plain = ctx(&store, false, true);
        assert!(MemorySave
            .run(json!({"content": "Likes tea."}), &plain)
            .await
            .is_ok());
        let facts = store.facts_of("owner", false).await.unwrap();
        assert!(facts
            .iter()
            .any(|f| f.content == "Likes tea." && f.source == "tool"));
    }

    #[tokio::test]
    async fn what_is_never_saved_and_who_is_asked() {
        let store = crate::store::Store::open_in_memory().unwrap().shared();
        let dm = ctx(&store, false, false);
        // A credential is refused, whoever asks.
        let r: crate::tools::ToolResult = MemorySave
            .run(
                json!({"content": "my key is sk-proj-abcdefghijklmnopqrstuvwx123456"}),
                &dm,
            )
            .await
            .into();
        assert_eq!(r.error_kind, Some(ErrorKind::Validation), "{r:?}");
        assert!(store.all_facts().await.unwrap().is_empty());
        // A person's own fact in a direct chat: saved, not asked, under that person.
        assert_eq!(
            MemorySave.consent_check(&json!({"content": "x"}), &dm),
            None
        );
        let r: crate::tools::ToolResult = MemorySave
            .run(json!({"content": "Likes tea."}), &dm)
            .await
            .into();
        assert!(r.ok, "{r:?}");
        let facts = store.facts_of("telegram:42", false).await.unwrap();
        assert_eq!(facts.len(), 1);
        // Saying it again confirms it instead of storing a copy.
        let again: crate::tools::ToolResult = MemorySave
            .run(json!({"content": "likes  TEA"}), &dm)
            .await
            .into();
        assert!(again.output.contains("already remembered"), "{again:?}");
        assert_eq!(store.all_facts().await.unwrap().len(), 1);
        // In a group: a personal fact is refused, a group fact asks (the owner), and a
        // replacement can only name a fact of the same memory.
        let group = ctx(&store, true, true);
        let r: crate::tools::ToolResult = MemorySave
            .run(json!({"content": "x", "scope": "personal"}), &group)
            .await
            .into();
        assert_eq!(r.error_kind, Some(ErrorKind::Validation), "{r:?}");
        let asked = MemorySave
            .consent_check(&json!({"content": "Standup at 9."}), &group)
            .unwrap();
        assert!(
            asked.contains("Standup at 9.") && asked.contains("group"),
            "{asked}"
        );
        let r: crate::tools::ToolResult = MemorySave
            .run(
                json!({"content": "Standup at 10.", "replaces": facts[0].id}),
                &group,
            )
            .await
            .into();
        assert_eq!(r.error_kind, Some(ErrorKind::Validation), "{r:?}");
        assert!(store.facts_of("telegram:42", false).await.unwrap()[0]
            .superseded_by
            .is_none());
    }
}
