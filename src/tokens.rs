//! Token estimates, the one estimate every budget uses: the characters a message counts as
//! (a CJK character, about a token on its own, as [`CHARS_PER_TOKEN`]), and tokens from them.
//! Compaction ([`crate::memory::compact`]) keeps requests under `model.context_tokens` with it;
//! the usage ledger ([`crate::usage`]) records a call with it when the server reports no counts
//! (llama.cpp's streamed answers, some local servers), so `ethan usage` and the daily budgets
//! still see the call.

use ethan_core::message::{ChatMessage, ToolSpec};
use ethan_core::provider::Usage;

/// The estimate of characters per token that every budget here uses.
pub const CHARS_PER_TOKEN: usize = 4;

/// The characters of one message that count toward a request: its text, and each tool call's
/// name and arguments ([`weighted_chars`]).
pub fn message_chars(m: &ChatMessage) -> usize {
    m.content.as_deref().map_or(0, weighted_chars)
        + m.tool_calls
            .iter()
            .map(|c| weighted_chars(&c.name) + weighted_chars(&c.arguments))
            .sum::<usize>()
}

/// Characters of `text` for the budget: a CJK character (about a token on its own) counts as
/// [`CHARS_PER_TOKEN`] characters, any other as one. Every request counts its whole window, so
/// ASCII text (one character a byte, none of them CJK) is counted by its length.
pub fn weighted_chars(text: &str) -> usize {
    if text.is_ascii() {
        return text.len();
    }
    text.chars()
        .map(|c| match c as u32 {
            0x3040..=0x30ff
            | 0x3400..=0x4dbf
            | 0x4e00..=0x9fff
            | 0xac00..=0xd7af
            | 0xf900..=0xfaff
            | 0xff00..=0xffef => CHARS_PER_TOKEN,
            _ => 1,
        })
        .sum()
}

/// The characters of a list of messages ([`message_chars`] summed).
pub fn chars_of(messages: &[ChatMessage]) -> usize {
    messages.iter().map(message_chars).sum()
}

/// Tokens for `chars` characters (rounded up).
pub fn tokens_of(chars: usize) -> u64 {
    chars.div_ceil(CHARS_PER_TOKEN) as u64
}

/// The tokens of one call estimated from what was sent (`messages`, and the tools offered: each
/// one's name, description and JSON Schema) and the answer: at least one token each way.
pub fn estimate(messages: &[ChatMessage], tools: &[ToolSpec], answer: &ChatMessage) -> Usage {
    let tool_chars: usize = tools
        .iter()
        .map(|t| {
            weighted_chars(&t.name)
                + weighted_chars(&t.description)
                + weighted_chars(&t.parameters.to_string())
        })
        .sum();
    Usage {
        input_tokens: tokens_of(chars_of(messages) + tool_chars).max(1),
        output_tokens: tokens_of(message_chars(answer)).max(1),
        cache_read_tokens: 0,
        cache_write_tokens: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cjk_characters_weigh_a_token_each() {
        assert_eq!(weighted_chars("abcd"), 4);
        assert_eq!(weighted_chars(""), 0);
        assert_eq!(weighted_chars("é"), 1, "a character, not its two bytes");
        assert_eq!(weighted_chars("你好"), 2 * CHARS_PER_TOKEN);
        assert_eq!(weighted_chars("a你"), 1 + CHARS_PER_TOKEN);
    }

    #[test]
    fn a_call_is_estimated_from_its_request_tools_and_answer() {
        let sent = [ChatMessage::system("12345678"), ChatMessage::user("abcd")];
        let tool = ToolSpec {
            name: "ab".into(),
            description: "cd".into(),
            parameters: serde_json::json!({}),
        };
        let u = estimate(&sent, &[tool], &ChatMessage::assistant("hello"));
        // 12 characters of messages + 6 of the tool: 5 tokens; 5 characters: 2 tokens.
        assert_eq!((u.input_tokens, u.output_tokens), (5, 2));
        let empty = estimate(&[], &[], &ChatMessage::assistant(""));
        assert_eq!((empty.input_tokens, empty.output_tokens), (1, 1));
    }
}
