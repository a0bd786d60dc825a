//! `memory_forget` against the store.

use crate::tools::memory_forget::*;
use crate::tools::{Tool, ToolContext};
use ethan_core::store::MemoryScope;
use ethan_core::store::NewFact;
use ethan_core::{ChannelKind, ChatKind, ChatRef};
use serde_json::json;

fn dm(store: &ethan_core::store::StorageRef) -> ToolContext {
    let mut ctx = ToolContext::local(std::env::temp_dir());
    ctx.services.store = Some(store.clone());
    ctx.channel = ChannelKind::Telegram;
    ctx.chat_id = "42".into();
    ctx.user_id = "42".into();
    ctx.is_owner = true;
    ctx.chat = Some(ChatRef {
        id: "42".into(),
        kind: ChatKind::Direct,
        thread: None,
    });
    ctx
}

#[tokio::test]
async fn after_outside_text_a_forget_is_asked_every_time_showing_the_fact() {
    let store = crate::store::Store::open_in_memory().unwrap().shared();
    let id = store
        .save_fact(&NewFact {
            scope: MemoryScope::Personal,
            subject: "owner".into(),
            content: "Likes oolong.".into(),
            source: "tool".into(),
            replaces: None,
        })
        .await
        .unwrap();
    let mut ctx = dm(&store);
    let args = json!({ "id": id });
    // The person's own fact, nothing from outside: no question.
    assert_eq!(MemoryForget.consent_check(&args, &ctx), None);
    assert!(!MemoryForget.consent_always(&args, &ctx));
    ctx.taint.mark_untrusted("web_fetch");
    ctx.assessment = MemoryForget.assess(&args, &ctx).await;
    let asked = MemoryForget.consent_check(&args, &ctx).expect("asks");
    assert!(
        asked.contains("\"Likes oolong.\"") && asked.contains("web_fetch"),
        "{asked}"
    );
    assert!(asked.contains("your personal memory"), "{asked}");
    assert!(MemoryForget.consent_always(&args, &ctx));
    // A fact this chat does not hold is still asked about, and says so.
    let other = json!({"id": id + 100});
    ctx.assessment = MemoryForget.assess(&other, &ctx).await;
    let asked = MemoryForget.consent_check(&other, &ctx).expect("asks");
    assert!(asked.contains("no such fact"), "{asked}");
    assert!(MemoryForget.run(other, &ctx).await.is_err());
    assert_eq!(store.facts_of("owner", false).await.unwrap().len(), 1);
}
