//! A web session's conversation as the page shows it after a (re)load: the stored history
//! rendered on the server, the messages recorded but not answered yet (a turn waiting, running,
//! or to be re-run after a restart), and the turn in flight from the [`Hub`] with the event id
//! to follow it from.
//!
//! Items, oldest first: `{"kind": "user", "html"}`, `{"kind": "assistant", "html"}`,
//! `{"kind": "tool", "id", "name", "state"}` (`done` or `failed`; a call without a stored
//! result is `stopped`), `{"kind": "card", "html"}` (a `ui_card` call that succeeded, drawn
//! again from its arguments).

use super::hub::{Hub, Live};
use super::render;
use crate::consent::display;
use crate::store::{DaemonStoreRef, StoreError};
use ethan_channels::ChannelKind;
use ethan_core::message::{ChatMessage, Role};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Most stored messages loaded (the newest).
const MAX_MESSAGES: usize = 400;

/// What the page gets for a session.
#[derive(Debug, Serialize)]
pub struct Conversation {
    pub session: String,
    pub items: Vec<Value>,
    /// Texts sent from the page and not answered yet, oldest first.
    pub pending: Vec<String>,
    pub live: Option<Live>,
    /// The id to follow the session's events from.
    pub cursor: String,
}

/// The conversation of web session `id` (key `web:<id>`).
pub async fn load(store: &DaemonStoreRef, hub: &Hub, id: &str) -> Result<Conversation, StoreError> {
    let key = format!("web:{id}");
    let session_id = store.current_session(&key).await?;
    let stored = store.messages_after(&session_id, 0, MAX_MESSAGES).await?;
    let msgs: Vec<ChatMessage> = stored.into_iter().map(|(_, m)| m).collect();
    let items = items(&msgs);
    let last_user = msgs
        .iter()
        .rev()
        .find(|m| m.role == Role::User)
        .and_then(|m| m.content.clone());
    let mut pending: Vec<String> = store
        .unfinished_inbound()
        .await?
        .into_iter()
        .filter(|e| e.channel == ChannelKind::Web && e.chat.id == id && !is_command(&e.text))
        .map(|e| e.text)
        .collect();
    // A turn is stored just before its answer is delivered and its event marked done: the
    // same message is not shown twice in that moment.
    if !pending.is_empty() && pending.first() == last_user.as_ref() {
        pending.remove(0);
    }
    let (live, cursor) = hub.snapshot(id);
    Ok(Conversation {
        session: id.to_string(),
        items,
        pending,
        live,
        cursor,
    })
}

fn is_command(text: &str) -> bool {
    text.trim_start().starts_with('/')
}

/// The stored messages as page items.
fn items(msgs: &[ChatMessage]) -> Vec<Value> {
    let results: HashMap<&str, bool> = msgs
        .iter()
        .filter(|m| m.role == Role::Tool)
        .filter_map(|m| Some((m.tool_call_id.as_deref()?, !m.is_error)))
        .collect();
    let mut out = Vec::new();
    for m in msgs {
        let text = m.content.as_deref().unwrap_or_default();
        match m.role {
            Role::User if !text.trim().is_empty() && !text.starts_with("[The picture") => {
                out.push(json!({"kind": "user", "html": render::plain(text)}))
            }
            Role::Assistant => {
                for c in &m.tool_calls {
                    let state = match results.get(c.id.as_str()) {
                        Some(true) => "done",
                        Some(false) => "failed",
                        None => "stopped",
                    };
                    out.push(json!({
                        "kind": "tool", "id": c.id, "name": display::visible(&c.name), "state": state,
                    }));
                    if c.name == "ui_card" && state == "done" {
                        if let Some(html) = card_html(&c.arguments) {
                            out.push(json!({"kind": "card", "html": html}));
                        }
                    }
                }
                if !text.trim().is_empty() {
                    out.push(json!({"kind": "assistant", "html": render::markdown(text)}));
                }
            }
            _ => {}
        }
    }
    out
}

/// A `ui_card` call's arguments as sanitised card HTML.
fn card_html(arguments: &str) -> Option<String> {
    let args: Value = serde_json::from_str(arguments).ok()?;
    let ui = ethan_cards::Ui::from_tool_args(&args).ok()?;
    Some(render::clean(&ethan_cards::render_html(&ui)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ethan_core::message::ToolCall;

    #[test]
    fn stored_turns_become_items_with_tool_states_and_cards() {
        let card = r#"{"card": {"type": "compare", "title": "T", "columns": ["A", "B"], "rows": [{"values": ["1", "2"]}]}}"#;
        let mut call = ChatMessage::assistant("");
        call.content = None;
        call.tool_calls = vec![
            ToolCall::new("c1", "shell", r#"{"command": "ls"}"#),
            ToolCall::new("c2", "ui_card", card),
        ];
        let msgs = vec![
            ChatMessage::user("hi <b>"),
            call,
            ChatMessage::tool_error("c1", "denied"),
            ChatMessage::tool("c2", "shown"),
            ChatMessage::assistant("**ok**"),
        ];
        let items = items(&msgs);
        let kinds: Vec<&str> = items.iter().map(|i| i["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["user", "tool", "tool", "card", "assistant"]);
        assert_eq!(items[0]["html"], "<p>hi &lt;b&gt;</p>");
        assert_eq!(items[1]["state"], "failed");
        assert_eq!(items[2]["state"], "done");
        assert!(items[3]["html"]
            .as_str()
            .unwrap()
            .contains("<th scope=\"col\">A</th>"));
        assert_eq!(items[4]["html"], "<p><strong>ok</strong></p>\n");
    }
}
