//! What an OpenAI Chat Completions request does for the server's prompt cache, kept out of the
//! client's request logic: the `prompt_cache_key` that names the conversation. (The body is
//! written with `messages` last, so two requests of one conversation share their bytes up to
//! where the newer one adds messages: [`super::openai`]'s typed body.)
//!
//! OpenAI caches the longest prefix of a prompt seen recently (from 1,024 tokens on) and routes
//! requests by a hash of their start and, when given, of `prompt_cache_key`; requests of one
//! conversation sent with one key land where that conversation's prefix is cached.

use crate::config::PromptCacheKey;
use ethan_core::message::{ChatMessage, Role};
use sha2::{Digest, Sha256};
use std::borrow::Borrow;

/// The `prompt_cache_key` of a conversation: a digest of its first user message (text and the
/// time it was sent), the same for every request of the conversation while that message is in
/// its window, and different from any other conversation's. `None` when `messages` has no user
/// message.
pub fn conversation_key<M: Borrow<ChatMessage>>(messages: &[M]) -> Option<String> {
    let first = messages
        .iter()
        .map(Borrow::borrow)
        .find(|m: &&ChatMessage| m.role == Role::User)?;
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
