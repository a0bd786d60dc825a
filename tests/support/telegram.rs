//! `FakeTelegram`: an in-process Telegram Bot API server for integration tests.
//!
//! It serves `POST /bot{token}/{method}` on `127.0.0.1:0` (GET is accepted too). Method names
//! are matched case-insensitively, because teloxide sends `GetUpdates`, `SendMessage`, ...
//! Bodies are parsed as JSON; form-urlencoded bodies become an object of strings (plus `_raw`),
//! anything else (multipart) is recorded as `{"_raw": ..., "_content_type": ...}`.
//!
//! Behaviour in brief:
//! - `getMe` answers a bot user (`id` 123456, `@ethan_test_bot`);
//! - `getUpdates` follows the real offset semantics: an update is confirmed (dropped) once a
//!   `getUpdates` arrives with a higher `offset`. [`FakeTelegram::set_redeliver_all`] makes it
//!   forget offsets and offer every update ever pushed. With nothing pending, the request is held
//!   for `min(timeout, 1)` seconds or until [`FakeTelegram::push_update`] is called;
//! - `sendMessage` / `editMessageText` answer a valid `Message` (ids from 1000 up); the fake keeps
//!   each message's current text ([`FakeTelegram::message_text`]), and an edit to the text a
//!   message already shows answers 400 "message is not modified", as Telegram does;
//! - `getFile` answers the `file_path` of a file added with [`FakeTelegram::add_file`] (400
//!   "file is too big" over 20 MB, as the Bot API), and `GET /file/bot<token>/<file_path>`
//!   serves its bytes ([`FakeTelegram::downloads`] lists what was fetched);
//! - with [`FakeTelegram::require_start`], `sendMessage` to a private chat whose user never
//!   wrote to the bot answers 403 "Forbidden: bot can't initiate conversation with a user";
//! - `sendMessageDraft` answers `true` (or 404 "method not found" after
//!   [`FakeTelegram::refuse_drafts`]); `deleteMessage` forgets the message and answers `true`;
//! - everything else answers `true`;
//! - [`FakeTelegram::fail_next`] queues canned error answers per method (FIFO);
//!   [`FakeTelegram::fail_nth`] fails one later call (e.g. the 3rd `sendMessage` from now).
//!
//! [`FakeTelegram::hold_send_message`] makes `sendMessage` record the request (status [`HELD`])
//! and leave it unanswered until [`FakeTelegram::release_held`] (or [`HOLD_MAX`]), as when the
//! bot's connection dies mid-send.
//!
//! Every call is recorded, including failed ones; [`FakeTelegram::sent_messages`] lists only the
//! `sendMessage` bodies that were answered successfully.

#![allow(dead_code)]

use std::collections::{HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use serde_json::{json, Value};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// The bot token every [`FakeTelegram`] started with [`FakeTelegram::start`] accepts.
pub const TEST_TOKEN: &str = "123456:TEST";
/// The bot's user id (matches the token's numeric prefix).
pub const BOT_ID: i64 = 123456;
/// The bot's username.
pub const BOT_USERNAME: &str = "ethan_test_bot";

/// Longest time a `getUpdates` without pending updates is held, whatever its `timeout`.
const MAX_HOLD: Duration = Duration::from_secs(1);
/// Poll period of the `wait_for_*` helpers.
const POLL: Duration = Duration::from_millis(20);

/// One request received by the fake.
#[derive(Debug, Clone)]
pub struct TelegramCall {
    /// Method name as sent (e.g. `SendMessage`).
    pub method: String,
    /// Parsed request body (see the module docs for non-JSON bodies).
    pub body: Value,
    /// HTTP status the fake answered with (200 unless an injected failure was used).
    pub status: u16,
    /// When the request was received.
    pub at: std::time::Instant,
}

impl TelegramCall {
    /// Whether this is a call of `method` (case-insensitive).
    pub fn is(&self, method: &str) -> bool {
        self.method.eq_ignore_ascii_case(method)
    }
}

#[derive(Default)]
struct TgState {
    /// Every update ever pushed, in push order.
    updates: Vec<Value>,
    /// Updates with `update_id` below this are confirmed (highest offset seen so far).
    confirmed_below: i64,
    redeliver_all: bool,
    calls: Vec<TelegramCall>,
    /// Injected failures, keyed by lowercase method name.
    failures: HashMap<String, VecDeque<(u16, Value)>>,
    /// Failures for one later call: (lowercase method, 1-based number of the call among all
    /// calls of that method, status, body) ([`FakeTelegram::fail_nth`]).
    scheduled: Vec<(String, usize, u16, Value)>,
    next_message_id: i64,
    /// `sendMessage` is recorded but not answered ([`FakeTelegram::hold_send_message`]).
    hold_send_message: bool,
    /// Wakes held requests ([`FakeTelegram::release_held`]).
    held_release: Arc<Notify>,
    getupdates_offsets: Vec<Option<i64>>,
    /// Requests refused because of a wrong token or an unknown path (`"METHOD path"`).
    rejected: Vec<String>,
    /// `getUpdates` calls still to be cut off mid-answer ([`FakeTelegram::drop_next_polls`]).
    drop_polls: usize,
    /// The current text of every message sent (or edited) and not deleted, by message id.
    texts: HashMap<i64, String>,
    /// `sendMessageDraft` answers 404 ([`FakeTelegram::refuse_drafts`]).
    refuse_drafts: bool,
    /// `(chat_id, message_id)` of every answered `sendMessage`, in order.
    sent_ids: Vec<(i64, i64)>,
    /// Files `getFile` knows, by `file_id` ([`FakeTelegram::add_file`]).
    files: HashMap<String, FakeFile>,
    /// The `file_path` of every download (`GET /file/bot<token>/<file_path>`), in order.
    downloads: Vec<String>,
    /// A private chat takes messages only from a user who wrote to the bot there
    /// ([`FakeTelegram::require_start`]).
    require_start: bool,
}

/// A file held by the fake Bot API.
#[derive(Clone)]
struct FakeFile {
    unique_id: String,
    path: String,
    bytes: Vec<u8>,
    /// What `getFile` reports (the real length unless [`FakeTelegram::add_file_sized`]).
    size: u64,
}

struct Shared {
    token: String,
    state: Mutex<TgState>,
    pushed: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, TgState> {
        // A panicking test thread must not turn every later assertion into a poison error.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Handle to a running fake Bot API server. Dropping it stops the server.
pub struct FakeTelegram {
    shared: Arc<Shared>,
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeTelegram {
    /// Starts a server accepting the token [`TEST_TOKEN`] (`"123456:TEST"`).
    pub async fn start() -> FakeTelegram {
        Self::start_with_token(TEST_TOKEN).await
    }

    /// Starts a server accepting `token`; requests with another token get 401.
    pub async fn start_with_token(token: &str) -> FakeTelegram {
        let shared = Arc::new(Shared {
            token: token.to_string(),
            state: Mutex::new(TgState {
                next_message_id: 1000,
                ..TgState::default()
            }),
            pushed: Notify::new(),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("FakeTelegram: bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("FakeTelegram: local_addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeTelegram { shared, addr, task }
    }

    /// `http://127.0.0.1:PORT` — no trailing slash, no `/bot...`; use as the API URL.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The socket address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The accepted bot token.
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// A whole config: the model at `model_url`, this fake as the Telegram channel, `owner` its
    /// owner, then `extra` (top-level YAML lines).
    pub fn owner_config(&self, model_url: &str, owner: i64, extra: &str) -> String {
        format!(
            "model:\n  base_url: {model_url}\n  api_key: sk-test-secret-value\n  name: test-model\n\
             channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n\
             owners: [\"telegram:{owner}\"]\n{extra}",
            self.token(),
            self.base_url()
        )
    }

    /// `base_url()/bot{token}/{method}`, handy for driving the fake directly.
    pub fn method_url(&self, method: &str) -> String {
        format!("{}/bot{}/{}", self.base_url(), self.shared.token, method)
    }

    // ----- files ---------------------------------------------------------------------------

    /// Makes a file available: `getFile{file_id}` answers its `file_path` (`path`), and
    /// `GET /file/bot<token>/<path>` serves `bytes`.
    pub fn add_file(&self, file_id: &str, unique_id: &str, path: &str, bytes: Vec<u8>) {
        let size = bytes.len() as u64;
        self.add_file_sized(file_id, unique_id, path, bytes, size);
    }

    /// Like [`FakeTelegram::add_file`], with the `file_size` `getFile` reports. Over 20 MB,
    /// `getFile` answers 400 "Bad Request: file is too big", as the Bot API does.
    pub fn add_file_sized(
        &self,
        file_id: &str,
        unique_id: &str,
        path: &str,
        bytes: Vec<u8>,
        size: u64,
    ) {
        self.shared.lock().files.insert(
            file_id.to_string(),
            FakeFile {
                unique_id: unique_id.to_string(),
                path: path.to_string(),
                bytes,
                size,
            },
        );
    }

    /// The `file_path` of every file download, in order.
    pub fn downloads(&self) -> Vec<String> {
        self.shared.lock().downloads.clone()
    }

    // ----- updates -------------------------------------------------------------------------

    /// Makes `update` (a full Bot API `Update` object with an `update_id`) available to
    /// `getUpdates` and wakes any held long-poll.
    pub fn push_update(&self, update: Value) {
        assert!(
            update.get("update_id").and_then(Value::as_i64).is_some(),
            "FakeTelegram::push_update: update has no integer update_id: {update}"
        );
        self.shared.lock().updates.push(update);
        self.shared.pushed.notify_waiters();
    }

    /// The `update_id` one above the highest pushed so far (1 when none were pushed).
    pub fn next_update_id(&self) -> i64 {
        self.shared
            .lock()
            .updates
            .iter()
            .filter_map(update_id)
            .max()
            .map_or(1, |m| m + 1)
    }

    /// Pushes a private-chat text message from `user_id` in `chat_id` with the next free
    /// `update_id`, and returns that id.
    pub fn push_text(&self, chat_id: i64, user_id: i64, text: &str) -> i64 {
        let id = self.next_update_id();
        self.push_update(Self::text_update(id, chat_id, user_id, text));
        id
    }

    /// A `callback_query` update: `user` pressed an inline button carrying `data` on a bot message
    /// in the private chat `chat`.
    pub fn callback_update(update_id: i64, user: i64, chat: i64, data: &str) -> Value {
        json!({
            "update_id": update_id,
            "callback_query": {
                "id": format!("cbq{update_id}"),
                "from": {"id": user, "is_bot": false, "first_name": "U"},
                "message": {
                    "message_id": 1000,
                    "from": {"id": BOT_ID, "is_bot": true, "first_name": "Ethan", "username": BOT_USERNAME},
                    "chat": {"id": chat, "type": "private", "first_name": "U"},
                    "date": 1700000000,
                    "text": "approval"
                },
                "chat_instance": "1",
                "data": data,
            }
        })
    }

    /// A valid `Update` carrying a private-chat text message.
    pub fn text_update(update_id: i64, chat_id: i64, user_id: i64, text: &str) -> Value {
        json!({
            "update_id": update_id,
            "message": {
                "message_id": update_id,
                "date": super::unix_now(),
                "chat": {"id": chat_id, "type": "private", "first_name": "User"},
                "from": {"id": user_id, "is_bot": false, "first_name": "User", "language_code": "en"},
                "text": text,
            }
        })
    }

    /// When `true`, `getUpdates` ignores offsets and offers every update ever pushed, like a
    /// Bot API that forgot the confirmed offset.
    pub fn set_redeliver_all(&self, on: bool) {
        self.shared.lock().redeliver_all = on;
        self.shared.pushed.notify_waiters();
    }

    /// Number of `getUpdates` calls received (including failed ones).
    pub fn getupdates_count(&self) -> usize {
        self.shared.lock().getupdates_offsets.len()
    }

    /// The `offset` of every `getUpdates` call, in order (`None` when absent).
    pub fn getupdates_offsets(&self) -> Vec<Option<i64>> {
        self.shared.lock().getupdates_offsets.clone()
    }

    /// Waits until at least `n` `getUpdates` calls arrived; panics after `timeout`.
    pub async fn wait_for_getupdates(&self, n: usize, timeout: Duration) {
        self.wait_for_calls("getUpdates", n, timeout).await;
    }

    // ----- error injection -----------------------------------------------------------------

    /// Queues an error answer (`status`, `body`) for the next call of `method`
    /// (case-insensitive). Several can be queued; they are used first-in first-out. The failed
    /// call is recorded (with its status); a failed `getUpdates` confirms nothing.
    ///
    /// Helpers for common bodies: [`FakeTelegram::bad_request_entities`],
    /// [`FakeTelegram::too_many_requests`], [`FakeTelegram::conflict`].
    pub fn fail_next(&self, method: &str, status: u16, body: Value) {
        self.shared
            .lock()
            .failures
            .entry(method.to_ascii_lowercase())
            .or_default()
            .push_back((status, body));
    }

    /// Answers the `n`-th call of `method` (case-insensitive) counted from now (`n` = 1: the
    /// next one) with the error (`status`, `body`), once; the calls before and after it are
    /// answered normally. The failed call is recorded with its status. [`FakeTelegram::fail_next`]
    /// answers take precedence for the calls they hit.
    pub fn fail_nth(&self, method: &str, n: usize, status: u16, body: Value) {
        assert!(n >= 1, "FakeTelegram::fail_nth: n counts from 1");
        let mut st = self.shared.lock();
        let lc = method.to_ascii_lowercase();
        let so_far = st.calls.iter().filter(|c| c.is(&lc)).count();
        st.scheduled.push((lc, so_far + n, status, body));
    }

    /// Number of injected failures for `method` not used yet.
    pub fn pending_failures(&self, method: &str) -> usize {
        let st = self.shared.lock();
        let lc = method.to_ascii_lowercase();
        st.failures.get(&lc).map_or(0, VecDeque::len)
            + st.scheduled.iter().filter(|f| f.0 == lc).count()
    }

    /// 400 body for an HTML parse error.
    pub fn bad_request_entities() -> Value {
        json!({
            "ok": false,
            "error_code": 400,
            "description": "Bad Request: can't parse entities: Unsupported start tag \"foo\" at byte offset 0"
        })
    }

    /// 429 body with `retry_after`.
    pub fn too_many_requests(retry_after: u64) -> Value {
        json!({
            "ok": false,
            "error_code": 429,
            "description": format!("Too Many Requests: retry after {retry_after}"),
            "parameters": {"retry_after": retry_after}
        })
    }

    /// 409 body a second poller gets from `getUpdates`.
    pub fn conflict() -> Value {
        json!({
            "ok": false,
            "error_code": 409,
            "description": "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
        })
    }

    // ----- recorded calls ------------------------------------------------------------------

    /// Bodies of every call of `method` (case-insensitive), in arrival order, failed or not.
    pub fn calls(&self, method: &str) -> Vec<Value> {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.is(method))
            .map(|c| c.body.clone())
            .collect()
    }

    /// Every call received, in arrival order.
    pub fn all_calls(&self) -> Vec<TelegramCall> {
        self.shared.lock().calls.clone()
    }

    /// Bodies of the `sendMessage` calls that were answered successfully.
    pub fn sent_messages(&self) -> Vec<Value> {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.is("sendMessage") && c.status == 200)
            .map(|c| c.body.clone())
            .collect()
    }

    /// The `text` of every successful `sendMessage`.
    pub fn sent_texts(&self) -> Vec<String> {
        self.sent_messages()
            .iter()
            .map(|b| {
                b.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string()
            })
            .collect()
    }

    /// Requests refused because of a wrong token or an unknown path, as `"METHOD path"`.
    pub fn rejected(&self) -> Vec<String> {
        self.shared.lock().rejected.clone()
    }

    /// Waits until at least `n` successful `sendMessage` calls were received and returns their
    /// bodies; panics after `timeout` listing every call received.
    pub async fn wait_for_sent(&self, n: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let sent = self.sent_messages();
            if sent.len() >= n {
                return sent;
            }
            if Instant::now() >= deadline {
                panic!(
                    "FakeTelegram: timed out after {timeout:?} waiting for {n} successful \
                     sendMessage call(s), got {}.\n{}",
                    sent.len(),
                    self.describe_calls()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until at least `n` calls of `method` (any outcome) were received and returns their
    /// bodies; panics after `timeout` listing every call received.
    pub async fn wait_for_calls(&self, method: &str, n: usize, timeout: Duration) -> Vec<Value> {
        let deadline = Instant::now() + timeout;
        loop {
            let calls = self.calls(method);
            if calls.len() >= n {
                return calls;
            }
            if Instant::now() >= deadline {
                panic!(
                    "FakeTelegram: timed out after {timeout:?} waiting for {n} {method} call(s), \
                     got {}.\n{}",
                    calls.len(),
                    self.describe_calls()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Human-readable list of every call received (for panic messages).
    pub fn describe_calls(&self) -> String {
        let st = self.shared.lock();
        let mut out = format!("FakeTelegram received {} call(s):\n", st.calls.len());
        for (i, c) in st.calls.iter().enumerate() {
            out.push_str(&format!(
                "  #{i} {} -> {}: {}\n",
                c.method, c.status, c.body
            ));
        }
        if !st.rejected.is_empty() {
            out.push_str(&format!("  rejected: {:?}\n", st.rejected));
        }
        out
    }

    /// The bot user as `getMe` returns it (a `User` plus the `Me`-only fields).
    pub fn bot_me() -> Value {
        json!({
            "id": BOT_ID,
            "is_bot": true,
            "first_name": "Ethan",
            "username": BOT_USERNAME,
            "can_join_groups": true,
            "can_read_all_group_messages": false,
            "supports_inline_queries": false,
            // Required by teloxide 0.17's `Me` (no serde default).
            "can_connect_to_business": false,
            "has_main_web_app": false
        })
    }

    /// The bot as a plain `User` (the `from` of messages the bot sends).
    pub fn bot_user() -> Value {
        json!({"id": BOT_ID, "is_bot": true, "first_name": "Ethan", "username": BOT_USERNAME})
    }
}

// ----- request handling ----------------------------------------------------------------------

/// A real Bot API update from `tests/fixtures/telegram/<name>` (provenance in that folder).
pub fn fixture(name: &str) -> Value {
    let path = format!(
        "{}/tests/fixtures/telegram/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("fixture")).expect("fixture JSON")
}

fn update_id(u: &Value) -> Option<i64> {
    u.get("update_id").and_then(Value::as_i64)
}

/// Reads an integer that may have arrived as a JSON number or a string (form bodies).
fn int_field(body: &Value, key: &str) -> Option<i64> {
    match body.get(key)? {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f as i64)),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn reply(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, Json(body)).into_response()
}

fn ok(result: Value) -> Response {
    reply(200, json!({"ok": true, "result": result}))
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    http_method: axum::http::Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = percent_decode(uri.path(), false);
    // File downloads: `GET /file/bot<token>/<file_path>`.
    if let Some((token, file_path)) = path
        .strip_prefix("/file/bot")
        .and_then(|rest| rest.split_once('/'))
    {
        let mut st = shared.lock();
        if token != shared.token {
            st.rejected.push(format!("{http_method} {path}"));
            return reply(
                404,
                json!({"ok": false, "error_code": 404, "description": "Not Found"}),
            );
        }
        st.downloads.push(file_path.to_string());
        return match st.files.values().find(|f| f.path == file_path) {
            Some(f) => (StatusCode::OK, f.bytes.clone()).into_response(),
            None => reply(
                404,
                json!({"ok": false, "error_code": 404, "description": "Not Found"}),
            ),
        };
    }
    let Some((token, method)) = path
        .strip_prefix("/bot")
        .and_then(|rest| rest.split_once('/'))
        .filter(|(_, m)| !m.is_empty() && !m.contains('/'))
    else {
        shared.lock().rejected.push(format!("{http_method} {path}"));
        return reply(
            404,
            json!({"ok": false, "error_code": 404, "description": "Not Found"}),
        );
    };
    if token != shared.token {
        shared.lock().rejected.push(format!("{http_method} {path}"));
        return reply(
            401,
            json!({"ok": false, "error_code": 401, "description": "Unauthorized"}),
        );
    }
    let method = method.to_string();
    let lc = method.to_ascii_lowercase();
    let body = parse_body(&headers, uri.query(), &body);

    // Record the call and decide on an injected failure atomically.
    let (failure, dropped, index) = {
        let mut st = shared.lock();
        let nth = st.calls.iter().filter(|c| c.is(&lc)).count() + 1;
        let failure = match st.failures.get_mut(&lc).and_then(VecDeque::pop_front) {
            Some(f) => Some(f),
            None => st
                .scheduled
                .iter()
                .position(|f| f.0 == lc && f.1 == nth)
                .map(|i| st.scheduled.remove(i))
                .map(|(_, _, status, body)| (status, body)),
        };
        let dropped = lc == "getupdates" && failure.is_none() && st.drop_polls > 0;
        if dropped {
            st.drop_polls -= 1;
        }
        if lc == "getupdates" {
            let offset = int_field(&body, "offset");
            st.getupdates_offsets.push(offset);
        }
        st.calls.push(TelegramCall {
            method: method.clone(),
            body: body.clone(),
            status: if dropped {
                DROPPED
            } else {
                failure.as_ref().map_or(200, |f| f.0)
            },
            at: std::time::Instant::now(),
        });
        (failure, dropped, st.calls.len() - 1)
    };
    if let Some((status, fbody)) = failure {
        return reply(status, fbody);
    }
    if dropped {
        // Alternately no answer at all and half an answer (see `drop_next_polls`).
        let nth = shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.is("getUpdates") && c.status == DROPPED)
            .count();
        return cut_off_updates(&shared, &body, nth % 2 == 0).await;
    }

    match lc.as_str() {
        "getme" => ok(FakeTelegram::bot_me()),
        "getfile" => {
            let id = body.get("file_id").and_then(Value::as_str).unwrap_or("");
            let mut st = shared.lock();
            let Some(f) = st.files.get(id).cloned() else {
                st.calls[index].status = 400;
                return reply(
                    400,
                    json!({"ok": false, "error_code": 400,
                    "description": "Bad Request: invalid file_id"}),
                );
            };
            if f.size > 20 * 1024 * 1024 {
                st.calls[index].status = 400;
                return reply(
                    400,
                    json!({"ok": false, "error_code": 400,
                    "description": "Bad Request: file is too big"}),
                );
            }
            ok(
                json!({"file_id": id, "file_unique_id": f.unique_id, "file_size": f.size,
                      "file_path": f.path}),
            )
        }
        "getupdates" => get_updates(&shared, &body).await,
        "sendmessage" => {
            hold_if_asked(&shared, &body).await;
            let mut st = shared.lock();
            let chat = int_field(&body, "chat_id").unwrap_or(0);
            if st.require_start && chat > 0 && !st.started(chat) {
                st.calls[index].status = 403;
                return reply(403, FakeTelegram::cant_initiate());
            }
            let id = st.next_message_id;
            st.next_message_id += 1;
            st.texts.insert(id, text_field(&body));
            st.sent_ids.push((chat, id));
            ok(message_json(id, &body, false))
        }
        "sendmessagedraft" => {
            let mut st = shared.lock();
            if st.refuse_drafts {
                st.calls[index].status = 404;
                return reply(404, FakeTelegram::method_not_found());
            }
            ok(json!(true))
        }
        "deletemessage" => {
            let mut st = shared.lock();
            if let Some(id) = int_field(&body, "message_id") {
                st.texts.remove(&id);
            }
            ok(json!(true))
        }
        "editmessagetext" => {
            if body.get("inline_message_id").is_some() {
                return ok(json!(true));
            }
            let mut st = shared.lock();
            let id = match int_field(&body, "message_id") {
                Some(id) => id,
                None => {
                    st.next_message_id += 1;
                    st.next_message_id - 1
                }
            };
            let text = text_field(&body);
            if st.texts.get(&id) == Some(&text) {
                st.calls[index].status = 400;
                return reply(400, FakeTelegram::not_modified());
            }
            st.texts.insert(id, text);
            ok(message_json(id, &body, true))
        }
        "getwebhookinfo" => ok(json!({
            "url": "",
            "has_custom_certificate": false,
            "pending_update_count": 0
        })),
        "getmycommands" => ok(json!([])),
        // sendChatAction, setMyCommands, deleteWebhook, setWebhook, answerCallbackQuery and
        // anything unknown.
        _ => ok(json!(true)),
    }
}

async fn get_updates(shared: &Shared, body: &Value) -> Response {
    let offset = int_field(body, "offset");
    let timeout = match body.get("timeout") {
        Some(Value::Number(n)) => n.as_f64().unwrap_or(0.0),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0.0),
        _ => 0.0,
    };
    let hold = Duration::from_secs_f64(timeout.clamp(0.0, MAX_HOLD.as_secs_f64()));
    let limit = int_field(body, "limit")
        .filter(|l| (1..=100).contains(l))
        .unwrap_or(100) as usize;
    if let Some(o) = offset {
        let mut st = shared.lock();
        if o > st.confirmed_below {
            st.confirmed_below = o;
        }
    }

    let deadline = Instant::now() + hold;
    loop {
        // Register for wake-ups before looking, so a push in between is not missed.
        let notified = shared.pushed.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();

        let batch: Vec<Value> = {
            let st = shared.lock();
            let mut pending: Vec<&Value> = st
                .updates
                .iter()
                .filter(|u| {
                    st.redeliver_all || {
                        let id = update_id(u).unwrap_or(i64::MIN);
                        id >= st.confirmed_below && offset.is_none_or(|o| id >= o)
                    }
                })
                .collect();
            pending.sort_by_key(|u| update_id(u));
            pending.into_iter().take(limit).cloned().collect()
        };
        if !batch.is_empty() || Instant::now() >= deadline {
            return ok(Value::Array(batch));
        }
        tokio::select! {
            _ = &mut notified => {}
            _ = tokio::time::sleep_until(deadline) => {}
        }
    }
}

/// The `text` of a request body ("" when absent).
fn text_field(body: &Value) -> String {
    body.get("text")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// A `Message` the bot "sent": `text` and `chat_id` come from the request.
fn message_json(message_id: i64, req: &Value, edited: bool) -> Value {
    let chat_id = match req.get("chat_id") {
        Some(Value::Number(n)) => n.as_i64().unwrap_or(0),
        Some(Value::String(s)) => s.trim().parse().unwrap_or(0),
        _ => 0,
    };
    let now = super::unix_now();
    let mut msg = json!({
        "message_id": message_id,
        "date": now,
        "chat": {"id": chat_id, "type": "private", "first_name": "User"},
        "from": FakeTelegram::bot_user(),
        "text": req.get("text").and_then(Value::as_str).unwrap_or(""),
    });
    if edited {
        msg["edit_date"] = json!(now);
    }
    msg
}

/// JSON bodies as is; form bodies as an object of strings plus `_raw`; anything else raw.
/// An empty body takes the query string's parameters (GET requests).
fn parse_body(headers: &HeaderMap, query: Option<&str>, bytes: &[u8]) -> Value {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_ascii_lowercase();
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return match query {
            Some(q) if !q.is_empty() => parse_form(q),
            _ => json!({}),
        };
    }
    if let Ok(v) = serde_json::from_slice::<Value>(bytes) {
        return v;
    }
    let raw = String::from_utf8_lossy(bytes).into_owned();
    if content_type.starts_with("application/x-www-form-urlencoded") {
        let mut v = parse_form(&raw);
        v["_raw"] = json!(raw);
        return v;
    }
    json!({"_raw": raw, "_content_type": content_type})
}

fn parse_form(s: &str) -> Value {
    let mut obj = serde_json::Map::new();
    for pair in s.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        obj.insert(percent_decode(k, true), json!(percent_decode(v, true)));
    }
    Value::Object(obj)
}

fn percent_decode(s: &str, plus_as_space: bool) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' if i + 2 < b.len() => {
                let hex = std::str::from_utf8(&b[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(byte) => {
                        out.push(byte);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' if plus_as_space => out.push(b' '),
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ----- reading what was sent incrementally (long runs) ----------------------------------------

impl FakeTelegram {
    /// `(chat_id, body)` of the successful `sendMessage` calls received after the first
    /// `*cursor` calls of any method (the body with its `text` and `reply_markup`); moves
    /// `*cursor` past every call received so far. Start with 0. Earlier calls are not copied
    /// again, so polling this stays cheap on long runs.
    pub fn sent_since(&self, cursor: &mut usize) -> Vec<(i64, Value)> {
        let st = self.shared.lock();
        let from = (*cursor).min(st.calls.len());
        *cursor = st.calls.len();
        st.calls[from..]
            .iter()
            .filter(|c| c.is("sendMessage") && c.status == 200)
            .map(|c| (int_field(&c.body, "chat_id").unwrap_or(0), c.body.clone()))
            .collect()
    }
}

// ----- held sends ----------------------------------------------------------------------------

/// [`TelegramCall::status`] of a `sendMessage` whose answer is being held
/// ([`FakeTelegram::hold_send_message`]); it becomes 200 if the answer is finally sent.
pub const HELD: u16 = 102;
/// Longest time a held request waits for [`FakeTelegram::release_held`].
pub const HOLD_MAX: Duration = Duration::from_secs(60);

impl FakeTelegram {
    /// While `on`, every `sendMessage` is recorded (status [`HELD`]) and its answer withheld:
    /// the message "was sent" but the bot never hears so, until [`FakeTelegram::release_held`]
    /// or [`HOLD_MAX`]. Turning it off does not release requests already held.
    pub fn hold_send_message(&self, on: bool) {
        self.shared.lock().hold_send_message = on;
    }

    /// Answers every held request now (normally; their status becomes 200).
    pub fn release_held(&self) {
        self.shared.lock().held_release.notify_waiters();
    }

    /// Bodies of the `sendMessage` calls whose answer is still held.
    pub fn held_send_messages(&self) -> Vec<Value> {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.is("sendMessage") && c.status == HELD)
            .map(|c| c.body.clone())
            .collect()
    }

    /// Bodies of every `sendMessage` call to `chat_id`, whatever its outcome (held included).
    pub fn send_message_calls_to(&self, chat_id: i64) -> Vec<Value> {
        self.calls("sendMessage")
            .into_iter()
            .filter(|b| int_field(b, "chat_id") == Some(chat_id))
            .collect()
    }
}

/// In hold mode, marks the `sendMessage` just recorded with `body` as [`HELD`] and waits for
/// [`FakeTelegram::release_held`] (at most [`HOLD_MAX`]) before it is answered. If the client
/// goes away first, the server drops this future and the call stays [`HELD`].
async fn hold_if_asked(shared: &Shared, body: &Value) {
    let (index, release) = {
        let mut st = shared.lock();
        if !st.hold_send_message {
            return;
        }
        let Some(index) = st
            .calls
            .iter()
            .rposition(|c| c.is("sendMessage") && c.status == 200 && &c.body == body)
        else {
            return;
        };
        st.calls[index].status = HELD;
        (index, Arc::clone(&st.held_release))
    };
    let _ = tokio::time::timeout(HOLD_MAX, release.notified()).await;
    if let Some(call) = shared.lock().calls.get_mut(index) {
        call.status = 200;
    }
}

// ----- connections cut mid-answer --------------------------------------------------------------

/// [`TelegramCall::status`] of a `getUpdates` whose connection was cut
/// ([`FakeTelegram::drop_next_polls`]).
pub const DROPPED: u16 = 0;

impl FakeTelegram {
    /// Cuts the next `n` `getUpdates` calls: each is accepted and its TCP connection aborted,
    /// alternately before any answer (the 1st, 3rd, … cut) and after the headers of a `200`
    /// and the first half of the JSON answer with the pending updates (the 2nd, 4th, …).
    /// Offsets in those calls still confirm updates, as on the real API (the server read the
    /// request). Recorded with status [`DROPPED`].
    pub fn drop_next_polls(&self, n: usize) {
        self.shared.lock().drop_polls += n;
    }

    /// `getUpdates` calls still to be cut.
    pub fn pending_drops(&self) -> usize {
        self.shared.lock().drop_polls
    }

    /// Number of `getUpdates` calls that were cut.
    pub fn dropped_polls(&self) -> usize {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.is("getUpdates") && c.status == DROPPED)
            .count()
    }
}

/// An aborted connection (hyper closes it when the body stream fails): at once, or, when
/// `partial`, after the first half of the answer a `getUpdates` would get now.
async fn cut_off_updates(shared: &Shared, body: &Value, partial: bool) -> Response {
    let offset = int_field(body, "offset");
    let whole = {
        let mut st = shared.lock();
        if let Some(o) = offset {
            st.confirmed_below = st.confirmed_below.max(o);
        }
        let mut pending: Vec<Value> = st
            .updates
            .iter()
            .filter(|u| {
                let id = update_id(u).unwrap_or(i64::MIN);
                st.redeliver_all || (id >= st.confirmed_below && offset.is_none_or(|o| id >= o))
            })
            .cloned()
            .collect();
        pending.sort_by_key(update_id);
        json!({"ok": true, "result": pending}).to_string()
    };
    let bytes = Bytes::from(whole.into_bytes());
    let half = bytes.slice(..bytes.len() / 2);
    let cut = || std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "connection cut");
    use futures::StreamExt;
    let stream = if partial {
        // The half is flushed before the error ends the connection.
        futures::stream::once(async move { Ok::<Bytes, std::io::Error>(half) })
            .chain(futures::stream::once(async move {
                tokio::time::sleep(Duration::from_millis(100)).await;
                Err(cut())
            }))
            .boxed()
    } else {
        futures::stream::once(async move { Err::<Bytes, std::io::Error>(cut()) }).boxed()
    };
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "application/json")
        .body(axum::body::Body::from_stream(stream))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

// ----- private chats a user never started ----------------------------------------------------

impl TgState {
    /// Whether `user` wrote to the bot in their private chat (an update was pushed for it).
    fn started(&self, user: i64) -> bool {
        self.updates.iter().any(|u| {
            u["message"]["chat"]["type"] == "private" && u["message"]["chat"]["id"] == json!(user)
        })
    }
}

impl FakeTelegram {
    /// While `on`, a `sendMessage` to a private chat (a positive `chat_id`) whose user never
    /// wrote to the bot there (no private message from them was pushed) answers 403 "Forbidden:
    /// bot can't initiate conversation with a user", as the Bot API does for someone who never
    /// pressed Start (recorded with status 403).
    pub fn require_start(&self, on: bool) {
        self.shared.lock().require_start = on;
    }

    /// The 403 body of a message to someone who never started the bot.
    pub fn cant_initiate() -> Value {
        json!({"ok": false, "error_code": 403,
               "description": "Forbidden: bot can't initiate conversation with a user"})
    }
}

// ----- streamed replies: drafts, edits, deletions ---------------------------------------------

impl FakeTelegram {
    /// While `on`, `sendMessageDraft` answers 404 "Not Found: method not found", as a Bot API
    /// server older than 9.3 does (the call is recorded with status 404).
    pub fn refuse_drafts(&self, on: bool) {
        self.shared.lock().refuse_drafts = on;
    }

    /// The 404 body of an unknown method.
    pub fn method_not_found() -> Value {
        json!({"ok": false, "error_code": 404, "description": "Not Found: method not found"})
    }

    /// The 400 body of an edit that changes nothing.
    pub fn not_modified() -> Value {
        json!({
            "ok": false,
            "error_code": 400,
            "description": "Bad Request: message is not modified: specified new message content \
                and reply markup are exactly the same as a current content and reply markup of \
                the message"
        })
    }

    /// Calls of `method` (case-insensitive) with their outcome and receive time, in order.
    pub fn calls_of(&self, method: &str) -> Vec<TelegramCall> {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.is(method))
            .cloned()
            .collect()
    }

    /// The current text of message `id` (after its edits), `None` when the fake never sent it
    /// or it was deleted.
    pub fn message_text(&self, id: i64) -> Option<String> {
        self.shared.lock().texts.get(&id).cloned()
    }

    /// The message ids the fake gave the `sendMessage` calls to `chat_id` it answered, in order.
    pub fn sent_message_ids(&self, chat_id: i64) -> Vec<i64> {
        self.shared
            .lock()
            .sent_ids
            .iter()
            .filter(|(chat, _)| *chat == chat_id)
            .map(|(_, id)| *id)
            .collect()
    }
}
