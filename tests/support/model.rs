//! `ScriptedModel`: an in-process OpenAI-compatible Chat Completions server for tests.
//!
//! [`ScriptedModel::start`] takes a script of [`Step`]s; every `POST /v1/chat/completions`
//! pops the next step and answers from it. When the script is exhausted the server answers
//! 500 `{"error":{"message":"script exhausted"}}` and counts it ([`ScriptedModel::exhausted`]).
//! `GET /v1/models` lists one model (`scripted-model`) for health checks.
//!
//! # Streaming
//!
//! A request with `"stream": true` is answered as `text/event-stream` (the OpenAI streaming
//! shape): a first chunk with `delta.role`, the text in several pieces (split after each
//! whitespace run, words longer than 8 characters in 8-character pieces), each tool call as one
//! chunk with its `index`, `id` (as given: a number stays a number) and `function.name` and
//! then its arguments in at least 2 pieces (when they have 2 characters or more; arguments
//! given as an object are sent whole in the call's chunk), a legacy `function_call` as
//! `delta.function_call` (the name, then the arguments in pieces), a chunk with the
//! `finish_reason`, a usage
//! chunk (`choices: []`) only when `stream_options.include_usage` is true, and `data: [DONE]`.
//! [`Step::Custom`] answers that are a 200 `chat.completion` are streamed the same way; other
//! custom answers and [`Step::Status`] steps stay plain HTTP responses. Requests without
//! `stream` get the whole `chat.completion` object, as before.
//!
//! Knobs:
//! - [`ScriptedModel::set_chunk_gap`]: a pause between two chunks of every streamed answer
//!   (e.g. 200 ms, so a test can watch the answer grow); [`Step::slow_text`] /
//!   [`Step::slow`] set it for one step.
//! - [`Step::stall`]: a streamed answer that stops for a while after its first chunks (an
//!   idle-timeout test: the client gives up and retries with the next step).
//! - [`ScriptedModel::set_report_usage`]: `false` leaves `usage` out of every answer, whole or
//!   streamed (no usage chunk even with `stream_options.include_usage`), as llama.cpp's server
//!   streams.
//! - [`ScriptedModel::set_refuse_stream`]: every request with `"stream": true` gets 400
//!   `stream is not supported` (`param: "stream"`) without using a step;
//!   [`ScriptedModel::set_refuse_stream_options`] likewise for `stream_options`.
//!
//! Every request body is recorded ([`ScriptedModel::requests`]) and its `messages` are checked
//! against the tool-call protocol ([`check_tool_protocol`]) and OpenAI's image parts
//! ([`check_image_parts`]: on a user message only, a `data:` URL of a JPEG, PNG, GIF or WebP
//! whose bytes are that type); problems are collected in
//! [`ScriptedModel::protocol_violations`], which tests should assert is empty.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::fmt;
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
use tokio::time::Instant;

/// The model id reported by `GET /v1/models` and used when a request names none.
pub const MODEL_ID: &str = "scripted-model";

/// Computes a response (`status`, `body`) from the request body.
pub type CustomFn = Arc<dyn Fn(&Value) -> (u16, Value) + Send + Sync>;

/// One scripted answer.
#[derive(Clone)]
pub enum Step {
    /// A normal completion: assistant `content`, `finish_reason: "stop"`.
    Text(String),
    /// An assistant message with `tool_calls` (`(id, name, arguments)`; the arguments text is
    /// sent verbatim, even if it is not valid JSON), `content: null`,
    /// `finish_reason: "tool_calls"`.
    ToolCalls(Vec<(String, String, String)>),
    /// That HTTP status with that JSON body.
    Status(u16, Value),
    /// Wait, then answer with the inner step.
    Delay(Duration, Box<Step>),
    /// Status and body computed from the request body (see [`text_completion`] and
    /// [`tool_calls_completion`] for building valid bodies).
    Custom(CustomFn),
    /// The inner step, streamed with this pause between two chunks (overrides
    /// [`ScriptedModel::set_chunk_gap`]); a request without `stream` gets it whole at once.
    Slow(Duration, Box<Step>),
    /// The inner step, streamed, with a pause of `pause` after the first `after` chunks (the
    /// first chunk is the one with `delta.role`); the rest follows the pause. A request
    /// without `stream` gets the whole answer after `pause`.
    Stall {
        after: usize,
        pause: Duration,
        step: Box<Step>,
    },
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Text(t) => f.debug_tuple("Text").field(t).finish(),
            Step::ToolCalls(c) => f.debug_tuple("ToolCalls").field(c).finish(),
            Step::Status(s, b) => f.debug_tuple("Status").field(s).field(b).finish(),
            Step::Delay(d, s) => f.debug_tuple("Delay").field(d).field(s).finish(),
            Step::Custom(_) => f.write_str("Custom(..)"),
            Step::Slow(d, s) => f.debug_tuple("Slow").field(d).field(s).finish(),
            Step::Stall { after, pause, step } => f
                .debug_struct("Stall")
                .field("after", after)
                .field("pause", pause)
                .field("step", step)
                .finish(),
        }
    }
}

impl Step {
    /// [`Step::Text`].
    pub fn text(text: impl Into<String>) -> Step {
        Step::Text(text.into())
    }

    /// [`Step::ToolCalls`] with a single call.
    pub fn tool_call(id: &str, name: &str, arguments: &str) -> Step {
        Step::ToolCalls(vec![(id.into(), name.into(), arguments.into())])
    }

    /// [`Step::ToolCalls`] from borrowed triples `(id, name, arguments)`.
    pub fn tool_calls(calls: &[(&str, &str, &str)]) -> Step {
        Step::ToolCalls(
            calls
                .iter()
                .map(|(i, n, a)| (i.to_string(), n.to_string(), a.to_string()))
                .collect(),
        )
    }

    /// [`Step::Status`].
    pub fn status(status: u16, body: Value) -> Step {
        Step::Status(status, body)
    }

    /// [`Step::Delay`]: wait `delay`, then answer with `step`.
    pub fn delay(delay: Duration, step: Step) -> Step {
        Step::Delay(delay, Box::new(step))
    }

    /// A text answer streamed with `gap` between two chunks ([`Step::Slow`] around
    /// [`Step::Text`]).
    pub fn slow_text(text: impl Into<String>, gap: Duration) -> Step {
        Step::Slow(gap, Box::new(Step::Text(text.into())))
    }

    /// [`Step::Slow`]: `step` streamed with `gap` between two chunks.
    pub fn slow(gap: Duration, step: Step) -> Step {
        Step::Slow(gap, Box::new(step))
    }

    /// [`Step::Stall`]: `step` streamed, pausing `pause` after its first `after` chunks.
    pub fn stall(after: usize, pause: Duration, step: Step) -> Step {
        Step::Stall {
            after,
            pause,
            step: Box::new(step),
        }
    }

    /// [`Step::Custom`].
    pub fn custom(f: impl Fn(&Value) -> (u16, Value) + Send + Sync + 'static) -> Step {
        Step::Custom(Arc::new(f))
    }

    /// A text answer cut off by the output-length limit: assistant `content`,
    /// `finish_reason: "length"`.
    pub fn length_limited(text: impl Into<String>) -> Step {
        let text = text.into();
        Step::custom(move |req| {
            let message = json!({"role": "assistant", "content": text});
            (200, completion(req, message, "length"))
        })
    }

    /// A text answer `prefix + <content of the last message with role "tool">` (array content
    /// parts are concatenated; `(no tool message)` when there is none).
    pub fn echo_last_tool_result(prefix: impl Into<String>) -> Step {
        let prefix = prefix.into();
        Step::custom(move |req| {
            let last = req
                .get("messages")
                .and_then(Value::as_array)
                .and_then(|msgs| msgs.iter().rev().find(|m| role(m) == Some("tool")))
                .map(|m| content_text(m.get("content").unwrap_or(&Value::Null)))
                .unwrap_or_else(|| "(no tool message)".to_string());
            (200, text_completion(req, &format!("{prefix}{last}")))
        })
    }

    /// 500 with an OpenAI-style server error body.
    pub fn server_error() -> Step {
        Step::Status(
            500,
            json!({"error": {"message": "The server had an error while processing your request.", "type": "server_error", "code": null}}),
        )
    }

    /// 429 with an OpenAI-style rate-limit body.
    pub fn rate_limited() -> Step {
        Step::Status(
            429,
            json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}}),
        )
    }

    /// 400 `context_length_exceeded`.
    pub fn context_length_exceeded() -> Step {
        Step::Status(
            400,
            json!({"error": {
                "message": "This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded"
            }}),
        )
    }
}

#[derive(Default)]
struct ModelState {
    steps: VecDeque<Step>,
    requests: Vec<Value>,
    /// Each request's body as sent, byte for byte.
    raw: Vec<Bytes>,
    authorizations: Vec<Option<String>>,
    violations: Vec<String>,
    exhausted: usize,
    models_calls: usize,
    unmatched: Vec<String>,
    /// Pause between two chunks of a streamed answer.
    chunk_gap: Duration,
    refuse_stream: bool,
    refuse_stream_options: bool,
    /// Leave `usage` out of every answer.
    no_usage: bool,
}

struct Shared {
    state: Mutex<ModelState>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, ModelState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Handle to a running scripted model server. Dropping it stops the server.
pub struct ScriptedModel {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

const POLL: Duration = Duration::from_millis(20);

impl ScriptedModel {
    /// Starts a server that answers with `steps`, in order.
    pub async fn start(steps: Vec<Step>) -> ScriptedModel {
        let shared = Arc::new(Shared {
            state: Mutex::new(ModelState {
                steps: steps.into(),
                ..ModelState::default()
            }),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("ScriptedModel: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("ScriptedModel: local_addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        ScriptedModel { shared, addr, task }
    }

    /// `http://127.0.0.1:PORT/v1` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Appends a step to the script.
    pub fn push_step(&self, step: Step) {
        self.shared.lock().steps.push_back(step);
    }

    /// Pauses `gap` between two chunks of every streamed answer (default: none). A step's own
    /// gap ([`Step::slow_text`], [`Step::slow`]) wins.
    pub fn set_chunk_gap(&self, gap: Duration) {
        self.shared.lock().chunk_gap = gap;
    }

    /// When `refuse` is true, every request with `"stream": true` is answered 400
    /// `{"error":{"message":"stream is not supported","param":"stream",…}}` and uses no step
    /// (it is still recorded in [`ScriptedModel::requests`]).
    pub fn set_refuse_stream(&self, refuse: bool) {
        self.shared.lock().refuse_stream = refuse;
    }

    /// When `refuse` is true, every request carrying `stream_options` is answered 400
    /// `Unrecognized request argument supplied: stream_options` and uses no step.
    pub fn set_refuse_stream_options(&self, refuse: bool) {
        self.shared.lock().refuse_stream_options = refuse;
    }

    /// When `report` is false, answers carry no `usage` (whole or streamed).
    pub fn set_report_usage(&self, report: bool) {
        self.shared.lock().no_usage = !report;
    }

    /// Steps not consumed yet.
    pub fn remaining_steps(&self) -> usize {
        self.shared.lock().steps.len()
    }

    /// Number of chat requests answered with "script exhausted".
    pub fn exhausted(&self) -> usize {
        self.shared.lock().exhausted
    }

    /// Every chat-completions request body, in arrival order.
    pub fn requests(&self) -> Vec<Value> {
        self.shared.lock().requests.clone()
    }

    /// Each `POST /chat/completions` body as sent, byte for byte, in arrival order.
    pub fn raw_requests(&self) -> Vec<Bytes> {
        self.shared.lock().raw.clone()
    }

    /// The most recent chat-completions request body.
    pub fn last_request(&self) -> Option<Value> {
        self.shared.lock().requests.last().cloned()
    }

    /// The `Authorization` header of every chat-completions request, in order.
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.shared.lock().authorizations.clone()
    }

    /// Number of `GET /v1/models` calls.
    pub fn models_calls(&self) -> usize {
        self.shared.lock().models_calls
    }

    /// Requests to paths the server does not serve, as `"METHOD path"`.
    pub fn unmatched(&self) -> Vec<String> {
        self.shared.lock().unmatched.clone()
    }

    /// Tool-call protocol problems found so far, each prefixed with `request #i`.
    pub fn protocol_violations(&self) -> Vec<String> {
        self.shared.lock().violations.clone()
    }

    /// Panics listing the protocol violations, if any.
    pub fn assert_protocol_ok(&self) {
        let v = self.protocol_violations();
        assert!(
            v.is_empty(),
            "ScriptedModel: tool-call protocol violations:\n  {}",
            v.join("\n  ")
        );
    }

    /// Waits until at least `n` chat requests arrived and returns their bodies; panics after
    /// `timeout` with a summary.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let reqs = self.requests();
            if reqs.len() >= n {
                return reqs;
            }
            if Instant::now() >= deadline {
                panic!(
                    "ScriptedModel: timed out after {timeout:?} waiting for {n} chat request(s), \
                     got {}.\n{}",
                    reqs.len(),
                    self.describe()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Human-readable summary of what the server saw (for panic messages).
    pub fn describe(&self) -> String {
        let st = self.shared.lock();
        let mut out = format!(
            "ScriptedModel: {} request(s), {} step(s) left, {} exhausted answer(s)\n",
            st.requests.len(),
            st.steps.len(),
            st.exhausted
        );
        for (i, r) in st.requests.iter().enumerate() {
            let roles: Vec<&str> = r
                .get("messages")
                .and_then(Value::as_array)
                .map(|m| m.iter().map(|m| role(m).unwrap_or("?")).collect())
                .unwrap_or_default();
            out.push_str(&format!("  request #{i}: roles {roles:?}\n"));
        }
        for v in &st.violations {
            out.push_str(&format!("  violation: {v}\n"));
        }
        if !st.unmatched.is_empty() {
            out.push_str(&format!("  unmatched: {:?}\n", st.unmatched));
        }
        out
    }
}

// ----- response bodies -----------------------------------------------------------------------

static COMPLETION_SEQ: AtomicU64 = AtomicU64::new(1);

/// A complete `chat.completion` object around `message`.
pub fn completion(request: &Value, message: Value, finish_reason: &str) -> Value {
    let model = request
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or(MODEL_ID);
    let prompt_tokens = request
        .get("messages")
        .map_or(0, |m| m.to_string().len() / 4) as u64;
    let completion_tokens = (message.to_string().len() / 4) as u64 + 1;
    json!({
        "id": format!("chatcmpl-scripted-{}", COMPLETION_SEQ.fetch_add(1, Ordering::Relaxed)),
        "object": "chat.completion",
        "created": super::unix_now(),
        "model": model,
        "choices": [{
            "index": 0,
            "message": message,
            "logprobs": null,
            "finish_reason": finish_reason
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        }
    })
}

/// A completion whose assistant message has `content: text`, `finish_reason: "stop"`.
pub fn text_completion(request: &Value, text: &str) -> Value {
    completion(
        request,
        json!({"role": "assistant", "content": text}),
        "stop",
    )
}

/// A completion whose assistant message carries `tool_calls` (`(id, name, arguments)`).
pub fn tool_calls_completion(request: &Value, calls: &[(String, String, String)]) -> Value {
    let tool_calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| {
            json!({"id": id, "type": "function", "function": {"name": name, "arguments": args}})
        })
        .collect();
    completion(
        request,
        json!({"role": "assistant", "content": null, "tool_calls": tool_calls}),
        "tool_calls",
    )
}

fn role(m: &Value) -> Option<&str> {
    m.get("role").and_then(Value::as_str)
}

/// Message content as text: strings as is, content-part arrays concatenated.
fn content_text(c: &Value) -> String {
    match c {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .map(|p| match p {
                Value::String(s) => s.clone(),
                _ => p
                    .get("text")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            })
            .collect(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

// ----- protocol check ------------------------------------------------------------------------

/// Checks the tool-call protocol of one request body. Returns one string per problem:
///
/// - every `tool_calls[].id` of an assistant message must be answered by exactly one later
///   `role: "tool"` message with that `tool_call_id` (missing and duplicate results);
/// - that result must be in the run of `tool` messages directly after the assistant message
///   (the OpenAI API rejects anything else);
/// - a `tool` message must name a `tool_call_id` declared by an earlier assistant message;
/// - tool calls need an `id`, `type: "function"` and a `function.name`; an id may be declared
///   only once per conversation;
/// - the body must have a `messages` array.
pub fn check_tool_protocol(body: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(msgs) = body.get("messages").and_then(Value::as_array) else {
        out.push("request has no `messages` array".to_string());
        return out;
    };
    let tool_id = |m: &Value| {
        m.get("tool_call_id")
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let mut declared: HashMap<String, usize> = HashMap::new();
    for (i, m) in msgs.iter().enumerate() {
        match role(m) {
            Some("assistant") => {
                let Some(calls) = m.get("tool_calls").and_then(Value::as_array) else {
                    continue;
                };
                // The run of tool messages directly following this assistant message.
                let run: Vec<String> = msgs[i + 1..]
                    .iter()
                    .take_while(|n| role(n) == Some("tool"))
                    .filter_map(tool_id)
                    .collect();
                for (j, tc) in calls.iter().enumerate() {
                    let name = tc
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .unwrap_or("");
                    if name.is_empty() {
                        out.push(format!(
                            "messages[{i}].tool_calls[{j}] has no function.name"
                        ));
                    }
                    if tc.get("type").and_then(Value::as_str) != Some("function") {
                        out.push(format!(
                            "messages[{i}].tool_calls[{j}] has type {} (expected \"function\")",
                            tc.get("type").unwrap_or(&Value::Null)
                        ));
                    }
                    let Some(id) = tc.get("id").and_then(Value::as_str) else {
                        out.push(format!("messages[{i}].tool_calls[{j}] has no id"));
                        continue;
                    };
                    if let Some(prev) = declared.insert(id.to_string(), i) {
                        out.push(format!(
                            "tool_call id {id:?} declared twice (messages[{prev}] and messages[{i}])"
                        ));
                    }
                    let results = msgs[i + 1..]
                        .iter()
                        .filter(|n| role(n) == Some("tool") && tool_id(n).as_deref() == Some(id))
                        .count();
                    match results {
                        0 => out.push(format!(
                            "messages[{i}]: tool_call {id:?} ({name}) has no tool result"
                        )),
                        1 => {}
                        n => out.push(format!(
                            "messages[{i}]: tool_call {id:?} ({name}) has {n} tool results (expected exactly 1)"
                        )),
                    }
                    if results > 0 && !run.iter().any(|r| r == id) {
                        out.push(format!(
                            "messages[{i}]: tool result for {id:?} ({name}) is not among the tool \
                             messages directly after the assistant message"
                        ));
                    }
                }
            }
            Some("tool") => match tool_id(m) {
                None => out.push(format!("messages[{i}]: tool message has no tool_call_id")),
                Some(id) if !declared.contains_key(&id) => out.push(format!(
                    "messages[{i}]: tool message references unknown tool_call_id {id:?}"
                )),
                Some(_) => {}
            },
            _ => {}
        }
    }
    out
}

/// The image parts of a request's messages, in order: (index of the message, MIME type of its
/// data URL, decoded bytes); a part that is not a readable `data:` URL has empty bytes.
pub fn image_parts(body: &Value) -> Vec<(usize, String, Vec<u8>)> {
    use base64::Engine;
    let msgs = body.get("messages").and_then(Value::as_array);
    let mut out = Vec::new();
    for (i, m) in msgs.into_iter().flatten().enumerate() {
        let parts = m.get("content").and_then(Value::as_array);
        for p in parts.into_iter().flatten() {
            if p.get("type").and_then(Value::as_str) != Some("image_url") {
                continue;
            }
            let url = p
                .pointer("/image_url/url")
                .and_then(Value::as_str)
                .unwrap_or("");
            let (mime, data) = url
                .strip_prefix("data:")
                .and_then(|r| r.split_once(";base64,"))
                .unwrap_or(("", ""));
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(data)
                .unwrap_or_default();
            out.push((i, mime.to_string(), bytes));
        }
    }
    out
}

/// The type of a picture from its first bytes, as a vision API tells them apart.
fn picture_type(b: &[u8]) -> Option<&'static str> {
    if b.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if b.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if b.starts_with(b"GIF87a") || b.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if b.len() >= 12 && &b[..4] == b"RIFF" && &b[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

/// What a vision API would refuse in a request's image parts: one outside a user message, a
/// URL that is not base64 `data:`, a type that is not a picture's, bytes of another type.
pub fn check_image_parts(body: &Value) -> Vec<String> {
    let msgs = body.get("messages").and_then(Value::as_array);
    let mut out = Vec::new();
    for (i, mime, bytes) in image_parts(body) {
        let role = msgs.and_then(|m| m.get(i)).and_then(role).unwrap_or("?");
        if role != "user" {
            out.push(format!("messages[{i}]: an image part in a {role} message"));
        }
        if bytes.is_empty() {
            out.push(format!(
                "messages[{i}]: an image part without base64 data: URL"
            ));
            continue;
        }
        match picture_type(&bytes) {
            Some(t) if t == mime => {}
            found => out.push(format!(
                "messages[{i}]: an image part declared {mime:?} holds {found:?}"
            )),
        }
    }
    out
}

// ----- request handling ----------------------------------------------------------------------

fn reply(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(body)).into_response()
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().trim_end_matches('/');
    match (&method, path) {
        (&Method::GET, "/v1/models") => {
            shared.lock().models_calls += 1;
            reply(
                200,
                json!({"object": "list", "data": [
                    {"id": MODEL_ID, "object": "model", "created": 0, "owned_by": "ethan-tests"}
                ]}),
            )
        }
        (&Method::POST, "/v1/chat/completions") => chat(&shared, &headers, &body).await,
        _ => {
            shared
                .lock()
                .unmatched
                .push(format!("{method} {}", uri.path()));
            reply(
                404,
                json!({"error": {"message": format!("ScriptedModel does not serve {method} {}", uri.path()), "type": "invalid_request_error"}}),
            )
        }
    }
}

async fn chat(shared: &Shared, headers: &HeaderMap, raw: &[u8]) -> Response {
    let authorization = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    let parsed = serde_json::from_slice::<Value>(raw);
    let (step, body, mut gap, no_usage) = {
        let mut st = shared.lock();
        let index = st.requests.len();
        st.authorizations.push(authorization);
        st.raw.push(Bytes::copy_from_slice(raw));
        let body = match parsed {
            Ok(body) => body,
            Err(e) => {
                let raw = String::from_utf8_lossy(raw).into_owned();
                st.requests.push(json!({ "_raw": raw }));
                st.violations
                    .push(format!("request #{index}: body is not valid JSON: {e}"));
                return reply(
                    400,
                    json!({"error": {"message": format!("invalid JSON body: {e}"), "type": "invalid_request_error"}}),
                );
            }
        };
        st.requests.push(body.clone());
        let mut found = check_tool_protocol(&body);
        found.extend(check_image_parts(&body));
        st.violations
            .extend(found.into_iter().map(|v| format!("request #{index}: {v}")));
        if st.refuse_stream && wants_stream(&body) {
            return reply(
                400,
                json!({"error": {"message": "stream is not supported", "type": "invalid_request_error", "param": "stream", "code": null}}),
            );
        }
        if st.refuse_stream_options && body.get("stream_options").is_some() {
            return reply(
                400,
                json!({"error": {"message": "Unrecognized request argument supplied: stream_options", "type": "invalid_request_error", "param": null, "code": null}}),
            );
        }
        let step = st.steps.pop_front();
        if step.is_none() {
            st.exhausted += 1;
        }
        (step, body, st.chunk_gap, st.no_usage)
    };

    let Some(mut step) = step else {
        return reply(500, json!({"error": {"message": "script exhausted"}}));
    };
    let stream = wants_stream(&body);
    let mut stall = None;
    let (status, mut answer) = loop {
        match step {
            Step::Delay(d, inner) => {
                tokio::time::sleep(d).await;
                step = *inner;
            }
            Step::Slow(g, inner) => {
                gap = g;
                step = *inner;
            }
            Step::Stall {
                after,
                pause,
                step: inner,
            } => {
                if stream {
                    stall = Some((after, pause));
                } else {
                    tokio::time::sleep(pause).await;
                }
                step = *inner;
            }
            Step::Text(text) => break (200, text_completion(&body, &text)),
            Step::ToolCalls(calls) => break (200, tool_calls_completion(&body, &calls)),
            Step::Status(status, b) => return reply(status, b),
            Step::Custom(f) => break f(&body),
        }
    };
    if no_usage {
        if let Some(o) = answer.as_object_mut() {
            o.remove("usage");
        }
    }
    if status != 200 || !stream {
        return reply(status, answer);
    }
    match stream_chunks(&body, &answer) {
        Some(events) => sse_response(events, gap, stall),
        None => reply(status, answer),
    }
}

/// Whether a request body asks for a streamed answer (`"stream": true`).
pub fn wants_stream(body: &Value) -> bool {
    body.get("stream").and_then(Value::as_bool) == Some(true)
}

/// Text split after each whitespace run, words longer than 8 characters in 8-character pieces.
pub fn text_pieces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split_inclusive(char::is_whitespace) {
        let chars: Vec<char> = word.chars().collect();
        for piece in chars.chunks(8) {
            out.push(piece.iter().collect());
        }
    }
    out
}

/// Arguments text in at least 2 pieces (when it has 2 characters or more), at most 3.
fn argument_pieces(args: &str) -> Vec<String> {
    let chars: Vec<char> = args.chars().collect();
    if chars.is_empty() {
        return vec![String::new()];
    }
    let size = chars.len().div_ceil(3).max(1);
    let size = if chars.len() >= 2 && size >= chars.len() {
        chars.len() - 1
    } else {
        size
    };
    chars.chunks(size).map(|c| c.iter().collect()).collect()
}

/// The SSE events (`data: …\n\n`, ending with `data: [DONE]`) of the streamed form of a
/// `chat.completion` answer (see the module docs); `None` when `completion` has no
/// `choices[0].message`.
pub fn stream_chunks(request: &Value, completion: &Value) -> Option<Vec<String>> {
    let choice = completion.pointer("/choices/0")?;
    let message = choice.get("message")?;
    let id = completion
        .get("id")
        .cloned()
        .unwrap_or_else(|| json!("chatcmpl-scripted"));
    let model = completion
        .get("model")
        .cloned()
        .unwrap_or_else(|| json!(MODEL_ID));
    let created = completion.get("created").cloned().unwrap_or(json!(0));
    let chunk = |delta: Value, finish: Value| {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [{"index": 0, "delta": delta, "logprobs": null,
            "finish_reason": finish}]});
        format!("data: {c}\n\n")
    };
    let mut events = vec![chunk(
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    if let Some(text) = message.get("content").and_then(Value::as_str) {
        for piece in text_pieces(text) {
            events.push(chunk(json!({"content": piece}), Value::Null));
        }
    }
    if let Some(calls) = message.get("tool_calls").and_then(Value::as_array) {
        for (index, call) in calls.iter().enumerate() {
            let args = call.pointer("/function/arguments");
            if let Some(obj) = args.filter(|a| a.is_object()) {
                // Arguments given as an object are sent whole, in the call's one chunk.
                events.push(chunk(
                    json!({"tool_calls": [{"index": index, "id": call.get("id"), "type": "function",
                        "function": {"name": call.pointer("/function/name"), "arguments": obj}}]}),
                    Value::Null,
                ));
                continue;
            }
            events.push(chunk(
                json!({"tool_calls": [{"index": index, "id": call.get("id"), "type": "function",
                    "function": {"name": call.pointer("/function/name"), "arguments": ""}}]}),
                Value::Null,
            ));
            let args = args.and_then(Value::as_str).unwrap_or_default();
            for piece in argument_pieces(args) {
                events.push(chunk(
                    json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                    Value::Null,
                ));
            }
        }
    }
    if let Some(f) = message.get("function_call").filter(|f| f.is_object()) {
        // The legacy field: the name first, then the arguments in pieces.
        events.push(chunk(
            json!({"function_call": {"name": f.get("name"), "arguments": ""}}),
            Value::Null,
        ));
        let args = f
            .get("arguments")
            .and_then(Value::as_str)
            .unwrap_or_default();
        for piece in argument_pieces(args) {
            events.push(chunk(
                json!({"function_call": {"arguments": piece}}),
                Value::Null,
            ));
        }
    }
    let finish = choice
        .get("finish_reason")
        .cloned()
        .unwrap_or(json!("stop"));
    events.push(chunk(json!({}), finish));
    let include_usage = request
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        == Some(true);
    if let Some(usage) = completion.get("usage").filter(|_| include_usage) {
        let c = json!({"id": id, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [], "usage": usage});
        events.push(format!("data: {c}\n\n"));
    }
    events.push("data: [DONE]\n\n".to_string());
    Some(events)
}

/// A `text/event-stream` response sending `events` with `gap` between two of them, and a
/// pause of `stall.1` after the first `stall.0` of them.
fn sse_response(events: Vec<String>, gap: Duration, stall: Option<(usize, Duration)>) -> Response {
    use futures::StreamExt;
    let body =
        futures::stream::iter(events.into_iter().enumerate()).then(move |(i, event)| async move {
            if i > 0 && !gap.is_zero() {
                tokio::time::sleep(gap).await;
            }
            if let Some((after, pause)) = stall {
                if i == after {
                    tokio::time::sleep(pause).await;
                }
            }
            Ok::<_, std::io::Error>(Bytes::from(event))
        });
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(axum::body::Body::from_stream(body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

// ----- a model answering from a function, for long runs ------------------------------------

/// What [`FnModel`] sends back for one request.
#[derive(Debug, Clone)]
pub enum FnAnswer {
    /// That HTTP status with that JSON body.
    Json(u16, Value),
    /// `200 OK` with a body that is not JSON.
    Garbage,
    /// `200 OK` announcing this body (`Content-Length`), but only its first half is sent before
    /// the connection is cut.
    CutOff(Value),
}

/// An OpenAI-compatible Chat Completions server (`POST /v1/chat/completions`, `GET
/// /v1/models`) answering each request from a function of its body. Unlike [`ScriptedModel`]
/// it keeps no request bodies and checks nothing, only counts: made for long runs with many
/// conversations at once, where the answer must depend on the request and not on arrival order.
/// A [`FnAnswer::Json`] 200 `chat.completion` to a request with `"stream": true` is streamed
/// as [`ScriptedModel`] streams (no pauses); the other answers are sent as they are.
/// Dropping it stops the server.
pub struct FnModel {
    addr: SocketAddr,
    requests: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl Drop for FnModel {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FnModel {
    /// Starts a server answering every chat request with `answer(&body)`.
    pub async fn start(answer: impl Fn(&Value) -> FnAnswer + Send + Sync + 'static) -> FnModel {
        let answer: Arc<dyn Fn(&Value) -> FnAnswer + Send + Sync> = Arc::new(answer);
        let requests = Arc::new(AtomicU64::new(0));
        let count = Arc::clone(&requests);
        let app = Router::new().fallback(move |method: Method, uri: Uri, body: Bytes| {
            let answer = Arc::clone(&answer);
            let count = Arc::clone(&count);
            async move {
                match (&method, uri.path().trim_end_matches('/')) {
                    (&Method::GET, "/v1/models") => reply(
                        200,
                        json!({"object": "list", "data": [{"id": MODEL_ID, "object": "model"}]}),
                    ),
                    (&Method::POST, "/v1/chat/completions") => {
                        count.fetch_add(1, Ordering::Relaxed);
                        let Ok(req) = serde_json::from_slice::<Value>(&body) else {
                            return reply(400, json!({"error": {"message": "invalid JSON body"}}));
                        };
                        fn_answer(&req, answer(&req))
                    }
                    _ => reply(404, json!({"error": {"message": "not served"}})),
                }
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("FnModel: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("FnModel: local_addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FnModel {
            addr,
            requests,
            task,
        }
    }

    /// `http://127.0.0.1:PORT/v1` (no trailing slash).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Chat requests received so far.
    pub fn requests(&self) -> u64 {
        self.requests.load(Ordering::Relaxed)
    }
}

fn fn_answer(req: &Value, a: FnAnswer) -> Response {
    match a {
        FnAnswer::Json(200, body) if wants_stream(req) => match stream_chunks(req, &body) {
            Some(events) => sse_response(events, Duration::ZERO, None),
            None => reply(200, body),
        },
        FnAnswer::Json(status, body) => reply(status, body),
        FnAnswer::Garbage => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            "<html>502 upstream oops</html>",
        )
            .into_response(),
        FnAnswer::CutOff(body) => {
            let whole = Bytes::from(body.to_string().into_bytes());
            let chunks: Vec<Result<Bytes, std::io::Error>> = vec![
                Ok(whole.slice(..whole.len() / 2)),
                Err(std::io::Error::new(
                    std::io::ErrorKind::ConnectionAborted,
                    "FnModel: connection cut",
                )),
            ];
            Response::builder()
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_LENGTH, whole.len())
                .body(axum::body::Body::from_stream(futures::stream::iter(chunks)))
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
        }
    }
}

/// The text of the last message with role `user` in a request body (`""` when none), without
/// the time the daemon writes in front of it ([`without_sent_time`]).
pub fn last_user_text(req: &Value) -> String {
    req.get("messages")
        .and_then(Value::as_array)
        .and_then(|msgs| msgs.iter().rev().find(|m| role(m) == Some("user")))
        .map(|m| content_text(m.get("content").unwrap_or(&Value::Null)))
        .map(|t| without_sent_time(&t).to_string())
        .unwrap_or_default()
}

/// `text` without the time the daemon writes in front of a person's message
/// (`[Sat 2026-12-05 09:14 CST] `); `text` itself when it does not start with one.
pub fn without_sent_time(text: &str) -> &str {
    static STAMP: std::sync::OnceLock<regex::Regex> = std::sync::OnceLock::new();
    let stamp = STAMP.get_or_init(|| {
        regex::Regex::new(r"^\[[A-Z][a-z]{2} \d{4}-\d{2}-\d{2} \d{2}:\d{2} [^\]\s]+\] ").unwrap()
    });
    stamp.find(text).map_or(text, |m| &text[m.end()..])
}

/// `n` steps that each answer `answer to: <last user text>`, so concurrent sessions can be told
/// apart whatever order their requests reach the model in.
pub fn echo_user(n: usize) -> Vec<Step> {
    (0..n)
        .map(|_| {
            Step::custom(|req| {
                let text = format!("answer to: {}", last_user_text(req));
                (200, text_completion(req, &text))
            })
        })
        .collect()
}

/// The role of the last message of a request body.
pub fn last_role(req: &Value) -> Option<&str> {
    req.get("messages")
        .and_then(Value::as_array)
        .and_then(|msgs| msgs.last())
        .and_then(role)
}
