//! `memory_save` against the store.

use crate::tools::memory_save::*;
use crate::tools::{ErrorKind, Tool, ToolContext};
use ethan_core::tool::CONSENTED;
use ethan_core::{ChannelKind, ChatKind, ChatRef};
use serde_json::json;

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
