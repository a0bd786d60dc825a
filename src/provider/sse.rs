//! Streamed Chat Completions answers (`POST {base_url}/chat/completions` with `"stream": true`):
//! the Server-Sent Events framing ([`SseDecoder`]) and the assembly of the
//! `chat.completion.chunk` objects into one [`Completion`] ([`ChunkAssembler`]).
//!
//! The framing follows the WHATWG HTML standard, "Server-sent events" (lines end in LF, CRLF or
//! CR; a line starting with `:` is a comment; the `data` fields of one event are joined with LF;
//! a blank line ends the event). The chunks follow the OpenAI streaming API:
//! `choices[0].delta.content` (a piece of text), `choices[0].delta.tool_calls[]` (`index`,
//! `id` and `function.name` once, `function.arguments` in pieces), `choices[0].finish_reason`,
//! a last chunk with `choices: []` and `usage` when `stream_options.include_usage` is set, and
//! `data: [DONE]` at the end. Servers' other shapes are read too: an `id` of any type, the
//! `arguments` sent whole as an object, and the legacy `choices[0].delta.function_call`
//! (`name`, then `arguments` in pieces), taken when no `tool_calls` came. The pieces are put
//! together in the shape of a whole answer's message and read by the same
//! [`super::tolerant::read_message`], so a streamed answer means what the same answer sent
//! whole means.

use super::{tolerant, Completion, FinishReason, ProviderError};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Splits a byte stream into the `data` payloads of its events. Feed it the body as it
/// arrives; bytes of a line cut across reads are kept until the line ends.
#[derive(Debug, Default)]
pub struct SseDecoder {
    /// The current line, not yet ended.
    line: Vec<u8>,
    /// The `data` of the current event, not yet dispatched.
    data: Option<String>,
    /// The last byte seen was a CR (a following LF belongs to the same line end).
    after_cr: bool,
}

impl SseDecoder {
    /// The `data` payloads (fields joined with `\n`) of the events that `bytes` completes, in
    /// order. Events with no `data` or an empty one are skipped; `event:`, `id:` and `retry:`
    /// fields are ignored.
    pub fn feed(&mut self, bytes: &[u8]) -> Vec<String> {
        let mut out = Vec::new();
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    self.end_line(&mut out);
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(b);
                }
            }
        }
        out
    }

    /// The end of the body: a last line without its line end, and an event without its blank
    /// line, are taken as if they had been ended.
    pub fn finish(&mut self) -> Vec<String> {
        let mut out = Vec::new();
        if !self.line.is_empty() {
            self.end_line(&mut out);
        }
        self.end_line(&mut out);
        out
    }

    fn end_line(&mut self, out: &mut Vec<String>) {
        let line = String::from_utf8_lossy(&self.line).into_owned();
        self.line.clear();
        if line.is_empty() {
            if let Some(data) = self.data.take().filter(|d| !d.is_empty()) {
                out.push(data);
            }
            return;
        }
        if line.starts_with(':') {
            return;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (line.as_str(), ""),
        };
        if field == "data" {
            match &mut self.data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            }
        }
    }
}

/// A tool call being assembled from its pieces.
#[derive(Debug, Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Builds the answer from the `data` payloads of a stream, one [`ChunkAssembler::push`] each.
#[derive(Debug, Default)]
pub struct ChunkAssembler {
    text: String,
    /// By the chunk's `index`.
    calls: BTreeMap<u64, PartialCall>,
    /// The legacy `delta.function_call`.
    legacy: Option<PartialCall>,
    finish_reason: Option<String>,
    usage: Option<Value>,
    done: bool,
}

impl ChunkAssembler {
    /// Takes one `data` payload: `[DONE]` or a `chat.completion.chunk` JSON object. Returns the
    /// piece of answer text it carries, if any (to show as the model writes).
    ///
    /// # Errors
    /// [`ProviderError::BadResponse`]: the payload is not JSON, a field has the wrong type, or
    /// the chunk carries an `error` object (some servers report failures mid-stream that way).
    pub fn push(&mut self, data: &str) -> Result<Option<String>, ProviderError> {
        let data = data.trim();
        if data == "[DONE]" {
            self.done = true;
            return Ok(None);
        }
        let v: Value = serde_json::from_str(data).map_err(|e| {
            ProviderError::BadResponse(format!(
                "a stream chunk is not JSON ({e}): {}",
                data.chars().take(100).collect::<String>()
            ))
        })?;
        if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .map_or_else(|| err.to_string(), str::to_string);
            return Err(ProviderError::BadResponse(format!(
                "error in the stream: {}",
                message.chars().take(300).collect::<String>()
            )));
        }
        if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
            self.usage = Some(usage.clone());
        }
        let choice = match v.get("choices") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::Array(choices)) => match choices
                .iter()
                .find(|c| c.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
            {
                Some(c) => c,
                None => return Ok(None),
            },
            Some(other) => {
                return Err(bad(format!("choices is not a list: {}", short(other))));
            }
        };
        if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
            self.finish_reason = Some(reason.to_string());
        }
        let Some(delta) = choice.get("delta").filter(|d| !d.is_null()) else {
            return Ok(None);
        };
        if let Some(calls) = delta.get("tool_calls").filter(|c| !c.is_null()) {
            let calls = calls
                .as_array()
                .ok_or_else(|| bad(format!("delta.tool_calls is not a list: {}", short(calls))))?;
            for (pos, c) in calls.iter().enumerate() {
                self.push_call(pos, c)?;
            }
        }
        if let Some(f) = delta.get("function_call").filter(|f| !f.is_null()) {
            if !f.is_object() {
                return Err(bad(format!(
                    "delta.function_call is not an object: {}",
                    short(f)
                )));
            }
            let entry = self.legacy.get_or_insert_with(PartialCall::default);
            add_function(entry, f, "function_call")?;
        }
        match delta.get("content") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(piece)) if piece.is_empty() => Ok(None),
            Some(Value::String(piece)) => {
                self.text.push_str(piece);
                Ok(Some(piece.clone()))
            }
            Some(other) => Err(bad(format!(
                "delta.content is not a string: {}",
                short(other)
            ))),
        }
    }

    /// One entry of `delta.tool_calls` (at position `pos` in its chunk).
    fn push_call(&mut self, pos: usize, c: &Value) -> Result<(), ProviderError> {
        // An id of any JSON type (some servers send integers), as text.
        let id = Some(super::tolerant::id_text(c.get("id"))).filter(|s| !s.is_empty());
        // No index: the call with this id, a new call for a new id, else the last call.
        let index = match c.get("index") {
            Some(Value::Number(n)) => n
                .as_u64()
                .ok_or_else(|| bad(format!("tool_calls[].index is not an index: {n}")))?,
            Some(Value::Null) | None => match (&id, self.calls.iter().next_back()) {
                (Some(id), _) if !id.is_empty() => self
                    .calls
                    .iter()
                    .find(|(_, p)| p.id == *id)
                    .map(|(i, _)| *i)
                    .unwrap_or_else(|| self.calls.keys().next_back().map_or(pos as u64, |i| i + 1)),
                (_, Some((last, _))) => *last,
                (_, None) => pos as u64,
            },
            Some(other) => {
                return Err(bad(format!(
                    "tool_calls[].index is not an index: {}",
                    short(other)
                )))
            }
        };
        let entry = self.calls.entry(index).or_default();
        if let Some(id) = id.filter(|i| !i.is_empty()) {
            if entry.id.is_empty() {
                entry.id = id;
            }
        }
        let Some(f) = c.get("function").filter(|f| !f.is_null()) else {
            return Ok(());
        };
        add_function(entry, f, "tool_calls[].function")
    }

    /// Whether `data: [DONE]` was seen.
    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Whether the stream said how it ended: `[DONE]` or a `finish_reason`. A body that ends
    /// before either was cut off.
    pub fn is_complete(&self) -> bool {
        self.done || self.finish_reason.is_some()
    }

    /// The `usage` object of the stream (its last chunk, with `stream_options.include_usage`).
    pub fn usage(&self) -> Option<&Value> {
        self.usage.as_ref()
    }

    /// The answer assembled so far in the shape of a whole answer's message: `content` (`null`
    /// when empty), `tool_calls` in `index` order, and the legacy `function_call`.
    fn wire_message(&self) -> Value {
        let mut m = json!({
            "role": "assistant",
            "content": (!self.text.is_empty()).then_some(self.text.as_str()),
        });
        if !self.calls.is_empty() {
            m["tool_calls"] = self
                .calls
                .values()
                .map(|c| {
                    json!({"id": c.id, "type": "function",
                        "function": {"name": c.name, "arguments": c.arguments}})
                })
                .collect();
        }
        if let Some(f) = &self.legacy {
            m["function_call"] = json!({"name": f.name, "arguments": f.arguments});
        }
        m
    }

    /// The answer assembled so far, as the non-streamed call would have returned it
    /// ([`tolerant::read_message`]; `offered_tools`: the request offered tools), and the finish
    /// reason.
    ///
    /// # Errors
    /// [`ProviderError::BadResponse`] when the pieces do not make a message.
    pub fn into_completion(self, offered_tools: bool) -> Result<Completion, ProviderError> {
        let message = tolerant::read_message(&self.wire_message(), offered_tools)
            .map_err(|e| bad(format!("the assembled message: {e}")))?;
        Ok(Completion {
            message,
            finish_reason: self.finish_reason.as_deref().map(FinishReason::parse),
            usage: None,
            model: String::new(),
        })
    }
}

/// One `function` object of a chunk (`tool_calls[].function`, or the legacy `function_call`)
/// into `entry`: its `name` (sent once, or repeated whole in every chunk; pieces are joined) and
/// its `arguments` (pieces of text, or an object sent whole).
fn add_function(entry: &mut PartialCall, f: &Value, what: &str) -> Result<(), ProviderError> {
    if let Some(name) = string_field(f.get("name"), &format!("{what}.name"))? {
        if entry.name.is_empty() {
            entry.name = name;
        } else if entry.name != name {
            entry.name.push_str(&name);
        }
    }
    match f.get("arguments") {
        None | Some(Value::Null) => {}
        Some(Value::String(piece)) => entry.arguments.push_str(piece),
        Some(obj @ Value::Object(_)) if entry.arguments.is_empty() => {
            entry.arguments = obj.to_string();
        }
        Some(other) => {
            return Err(bad(format!(
                "{what}.arguments is not a string: {}",
                short(other)
            )))
        }
    }
    Ok(())
}

fn bad(message: String) -> ProviderError {
    ProviderError::BadResponse(format!("stream chunk: {message}"))
}

fn short(v: &Value) -> String {
    v.to_string().chars().take(100).collect()
}

/// A string field that may be absent or `null`.
fn string_field(v: Option<&Value>, what: &str) -> Result<Option<String>, ProviderError> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(bad(format!("{what} is not a string: {}", short(other)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `body` fed in pieces of `step` bytes and assembles it; also returns the text
    /// pieces in order.
    fn run(body: &str, step: usize) -> Result<(Completion, Vec<String>, bool), ProviderError> {
        let mut dec = SseDecoder::default();
        let mut asm = ChunkAssembler::default();
        let mut pieces = Vec::new();
        let mut datas = Vec::new();
        for chunk in body.as_bytes().chunks(step) {
            datas.extend(dec.feed(chunk));
        }
        datas.extend(dec.finish());
        for d in datas {
            if let Some(p) = asm.push(&d)? {
                pieces.push(p);
            }
        }
        let done = asm.is_done();
        Ok((asm.into_completion(true)?, pieces, done))
    }

    fn content_chunk(piece: &str) -> String {
        format!(
            "data: {}\n\n",
            serde_json::json!({"object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": null}]})
        )
    }

    #[test]
    fn text_pieces_in_order() {
        let mut body = String::from(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
        );
        for p in ["Hel", "lo, ", "wörld", "!"] {
            body.push_str(&content_chunk(p));
        }
        body.push_str("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n");
        // Fed whole, byte by byte (splitting the UTF-8 of "ö"), and in odd pieces.
        for step in [body.len(), 1, 7] {
            let (c, pieces, done) = run(&body, step).unwrap();
            assert_eq!(pieces, ["Hel", "lo, ", "wörld", "!"]);
            assert_eq!(c.message.content.as_deref(), Some("Hello, wörld!"));
            assert!(c.message.tool_calls.is_empty());
            assert_eq!(c.finish_reason, Some(FinishReason::Stop));
            assert!(done);
        }
    }

    #[test]
    fn an_integer_id_in_a_stream_is_text() {
        let body = concat!(
            "data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0,\"id\":5,\"function\":{\"name\":\"shell\",\"arguments\":\"{}\"}}]}}]}\n\n",
            "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"tool_calls\"}]}\n\n",
            "data: [DONE]\n\n"
        );
        let (c, _, _) = run(body, 9).unwrap();
        assert_eq!(c.message.tool_calls[0].id, "5");
        assert_eq!(c.message.tool_calls[0].name, "shell");
    }

    #[test]
    fn a_legacy_function_call_streamed_in_pieces_is_a_call() {
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"function_call":{"name":"shell","arguments":""}}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{\"command\":"}}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"function_call":{"arguments":" \"ls\"}"}}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}"#,
        ];
        let body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        let (c, pieces, _) = run(&(body + "data: [DONE]\n\n"), 7).unwrap();
        assert!(pieces.is_empty());
        let call = &c.message.tool_calls[0];
        assert_eq!(
            (call.name.as_str(), call.arguments.as_str()),
            ("shell", r#"{"command": "ls"}"#)
        );
        assert!(call.id.starts_with("call_0_"), "{}", call.id);
        // llama-cpp-python sends both fields in each chunk: one call, not two.
        let both = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"function_call":{"name":"clock","arguments":"{}"},"tool_calls":[{"index":0,"id":"call__0_clock_x","type":"function","function":{"name":"clock","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ];
        let body: String = both.iter().map(|c| format!("data: {c}\n\n")).collect();
        let (c, _, _) = run(&body, 64).unwrap();
        assert_eq!(c.message.tool_calls.len(), 1);
        assert_eq!(c.message.tool_calls[0].id, "call__0_clock_x");
        // Object arguments, sent whole.
        let obj = r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":3,"function":{"name":"web_search","arguments":{"query":"rust"}}}]},"finish_reason":"tool_calls"}]}"#;
        let (c, _, _) = run(&format!("data: {obj}\n\n"), 5).unwrap();
        assert_eq!(c.message.tool_calls[0].id, "3");
        assert_eq!(c.message.tool_calls[0].arguments, r#"{"query":"rust"}"#);
    }

    #[test]
    fn tool_calls_interleaved_by_index_with_arguments_in_pieces() {
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"file_read","arguments":""}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_b","type":"function","function":{"name":"shell","arguments":"{\"comm"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{\"path\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"function":{"arguments":"and\":\"ls\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"\"a.txt\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}"#,
        ];
        let body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        let body = body + "data: [DONE]\n\n";
        let (c, pieces, _) = run(&body, 5).unwrap();
        assert!(pieces.is_empty());
        assert_eq!(c.message.content, None);
        assert_eq!(c.finish_reason, Some(FinishReason::ToolCalls));
        let calls: Vec<(&str, &str, &str)> = c
            .message
            .tool_calls
            .iter()
            .map(|t| (t.id.as_str(), t.name.as_str(), t.arguments.as_str()))
            .collect();
        assert_eq!(
            calls,
            [
                ("call_a", "file_read", r#"{"path":"a.txt"}"#),
                ("call_b", "shell", r#"{"command":"ls"}"#)
            ]
        );
    }

    #[test]
    fn ids_and_names_repeated_in_every_chunk_and_missing_ids() {
        let chunks = [
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"web_search","arguments":"{\"q\":"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"c1","type":"function","function":{"name":"web_search","arguments":"\"rust\"}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"","function":{"name":"clock","arguments":"{}"}}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":null,"function":{"name":"clock","arguments":""}}]},"finish_reason":"tool_calls"}]}"#,
        ];
        let body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
        let (c, _, done) = run(&(body + "data: [DONE]\n\n"), 64).unwrap();
        assert!(done);
        let calls = &c.message.tool_calls;
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].name.as_str()),
            ("c1", "web_search")
        );
        assert_eq!(calls[0].arguments, r#"{"q":"rust"}"#);
        assert_eq!(calls[1].name, "clock");
        assert_eq!(calls[1].arguments, "{}");
        assert!(calls[1].id.starts_with("call_1_"), "{}", calls[1].id);
    }

    #[test]
    fn done_comments_usage_chunk_and_crlf() {
        let body = ": OPENROUTER PROCESSING\r\n\r\n\
             event: message\r\nid: 1\r\n\
             data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"}}]}\r\n\r\n\
             :keep-alive\r\n\r\n\
             data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\" there\"},\"finish_reason\":\"stop\"}]}\r\n\r\n\
             data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":2,\"total_tokens\":11}}\r\n\r\n\
             data: [DONE]\r\n\r\n\
             data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"after done\"}}]}\r\n\r\n";
        for step in [1, 3, body.len()] {
            let mut dec = SseDecoder::default();
            let mut asm = ChunkAssembler::default();
            let mut pieces = Vec::new();
            'read: for chunk in body.as_bytes().chunks(step) {
                for d in dec.feed(chunk) {
                    pieces.extend(asm.push(&d).unwrap());
                    if asm.is_done() {
                        break 'read;
                    }
                }
            }
            assert!(asm.is_done());
            assert_eq!(pieces, ["Hi", " there"]);
            assert_eq!(asm.usage().unwrap()["total_tokens"], 11);
            let c = asm.into_completion(false).unwrap();
            assert_eq!(c.message.content.as_deref(), Some("Hi there"));
            assert_eq!(c.finish_reason, Some(FinishReason::Stop));
        }
        // Bare CR line ends, multi-line data, and a last event without its blank line.
        let mut dec = SseDecoder::default();
        let mut datas = dec.feed(b"data: a\rdata: b\r\rdata:c");
        datas.extend(dec.finish());
        assert_eq!(datas, ["a\nb", "c"]);
    }

    #[test]
    fn an_unfinished_stream_is_not_complete() {
        let mut asm = ChunkAssembler::default();
        asm.push(r#"{"choices":[{"index":0,"delta":{"content":"half"}}]}"#)
            .unwrap();
        assert!(!asm.is_complete());
        asm.push(r#"{"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#)
            .unwrap();
        assert!(asm.is_complete());
        assert!(asm.into_completion(false).unwrap().truncated());
    }

    #[test]
    fn garbage_is_a_bad_response() {
        for data in [
            "{not json",
            "<html>502</html>",
            r#"{"choices":[{"index":0,"delta":{"content":5}}]}"#,
            r#"{"choices":{"0":1}}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":"x"}]}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":7}}]}}]}"#,
            r#"{"error":{"message":"upstream overloaded"}}"#,
        ] {
            let mut asm = ChunkAssembler::default();
            let e = asm.push(data).unwrap_err();
            assert!(matches!(e, ProviderError::BadResponse(_)), "{data}: {e:?}");
            assert!(e.is_transient());
        }
        let err = run("data: {\"choices\":[]}\n\ndata: nope\n\n", 4).unwrap_err();
        assert!(err.to_string().contains("not JSON"), "{err}");
    }
}
