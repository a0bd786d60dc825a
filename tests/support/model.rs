//! `ScriptedModel`: an in-process OpenAI-compatible Chat Completions server for tests.
//!
//! [`ScriptedModel::start`] takes a script of [`Step`]s; every `POST /v1/chat/completions`
//! pops the next step and answers from it. When the script is exhausted the server answers
//! 500 `{"error":{"message":"script exhausted"}}` and counts it ([`ScriptedModel::exhausted`]).
//! `GET /v1/models` lists one model (`scripted-model`) for health checks.
//!
//! Streaming is not implemented: a request with `"stream": true` still gets the ordinary
//! non-streaming `chat.completion` JSON object.
//!
//! Every request body is recorded ([`ScriptedModel::requests`]) and its `messages` are checked
//! against the tool-call protocol ([`check_tool_protocol`]); problems are collected in
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
}

impl fmt::Debug for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Text(t) => f.debug_tuple("Text").field(t).finish(),
            Step::ToolCalls(c) => f.debug_tuple("ToolCalls").field(c).finish(),
            Step::Status(s, b) => f.debug_tuple("Status").field(s).field(b).finish(),
            Step::Delay(d, s) => f.debug_tuple("Delay").field(d).field(s).finish(),
            Step::Custom(_) => f.write_str("Custom(..)"),
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
    authorizations: Vec<Option<String>>,
    violations: Vec<String>,
    exhausted: usize,
    models_calls: usize,
    unmatched: Vec<String>,
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
    let (step, body) = {
        let mut st = shared.lock();
        let index = st.requests.len();
        st.authorizations.push(authorization);
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
        let found = check_tool_protocol(&body);
        st.violations
            .extend(found.into_iter().map(|v| format!("request #{index}: {v}")));
        let step = st.steps.pop_front();
        if step.is_none() {
            st.exhausted += 1;
        }
        (step, body)
    };

    let Some(mut step) = step else {
        return reply(500, json!({"error": {"message": "script exhausted"}}));
    };
    loop {
        match step {
            Step::Delay(d, inner) => {
                tokio::time::sleep(d).await;
                step = *inner;
            }
            Step::Text(text) => return reply(200, text_completion(&body, &text)),
            Step::ToolCalls(calls) => return reply(200, tool_calls_completion(&body, &calls)),
            Step::Status(status, b) => return reply(status, b),
            Step::Custom(f) => {
                let (status, b) = f(&body);
                return reply(status, b);
            }
        }
    }
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
                        fn_answer(answer(&req))
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

fn fn_answer(a: FnAnswer) -> Response {
    match a {
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

/// The text of the last message with role `user` in a request body (`""` when none).
pub fn last_user_text(req: &Value) -> String {
    req.get("messages")
        .and_then(Value::as_array)
        .and_then(|msgs| msgs.iter().rev().find(|m| role(m) == Some("user")))
        .map(|m| content_text(m.get("content").unwrap_or(&Value::Null)))
        .unwrap_or_default()
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
