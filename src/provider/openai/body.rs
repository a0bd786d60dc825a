//! The Chat Completions request body, written straight from the provider-neutral messages and
//! tools it borrows (no copy of the history's text, no `serde_json::Value` tree in between).
//!
//! The keys are written in a fixed order, `messages` last: what comes before them (`model`,
//! `prompt_cache_key`, the streaming keys, `tools`) is the same from one request of a
//! conversation to the next, so a later request starts with the bytes of the one before it
//! (the server's prompt cache, [`super::super::cache_key`]). Within an object the keys are in
//! alphabetical order, as they always were.
//!
//! A message: `role`, `content` (`""` beside tool calls),
//! `tool_calls[]{id, type: "function", function{name, arguments}}`, `tool_call_id`. The neutral
//! `opaque` field is not sent: this API has none. A user message with pictures has a list of
//! content parts: `{type: "text"}` then `{type: "image_url", image_url: {url:
//! "data:<mime>;base64,…"}}` per picture.

use crate::provider::types::{ChatMessage, Role, ToolCall, ToolSpec};
use serde::ser::{Serialize, Serializer};
use serde_json::Value;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

/// One request's body. Cheap to copy: it borrows what it writes.
#[derive(Clone, Copy, serde::Serialize)]
pub(super) struct Body<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompt_cache_key: Option<&'a str>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
    #[serde(skip_serializing_if = "List::is_empty")]
    tools: List<'a, ToolSpec, Tool<'a>>,
    /// Written by [`Body::to_bytes`] after the keys above.
    #[serde(skip)]
    messages: &'a [Cow<'a, ChatMessage>],
    /// The system prompts written lately, whose JSON is copied when one comes again.
    #[serde(skip)]
    prompts: Option<&'a Prompts>,
}

/// How many system prompts [`Prompts`] keeps.
const KEPT_PROMPTS: usize = 4;

/// The JSON of the system prompts a client wrote lately (a few: one per agent and channel in
/// use), so that a turn's requests and the next turn's copy the prompt's bytes instead of
/// writing its text again; a prompt is found by its whole text. Shared by the client's clones.
#[derive(Clone, Default)]
pub(super) struct Prompts(Arc<Mutex<VecDeque<KeptPrompt>>>);

/// A system prompt's text and its JSON.
type KeptPrompt = (Option<String>, Arc<[u8]>);

impl Prompts {
    /// The JSON of the system message `m`, kept or written now (and kept).
    fn json(&self, m: &ChatMessage) -> Arc<[u8]> {
        let text = m.content.as_deref();
        let mut kept = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, json)) = kept.iter().find(|(t, _)| t.as_deref() == text) {
            return json.clone();
        }
        let json: Arc<[u8]> = message_json(m).into();
        if kept.len() == KEPT_PROMPTS {
            kept.pop_front();
        }
        kept.push_back((text.map(str::to_string), json.clone()));
        json
    }
}

/// `stream_options`: the usage in the last chunk.
#[derive(Clone, Copy, serde::Serialize)]
struct StreamOptions {
    include_usage: bool,
}

impl<'a> Body<'a> {
    /// The body of a whole answer: `model`, `messages`, `tools` when there are any, and the
    /// conversation's `prompt_cache_key` when given.
    pub fn new(
        model: &'a str,
        prompt_cache_key: Option<&'a str>,
        messages: &'a [Cow<'a, ChatMessage>],
        tools: &'a [ToolSpec],
    ) -> Self {
        Self {
            model,
            prompt_cache_key,
            stream: false,
            stream_options: None,
            tools: List(tools, Tool::of),
            messages,
            prompts: None,
        }
    }

    /// The same body, its system prompt's JSON copied from `prompts` when it was written lately.
    pub fn with_prompts(self, prompts: &'a Prompts) -> Self {
        Self {
            prompts: Some(prompts),
            ..self
        }
    }

    /// The same body streamed (`"stream": true`), with `"stream_options": {"include_usage":
    /// true}` when `options`.
    pub fn streamed(self, options: bool) -> Self {
        Self {
            stream: true,
            stream_options: options.then_some(StreamOptions {
                include_usage: true,
            }),
            ..self
        }
    }

    /// Whether it offers tools.
    pub fn offers_tools(&self) -> bool {
        !self.tools.is_empty()
    }

    /// The JSON text: the keys before `messages`, then each message as its memo holds it
    /// ([`message_json`]: a copy of bytes for the messages of the kept window), else written.
    pub fn to_bytes(self) -> Vec<u8> {
        let kept: usize = self
            .messages
            .iter()
            .filter_map(|m| kept_json(m))
            .map(<[u8]>::len)
            .sum();
        let mut out = Vec::with_capacity(kept + 4096);
        // Writing these types to a `Vec` cannot fail: every map key is a string.
        let _ = serde_json::to_writer(&mut out, &self);
        // `{…"model":…}`: `model` is always there, so `messages` follows a comma.
        out.pop();
        out.extend_from_slice(br#","messages":["#);
        for (i, m) in self.messages.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match (kept_json(m), self.prompts) {
                (Some(json), _) => out.extend_from_slice(json),
                (None, Some(prompts)) if m.role == Role::System && plain(m) => {
                    out.extend_from_slice(&prompts.json(m));
                }
                _ => {
                    let _ = serde_json::to_writer(&mut out, &Message::of(m));
                }
            }
        }
        out.extend_from_slice(b"]}");
        out
    }
}

/// `m` in the Chat Completions wire shape, as [`Body::to_bytes`] writes it: what the kept window
/// keeps in a message's memo ([`ethan_core::message::Memo::chat_json`]).
pub fn message_json(m: &ChatMessage) -> Vec<u8> {
    let mut out = Vec::with_capacity(m.content.as_ref().map_or(0, String::len) + 64);
    let _ = serde_json::to_writer(&mut out, &Message::of(m));
    out
}

/// Whether `m` is text alone (what [`Prompts`] keeps a system prompt by).
fn plain(m: &ChatMessage) -> bool {
    m.tool_calls.is_empty() && m.tool_call_id.is_none() && m.images.is_empty()
}

/// The JSON of `m` its memo holds, when it holds it for `m` as it is.
fn kept_json(m: &ChatMessage) -> Option<&[u8]> {
    let text_len = m.content.as_ref().map_or(0, String::len);
    m.derived.get()?.chat_json(text_len)
}

/// A list borrowed from the messages or tools, each element written in its wire shape (`W`,
/// made by the function).
struct List<'a, T, W>(&'a [T], fn(&'a T) -> W);

impl<T, W> Clone for List<'_, T, W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T, W> Copy for List<'_, T, W> {}

impl<T, W> List<'_, T, W> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl<'a, T, W: Serialize> Serialize for List<'a, T, W> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(self.1))
    }
}

/// A tool: `{type: "function", function: {name, description, parameters}}`.
#[derive(serde::Serialize)]
struct Tool<'a> {
    function: Function<'a>,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(serde::Serialize)]
struct Function<'a> {
    description: &'a str,
    name: &'a str,
    parameters: &'a Value,
}

impl<'a> Tool<'a> {
    fn of(t: &'a ToolSpec) -> Self {
        Self {
            function: Function {
                description: &t.description,
                name: &t.name,
                parameters: &t.parameters,
            },
            kind: "function",
        }
    }
}

/// A message in the Chat Completions wire shape (see the module doc).
#[derive(serde::Serialize)]
pub(super) struct Message<'a> {
    content: Content<'a>,
    role: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_call_id: Option<&'a str>,
    #[serde(skip_serializing_if = "List::is_empty")]
    tool_calls: List<'a, ToolCall, Call<'a>>,
}

/// A tool call: `{id, type: "function", function: {name, arguments}}`.
#[derive(serde::Serialize)]
struct Call<'a> {
    function: CallFunction<'a>,
    id: &'a str,
    #[serde(rename = "type")]
    kind: &'static str,
}

#[derive(serde::Serialize)]
struct CallFunction<'a> {
    arguments: &'a str,
    name: &'a str,
}

impl<'a> Call<'a> {
    fn of(c: &'a ToolCall) -> Self {
        Self {
            function: CallFunction {
                arguments: &c.arguments,
                name: &c.name,
            },
            id: &c.id,
            kind: "function",
        }
    }
}

impl<'a> Message<'a> {
    pub fn of(m: &'a ChatMessage) -> Self {
        // `""`, not `null`, beside tool calls: some servers (llama-cpp-python) answer 500 for
        // null.
        let text = match &m.content {
            None if !m.tool_calls.is_empty() => Some(""),
            c => c.as_deref(),
        };
        let content = if m.role == Role::User && !m.images.is_empty() {
            // Vision: the text, then one `image_url` part per picture, as a data URL.
            let mut parts = vec![Part::Text {
                text: text.unwrap_or_default(),
                kind: "text",
            }];
            parts.extend(m.images.iter().map(|i| Part::Image {
                image_url: ImageUrl { url: i.data_url() },
                kind: "image_url",
            }));
            Content::Parts(parts)
        } else {
            Content::Text(text)
        };
        Self {
            content,
            role: m.role.as_str(),
            tool_call_id: m.tool_call_id.as_deref(),
            tool_calls: List(&m.tool_calls, Call::of),
        }
    }
}

#[derive(serde::Serialize)]
#[serde(untagged)]
enum Content<'a> {
    Text(Option<&'a str>),
    Parts(Vec<Part<'a>>),
}

#[derive(serde::Serialize)]
#[serde(untagged)]
enum Part<'a> {
    Text {
        text: &'a str,
        #[serde(rename = "type")]
        kind: &'static str,
    },
    Image {
        image_url: ImageUrl,
        #[serde(rename = "type")]
        kind: &'static str,
    },
}

#[derive(serde::Serialize)]
struct ImageUrl {
    url: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_come_last_and_keys_are_in_order() {
        let messages = ethan_core::provider::owned([ChatMessage::user("hi")]);
        let tools = [ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: json!({"type": "object"}),
        }];
        let body = Body::new("m", Some("k"), &messages, &tools).streamed(true);
        let text = String::from_utf8(body.to_bytes()).unwrap();
        assert_eq!(
            text,
            r#"{"model":"m","prompt_cache_key":"k","stream":true,"stream_options":{"include_usage":true},"tools":[{"function":{"description":"d","name":"t","parameters":{"type":"object"}},"type":"function"}],"messages":[{"content":"hi","role":"user"}]}"#
        );
        let plain = Body::new("m", None, &messages, &[]);
        assert_eq!(
            String::from_utf8(plain.to_bytes()).unwrap(),
            r#"{"model":"m","messages":[{"content":"hi","role":"user"}]}"#
        );
    }

    #[test]
    fn kept_prompts_give_the_bodies_written_afresh() {
        let prompts = Prompts::default();
        let tools = [ToolSpec {
            name: "t".into(),
            description: "d".into(),
            parameters: serde_json::json!({"type": "object"}),
        }];
        // Six prompts, each twice, so the oldest are dropped and written again; one with
        // quotes and one with no text.
        let mut texts: Vec<Option<String>> = (0..5)
            .map(|i| Some(format!("You are \"Ethan\" {i}\n")))
            .collect();
        texts.push(None);
        for round in 0..2 {
            for text in &texts {
                let mut system = ChatMessage::system("");
                system.content = text.clone();
                let messages =
                    ethan_core::provider::owned([system, ChatMessage::user(format!("q{round}"))]);
                let fresh = Body::new("m", None, &messages, &tools).to_bytes();
                let kept = Body::new("m", None, &messages, &tools)
                    .with_prompts(&prompts)
                    .to_bytes();
                assert_eq!(
                    String::from_utf8(kept).unwrap(),
                    String::from_utf8(fresh).unwrap()
                );
            }
        }
        assert_eq!(prompts.0.lock().unwrap().len(), KEPT_PROMPTS);
    }

    #[test]
    fn calls_have_empty_content_and_results_their_call() {
        let mut call = ChatMessage::assistant("x");
        call.content = None;
        call.tool_calls = vec![ToolCall {
            id: "c1".into(),
            name: "f".into(),
            arguments: "{}".into(),
        }];
        let result = ChatMessage::tool("c1", "out");
        let v = serde_json::to_value([Message::of(&call), Message::of(&result)]).unwrap();
        assert_eq!(
            v,
            json!([{"content": "", "role": "assistant", "tool_calls": [{"id": "c1",
                     "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                   {"content": "out", "role": "tool", "tool_call_id": "c1"}])
        );
    }
}
