//! Token estimates, the one estimate every budget uses: the characters a message counts as
//! (a CJK character, about a token on its own, as [`CHARS_PER_TOKEN`]), and tokens from them.
//! Compaction ([`crate::memory::compact`]) keeps requests under `model.context_tokens` with it;
//! the usage ledger ([`crate::usage`]) records a call with it when the server reports no counts
//! (llama.cpp's streamed answers, some local servers), so `ethan usage` and the daily budgets
//! still see the call.

use ethan_core::message::{ChatMessage, ToolSpec};
use ethan_core::provider::Usage;
use std::borrow::Borrow;

/// The estimate of characters per token that every budget here uses.
pub const CHARS_PER_TOKEN: usize = 4;

/// The characters of one message that count toward a request: its text, and each tool call's
/// name and arguments ([`weighted_chars`]); taken from its memo when the kept window gave it
/// one ([`ethan_core::message::Memo::chars`]), counted otherwise.
pub fn message_chars(m: &ChatMessage) -> usize {
    let text_len = m.content.as_ref().map_or(0, String::len);
    match m.derived.get().and_then(|d| d.chars(text_len)) {
        Some(chars) => chars,
        None => counted_chars(m),
    }
}

/// [`message_chars`] counted, whatever the message's memo says (what a memo is made from).
pub fn counted_chars(m: &ChatMessage) -> usize {
    m.content.as_deref().map_or(0, weighted_chars)
        + m.tool_calls
            .iter()
            .map(|c| weighted_chars(&c.name) + weighted_chars(&c.arguments))
            .sum::<usize>()
}

/// Characters of `text` for the budget: a CJK character (about a token on its own) counts as
/// [`CHARS_PER_TOKEN`] characters, any other as one.
///
/// Counted on the bytes, not by decoding each character: every request sums the whole window
/// with it (compaction, the turn's fit, the usage estimate), so it runs over every byte of the
/// history several times per model call. Characters are the bytes that are not UTF-8
/// continuation bytes; the CJK ranges are all three-byte characters (lead byte `E3`–`EF`), so
/// only those are decoded, and only in a text that is not all ASCII.
pub fn weighted_chars(text: &str) -> usize {
    let bytes = text.as_bytes();
    let chars: usize = bytes.iter().map(|&b| usize::from((b as i8) >= -0x40)).sum();
    if chars == bytes.len() {
        return chars;
    }
    // Only blocks holding a possible lead byte of a CJK character are looked at byte by byte.
    const BLOCK: usize = 64;
    let mut cjk = 0;
    for (n, block) in bytes.chunks(BLOCK).enumerate() {
        if block.iter().fold(0u8, |m, &b| m.max(b)) < 0xe3 {
            continue;
        }
        for (j, &b) in block.iter().enumerate() {
            if !(0xe3..=0xef).contains(&b) {
                continue;
            }
            let i = n * BLOCK + j;
            if let Some(&[b1, b2]) = bytes.get(i + 1..i + 3) {
                let c = (u32::from(b & 0x0f) << 12)
                    | (u32::from(b1 & 0x3f) << 6)
                    | u32::from(b2 & 0x3f);
                cjk += usize::from(is_cjk(c));
            }
        }
    }
    chars + cjk * (CHARS_PER_TOKEN - 1)
}

/// Whether a character (by its code point) is one that [`weighted_chars`] counts as a token.
fn is_cjk(c: u32) -> bool {
    matches!(
        c,
        0x3040..=0x30ff
            | 0x3400..=0x4dbf
            | 0x4e00..=0x9fff
            | 0xac00..=0xd7af
            | 0xf900..=0xfaff
            | 0xff00..=0xffef
    )
}

/// The characters of a list of messages ([`message_chars`] summed).
pub fn chars_of<M: Borrow<ChatMessage>>(messages: &[M]) -> usize {
    messages.iter().map(|m| message_chars(m.borrow())).sum()
}

/// Tokens for `chars` characters (rounded up).
pub fn tokens_of(chars: usize) -> u64 {
    chars.div_ceil(CHARS_PER_TOKEN) as u64
}

/// The tokens of one call estimated from what was sent (`messages`, and the tools offered: each
/// one's name, description and JSON Schema) and the answer: at least one token each way.
pub fn estimate<M: Borrow<ChatMessage>>(
    messages: &[M],
    tools: &[ToolSpec],
    answer: &ChatMessage,
) -> Usage {
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

    /// The byte count gives what counting character by character gives, for ASCII, CJK at
    /// each range's ends, other scripts, emoji and three-byte characters outside the ranges.
    #[test]
    fn counting_bytes_is_counting_characters() {
        let by_char = |t: &str| -> usize {
            t.chars()
                .map(|c| if is_cjk(c as u32) { CHARS_PER_TOKEN } else { 1 })
                .sum()
        };
        let edges: String = [
            0x303f, 0x3040, 0x30ff, 0x3100, 0x33ff, 0x3400, 0x4dbf, 0x4dc0, 0x4dff, 0x4e00, 0x9fff,
            0xa000, 0xabff, 0xac00, 0xd7af, 0xd7b0, 0xf8ff, 0xf900, 0xfaff, 0xfb00, 0xfeff, 0xff00,
            0xffef, 0xfff0, 0x800, 0xe000,
        ]
        .iter()
        .filter_map(|&c| char::from_u32(c))
        .collect();
        for t in [
            "",
            "plain ascii text\n",
            "你好，世界 hello",
            "日本語のテキスト and 한국어",
            "ümlaut ñ € 😀 ∑",
            edges.as_str(),
            &format!("{}{}{}", "x".repeat(62), "你好", "é".repeat(40)),
        ] {
            assert_eq!(weighted_chars(t), by_char(t), "{t:?}");
        }
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
        let empty = estimate::<ChatMessage>(&[], &[], &ChatMessage::assistant(""));
        assert_eq!((empty.input_tokens, empty.output_tokens), (1, 1));
    }
}
