//! A fast loopback Telegram Bot API and an instant OpenAI-compatible model, both timestamping
//! what the daemon does with one clock (`Instant`, this process).
//!
//! Telegram (`/bot<token>/<method>`, JSON or form bodies): `getMe`, long-polling `getUpdates`
//! with real offset semantics (updates below the last `offset` are confirmed and dropped),
//! `sendMessage` (arrival recorded), `sendMessageDraft` and `editMessageText` (arrival of the
//! first one recorded), `getWebhookInfo` (no webhook); every other method answers `true`. The
//! model (`POST …/chat/completions`) answers `bench-<n> ok`, echoing the `bench-<n>` tag of the
//! last user message so each reply is matched to its update: at once as one JSON body, or, for
//! `"stream": true`, as two SSE chunks (`bench-<n> `, then `ok`) [`Fakes::set_chunk_gap`] apart.
//! The same model speaks Anthropic Messages (`POST /v1/messages`, JSON or SSE `text_delta`s), so
//! a daemon with `provider: anthropic` can be measured against it too.
//!
//! Recorded per tag: when the update was handed out in a `getUpdates` answer, when the model
//! request arrived, when the model's first chunk was written (streamed answers), when the model
//! answer was complete, when the first draft or edit arrived, when `sendMessage` arrived, and
//! the size in bytes of the model request body. A message saying [`READ_A_FILE`] is a tool turn:
//! the model first calls `file_read`, then answers.

use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

pub const TOKEN: &str = "123456:bench-token";
/// The private chat of the sequential runs; its user is the bot's owner in the bench's config.
pub const OWNER_CHAT: i64 = 900_000_001;
/// Chat ids of the throughput run start here.
pub const CHAT_BASE: i64 = 910_000_000;
const MAX_HOLD: Duration = Duration::from_secs(25);

#[derive(Default)]
struct Tg {
    updates: VecDeque<(i64, Value)>,
    confirmed_below: i64,
    next_update_id: i64,
    next_message_id: i64,
    first_poll: Option<Instant>,
    handed: HashMap<u64, Instant>,
    model_in: HashMap<u64, Instant>,
    model_out: HashMap<u64, Instant>,
    first_token: HashMap<u64, Instant>,
    drafted: HashMap<u64, Instant>,
    sent: HashMap<u64, Instant>,
    /// Body size of the (first) model request of each tag, in bytes.
    request_bytes: HashMap<u64, usize>,
    next_tag: u64,
}

#[derive(Default)]
struct Shared {
    tg: Mutex<Tg>,
    /// Woken when updates are queued (long polls) and when a reply arrives (the runs).
    updates: Notify,
    replies: Notify,
    /// Streamed answers: the pause between the first chunk and the rest, in µs.
    chunk_gap_us: std::sync::atomic::AtomicU64,
    /// Tool turns whose `file_read` result showed the file's text.
    files_read: std::sync::atomic::AtomicUsize,
}

/// Handle to the running fakes.
#[derive(Clone)]
pub struct Fakes {
    shared: Arc<Shared>,
    pub telegram: SocketAddr,
    pub model: SocketAddr,
}

/// Per-message legs of one sequential run, in microseconds.
pub struct Legs {
    pub inbound: Vec<f64>,
    pub outbound: Vec<f64>,
    /// Both legs of the same message added: the daemon's own share of a turn.
    pub both: Vec<f64>,
    pub total: Vec<f64>,
    /// Streamed answers: the model's first chunk written → the first draft or edit arrived.
    pub first_update: Vec<f64>,
    /// The model request body of each message, in bytes, in order.
    pub request_bytes: Vec<usize>,
}

pub fn tag_of(text: &str) -> Option<u64> {
    let at = text.find("bench-")? + "bench-".len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

impl Fakes {
    pub async fn start() -> Fakes {
        let shared = Arc::new(Shared::default());
        {
            let mut tg = shared.tg.lock().unwrap();
            tg.next_update_id = 1;
            tg.next_message_id = 1000;
        }
        let tg_app = Router::new()
            .route("/{bot}/{method}", post(telegram).get(telegram))
            .with_state(shared.clone());
        let model_app = Router::new()
            .route("/v1/chat/completions", post(model))
            .route("/v1/messages", post(anthropic))
            .with_state(shared.clone());
        let tg_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let model_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let telegram = tg_listener.local_addr().unwrap();
        let model = model_listener.local_addr().unwrap();
        // As a real server does: a streamed chunk goes out at once, not after the client's
        // delayed ACK of the previous one (Nagle).
        use axum::serve::ListenerExt;
        let nodelay = |tcp: &mut tokio::net::TcpStream| {
            let _ = tcp.set_nodelay(true);
        };
        let tg_listener = tg_listener.tap_io(nodelay);
        let model_listener = model_listener.tap_io(nodelay);
        tokio::spawn(async move { axum::serve(tg_listener, tg_app).await });
        tokio::spawn(async move { axum::serve(model_listener, model_app).await });
        Fakes {
            shared,
            telegram,
            model,
        }
    }

    fn tg(&self) -> MutexGuard<'_, Tg> {
        self.shared.tg.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Streamed answers: pause `gap` between the first chunk and the rest.
    pub fn set_chunk_gap(&self, gap: Duration) {
        self.shared
            .chunk_gap_us
            .store(gap.as_micros() as u64, std::sync::atomic::Ordering::Relaxed);
    }

    /// Forget when the last `getUpdates` arrived.
    pub fn reset_polls(&self) {
        self.tg().first_poll = None;
    }

    /// When the first `getUpdates` since [`Fakes::reset_polls`] arrived.
    pub fn first_poll(&self) -> Option<Instant> {
        self.tg().first_poll
    }

    /// A fresh tag for a message sent through another channel (the Lark path).
    pub fn new_tag(&self) -> u64 {
        Self::next_tag(&mut self.tg())
    }

    fn next_tag(tg: &mut Tg) -> u64 {
        tg.next_tag += 1;
        tg.next_tag
    }

    /// Record when the message carrying `tag` was handed to the daemon (the Lark path).
    pub fn set_handed(&self, tag: u64, at: Instant) {
        self.tg().handed.insert(tag, at);
    }

    /// Of `tag`: when it was handed out, when its model request arrived, when the model's first
    /// chunk was written (streamed answers) and when the answer was complete.
    pub fn model_times(&self, tag: u64) -> [Option<Instant>; 4] {
        let tg = self.tg();
        [
            tg.handed.get(&tag).copied(),
            tg.model_in.get(&tag).copied(),
            tg.first_token.get(&tag).copied(),
            tg.model_out.get(&tag).copied(),
        ]
    }

    /// Queue one private-chat text update carrying a fresh tag; returns the tag.
    fn push(tg: &mut Tg, chat_id: i64, text: &str) -> u64 {
        let tag = Self::next_tag(tg);
        let id = tg.next_update_id;
        tg.next_update_id += 1;
        let update = json!({
            "update_id": id,
            "message": {
                "message_id": id,
                "date": crate::unix_now(),
                "chat": {"id": chat_id, "type": "private", "first_name": "User"},
                "from": {"id": chat_id, "is_bot": false, "first_name": "User", "language_code": "en"},
                "text": format!("{text} bench-{tag}"),
            }
        });
        tg.updates.push_back((id, update));
        tag
    }

    async fn wait_sent(&self, tags: &[u64], timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.shared.replies.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let tg = self.tg();
                if tags.iter().all(|t| tg.sent.contains_key(t)) {
                    return true;
                }
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return false;
            }
        }
    }

    /// `n` messages in one chat ([`OWNER_CHAT`]), one in flight at a time. `Err` says which one got no reply.
    pub async fn sequential(&self, n: usize, timeout: Duration) -> Result<Legs, String> {
        self.sequential_in(|_| OWNER_CHAT, n, timeout).await
    }

    /// `n` messages one in flight at a time, the `i`th in the private chat `chat(i)`.
    pub async fn sequential_in(
        &self,
        chat: impl Fn(usize) -> i64,
        n: usize,
        timeout: Duration,
    ) -> Result<Legs, String> {
        self.sequential_saying(chat, "hello", n, timeout).await
    }

    /// `n` tool turns in [`OWNER_CHAT`], one in flight at a time: each a `file_read` call and
    /// then the answer ([`READ_A_FILE`]); their `total` is the message's whole time in the
    /// daemon (the model answers at once).
    pub async fn sequential_tool_turns(&self, n: usize, timeout: Duration) -> Result<Legs, String> {
        self.sequential_saying(|_| OWNER_CHAT, READ_A_FILE, n, timeout)
            .await
    }

    /// Tool turns whose `file_read` result came back with the file's text.
    pub fn files_read(&self) -> usize {
        self.shared
            .files_read
            .load(std::sync::atomic::Ordering::Relaxed)
    }

    /// [`Fakes::sequential_in`] with the text `text`.
    async fn sequential_saying(
        &self,
        chat: impl Fn(usize) -> i64,
        text: &str,
        n: usize,
        timeout: Duration,
    ) -> Result<Legs, String> {
        let mut tags = Vec::with_capacity(n);
        for i in 0..n {
            let tag = Self::push(&mut self.tg(), chat(i), text);
            self.shared.updates.notify_waiters();
            if !self.wait_sent(&[tag], timeout).await {
                return Err(format!(
                    "message {i} (bench-{tag}) got no reply in {timeout:?}"
                ));
            }
            tags.push(tag);
        }
        let tg = self.tg();
        let us = |a: Option<&Instant>, b: Option<&Instant>| match (a, b) {
            (Some(a), Some(b)) => Some(b.saturating_duration_since(*a).as_secs_f64() * 1e6),
            _ => None,
        };
        let legs = Legs {
            inbound: tags
                .iter()
                .filter_map(|t| us(tg.handed.get(t), tg.model_in.get(t)))
                .collect(),
            outbound: tags
                .iter()
                .filter_map(|t| us(tg.model_out.get(t), tg.sent.get(t)))
                .collect(),
            both: tags
                .iter()
                .filter_map(|t| {
                    Some(
                        us(tg.handed.get(t), tg.model_in.get(t))?
                            + us(tg.model_out.get(t), tg.sent.get(t))?,
                    )
                })
                .collect(),
            total: tags
                .iter()
                .filter_map(|t| us(tg.handed.get(t), tg.sent.get(t)))
                .collect(),
            first_update: tags
                .iter()
                .filter_map(|t| us(tg.first_token.get(t), tg.drafted.get(t)))
                .collect(),
            request_bytes: tags
                .iter()
                .filter_map(|t| tg.request_bytes.get(t).copied())
                .collect(),
        };
        Ok(legs)
    }

    /// `chats` × `per_chat` messages queued at once, in chats from [`CHAT_BASE`]; (replied,
    /// seconds from queueing to the last reply).
    pub async fn burst(&self, chats: usize, per_chat: usize, timeout: Duration) -> (usize, f64) {
        self.burst_at(CHAT_BASE, chats, per_chat, timeout).await
    }

    /// [`Fakes::burst`] in the chats `first_chat`, `first_chat + 1`, ….
    pub async fn burst_at(
        &self,
        first_chat: i64,
        chats: usize,
        per_chat: usize,
        timeout: Duration,
    ) -> (usize, f64) {
        let mut tags = Vec::with_capacity(chats * per_chat);
        let t0 = Instant::now();
        {
            let mut tg = self.tg();
            for i in 0..per_chat {
                for c in 0..chats {
                    tags.push(Self::push(
                        &mut tg,
                        first_chat + c as i64,
                        &format!("msg {i}"),
                    ));
                }
            }
        }
        self.shared.updates.notify_waiters();
        self.wait_sent(&tags, timeout).await;
        let tg = self.tg();
        let done: Vec<Instant> = tags
            .iter()
            .filter_map(|t| tg.sent.get(t).copied())
            .collect();
        let last = done.iter().max().copied().unwrap_or(t0);
        (done.len(), last.duration_since(t0).as_secs_f64())
    }
}

/// A JSON body, or a form body, or the query: whatever teloxide sent.
fn params(body: &Bytes) -> Value {
    if let Ok(v) = serde_json::from_slice::<Value>(body) {
        return v;
    }
    let mut map = serde_json::Map::new();
    for pair in String::from_utf8_lossy(body).split('&') {
        if let Some((k, v)) = pair.split_once('=') {
            map.insert(k.to_string(), Value::String(v.to_string()));
        }
    }
    Value::Object(map)
}

fn int(v: &Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_str()?.parse().ok())
}

async fn telegram(
    State(s): State<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    body: Bytes,
) -> Json<Value> {
    let t = Instant::now();
    if bot.strip_prefix("bot") != Some(TOKEN) {
        return Json(json!({"ok": false, "error_code": 401, "description": "Unauthorized"}));
    }
    let p = params(&body);
    let result = match method.to_ascii_lowercase().as_str() {
        "getme" => json!({
            "id": 123456, "is_bot": true, "first_name": "Ethan", "username": "ethan_bench_bot",
            "can_join_groups": true, "can_read_all_group_messages": false,
            "supports_inline_queries": false, "can_connect_to_business": false,
            "has_main_web_app": false
        }),
        "getupdates" => return Json(json!({"ok": true, "result": get_updates(&s, t, &p).await})),
        "sendmessage" => {
            let text = p["text"].as_str().unwrap_or_default().to_string();
            let chat_id = int(&p["chat_id"]).unwrap_or(0);
            let mut tg = s.tg.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(tag) = tag_of(&text) {
                tg.sent.entry(tag).or_insert(t);
            }
            tg.next_message_id += 1;
            let id = tg.next_message_id;
            drop(tg);
            s.replies.notify_waiters();
            json!({
                "message_id": id, "date": crate::unix_now(),
                "chat": {"id": chat_id, "type": "private", "first_name": "User"},
                "from": {"id": 123456, "is_bot": true, "first_name": "Ethan", "username": "ethan_bench_bot"},
                "text": text
            })
        }
        "sendmessagedraft" | "editmessagetext" => {
            let text = p["text"].as_str().unwrap_or_default().to_string();
            let mut tg = s.tg.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(tag) = tag_of(&text) {
                tg.drafted.entry(tag).or_insert(t);
            }
            drop(tg);
            if method.eq_ignore_ascii_case("editmessagetext") {
                let chat_id = int(&p["chat_id"]).unwrap_or(0);
                json!({
                    "message_id": int(&p["message_id"]).unwrap_or(0), "date": crate::unix_now(),
                    "chat": {"id": chat_id, "type": "private", "first_name": "User"},
                    "from": {"id": 123456, "is_bot": true, "first_name": "Ethan", "username": "ethan_bench_bot"},
                    "text": text
                })
            } else {
                json!(true)
            }
        }
        "getwebhookinfo" => {
            json!({"url": "", "has_custom_certificate": false, "pending_update_count": 0})
        }
        _ => json!(true),
    };
    Json(json!({"ok": true, "result": result}))
}

async fn get_updates(s: &Shared, t: Instant, p: &Value) -> Vec<Value> {
    let hold = p["timeout"]
        .as_f64()
        .or_else(|| p["timeout"].as_str()?.parse().ok())
        .map(|secs| Duration::from_secs_f64(secs.clamp(0.0, MAX_HOLD.as_secs_f64())))
        .unwrap_or_default();
    let limit = int(&p["limit"]).unwrap_or(100).clamp(1, 100) as usize;
    let deadline = tokio::time::Instant::now() + hold;
    {
        let mut tg = s.tg.lock().unwrap_or_else(|e| e.into_inner());
        tg.first_poll.get_or_insert(t);
        if let Some(offset) = int(&p["offset"]) {
            if offset > tg.confirmed_below {
                tg.confirmed_below = offset;
                while tg.updates.front().is_some_and(|(id, _)| *id < offset) {
                    tg.updates.pop_front();
                }
            }
        }
    }
    loop {
        let notified = s.updates.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        {
            let mut tg = s.tg.lock().unwrap_or_else(|e| e.into_inner());
            let below = tg.confirmed_below;
            let batch: Vec<Value> = tg
                .updates
                .iter()
                .filter(|(id, _)| *id >= below)
                .take(limit)
                .map(|(_, u)| u.clone())
                .collect();
            if !batch.is_empty() {
                let now = Instant::now();
                for u in &batch {
                    if let Some(tag) = u["message"]["text"].as_str().and_then(tag_of) {
                        tg.handed.entry(tag).or_insert(now);
                    }
                }
                return batch;
            }
        }
        if tokio::time::timeout_at(deadline, notified).await.is_err() {
            return Vec::new();
        }
    }
}

/// The tag of a model request's last user message (text, or text blocks), its first words
/// (`bench-<tag> `), and the request's size recorded under the tag.
fn read_request(s: &Shared, req: &Value, bytes: usize) -> (Option<u64>, String) {
    let last_user = req["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .unwrap_or_default();
    let tag = tag_of(&last_user);
    let first = match tag {
        Some(tag) => {
            let mut tg = s.tg.lock().unwrap_or_else(|e| e.into_inner());
            tg.request_bytes.entry(tag).or_insert(bytes);
            format!("bench-{tag} ")
        }
        None => String::new(),
    };
    (tag, first)
}

/// What the fake model reads of a request body, as a small `Value`: `model`, `stream`,
/// `stream_options` and, of `messages`, only the last user message and the last message (each
/// `role` and `content`). The other messages are skipped as raw JSON: the fake's own time is
/// inside every figure that spans a model request, and building a tree of values for each
/// message of a 400-message window cost it more than a tenth of a millisecond a request, which
/// grew with the window the daemon sends. `Null` when the body is not such a JSON object.
fn read_body(body: &[u8]) -> Value {
    #[derive(serde::Deserialize)]
    struct Request<'a> {
        #[serde(default)]
        model: Option<String>,
        #[serde(default)]
        stream: Option<bool>,
        #[serde(default)]
        stream_options: Option<Value>,
        #[serde(default, borrow)]
        messages: Vec<Message<'a>>,
    }
    #[derive(serde::Deserialize)]
    struct Message<'a> {
        #[serde(default, borrow)]
        role: std::borrow::Cow<'a, str>,
        #[serde(default, borrow)]
        content: Option<&'a serde_json::value::RawValue>,
    }
    let Ok(req) = serde_json::from_slice::<Request>(body) else {
        return Value::Null;
    };
    let message = |m: &Message| {
        let content = m
            .content
            .and_then(|raw| serde_json::from_str(raw.get()).ok())
            .unwrap_or(Value::Null);
        json!({"role": m.role, "content": content})
    };
    let last = req.messages.len().checked_sub(1);
    let last_user = req.messages.iter().rposition(|m| m.role == "user");
    let mut messages: Vec<Value> = last_user
        .iter()
        .map(|&i| message(&req.messages[i]))
        .collect();
    if let Some(i) = last.filter(|&i| Some(i) != last_user) {
        messages.push(message(&req.messages[i]));
    }
    let mut v = json!({"messages": messages});
    for (key, value) in [
        ("model", req.model.map(Value::String)),
        ("stream", req.stream.map(Value::Bool)),
        ("stream_options", req.stream_options),
    ] {
        if let Some(value) = value {
            v[key] = value;
        }
    }
    v
}

async fn model(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    let t = Instant::now();
    let req = read_body(&body);
    let (tag, first) = read_request(&s, &req, body.len());
    if wants_file_read(&req) {
        return file_read_call(&req);
    }
    if file_was_read(&req) {
        s.files_read
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    if req["stream"] == json!(true) {
        let parts = openai_chunks(&req, first);
        return stream(s, parts, tag, t);
    }
    let text = format!("{first}ok");
    let reply = json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": crate::unix_now(),
        "model": req["model"].as_str().unwrap_or("bench"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                     "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
    });
    answer_at_once(&s, tag, t, reply)
}

/// Anthropic Messages (`POST /v1/messages`): the same answer as [`model`], as one `message` or
/// as SSE events (`message_start`, a text block of two `text_delta`s, `message_delta`,
/// `message_stop`).
async fn anthropic(State(s): State<Arc<Shared>>, body: Bytes) -> Response {
    let t = Instant::now();
    let req = read_body(&body);
    let (tag, first) = read_request(&s, &req, body.len());
    let model = req["model"].as_str().unwrap_or("bench").to_string();
    if req["stream"] == json!(true) {
        let event =
            |name: &str, data: Value| Bytes::from(format!("event: {name}\ndata: {data}\n\n"));
        let delta = |text: &str| {
            event(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0,
                       "delta": {"type": "text_delta", "text": text}}),
            )
        };
        let start = json!({"type": "message_start", "message": {
            "id": "msg_bench", "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": null, "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 1}}});
        let parts = vec![
            Bytes::from(
                [
                    event("message_start", start),
                    event(
                        "content_block_start",
                        json!({"type": "content_block_start", "index": 0,
                               "content_block": {"type": "text", "text": ""}}),
                    ),
                    delta(&first),
                ]
                .concat(),
            ),
            Bytes::from(
                [
                    delta("ok"),
                    event(
                        "content_block_stop",
                        json!({"type": "content_block_stop", "index": 0}),
                    ),
                    event(
                        "message_delta",
                        json!({"type": "message_delta",
                               "delta": {"stop_reason": "end_turn", "stop_sequence": null},
                               "usage": {"output_tokens": 3}}),
                    ),
                    event("message_stop", json!({"type": "message_stop"})),
                ]
                .concat(),
            ),
        ];
        return stream(s, parts, tag, t);
    }
    let reply = json!({
        "id": "msg_bench", "type": "message", "role": "assistant", "model": model,
        "content": [{"type": "text", "text": format!("{first}ok")}],
        "stop_reason": "end_turn", "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 3}
    });
    answer_at_once(&s, tag, t, reply)
}

/// The text of a tool turn's message ([`Fakes::sequential_tool_turns`]): the model answers it
/// with a `file_read` of [`FILE_READ_PATH`] first, then with its text once the result is in.
pub const READ_A_FILE: &str = "read the file";
/// What the tool turns read, relative to the workspace (`$ETHAN_HOME/workspace` by default).
pub const FILE_READ_PATH: &str = "bench.txt";
/// A line of that file, which its result must show.
pub const FILE_TEXT: &str = "a line of the bench file";

/// A tool turn's first request: the last user message asks for the file and no tool result
/// came back yet.
fn wants_file_read(req: &Value) -> bool {
    let Some(messages) = req["messages"].as_array() else {
        return false;
    };
    let last = messages.last();
    last.is_some_and(|m| m["role"] == "user")
        && last.is_some_and(|m| m["content"].to_string().contains(READ_A_FILE))
}

/// A tool turn's second request: the last message is the tool's result with the file's text.
fn file_was_read(req: &Value) -> bool {
    req["messages"]
        .as_array()
        .and_then(|m| m.last())
        .is_some_and(|m| m["role"] == "tool" && m["content"].to_string().contains(FILE_TEXT))
}

/// One `file_read` call, at once or as chunks (OpenAI `tool_calls`).
fn file_read_call(req: &Value) -> Response {
    let call = json!({"id": "call_bench", "type": "function",
                      "function": {"name": "file_read",
                                   "arguments": json!({"path": FILE_READ_PATH}).to_string()}});
    let model = req["model"].as_str().unwrap_or("bench").to_string();
    if req["stream"] != json!(true) {
        let reply = json!({
            "id": "chatcmpl-bench", "object": "chat.completion", "created": crate::unix_now(),
            "model": model,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
                                                 "tool_calls": [call]},
                         "logprobs": null, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        });
        return Json(reply).into_response();
    }
    let mut delta = call;
    delta["index"] = json!(0);
    let chunk = json!({
        "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": crate::unix_now(),
        "model": model,
        "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [delta]},
                     "finish_reason": "tool_calls"}]
    });
    // The usage chunk when asked for, as with a text answer (else the daemon estimates).
    let usage = if req["stream_options"]["include_usage"] == json!(true) {
        let usage = json!({
            "id": "chatcmpl-bench", "object": "chat.completion.chunk",
            "created": crate::unix_now(), "model": model, "choices": [],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        });
        format!("data: {usage}\n\n")
    } else {
        String::new()
    };
    let body = format!("data: {chunk}\n\n{usage}data: [DONE]\n\n");
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

/// A whole (not streamed) answer: the request's arrival `t` and now recorded under `tag`.
fn answer_at_once(s: &Shared, tag: Option<u64>, t: Instant, reply: Value) -> Response {
    if let Some(tag) = tag {
        let mut tg = s.tg.lock().unwrap_or_else(|e| e.into_inner());
        tg.model_in.entry(tag).or_insert(t);
        tg.model_out.entry(tag).or_insert_with(Instant::now);
    }
    Json(reply).into_response()
}

/// OpenAI `chat.completion.chunk`s: one with `first`, one with `ok` and the finish reason, a
/// usage chunk when asked for, `[DONE]`.
fn openai_chunks(req: &Value, first: String) -> Vec<Bytes> {
    let model = req["model"].as_str().unwrap_or("bench").to_string();
    let chunk = |delta: Value, finish: Value| {
        let c = json!({
            "id": "chatcmpl-bench", "object": "chat.completion.chunk",
            "created": crate::unix_now(), "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]
        });
        Bytes::from(format!("data: {c}\n\n"))
    };
    let mut parts = vec![
        chunk(json!({"role": "assistant", "content": first}), Value::Null),
        chunk(json!({"content": "ok"}), json!("stop")),
    ];
    if req["stream_options"]["include_usage"] == json!(true) {
        let usage = json!({
            "id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": crate::unix_now(),
            "model": model, "choices": [],
            "usage": {"prompt_tokens": 10, "completion_tokens": 3, "total_tokens": 13}
        });
        parts.push(Bytes::from(format!("data: {usage}\n\n")));
    }
    parts.push(Bytes::from_static(b"data: [DONE]\n\n"));
    parts
}

/// `parts` as an SSE body: the first part, the pause of [`Fakes::set_chunk_gap`], the rest.
fn stream(s: Arc<Shared>, parts: Vec<Bytes>, tag: Option<u64>, t: Instant) -> Response {
    let gap = Duration::from_micros(s.chunk_gap_us.load(std::sync::atomic::Ordering::Relaxed));
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::convert::Infallible>>(8);
    tokio::spawn(async move {
        let mut parts = parts.into_iter();
        if let Some(tag) = tag {
            let mut tg = s.tg.lock().unwrap_or_else(|e| e.into_inner());
            tg.model_in.entry(tag).or_insert(t);
            tg.first_token.entry(tag).or_insert_with(Instant::now);
        }
        if let Some(p) = parts.next() {
            let _ = tx.send(Ok(p)).await;
        }
        if !gap.is_zero() {
            tokio::time::sleep(gap).await;
        }
        for p in parts {
            let _ = tx.send(Ok(p)).await;
        }
        if let Some(tag) = tag {
            let mut tg = s.tg.lock().unwrap_or_else(|e| e.into_inner());
            tg.model_out.entry(tag).or_insert_with(Instant::now);
        }
    });
    let body = axum::body::Body::from_stream(futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    }));
    ([(header::CONTENT_TYPE, "text/event-stream")], body).into_response()
}

#[cfg(test)]
mod tests {
    #[test]
    fn tags_are_read_from_text() {
        assert_eq!(super::tag_of("hello bench-42"), Some(42));
        assert_eq!(super::tag_of("ok bench-7 more"), Some(7));
        assert_eq!(super::tag_of("bench-9 ok"), Some(9));
        assert_eq!(super::tag_of("nothing"), None);
    }
}
