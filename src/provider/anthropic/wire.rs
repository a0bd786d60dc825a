//! The Anthropic Messages wire shapes (`POST /v1/messages`, API version `2023-06-01`) to and
//! from the neutral messages of [`ethan_core::message`].
//!
//! Request ([`request_body`]): `model`, `max_tokens`, `system` (text blocks), `messages`
//! (roles alternating, `user` first; content as blocks: `text`, `tool_use {id, name, input}`,
//! `tool_result {tool_use_id, content, is_error}`, and `thinking` / `redacted_thinking` blocks
//! given back as received), `tools` (`{name, description, input_schema}`), and prompt-cache
//! breakpoints (`cache_control: {"type": "ephemeral"}`; the API allows at most 4).
//!
//! Answer ([`parse_message`]): a `message` object with `content` blocks, `stop_reason` and
//! `usage` (`input_tokens`, `output_tokens`, `cache_read_input_tokens`,
//! `cache_creation_input_tokens`). Errors ([`classify_error`]): `{"type": "error", "error":
//! {"type", "message"}}`.

use crate::provider::http::error_message;
use crate::provider::types::{ChatMessage, Role, ToolCall, ToolSpec};
use crate::provider::{tolerant, Completion, FinishReason, ProviderError};
use ethan_core::provider::Usage;
use serde_json::{json, Value};
use std::borrow::Cow;
use std::collections::HashSet;

/// The key of this provider's data in a neutral message's `opaque` field:
/// `{"anthropic": {"content": [<every block of the answer, as received>]}}`.
pub(crate) const OPAQUE_KEY: &str = "anthropic";

/// The most `cache_control` breakpoints a request may carry (an API limit).
pub(crate) const MAX_CACHE_BREAKPOINTS: usize = 4;

/// The text of a user message put first when the history starts with the assistant (the API
/// wants `user` first).
const LEADING_USER_TEXT: &str = "(earlier conversation)";
/// The result sent for a tool use whose result is missing from the history (the API wants one
/// for each).
const MISSING_RESULT_TEXT: &str = "(no result: the call did not run)";
/// The content of a tool result that was empty (an empty error result is refused).
const EMPTY_RESULT_TEXT: &str = "(no output)";

/// One wire message being built: `role` (`user` / `assistant`) and its content blocks.
#[derive(Debug)]
struct Turn {
    role: &'static str,
    blocks: Vec<Value>,
}

/// The request body of `POST /v1/messages` (see the module doc); `stream` adds `"stream":
/// true`.
pub(crate) fn request_body(
    model: &str,
    max_tokens: u32,
    messages: &[Cow<'_, ChatMessage>],
    tools: &[ToolSpec],
    stream: bool,
) -> Value {
    let mut system: Vec<Value> = messages
        .iter()
        .filter(|m| m.role == Role::System)
        .filter_map(|m| m.content.as_deref().filter(|t| !t.trim().is_empty()))
        .map(|t| json!({"type": "text", "text": t}))
        .collect();
    let mut wire_tools: Vec<Value> = tools.iter().map(tool_to_wire).collect();
    let mut turns = messages_to_wire(messages);
    // Breakpoints: the system prompt, the tools, and the conversation so far (its last block
    // that may carry one): 3 of the API's 4.
    let last_system = system.last_mut();
    let last_tool = wire_tools.last_mut();
    let last_block = turns
        .last_mut()
        .and_then(|t| t.blocks.iter_mut().rev().find(|b| !is_thinking(b)));
    for block in [last_system, last_tool, last_block]
        .into_iter()
        .flatten()
        .take(MAX_CACHE_BREAKPOINTS)
    {
        set_cache_control(block);
    }
    let messages: Vec<Value> = turns
        .into_iter()
        .map(|t| json!({"role": t.role, "content": t.blocks}))
        .collect();
    let mut body = json!({"model": model, "max_tokens": max_tokens, "messages": messages});
    if !system.is_empty() {
        body["system"] = Value::Array(system);
    }
    if !wire_tools.is_empty() {
        body["tools"] = Value::Array(wire_tools);
    }
    if stream {
        body["stream"] = json!(true);
    }
    body
}

/// A tool offered to the model: `{name, description, input_schema}`; a schema that is not an
/// object becomes the empty object schema (the API requires `type: "object"`).
fn tool_to_wire(t: &ToolSpec) -> Value {
    let schema = if t.parameters.is_object() {
        t.parameters.clone()
    } else {
        json!({"type": "object", "properties": {}})
    };
    json!({"name": t.name, "description": t.description, "input_schema": schema})
}

fn set_cache_control(block: &mut Value) {
    if let Some(obj) = block.as_object_mut() {
        obj.insert("cache_control".into(), json!({"type": "ephemeral"}));
    }
}

fn is_thinking(block: &Value) -> bool {
    matches!(
        block.get("type").and_then(Value::as_str),
        Some("thinking" | "redacted_thinking")
    )
}

fn block_type(block: &Value) -> &str {
    block.get("type").and_then(Value::as_str).unwrap_or("")
}

/// The non-system messages as wire messages: same roles merged so they alternate, `user`
/// first, every `tool_use` answered by a `tool_result` in the next user message (a missing one
/// is added as an error result; a result with no call before it is sent as text), no empty
/// text blocks.
fn messages_to_wire(messages: &[Cow<'_, ChatMessage>]) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    for m in messages.iter().map(|m| &**m) {
        let (role, blocks) = match m.role {
            Role::System => continue,
            Role::User => (
                "user",
                m.images
                    .iter()
                    .map(image_block)
                    .chain(text_block(m.content.as_deref()))
                    .collect(),
            ),
            Role::Tool => ("user", vec![tool_result_block(m)]),
            Role::Assistant => ("assistant", assistant_blocks(m)),
        };
        if blocks.is_empty() {
            continue;
        }
        match turns.last_mut() {
            Some(last) if last.role == role => last.blocks.extend(blocks),
            _ => turns.push(Turn { role, blocks }),
        }
    }
    if turns.first().is_some_and(|t| t.role == "assistant") || turns.is_empty() {
        turns.insert(
            0,
            Turn {
                role: "user",
                blocks: vec![json!({"type": "text", "text": LEADING_USER_TEXT})],
            },
        );
    }
    pair_tool_results(&mut turns);
    turns
}

/// A picture: `{type: image, source: {type: base64, media_type, data}}`, before the text of
/// its message (as Anthropic's vision guide recommends).
fn image_block(image: &ethan_core::message::ImagePart) -> Value {
    json!({"type": "image", "source": {
        "type": "base64", "media_type": image.mime, "data": image.base64()}})
}

fn text_block(text: Option<&str>) -> Option<Value> {
    text.filter(|t| !t.trim().is_empty())
        .map(|t| json!({"type": "text", "text": t}))
}

/// `{type: tool_result, tool_use_id, content, is_error}` (`is_error` only when true).
fn tool_result_block(m: &ChatMessage) -> Value {
    let content = m
        .content
        .as_deref()
        .filter(|t| !t.trim().is_empty())
        .unwrap_or(EMPTY_RESULT_TEXT);
    let mut block = json!({
        "type": "tool_result",
        "tool_use_id": m.tool_call_id.clone().unwrap_or_default(),
        "content": content,
    });
    if m.is_error {
        block["is_error"] = json!(true);
    }
    block
}

/// The blocks of an assistant message: the blocks of the answer as received when this
/// provider's `opaque` data holds them and they still say what the message says; else its
/// thinking blocks (if any) first, then a `text` block (if not empty) and a `tool_use` block
/// per call.
fn assistant_blocks(m: &ChatMessage) -> Vec<Value> {
    let received: Vec<Value> = m
        .opaque
        .as_ref()
        .and_then(|o| o.get(OPAQUE_KEY))
        .and_then(|a| a.get("content"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if !received.is_empty() && says_the_same(&received, m) {
        return received
            .into_iter()
            .filter(|b| !(block_type(b) == "text" && text_of(b).trim().is_empty()))
            .map(|mut b| {
                if !is_thinking(&b) {
                    if let Some(o) = b.as_object_mut() {
                        o.remove("cache_control");
                    }
                }
                b
            })
            .collect();
    }
    let mut blocks: Vec<Value> = received.into_iter().filter(is_thinking).collect();
    blocks.extend(text_block(m.content.as_deref()));
    for c in &m.tool_calls {
        blocks.push(json!({"type": "tool_use", "id": c.id, "name": c.name,
                           "input": tool_input(c)}));
    }
    blocks
}

fn text_of(block: &Value) -> &str {
    block.get("text").and_then(Value::as_str).unwrap_or("")
}

/// Whether received blocks carry the message's text and its tool calls (ids and names, in
/// order): the message was not changed since it was read.
fn says_the_same(received: &[Value], m: &ChatMessage) -> bool {
    let text: String = received
        .iter()
        .filter(|b| block_type(b) == "text")
        .map(text_of)
        .collect();
    let uses: Vec<(&str, &str)> = received
        .iter()
        .filter(|b| block_type(b) == "tool_use")
        .map(|b| {
            (
                b.get("id").and_then(Value::as_str).unwrap_or(""),
                b.get("name").and_then(Value::as_str).unwrap_or(""),
            )
        })
        .collect();
    let calls: Vec<(&str, &str)> = m
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str()))
        .collect();
    text == m.content.as_deref().unwrap_or("") && uses == calls
}

/// A call's `input`: its arguments parsed, or `{}` when they are not a JSON object (the model
/// wrote bad JSON; the tool's result says so when the call is validated).
fn tool_input(c: &ToolCall) -> Value {
    match serde_json::from_str::<Value>(&c.arguments) {
        Ok(v @ Value::Object(_)) => v,
        _ if c.arguments.trim().is_empty() => json!({}),
        _ => {
            tracing::debug!(
                "tool call {} ({}) has arguments that are not a JSON object; sent as {{}}",
                c.id,
                c.name
            );
            json!({})
        }
    }
}

/// Makes every user turn after an assistant turn answer that turn's `tool_use` blocks: a
/// missing result is added (as an error result), a `tool_result` naming no call of the turn
/// before is turned into text, and the results come first in the message (the API's order).
fn pair_tool_results(turns: &mut Vec<Turn>) {
    let mut i = 0;
    while i < turns.len() {
        let asked: Vec<String> = if i > 0 && turns[i].role == "user" {
            tool_use_ids(&turns[i - 1])
        } else {
            Vec::new()
        };
        if turns[i].role == "user" {
            let asked_set: HashSet<&str> = asked.iter().map(String::as_str).collect();
            let blocks = std::mem::take(&mut turns[i].blocks);
            let mut results = Vec::new();
            let mut others = Vec::new();
            let mut answered = HashSet::new();
            for b in blocks {
                if block_type(&b) != "tool_result" {
                    others.push(b);
                    continue;
                }
                let id = b
                    .get("tool_use_id")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                if asked_set.contains(id.as_str()) && answered.insert(id) {
                    results.push(b);
                } else {
                    // A result whose call is not in the turn before (or a second one): text.
                    let content = b.get("content").and_then(Value::as_str).unwrap_or("");
                    others.push(json!({"type": "text",
                        "text": format!("(tool result) {content}")}));
                }
            }
            for id in &asked {
                if !answered.contains(id) {
                    results.push(json!({"type": "tool_result", "tool_use_id": id,
                        "content": MISSING_RESULT_TEXT, "is_error": true}));
                }
            }
            results.extend(others);
            turns[i].blocks = results;
        } else if i + 1 == turns.len() || turns[i + 1].role != "user" {
            // An assistant turn whose calls have no user turn after it.
            if !tool_use_ids(&turns[i]).is_empty() {
                turns.insert(
                    i + 1,
                    Turn {
                        role: "user",
                        blocks: Vec::new(),
                    },
                );
            }
        }
        i += 1;
    }
}

fn tool_use_ids(turn: &Turn) -> Vec<String> {
    if turn.role != "assistant" {
        return Vec::new();
    }
    turn.blocks
        .iter()
        .filter(|b| block_type(b) == "tool_use")
        .filter_map(|b| b.get("id").and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// The completion of a `message` object (a whole answer, or one assembled from a stream):
/// `text` blocks joined into the content, `tool_use` blocks as tool calls (`input` as JSON
/// text; a string `input` is taken as the JSON text itself), the blocks kept in `opaque` when
/// the answer has thinking blocks, `stop_reason` and `usage` read ([`finish_reason`],
/// [`usage_of`]). `model` is left empty for the client to fill.
///
/// # Errors
/// [`ProviderError::BadResponse`] when `content` is missing or not a list.
pub(crate) fn parse_message(v: &Value) -> Result<Completion, ProviderError> {
    let blocks = v
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| ProviderError::BadResponse("no content list in the message".into()))?;
    let mut text = String::new();
    let mut tool_calls = Vec::new();
    for b in blocks {
        match block_type(b) {
            "text" => text.push_str(text_of(b)),
            "tool_use" => tool_calls.push(ToolCall {
                id: tolerant::id_text(b.get("id")),
                name: b
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                arguments: match b.get("input") {
                    None | Some(Value::Null) => "{}".to_string(),
                    input => tolerant::arguments_text(input),
                },
            }),
            _ => {}
        }
    }
    let opaque = blocks
        .iter()
        .any(is_thinking)
        .then(|| json!({ OPAQUE_KEY: {"content": blocks} }));
    let mut message = ChatMessage {
        role: Role::Assistant,
        content: (!text.is_empty() || tool_calls.is_empty()).then_some(text),
        tool_calls,
        tool_call_id: None,
        opaque,
        is_error: false,
        images: Vec::new(),
        sent_at: None,
        derived: Default::default(),
    };
    // Ids filled in and unique (the blocks in `opaque` are then no longer used as they are).
    tolerant::finish_message(&mut message, false);
    Ok(Completion {
        message,
        finish_reason: v
            .get("stop_reason")
            .and_then(Value::as_str)
            .map(finish_reason),
        usage: v.get("usage").and_then(usage_of),
        model: String::new(),
    })
}

/// The neutral reason of a `stop_reason`: `end_turn` / `stop_sequence` → stop, `tool_use` →
/// tool calls, `max_tokens` → length, `refusal` → content filter, anything else (e.g.
/// `pause_turn`) as it is spelled.
pub(crate) fn finish_reason(wire: &str) -> FinishReason {
    match wire {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_string()),
    }
}

/// The tokens of a `usage` object: `input_tokens` counts the prompt in all (`input_tokens` +
/// `cache_read_input_tokens` + `cache_creation_input_tokens`); `None` when it has neither
/// `input_tokens` nor `output_tokens`.
pub(crate) fn usage_of(u: &Value) -> Option<Usage> {
    let n = |k: &str| u.get(k).and_then(Value::as_u64);
    let (input, output) = (n("input_tokens"), n("output_tokens"));
    if input.is_none() && output.is_none() {
        return None;
    }
    let read = n("cache_read_input_tokens").unwrap_or(0);
    let write = n("cache_creation_input_tokens").unwrap_or(0);
    Some(Usage {
        input_tokens: input
            .unwrap_or(0)
            .saturating_add(read)
            .saturating_add(write),
        output_tokens: output.unwrap_or(0),
        cache_read_tokens: read,
        cache_write_tokens: write,
    })
}

/// The error of an answer with HTTP `status` and body `text`: 401/403 →
/// [`ProviderError::Auth`]; 400 saying the prompt is too long (or 413, the request is too
/// large) → [`ProviderError::ContextLength`]; else [`ProviderError::Http`] (429, 529
/// `overloaded_error`, 5xx and 408 are transient). The message is `error.type: error.message`.
pub(crate) fn classify_error(status: u16, text: &str) -> ProviderError {
    let message = match serde_json::from_str::<Value>(text).ok().and_then(|v| {
        v.pointer("/error/type")
            .and_then(Value::as_str)
            .map(str::to_string)
    }) {
        Some(kind) => format!("{kind}: {}", error_message(text)),
        None => error_message(text),
    };
    if status == 401 || status == 403 {
        return ProviderError::Auth { status, message };
    }
    let lower = error_message(text).to_ascii_lowercase();
    if status == 413
        || (status == 400
            && (lower.contains("prompt is too long")
                || lower.contains("context limit")
                || lower.contains("context window")
                || lower.contains("context length")
                || lower.contains("too many tokens")))
    {
        return ProviderError::ContextLength(message);
    }
    ProviderError::Http { status, message }
}

/// The error of an `error` event in a stream (`{"type": "error", "error": {"type",
/// "message"}}`), as the HTTP answer with that error type would be: `overloaded_error` → 529,
/// `rate_limit_error` → 429, `api_error` → 500 (all transient), `authentication_error` /
/// `permission_error` → [`ProviderError::Auth`], `invalid_request_error` → 400,
/// `request_too_large` → [`ProviderError::ContextLength`]; any other →
/// [`ProviderError::BadResponse`].
pub(crate) fn stream_error(event: &Value) -> ProviderError {
    let kind = event
        .pointer("/error/type")
        .and_then(Value::as_str)
        .unwrap_or("");
    let status = match kind {
        "overloaded_error" => 529,
        "rate_limit_error" => 429,
        "api_error" => 500,
        "authentication_error" => 401,
        "permission_error" => 403,
        "invalid_request_error" => 400,
        "request_too_large" => 413,
        "timeout_error" => 504,
        _ => {
            return ProviderError::BadResponse(format!(
                "error in the stream: {}",
                error_message(&event.to_string())
            ))
        }
    };
    classify_error(status, &event.to_string())
}

/// The number of `cache_control` breakpoints anywhere in a request body.
#[cfg(test)]
fn cache_breakpoints(body: &Value) -> usize {
    fn count(v: &Value) -> usize {
        match v {
            Value::Object(o) => {
                usize::from(o.contains_key("cache_control")) + o.values().map(count).sum::<usize>()
            }
            Value::Array(a) => a.iter().map(count).sum(),
            _ => 0,
        }
    }
    count(body)
}

#[cfg(test)]
mod tests;
