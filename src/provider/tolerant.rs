//! The shapes real OpenAI-compatible servers answer in besides the specification, read into the
//! neutral message: a tool call's `id` of any JSON type (an integer from llama.cpp-style
//! servers) and repeated ids made unique, `arguments` given as a JSON object instead of a
//! string, the legacy `function_call` field, and tool calls the model wrote as text
//! (`<tool_call>{"name": …, "arguments": …}</tool_call>`, or a fenced JSON block with `name` and
//! `arguments`) when the request offered tools.
//!
//! [`read_message`] is the one reader of an assistant message for both paths: a whole answer's
//! `choices[0].message`, and a streamed answer's chunks once [`super::sse::ChunkAssembler`] has
//! put them together in the same shape. While an answer streams, [`super::held_text`] keeps back
//! the text that may turn out to be a call written as text, using the same call parser.

use super::types::{ChatMessage, Role, ToolCall};
use serde_json::Value;
use std::collections::HashSet;

/// The tag a tool call written as text starts with.
pub(crate) const CALL_TAG: &str = "<tool_call>";
/// The tag it ends with.
const CALL_END_TAG: &str = "</tool_call>";

/// An assistant message in the Chat Completions wire shape (`role`, `content`,
/// `tool_calls[]{id, function{name, arguments}}`, the legacy `function_call`) as the neutral
/// message, with every quirk above read ([`finish_message`]). Errors: a field of the wrong type.
pub fn read_message(v: &Value, offered_tools: bool) -> Result<ChatMessage, String> {
    let mut message = message_from_wire(v)?;
    finish_message(&mut message, offered_tools);
    Ok(message)
}

/// The message of the wire shape, as sent: ids, names and arguments as text
/// ([`id_text`], [`arguments_text`]); the legacy `function_call` when there are no `tool_calls`.
fn message_from_wire(v: &Value) -> Result<ChatMessage, String> {
    let role = match v.get("role") {
        None | Some(Value::Null) => Role::Assistant,
        Some(Value::String(r)) => Role::parse(r).ok_or_else(|| format!("unknown role {r:?}"))?,
        Some(other) => return Err(format!("role is not a string: {other}")),
    };
    let content = match v.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.clone()),
        Some(other) => return Err(format!("content is not a string: {other}")),
    };
    let mut tool_calls = Vec::new();
    if let Some(calls) = v.get("tool_calls").filter(|c| !c.is_null()) {
        let calls = calls
            .as_array()
            .ok_or_else(|| "tool_calls is not a list".to_string())?;
        for (i, c) in calls.iter().enumerate() {
            let f = c
                .get("function")
                .ok_or_else(|| format!("tool_calls[{i}] has no function"))?;
            let name = match f.get("name") {
                None | Some(Value::Null) => String::new(),
                Some(Value::String(s)) => s.clone(),
                Some(other) => {
                    return Err(format!(
                        "tool_calls[{i}].function.name is not a string: {other}"
                    ))
                }
            };
            tool_calls.push(ToolCall {
                id: id_text(c.get("id")),
                name,
                arguments: arguments_text(f.get("arguments")),
            });
        }
    }
    if tool_calls.is_empty() {
        tool_calls.extend(legacy_function_call(v));
    }
    Ok(ChatMessage {
        role,
        content,
        tool_calls,
        tool_call_id: v
            .get("tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_string),
        opaque: None,
        is_error: false,
        images: Vec::new(),
        sent_at: None,
        derived: Default::default(),
    })
}

/// A tool call's id as text: a string as it is, a number or anything else as its JSON text;
/// empty for `null` or a missing id.
pub fn id_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// A call's `arguments` as the JSON text the tools expect: a string as it is, an object (or
/// any other JSON value) as its compact JSON text; empty for `null` or missing.
pub fn arguments_text(v: Option<&Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(other) => other.to_string(),
    }
}

/// The last touches on an assistant message, after it was read from the wire:
/// - with no tool calls and `offered_tools`, tool calls written in the text become real ones
///   (the text around them stays the message's content);
/// - every call gets an id, unique within the message (`call_{i}_…` for a missing one, `-{n}`
///   added to a repeated one).
pub fn finish_message(message: &mut ChatMessage, offered_tools: bool) {
    if offered_tools && message.tool_calls.is_empty() {
        if let Some((rest, calls)) = message.content.as_deref().and_then(text_tool_calls) {
            tracing::debug!(
                "the model wrote {} tool call(s) as text; running them as tool calls",
                calls.len()
            );
            message.content = (!rest.trim().is_empty()).then(|| rest.trim().to_string());
            message.tool_calls = calls;
        }
    }
    let mut seen = HashSet::new();
    for (i, c) in message.tool_calls.iter_mut().enumerate() {
        if c.id.is_empty() {
            c.id = format!("call_{i}_{}", uuid::Uuid::new_v4().simple());
        }
        if !seen.insert(c.id.clone()) {
            let mut n = 2;
            while seen.contains(&format!("{}-{n}", c.id)) {
                n += 1;
            }
            c.id = format!("{}-{n}", c.id);
            seen.insert(c.id.clone());
        }
    }
}

/// The legacy `function_call: {name, arguments}` of a message as a tool call, if there is one.
pub fn legacy_function_call(message: &Value) -> Option<ToolCall> {
    let f = message.get("function_call").filter(|f| f.is_object())?;
    let name = f.get("name").and_then(Value::as_str)?.to_string();
    Some(ToolCall {
        id: String::new(),
        name,
        arguments: arguments_text(f.get("arguments")),
    })
}

/// Tool calls written as text in `content`: `<tool_call>{…}</tool_call>` blocks, else fenced
/// code blocks (```` ```json ````, or no language) holding one JSON object with a string `name`
/// and `arguments` (or `parameters`). Returns the text without them, and the calls; `None` when
/// there are none (a fenced block of other JSON is left alone).
fn text_tool_calls(content: &str) -> Option<(String, Vec<ToolCall>)> {
    let mut calls = Vec::new();
    let mut rest = String::new();
    let mut tail = content;
    while let Some(start) = tail.find(CALL_TAG) {
        let after = &tail[start + CALL_TAG.len()..];
        let Some(end) = after.find(CALL_END_TAG) else {
            break;
        };
        let call = parse_call(after[..end].trim())?;
        rest.push_str(&tail[..start]);
        calls.push(call);
        tail = &after[end + CALL_END_TAG.len()..];
    }
    if !calls.is_empty() {
        rest.push_str(tail);
        return Some((rest, calls));
    }
    // Fenced blocks.
    let mut out = String::new();
    let mut lines = content.split_inclusive('\n');
    while let Some(line) = lines.next() {
        if is_call_fence(line) {
            let mut body = String::new();
            let mut closed = false;
            for l in lines.by_ref() {
                if is_fence_end(l) {
                    closed = true;
                    break;
                }
                body.push_str(l);
            }
            match parse_call(body.trim()).filter(|_| closed) {
                Some(call) => calls.push(call),
                None => return None,
            }
        } else {
            out.push_str(line);
        }
    }
    (!calls.is_empty()).then_some((out, calls))
}

/// Whether a line opens a fenced block that may hold a call: ```` ``` ```` or ```` ```json ````.
pub(crate) fn is_call_fence(line: &str) -> bool {
    matches!(line.trim(), "```" | "```json")
}

/// Whether a line closes a fenced block.
pub(crate) fn is_fence_end(line: &str) -> bool {
    line.trim() == "```"
}

/// One written tool call: a JSON object with a string `name` and `arguments` (or `parameters`),
/// an object or a string.
pub(crate) fn parse_call(text: &str) -> Option<ToolCall> {
    let v: Value = serde_json::from_str(text).ok()?;
    let name = v.get("name")?.as_str()?.trim().to_string();
    if name.is_empty() {
        return None;
    }
    let args = v.get("arguments").or_else(|| v.get("parameters"));
    if !matches!(args, None | Some(Value::Object(_)) | Some(Value::String(_))) {
        return None;
    }
    Some(ToolCall {
        id: String::new(),
        name,
        arguments: match args {
            None => "{}".into(),
            a => arguments_text(a),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn assistant(text: &str) -> ChatMessage {
        ChatMessage::assistant(text)
    }

    #[test]
    fn a_tool_call_written_in_tags_becomes_a_call_when_tools_were_offered() {
        let mut m = assistant(
            "Let me look.\n<tool_call>\n{\"name\": \"file_read\", \"arguments\": {\"path\": \"a.txt\"}}\n</tool_call>",
        );
        finish_message(&mut m, true);
        assert_eq!(m.tool_calls.len(), 1);
        assert_eq!(m.tool_calls[0].name, "file_read");
        assert_eq!(m.tool_calls[0].arguments, r#"{"path":"a.txt"}"#);
        assert!(m.tool_calls[0].id.starts_with("call_0_"));
        assert_eq!(m.content.as_deref(), Some("Let me look."));
        // Not offered: the text stays text.
        let mut m = assistant("<tool_call>{\"name\": \"x\", \"arguments\": {}}</tool_call>");
        finish_message(&mut m, false);
        assert!(m.tool_calls.is_empty());
    }

    #[test]
    fn a_fenced_json_call_is_recognised_and_other_json_is_left_alone() {
        let mut m = assistant(
            "```json\n{\"name\": \"shell\", \"arguments\": \"{\\\"command\\\": \\\"ls\\\"}\"}\n```\n",
        );
        finish_message(&mut m, true);
        assert_eq!(m.tool_calls[0].name, "shell");
        assert_eq!(m.tool_calls[0].arguments, r#"{"command": "ls"}"#);
        assert_eq!(m.content, None);
        let data = "Here is the data:\n```json\n{\"a\": 1}\n```\n";
        let mut m = assistant(data);
        finish_message(&mut m, true);
        assert!(m.tool_calls.is_empty());
        assert_eq!(m.content.as_deref(), Some(data));
        // A broken call in tags is not half-taken.
        let mut m = assistant("<tool_call>{\"name\": </tool_call>");
        finish_message(&mut m, true);
        assert!(m.tool_calls.is_empty());
    }

    #[test]
    fn ids_of_any_type_are_text_and_repeated_ids_are_made_unique() {
        assert_eq!(id_text(Some(&json!(7))), "7");
        assert_eq!(id_text(Some(&json!("c1"))), "c1");
        assert_eq!(id_text(None), "");
        assert_eq!(arguments_text(Some(&json!({"q": "x"}))), r#"{"q":"x"}"#);
        let call = |id: &str| ToolCall {
            id: id.into(),
            name: "n".into(),
            arguments: "{}".into(),
        };
        let mut m = ChatMessage::assistant("");
        m.tool_calls = vec![call("0"), call("0"), call("0-2"), call("")];
        finish_message(&mut m, true);
        let ids: Vec<_> = m.tool_calls.iter().map(|c| c.id.clone()).collect();
        assert_eq!(&ids[..2], ["0", "0-2"]);
        assert_eq!(ids[2], "0-2-2");
        assert!(ids[3].starts_with("call_3_"));
        let legacy = json!({"role": "assistant", "content": null,
            "function_call": {"name": "web_search", "arguments": "{\"query\":\"rust\"}"}});
        let c = legacy_function_call(&legacy).unwrap();
        assert_eq!(
            (c.name.as_str(), c.arguments.as_str()),
            ("web_search", r#"{"query":"rust"}"#)
        );
        assert!(legacy_function_call(&json!({"content": "hi"})).is_none());
    }
}
