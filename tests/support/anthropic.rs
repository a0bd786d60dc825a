//! `FakeAnthropic`: an in-process Anthropic Messages API server for tests.
//!
//! [`FakeAnthropic::start`] takes the API key it expects and a script of [`AStep`]s; every
//! `POST /v1/messages` pops the next step and answers from it: a whole `message` object, or —
//! when the request has `"stream": true` — the Server-Sent Events of the streaming API
//! (`message_start`, per block `content_block_start` / `content_block_delta` /
//! `content_block_stop`, `message_delta`, `message_stop`), with text in several `text_delta`
//! pieces, tool input in several `input_json_delta` pieces, thinking in `thinking_delta` and
//! `signature_delta`, and `ping` events in between. [`AStep::Status`] steps stay plain HTTP
//! error answers. When the script is exhausted it answers 500 `api_error`. `GET /v1/models`
//! lists one model.
//!
//! Every request is validated; problems are collected in [`FakeAnthropic::violations`], which
//! tests should assert is empty ([`FakeAnthropic::assert_ok`]):
//! - `x-api-key` (or `Authorization: Bearer`) equal to the expected key, `anthropic-version`
//!   present and not before `2023-06-01`, `content-type: application/json`;
//! - `model` and a positive `max_tokens`;
//! - `messages` non-empty, roles strictly alternating, starting with `user`;
//! - every `tool_use` id of an assistant message answered by a `tool_result` with that
//!   `tool_use_id` in the very next (user) message, and no `tool_result` without its `tool_use`;
//! - no empty `text` block (system included);
//! - at most 4 `cache_control` breakpoints in all (system, tools, messages);
//! - thinking blocks given back exactly as the fake sent them (signature included), first in
//!   the assistant message that carries the tool uses they came with.

#![allow(dead_code)]

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::task::JoinHandle;

/// The model listed by `GET /v1/models`.
pub const MODEL_ID: &str = "claude-fake";

/// The lowest `anthropic-version` the fake accepts.
pub const MIN_VERSION: &str = "2023-06-01";

/// One scripted answer.
#[derive(Clone)]
pub enum AStep {
    /// A message with these content blocks and this `stop_reason`.
    Message {
        content: Vec<Value>,
        stop_reason: String,
    },
    /// That HTTP status with that JSON body.
    Status(u16, Value),
    /// A step computed from the request body.
    Custom(Arc<dyn Fn(&Value) -> AStep + Send + Sync>),
}

impl std::fmt::Debug for AStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AStep::Message {
                content,
                stop_reason,
            } => f
                .debug_struct("Message")
                .field("content", content)
                .field("stop_reason", stop_reason)
                .finish(),
            AStep::Status(s, b) => f.debug_tuple("Status").field(s).field(b).finish(),
            AStep::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl AStep {
    /// A text answer, `stop_reason: end_turn`.
    pub fn text(text: impl Into<String>) -> AStep {
        AStep::Message {
            content: vec![json!({"type": "text", "text": text.into()})],
            stop_reason: "end_turn".into(),
        }
    }

    /// An answer asking for tools: an optional `text` block, then one `tool_use` block per
    /// `(id, name, input JSON text)`; `stop_reason: tool_use`.
    pub fn tool_uses(text: Option<&str>, uses: &[(&str, &str, &str)]) -> AStep {
        let mut content: Vec<Value> = text
            .map(|t| json!({"type": "text", "text": t}))
            .into_iter()
            .collect();
        for (id, name, input) in uses {
            let input: Value = serde_json::from_str(input).unwrap_or_else(|_| json!({}));
            content.push(json!({"type": "tool_use", "id": id, "name": name, "input": input}));
        }
        AStep::Message {
            content,
            stop_reason: "tool_use".into(),
        }
    }

    /// `step` (a message) with a `thinking` block (`thinking`, `signature`) first.
    pub fn with_thinking(thinking: &str, signature: &str, step: AStep) -> AStep {
        match step {
            AStep::Message {
                mut content,
                stop_reason,
            } => {
                content.insert(
                    0,
                    json!({"type": "thinking", "thinking": thinking, "signature": signature}),
                );
                AStep::Message {
                    content,
                    stop_reason,
                }
            }
            other => other,
        }
    }

    /// A text answer cut off by the output limit: `stop_reason: max_tokens`.
    pub fn max_tokens(text: impl Into<String>) -> AStep {
        AStep::Message {
            content: vec![json!({"type": "text", "text": text.into()})],
            stop_reason: "max_tokens".into(),
        }
    }

    /// That status with an Anthropic error body `{"type": "error", "error": {type, message}}`.
    pub fn error(status: u16, kind: &str, message: &str) -> AStep {
        AStep::Status(
            status,
            json!({"type": "error", "error": {"type": kind, "message": message}}),
        )
    }

    /// 529 `overloaded_error`.
    pub fn overloaded() -> AStep {
        AStep::error(529, "overloaded_error", "Overloaded")
    }

    /// A text answer `prefix` + the tool results of the last user message, each as
    /// `<tool_use_id>[error]=<content>` (`[error]` when `is_error` is true), joined with ` | `.
    pub fn echo_tool_results(prefix: &str) -> AStep {
        let prefix = prefix.to_string();
        AStep::Custom(Arc::new(move |req| {
            let results: Vec<String> = tool_results(req)
                .into_iter()
                .map(|(id, content, is_error)| {
                    format!("{id}{}={content}", if is_error { "[error]" } else { "" })
                })
                .collect();
            AStep::text(format!("{prefix}{}", results.join(" | ")))
        }))
    }
}

/// `(tool_use_id, content text, is_error)` of the tool results in the last message of a request.
pub fn tool_results(req: &Value) -> Vec<(String, String, bool)> {
    req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_array())
        .map(|blocks| {
            blocks
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| {
                    (
                        b["tool_use_id"].as_str().unwrap_or("").to_string(),
                        content_text(&b["content"]),
                        b["is_error"] == true,
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A content value as text: a string as is, blocks' `text` joined.
fn content_text(c: &Value) -> String {
    match c {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks.iter().filter_map(|b| b["text"].as_str()).collect(),
        _ => String::new(),
    }
}

/// What one request looked like, as the fake saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Default)]
struct FakeState {
    steps: VecDeque<AStep>,
    requests: Vec<Seen>,
    violations: Vec<String>,
    exhausted: usize,
    models_calls: usize,
    /// Thinking blocks sent, by the ids of the tool uses they came with.
    thinking_by_tool_use: HashMap<String, Vec<Value>>,
    /// Every thinking block sent, as JSON text.
    thinking_sent: HashSet<String>,
    /// Pause between two SSE events.
    gap: Duration,
    /// When set, `usage` reports what this cache read and wrote (else no cache use).
    cache: Option<crate::support::prompt_cache::PromptCache>,
}

struct Shared {
    key: String,
    state: Mutex<FakeState>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, FakeState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Handle to a running fake. Dropping it stops the server.
pub struct FakeAnthropic {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for FakeAnthropic {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeAnthropic {
    /// Starts a server expecting `key` and answering with `steps`, in order.
    pub async fn start(key: &str, steps: Vec<AStep>) -> FakeAnthropic {
        use axum::serve::ListenerExt;
        let shared = Arc::new(Shared {
            key: key.to_string(),
            state: Mutex::new(FakeState {
                steps: steps.into(),
                ..FakeState::default()
            }),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("FakeAnthropic: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("FakeAnthropic: local_addr");
        // Small SSE events go out at once, not after Nagle's delay.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeAnthropic { shared, addr, task }
    }

    /// `http://127.0.0.1:PORT` (the host: the client appends `/v1/messages`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A pause between two events of every streamed answer (default: none).
    pub fn set_gap(&self, gap: Duration) {
        self.shared.lock().gap = gap;
    }

    /// From now on, report in `usage` what a prompt cache read and wrote for each request
    /// ([`crate::support::prompt_cache`]).
    pub fn simulate_prompt_cache(&self) {
        self.shared.lock().cache = Some(Default::default());
    }

    /// Every `POST /v1/messages` request, in arrival order.
    pub fn requests(&self) -> Vec<Seen> {
        self.shared.lock().requests.clone()
    }

    /// Every request body, in arrival order.
    pub fn bodies(&self) -> Vec<Value> {
        self.requests().into_iter().map(|s| s.body).collect()
    }

    /// Steps not used yet.
    pub fn remaining_steps(&self) -> usize {
        self.shared.lock().steps.len()
    }

    /// Requests answered with "script exhausted".
    pub fn exhausted(&self) -> usize {
        self.shared.lock().exhausted
    }

    /// Number of `GET /v1/models` calls.
    pub fn models_calls(&self) -> usize {
        self.shared.lock().models_calls
    }

    /// The problems found in the requests so far, each prefixed with `request #i`.
    pub fn violations(&self) -> Vec<String> {
        self.shared.lock().violations.clone()
    }

    /// Panics listing the violations, if any.
    pub fn assert_ok(&self) {
        let v = self.violations();
        assert!(
            v.is_empty(),
            "FakeAnthropic: request violations:\n  {}",
            v.join("\n  ")
        );
    }
}

fn reply(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(body)).into_response()
}

fn error_body(kind: &str, message: &str) -> Value {
    json!({"type": "error", "error": {"type": kind, "message": message}})
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    match (&method, uri.path().trim_end_matches('/')) {
        (&Method::GET, "/v1/models") => {
            let problems = check_headers(&shared.key, &headers, false);
            shared.lock().models_calls += 1;
            if !problems.is_empty() {
                return reply(401, error_body("authentication_error", "invalid x-api-key"));
            }
            reply(
                200,
                json!({"data": [{"type": "model", "id": MODEL_ID, "display_name": "Fake"}],
                       "has_more": false}),
            )
        }
        (&Method::POST, "/v1/messages") => messages(&shared, headers, &body).await,
        _ => reply(
            404,
            error_body(
                "not_found_error",
                &format!("no route {method} {}", uri.path()),
            ),
        ),
    }
}

static SEQ: AtomicU64 = AtomicU64::new(1);

async fn messages(shared: &Shared, headers: HeaderMap, raw: &[u8]) -> Response {
    let (step, body, gap, cached) = {
        let mut st = shared.lock();
        let index = st.requests.len();
        let body = match serde_json::from_slice::<Value>(raw) {
            Ok(b) => b,
            Err(e) => {
                st.violations
                    .push(format!("request #{index}: body is not JSON: {e}"));
                st.requests.push(Seen {
                    headers,
                    body: Value::Null,
                });
                return reply(400, error_body("invalid_request_error", "invalid JSON"));
            }
        };
        let mut found = check_headers(&shared.key, &headers, true);
        found.extend(check_body(&body, &st));
        st.violations
            .extend(found.into_iter().map(|v| format!("request #{index}: {v}")));
        st.requests.push(Seen {
            headers,
            body: body.clone(),
        });
        let step = st.steps.pop_front();
        if step.is_none() {
            st.exhausted += 1;
        }
        let cached = st.cache.as_mut().map(|c| c.account(&body));
        (step, body, st.gap, cached)
    };
    let Some(mut step) = step else {
        return reply(500, error_body("api_error", "script exhausted"));
    };
    while let AStep::Custom(f) = step {
        step = f(&body);
    }
    let (content, stop_reason) = match step {
        AStep::Status(status, b) => return reply(status, b),
        AStep::Message {
            content,
            stop_reason,
        } => (content, stop_reason),
        AStep::Custom(_) => unreachable!(),
    };
    // Remember the thinking blocks sent, to check they come back unchanged.
    {
        let mut st = shared.lock();
        let thinking: Vec<Value> = content
            .iter()
            .filter(|b| b["type"] == "thinking" || b["type"] == "redacted_thinking")
            .cloned()
            .collect();
        for t in &thinking {
            st.thinking_sent.insert(t.to_string());
        }
        for b in content.iter().filter(|b| b["type"] == "tool_use") {
            if let Some(id) = b["id"].as_str() {
                st.thinking_by_tool_use
                    .insert(id.to_string(), thinking.clone());
            }
        }
    }
    let model = body["model"].as_str().unwrap_or(MODEL_ID).to_string();
    let (input_tokens, cache_read, cache_write) = match cached {
        Some(c) => (c.input, c.read, c.write),
        None => ((body["messages"].to_string().len() / 4) as u64, 0, 0),
    };
    let output_tokens = (json!(content).to_string().len() / 4) as u64 + 1;
    let id = format!("msg_fake_{}", SEQ.fetch_add(1, Ordering::Relaxed));
    if body["stream"] != true {
        return reply(
            200,
            json!({"id": id, "type": "message", "role": "assistant", "model": model,
                "content": content, "stop_reason": stop_reason, "stop_sequence": null,
                "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens,
                          "cache_read_input_tokens": cache_read,
                          "cache_creation_input_tokens": cache_write}}),
        );
    }
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": {"id": id, "type": "message",
            "role": "assistant", "model": model, "content": [], "stop_reason": null,
            "stop_sequence": null, "usage": {"input_tokens": input_tokens, "output_tokens": 1,
            "cache_read_input_tokens": cache_read, "cache_creation_input_tokens": cache_write}}}),
    )];
    events.push(("ping", json!({"type": "ping"})));
    for (index, block) in content.iter().enumerate() {
        events.extend(block_events(index, block));
        events.push(("ping", json!({"type": "ping"})));
    }
    events.push((
        "message_delta",
        json!({"type": "message_delta", "delta": {"stop_reason": stop_reason,
            "stop_sequence": null}, "usage": {"output_tokens": output_tokens}}),
    ));
    events.push(("message_stop", json!({"type": "message_stop"})));
    sse_response(events, gap)
}

/// The events of one content block: start, deltas in pieces, stop.
fn block_events(index: usize, block: &Value) -> Vec<(&'static str, Value)> {
    let delta = |d: Value| {
        (
            "content_block_delta",
            json!({"type": "content_block_delta", "index": index, "delta": d}),
        )
    };
    let mut out = Vec::new();
    let start = |b: Value| {
        (
            "content_block_start",
            json!({"type": "content_block_start", "index": index, "content_block": b}),
        )
    };
    match block["type"].as_str().unwrap_or("") {
        "text" => {
            out.push(start(json!({"type": "text", "text": ""})));
            for p in pieces(block["text"].as_str().unwrap_or("")) {
                out.push(delta(json!({"type": "text_delta", "text": p})));
            }
        }
        "tool_use" => {
            out.push(start(json!({"type": "tool_use", "id": block["id"],
                "name": block["name"], "input": {}})));
            out.push(delta(
                json!({"type": "input_json_delta", "partial_json": ""}),
            ));
            for p in pieces(&block["input"].to_string()) {
                out.push(delta(
                    json!({"type": "input_json_delta", "partial_json": p}),
                ));
            }
        }
        "thinking" => {
            out.push(start(
                json!({"type": "thinking", "thinking": "", "signature": ""}),
            ));
            for p in pieces(block["thinking"].as_str().unwrap_or("")) {
                out.push(delta(json!({"type": "thinking_delta", "thinking": p})));
            }
            out.push(delta(
                json!({"type": "signature_delta", "signature": block["signature"]}),
            ));
        }
        _ => out.push(start(block.clone())),
    }
    out.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": index}),
    ));
    out
}

/// `text` in pieces of at most 6 characters (at least 2 pieces when it has 2 characters).
fn pieces(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    if chars.is_empty() {
        return Vec::new();
    }
    let size = 6.min(chars.len().div_ceil(2)).max(1);
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

fn sse_response(events: Vec<(&'static str, Value)>, gap: Duration) -> Response {
    use futures::StreamExt;
    let body = futures::stream::iter(events.into_iter().enumerate()).then(
        move |(i, (name, data))| async move {
            if i > 0 && !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            Ok::<_, std::io::Error>(Bytes::from(format!("event: {name}\ndata: {data}\n\n")))
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(axum::body::Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

// ----- validation ----------------------------------------------------------------------------

/// Problems with the headers of a request; `json_body`: the request carries a JSON body.
fn check_headers(key: &str, headers: &HeaderMap, json_body: bool) -> Vec<String> {
    let mut out = Vec::new();
    let get = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let api_key = get("x-api-key");
    let bearer = get("authorization").and_then(|v| v.strip_prefix("Bearer "));
    match (api_key, bearer) {
        (Some(k), None) | (None, Some(k)) if k == key => {}
        (None, None) => out.push("no x-api-key (nor Authorization: Bearer) header".into()),
        (Some(_), Some(_)) => out.push("both x-api-key and Authorization sent".into()),
        _ => out.push("the API key sent is not the configured one".into()),
    }
    match get("anthropic-version") {
        None => out.push("no anthropic-version header".into()),
        Some(v) if v < MIN_VERSION || v.len() != MIN_VERSION.len() => {
            out.push(format!("anthropic-version {v:?} is before {MIN_VERSION}"))
        }
        Some(_) => {}
    }
    if json_body && !get("content-type").is_some_and(|v| v.starts_with("application/json")) {
        out.push(format!("content-type is {:?}", get("content-type")));
    }
    out
}

/// Problems with a request body (see the module doc).
fn check_body(body: &Value, st: &FakeState) -> Vec<String> {
    let mut out = Vec::new();
    if body["model"].as_str().is_none_or(str::is_empty) {
        out.push("no model".into());
    }
    if body["max_tokens"].as_u64().is_none_or(|n| n == 0) {
        out.push("no positive max_tokens".into());
    }
    let breakpoints = count_cache_control(body);
    if breakpoints > 4 {
        out.push(format!(
            "{breakpoints} cache_control breakpoints (at most 4)"
        ));
    }
    if let Some(system) = body.get("system") {
        match system {
            Value::String(s) if s.is_empty() => out.push("empty system text".into()),
            Value::Array(blocks) => {
                for b in blocks {
                    if b["type"] != "text" || b["text"].as_str().is_none_or(str::is_empty) {
                        out.push(format!("system block is not a non-empty text: {b}"));
                    }
                }
            }
            Value::String(_) => {}
            other => out.push(format!("system is neither text nor blocks: {other}")),
        }
    }
    let Some(msgs) = body["messages"].as_array().filter(|m| !m.is_empty()) else {
        out.push("no messages".into());
        return out;
    };
    let blocks_of = |m: &Value| -> Vec<Value> {
        match &m["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(b) => b.clone(),
            _ => Vec::new(),
        }
    };
    let mut asked: Vec<String> = Vec::new();
    for (i, m) in msgs.iter().enumerate() {
        let role = m["role"].as_str().unwrap_or("?");
        let expected = if i % 2 == 0 { "user" } else { "assistant" };
        if role != expected {
            out.push(format!(
                "messages[{i}] is {role}, expected {expected} (alternating, user first)"
            ));
        }
        let blocks = blocks_of(m);
        if blocks.is_empty() {
            out.push(format!("messages[{i}] has no content"));
        }
        for b in &blocks {
            if b["type"] == "text" && b["text"].as_str().is_none_or(str::is_empty) {
                out.push(format!("messages[{i}] has an empty text block"));
            }
        }
        if role == "user" {
            let answered: Vec<String> = blocks
                .iter()
                .filter(|b| b["type"] == "tool_result")
                .map(|b| b["tool_use_id"].as_str().unwrap_or("").to_string())
                .collect();
            for id in &answered {
                if !asked.contains(id) {
                    out.push(format!(
                        "messages[{i}]: tool_result {id:?} without its tool_use"
                    ));
                }
            }
            for id in &asked {
                if !answered.contains(id) {
                    out.push(format!(
                        "messages[{i}]: no tool_result for tool_use {id:?} of messages[{}]",
                        i - 1
                    ));
                }
            }
            asked.clear();
        } else {
            if !asked.is_empty() {
                out.push(format!(
                    "messages[{i}]: tool uses of messages[{}] unanswered",
                    i - 1
                ));
            }
            asked = blocks
                .iter()
                .filter(|b| b["type"] == "tool_use")
                .map(|b| b["id"].as_str().unwrap_or("").to_string())
                .collect();
            check_thinking(i, &blocks, &asked, st, &mut out);
        }
    }
    if !asked.is_empty() {
        out.push(format!(
            "the tool uses of the last message are unanswered: {asked:?}"
        ));
    }
    out
}

/// Thinking blocks of an assistant message: each one sent by the fake exactly so, and those
/// that came with its tool uses first, unchanged.
fn check_thinking(
    i: usize,
    blocks: &[Value],
    uses: &[String],
    st: &FakeState,
    out: &mut Vec<String>,
) {
    let is_thinking = |b: &Value| b["type"] == "thinking" || b["type"] == "redacted_thinking";
    for b in blocks.iter().filter(|b| is_thinking(b)) {
        if !st.thinking_sent.contains(&b.to_string()) {
            out.push(format!(
                "messages[{i}]: a thinking block the fake never sent (changed?): {b}"
            ));
        }
    }
    for id in uses {
        if let Some(sent) = st.thinking_by_tool_use.get(id) {
            if blocks.len() < sent.len() || blocks[..sent.len()] != sent[..] {
                out.push(format!(
                    "messages[{i}]: the thinking blocks sent with tool use {id:?} are not given back first and unchanged"
                ));
            }
        }
    }
}

fn count_cache_control(v: &Value) -> usize {
    match v {
        Value::Object(o) => {
            usize::from(o.contains_key("cache_control"))
                + o.values().map(count_cache_control).sum::<usize>()
        }
        Value::Array(a) => a.iter().map(count_cache_control).sum(),
        _ => 0,
    }
}
