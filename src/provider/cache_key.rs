//! What an OpenAI Chat Completions request does for the server's prompt cache, kept out of the
//! client's request logic: the body written with `messages` last, so two requests of one
//! conversation share their bytes up to where the newer one adds messages, and the
//! `prompt_cache_key` that names the conversation.
//!
//! OpenAI caches the longest prefix of a prompt seen recently (from 1,024 tokens on) and routes
//! requests by a hash of their start and, when given, of `prompt_cache_key`; requests of one
//! conversation sent with one key land where that conversation's prefix is cached.

use crate::config::PromptCacheKey;
use ethan_core::message::{ChatMessage, Role};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The JSON text of `body` (an object) with its `messages` written last: what comes before
/// them (`model`, `tools`, the streaming keys) is the same from one request to the next, so
/// a later request of a conversation starts with the bytes of the one before it.
pub fn body_bytes(body: &Value) -> Vec<u8> {
    let Some(obj) = body.as_object() else {
        return serde_json::to_vec(body).unwrap_or_default();
    };
    let mut out = Vec::with_capacity(4096);
    out.push(b'{');
    let keys = obj.keys().filter(|k| *k != "messages");
    let keys = keys.chain(obj.keys().filter(|k| *k == "messages"));
    for (i, k) in keys.enumerate() {
        if i > 0 {
            out.push(b',');
        }
        // Writing a string or a `Value` to a `Vec` cannot fail.
        let _ = serde_json::to_writer(&mut out, k);
        out.push(b':');
        let _ = serde_json::to_writer(&mut out, &obj[k.as_str()]);
    }
    out.push(b'}');
    out
}

/// The `prompt_cache_key` of a conversation: a digest of its first user message (text and the
/// time it was sent), the same for every request of the conversation while that message is in
/// its window, and different from any other conversation's. `None` when `messages` has no user
/// message.
pub fn conversation_key(messages: &[ChatMessage]) -> Option<String> {
    let first = messages.iter().find(|m| m.role == Role::User)?;
    let mut h = Sha256::new();
    h.update(first.sent_at.unwrap_or_default().to_le_bytes());
    h.update(first.content.as_deref().unwrap_or_default().as_bytes());
    let digest = h.finalize();
    let hex: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
    Some(format!("ethan-{hex}"))
}

/// Whether to send `prompt_cache_key` to `base_url`: as configured; `auto` only to OpenAI's own
/// API (other servers may refuse a parameter they do not know).
pub fn sends_key(configured: PromptCacheKey, base_url: &str) -> bool {
    match configured {
        PromptCacheKey::Always => true,
        PromptCacheKey::Never => false,
        PromptCacheKey::Auto => reqwest::Url::parse(base_url)
            .ok()
            .and_then(|u| {
                u.host_str()
                    .map(|h| h.eq_ignore_ascii_case("api.openai.com"))
            })
            .unwrap_or(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_come_last_and_the_text_is_the_same_json() {
        let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                          "tools": [{"type": "function"}], "stream": true});
        let text = String::from_utf8(body_bytes(&body)).unwrap();
        assert!(
            text.ends_with(r#""messages":[{"content":"hi","role":"user"}]}"#),
            "{text}"
        );
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), body);
    }

    #[test]
    fn one_key_per_conversation() {
        let mut first = ChatMessage::user("hello");
        first.sent_at = Some(100);
        let a = vec![ChatMessage::system("s"), first.clone()];
        let mut later = a.clone();
        later.push(ChatMessage::assistant("hi"));
        later.push(ChatMessage::user("more"));
        assert_eq!(conversation_key(&a), conversation_key(&later));
        let mut other = first;
        other.sent_at = Some(101);
        assert_ne!(conversation_key(&a), conversation_key(&[other]));
        assert_eq!(conversation_key(&[ChatMessage::system("s")]), None);
    }

    #[test]
    fn the_key_goes_to_openai_unless_configured() {
        use PromptCacheKey::*;
        assert!(sends_key(Auto, "https://api.openai.com/v1"));
        assert!(!sends_key(Auto, "http://127.0.0.1:11434/v1"));
        assert!(sends_key(Always, "http://127.0.0.1:11434/v1"));
        assert!(!sends_key(Never, "https://api.openai.com/v1"));
    }
}
