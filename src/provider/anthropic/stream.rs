//! Streamed Messages answers (`POST /v1/messages` with `"stream": true`): the events, each a
//! JSON object whose `type` names it, assembled into the `message` object a whole answer would
//! have been ([`EventAssembler`]), so one reader ([`super::wire::parse_message`]) serves both.
//!
//! The events (Anthropic "Streaming Messages"): `message_start` (`message` with its `usage`),
//! `content_block_start` (`index`, `content_block`: `text`, `tool_use`, `thinking`,
//! `redacted_thinking`), `content_block_delta` (`text_delta.text`,
//! `input_json_delta.partial_json`, `thinking_delta.thinking`, `signature_delta.signature`),
//! `content_block_stop`, `message_delta` (`delta.stop_reason`, `usage.output_tokens`),
//! `message_stop`, `ping`, and `error` (`error.type`, `error.message`). Unknown event and delta
//! types are ignored, as the API's versioning policy asks.

use super::wire;
use crate::provider::{Completion, ProviderError};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// What one event was, for the reader of the stream.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Event {
    /// A piece of answer text (to show as the model writes).
    Text(String),
    /// A keep-alive: not progress.
    Ping,
    /// Any other event.
    Other,
}

/// A content block being assembled: the block as started, and the JSON text of a `tool_use`
/// input received in pieces.
#[derive(Debug)]
struct Block {
    block: Map<String, Value>,
    partial_json: String,
}

/// Builds the answer from the `data` payloads of a stream, one [`EventAssembler::push`] each.
#[derive(Debug, Default)]
pub(crate) struct EventAssembler {
    /// The `message` of `message_start` (without content), updated by `message_delta`.
    message: Map<String, Value>,
    /// By the event's `index`.
    blocks: BTreeMap<u64, Block>,
    /// `usage` of `message_start`, then merged with that of each `message_delta`.
    usage: Map<String, Value>,
    started: bool,
    stopped: bool,
}

fn bad(what: impl Into<String>) -> ProviderError {
    ProviderError::BadResponse(what.into())
}

impl EventAssembler {
    /// Takes one `data` payload (a JSON event object).
    ///
    /// # Errors
    /// [`ProviderError::BadResponse`]: not JSON, or a field has the wrong type; an `error`
    /// event as [`wire::stream_error`] says.
    pub(crate) fn push(&mut self, data: &str) -> Result<Event, ProviderError> {
        let v: Value = serde_json::from_str(data.trim()).map_err(|e| {
            bad(format!(
                "a stream event is not JSON ({e}): {}",
                data.chars().take(100).collect::<String>()
            ))
        })?;
        let kind = v.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "ping" => return Ok(Event::Ping),
            "error" => return Err(wire::stream_error(&v)),
            "message_start" => {
                let m = v
                    .get("message")
                    .and_then(Value::as_object)
                    .ok_or_else(|| bad("message_start without a message"))?;
                self.message = m.clone();
                self.message.remove("content");
                if let Some(u) = m.get("usage").and_then(Value::as_object) {
                    self.usage = u.clone();
                }
                self.started = true;
            }
            "content_block_start" => {
                let index = index_of(&v)?;
                let block = v
                    .get("content_block")
                    .and_then(Value::as_object)
                    .ok_or_else(|| bad("content_block_start without a content_block"))?;
                self.blocks.insert(
                    index,
                    Block {
                        block: block.clone(),
                        partial_json: String::new(),
                    },
                );
            }
            "content_block_delta" => return self.delta(&v),
            "message_delta" => {
                if let Some(d) = v.get("delta").and_then(Value::as_object) {
                    for (k, val) in d {
                        self.message.insert(k.clone(), val.clone());
                    }
                }
                if let Some(u) = v.get("usage").and_then(Value::as_object) {
                    for (k, val) in u.iter().filter(|(_, val)| !val.is_null()) {
                        self.usage.insert(k.clone(), val.clone());
                    }
                }
            }
            "message_stop" => self.stopped = true,
            // content_block_stop, and event types added later.
            _ => {}
        }
        Ok(Event::Other)
    }

    fn delta(&mut self, v: &Value) -> Result<Event, ProviderError> {
        let index = index_of(v)?;
        let delta = v
            .get("delta")
            .and_then(Value::as_object)
            .ok_or_else(|| bad("content_block_delta without a delta"))?;
        let b = self
            .blocks
            .get_mut(&index)
            .ok_or_else(|| bad(format!("a delta for block {index}, which was not started")))?;
        let piece = |key: &str| -> Result<&str, ProviderError> {
            delta
                .get(key)
                .and_then(Value::as_str)
                .ok_or_else(|| bad(format!("a delta without its {key} text")))
        };
        match delta.get("type").and_then(Value::as_str).unwrap_or("") {
            "text_delta" => {
                let text = piece("text")?;
                append(&mut b.block, "text", text);
                if !text.is_empty() {
                    return Ok(Event::Text(text.to_string()));
                }
            }
            "input_json_delta" => b.partial_json.push_str(piece("partial_json")?),
            "thinking_delta" => append(&mut b.block, "thinking", piece("thinking")?),
            "signature_delta" => append(&mut b.block, "signature", piece("signature")?),
            _ => {}
        }
        Ok(Event::Other)
    }

    /// Whether `message_stop` came: the answer is whole.
    pub(crate) fn is_done(&self) -> bool {
        self.stopped
    }

    /// The completion of the stream ([`wire::parse_message`] of the assembled message). A
    /// `tool_use` input whose pieces are not a JSON object is kept as its text (the tool's
    /// validation then reports it to the model).
    ///
    /// # Errors
    /// [`ProviderError::BadResponse`] when the stream had no `message_start` or no
    /// `message_stop`.
    pub(crate) fn into_completion(self) -> Result<Completion, ProviderError> {
        if !self.started || !self.stopped {
            return Err(bad(
                "the stream ended before message_stop (the answer is incomplete)",
            ));
        }
        let content: Vec<Value> = self
            .blocks
            .into_values()
            .map(
                |Block {
                     mut block,
                     partial_json,
                 }| {
                    if block.get("type").and_then(Value::as_str) == Some("tool_use")
                        && !partial_json.trim().is_empty()
                    {
                        let input = match serde_json::from_str::<Value>(&partial_json) {
                            Ok(v @ Value::Object(_)) => v,
                            _ => Value::String(partial_json),
                        };
                        block.insert("input".into(), input);
                    }
                    Value::Object(block)
                },
            )
            .collect();
        let mut message = Value::Object(self.message);
        message["content"] = Value::Array(content);
        message["usage"] = Value::Object(self.usage);
        wire::parse_message(&message)
    }
}

fn index_of(v: &Value) -> Result<u64, ProviderError> {
    v.get("index")
        .and_then(Value::as_u64)
        .ok_or_else(|| bad("a content block event without its index"))
}

/// Appends `piece` to the string field `key` of `block` (created when missing).
fn append(block: &mut Map<String, Value>, key: &str, piece: &str) {
    match block.get_mut(key) {
        Some(Value::String(s)) => s.push_str(piece),
        _ => {
            block.insert(key.into(), json!(piece));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::FinishReason;

    fn push_all(events: &[Value]) -> Result<(EventAssembler, Vec<Event>), ProviderError> {
        let mut a = EventAssembler::default();
        let mut out = Vec::new();
        for e in events {
            out.push(a.push(&e.to_string())?);
        }
        Ok((a, out))
    }

    fn start() -> Value {
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message",
            "role": "assistant", "content": [], "model": "claude-x", "stop_reason": null,
            "usage": {"input_tokens": 10, "cache_read_input_tokens": 90,
                      "cache_creation_input_tokens": 0, "output_tokens": 1}}})
    }

    fn delta(index: u64, d: Value) -> Value {
        json!({"type": "content_block_delta", "index": index, "delta": d})
    }

    #[test]
    fn assembles_thinking_text_and_a_tool_use_in_pieces() {
        let events = vec![
            start(),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
            delta(0, json!({"type": "thinking_delta", "thinking": "Let me "})),
            delta(0, json!({"type": "thinking_delta", "thinking": "look."})),
            delta(0, json!({"type": "signature_delta", "signature": "sig=="})),
            json!({"type": "content_block_stop", "index": 0}),
            json!({"type": "ping"}),
            json!({"type": "content_block_start", "index": 1,
                   "content_block": {"type": "text", "text": ""}}),
            delta(1, json!({"type": "text_delta", "text": "Reading "})),
            delta(1, json!({"type": "text_delta", "text": "it."})),
            json!({"type": "content_block_stop", "index": 1}),
            json!({"type": "content_block_start", "index": 2,
                   "content_block": {"type": "tool_use", "id": "toolu_1", "name": "file_read",
                                     "input": {}}}),
            delta(2, json!({"type": "input_json_delta", "partial_json": ""})),
            delta(
                2,
                json!({"type": "input_json_delta", "partial_json": "{\"path\": "}),
            ),
            delta(
                2,
                json!({"type": "input_json_delta", "partial_json": "\"a.txt\"}"}),
            ),
            json!({"type": "content_block_stop", "index": 2}),
            json!({"type": "message_delta", "delta": {"stop_reason": "tool_use",
                   "stop_sequence": null}, "usage": {"output_tokens": 42}}),
            json!({"type": "message_stop"}),
        ];
        let (a, out) = push_all(&events).unwrap();
        assert!(a.is_done());
        let texts: Vec<&Event> = out.iter().filter(|e| matches!(e, Event::Text(_))).collect();
        assert_eq!(
            texts,
            [&Event::Text("Reading ".into()), &Event::Text("it.".into())]
        );
        assert_eq!(out.iter().filter(|e| **e == Event::Ping).count(), 1);
        let c = a.into_completion().unwrap();
        assert_eq!(c.message.content.as_deref(), Some("Reading it."));
        assert_eq!(c.message.tool_calls[0].id, "toolu_1");
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"path":"a.txt"}"#);
        assert_eq!(c.finish_reason, Some(FinishReason::ToolCalls));
        let u = c.usage.unwrap();
        assert_eq!(
            (u.input_tokens, u.output_tokens, u.cache_read_tokens),
            (100, 42, 90)
        );
        let kept = &c.message.opaque.unwrap()["anthropic"]["content"];
        assert_eq!(
            kept[0],
            json!({"type": "thinking", "thinking": "Let me look.", "signature": "sig=="})
        );
        assert_eq!(kept[2]["input"], json!({"path": "a.txt"}));
    }

    #[test]
    fn a_stream_without_message_stop_is_incomplete() {
        let (a, _) = push_all(&[
            start(),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "text", "text": ""}}),
            delta(0, json!({"type": "text_delta", "text": "Hal"})),
        ])
        .unwrap();
        assert!(!a.is_done());
        assert!(matches!(
            a.into_completion(),
            Err(ProviderError::BadResponse(_))
        ));
    }

    #[test]
    fn bad_input_json_is_kept_as_text() {
        let (a, _) = push_all(&[
            start(),
            json!({"type": "content_block_start", "index": 0,
                   "content_block": {"type": "tool_use", "id": "t", "name": "x", "input": {}}}),
            delta(
                0,
                json!({"type": "input_json_delta", "partial_json": "{\"a\": "}),
            ),
            json!({"type": "message_delta", "delta": {"stop_reason": "max_tokens"}}),
            json!({"type": "message_stop"}),
        ])
        .unwrap();
        let c = a.into_completion().unwrap();
        assert_eq!(c.message.tool_calls[0].arguments, "{\"a\": ");
        assert!(c.truncated());
    }

    #[test]
    fn error_events_and_garbage_are_errors() {
        let overloaded = json!({"type": "error",
            "error": {"type": "overloaded_error", "message": "Overloaded"}});
        let e = push_all(&[start(), overloaded]).err().unwrap();
        assert!(e.is_transient(), "{e}");
        assert!(matches!(e, ProviderError::Http { status: 529, .. }));
        let invalid = json!({"type": "error",
            "error": {"type": "invalid_request_error", "message": "no"}});
        assert!(!push_all(&[invalid]).err().unwrap().is_transient());
        let mut a = EventAssembler::default();
        assert!(a.push("{oops").is_err());
        assert!(a
            .push(&delta(3, json!({"type": "text_delta", "text": "x"})).to_string())
            .is_err());
        // Unknown events and deltas are ignored.
        assert_eq!(
            a.push(r#"{"type": "something_new"}"#).unwrap(),
            Event::Other
        );
    }
}
