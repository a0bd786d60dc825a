//! A prompt cache as Anthropic's Messages API describes it, for the fake
//! ([`crate::support::anthropic::FakeAnthropic::simulate_prompt_cache`]): the prompt is the
//! sequence of its blocks in the API's order — tools, then system, then each message's content
//! blocks — and a block with `cache_control` is a breakpoint. A request reads from the cache
//! the longest prefix that ends at one of its breakpoints, or at one of the 20 block boundaries
//! before it, and was written by an earlier request; it writes the prefix of each of its
//! breakpoints. Tokens are counted at 4 characters each of the blocks' JSON without
//! `cache_control`.

use serde_json::Value;
use std::collections::hash_map::DefaultHasher;
use std::collections::HashSet;
use std::hash::{Hash, Hasher};

/// How far before a breakpoint the API looks for an earlier cache entry, in blocks.
const LOOKBACK: usize = 20;

/// The prefixes written so far (by digest).
#[derive(Default)]
pub struct PromptCache {
    written: HashSet<u64>,
}

/// The `usage` counts of one request: `input_tokens` (neither read nor written),
/// `cache_read_input_tokens`, `cache_creation_input_tokens`.
#[derive(Debug, Clone, Copy, Default)]
pub struct CacheUsage {
    pub input: u64,
    pub read: u64,
    pub write: u64,
}

impl PromptCache {
    /// The counts of `body` (a `POST /v1/messages` body), writing its breakpoints' prefixes.
    pub fn account(&mut self, body: &Value) -> CacheUsage {
        let blocks = blocks(body);
        let mut h = DefaultHasher::new();
        let (mut digests, mut lens, mut len) = (Vec::new(), Vec::new(), 0usize);
        for (text, _) in &blocks {
            text.hash(&mut h);
            len += text.len();
            digests.push(h.finish());
            lens.push(len);
        }
        let breakpoints: Vec<usize> = (0..blocks.len()).filter(|&i| blocks[i].1).collect();
        let mut read = 0;
        for &b in &breakpoints {
            let hit = (b.saturating_sub(LOOKBACK)..=b)
                .rev()
                .find(|&j| self.written.contains(&digests[j]));
            if let Some(j) = hit {
                read = read.max(lens[j]);
            }
        }
        let cached_end = breakpoints.last().map_or(0, |&b| lens[b]);
        let write = cached_end.saturating_sub(read);
        for &b in &breakpoints {
            self.written.insert(digests[b]);
        }
        let tokens = |chars: usize| (chars / 4) as u64;
        CacheUsage {
            input: tokens(len.saturating_sub(read + write)),
            read: tokens(read),
            write: tokens(write),
        }
    }
}

/// The blocks of `body` in the API's cache order, each as its JSON text without
/// `cache_control` and whether it had one.
fn blocks(body: &Value) -> Vec<(String, bool)> {
    let mut out = Vec::new();
    let mut push = |role: &str, b: &Value| {
        let mut b = b.clone();
        let marked = b
            .as_object_mut()
            .and_then(|o| o.remove("cache_control"))
            .is_some();
        out.push((format!("{role}:{b}"), marked));
    };
    for t in body["tools"].as_array().into_iter().flatten() {
        push("tool", t);
    }
    match &body["system"] {
        Value::String(s) => push("system", &Value::String(s.clone())),
        Value::Array(a) => a.iter().for_each(|b| push("system", b)),
        _ => {}
    }
    for m in body["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("?");
        match &m["content"] {
            Value::Array(a) => a.iter().for_each(|b| push(role, b)),
            c => push(role, c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn request(messages: &[&str]) -> Value {
        let cc = json!({"type": "ephemeral"});
        let n = messages.len();
        let msgs: Vec<Value> = messages
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let mut block = json!({"type": "text", "text": t});
                if i + 1 == n {
                    block["cache_control"] = cc.clone();
                }
                json!({"role": if i % 2 == 0 { "user" } else { "assistant" }, "content": [block]})
            })
            .collect();
        json!({"system": [{"type": "text", "text": "s".repeat(400), "cache_control": cc}],
               "messages": msgs})
    }

    #[test]
    fn a_longer_conversation_reads_what_the_previous_request_wrote() {
        let mut cache = PromptCache::default();
        let first = cache.account(&request(&["hello there"]));
        assert_eq!(first.read, 0);
        assert!(first.write > 100);
        let second = cache.account(&request(&["hello there", "hi", "more please"]));
        assert!(second.read > first.write - 1, "{first:?} {second:?}");
        let other = cache.account(&json!({"system": "changed",
            "messages": [{"role": "user", "content": "x"}]}));
        assert_eq!(other.read, 0);
    }
}
