//! `FakeLark`: an in-process Lark/Feishu Open Platform for integration tests — the Open API
//! over HTTP and the event long connection over a websocket speaking real pbbp2 frames.
//!
//! HTTP (`base_url()`, use as `channels.lark.base_url`):
//! - `POST /callback/ws/endpoint` checks `{"AppID","AppSecret"}` and hands out a one-time
//!   websocket URL (`ws://127.0.0.1:PORT/ws/v2?device_id=…&service_id=33554678&ticket=…`)
//!   with a fast `ClientConfig` (ping every 1 s, reconnect nonce 1 s, interval 1 s);
//! - `POST /open-apis/auth/v3/tenant_access_token/internal` issues `t-1`, `t-2`, …;
//!   [`FakeLark::expire_tokens`] makes every issued token invalid, so the next call answers
//!   HTTP 200 with code 99991663;
//! - `GET /open-apis/bot/v3/info` answers the bot ([`BOT_OPEN_ID`]);
//! - `POST /open-apis/im/v1/messages/{id}/reply` and `POST /open-apis/im/v1/messages` record
//!   the message ([`FakeLark::messages`]); a repeated `uuid` returns the first message again
//!   without recording a second one, as Lark does; a create by `receive_id_type=open_id` to a
//!   person marked with [`FakeLark::unreachable`] answers code 230013;
//! - `PATCH /open-apis/im/v1/messages/{id}` records card updates;
//! - `GET /open-apis/im/v1/messages/{id}` says who sent a message (the app for ids it issued);
//! - `GET /open-apis/im/v1/messages/{id}/resources/{file_key}?type=image|file` serves the
//!   bytes added with [`FakeLark::add_resource`];
//! - CardKit (`/open-apis/cardkit/v1/cards…`: create, element content `PUT`, settings `PATCH`)
//!   as described in [`cardkit`]; [`FakeLark::refuse_cardkit`] answers the create
//!   call with the missing-scope code 99991672; [`FakeLark::cards`],
//!   [`FakeLark::card_writes`] and [`FakeLark::card_settings`] read what arrived. A reply whose
//!   content is `{"type":"card","data":{"card_id":…}}` is recorded like any other
//!   ([`SentMessage::card_id`]) and read back with the card as it is now as its `content`;
//! - [`FakeLark::hold_sends`] accepts (and shows) replies and creates but withholds the HTTP
//!   answer until [`FakeLark::release_held`] (at most [`HOLD_MAX`]), as when the bot's
//!   connection dies mid-send; the recorded call has status [`HELD`] meanwhile;
//! - [`FakeLark::fail_next`] queues canned answers per route (`endpoint`, `token`, `bot_info`,
//!   `reply`, `create`, `patch`, `get_message`, `card_create`, `card_content`, `card_settings`),
//!   e.g. a 429 with `x-ogw-ratelimit-reset` or
//!   code 230099 for a refused card; [`FakeLark::fail_nth`] answers one later call of a route
//!   (e.g. the 3rd `reply` from now).
//!
//! Websocket: one connection at a time is "current"; [`FakeLark::push_event`] sends a data
//! frame to it, [`FakeLark::push_event_fragmented`] splits the payload into `sum` fragments,
//! [`FakeLark::push_card_action`] sends a `card.action.trigger`, [`FakeLark::push_raw`] sends
//! arbitrary bytes, [`FakeLark::drop_connection`] cuts the TCP connection without a close
//! frame. Pings are answered with a pong carrying the ClientConfig. Every data frame the
//! client sends back is recorded as an [`Ack`] with the time since the matching frame was
//! pushed. A handshake with an unknown or already used ticket is refused (and recorded).

#![allow(dead_code)]

/// The CardKit routes (a file of its own; the benchmarks include this file by path too).
#[path = "lark_cardkit.rs"]
pub mod cardkit;

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
use ethan_channels::lark::frame::{self, header, Frame, METHOD_CONTROL, METHOD_DATA};
use ethan_channels::lark::tokio_tungstenite::{self, tungstenite};
use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tungstenite::Message;

/// The app id the fake accepts.
pub const APP_ID: &str = "cli_a0test0ethan00";
/// The app secret the fake accepts.
pub const APP_SECRET: &str = "fake-lark-app-secret-0123";
/// The bot's open_id.
pub const BOT_OPEN_ID: &str = "ou_27ade7346f1dc5a485d4de0c5944dd13";
/// The bot's name.
pub const BOT_NAME: &str = "Ethan Test";
/// `service_id` of every websocket URL.
pub const SERVICE_ID: i32 = 33554678;

const POLL: Duration = Duration::from_millis(20);

/// One HTTP request received.
#[derive(Debug, Clone)]
pub struct LarkCall {
    pub method: String,
    pub path: String,
    pub query: String,
    pub body: Value,
    pub status: u16,
    /// The bearer token, if any.
    pub token: Option<String>,
}

/// A message the bot sent (reply or create) that the fake accepted.
#[derive(Debug, Clone)]
pub struct SentMessage {
    /// `reply` or `create`.
    pub kind: String,
    /// The message replied to (`reply` only).
    pub reply_to: Option<String>,
    /// `receive_id` (`create` only).
    pub receive_id: Option<String>,
    /// `receive_id_type` of the query (`create` only): `chat_id` or `open_id`.
    pub receive_id_type: Option<String>,
    pub msg_type: String,
    /// `content`, parsed from its JSON string.
    pub content: Value,
    pub uuid: String,
    pub reply_in_thread: bool,
    /// The id the fake gave it.
    pub message_id: String,
    /// The token it was sent with.
    pub token: String,
    /// The CardKit card entity it sends (`{"type":"card","data":{"card_id":…}}`); `content` is
    /// then that card as it is now (see [`FakeLark::messages`]).
    pub card_entity: Option<String>,
    /// When the request arrived.
    pub at: Instant,
}

impl SentMessage {
    /// The `card_id` of a message that sends a CardKit card entity
    /// (`{"type":"card","data":{"card_id":…}}`).
    pub fn card_id(&self) -> Option<String> {
        self.card_entity.clone()
    }

    /// The Markdown of a reply card: the element with `element_id` `answer` (a streaming card),
    /// else `body.elements[0].content`; `""` when there is none.
    pub fn card_markdown(&self) -> String {
        let elements = self
            .content
            .pointer("/body/elements")
            .and_then(Value::as_array);
        let answer = elements.and_then(|es| es.iter().find(|e| e["element_id"] == "answer"));
        answer
            .or_else(|| elements.and_then(|es| es.first()))
            .and_then(|e| e["content"].as_str())
            .unwrap_or("")
            .to_string()
    }
}

/// A data frame the client sent back.
#[derive(Debug, Clone)]
pub struct Ack {
    pub seq_id: u64,
    pub headers: Vec<(String, String)>,
    /// `code` of the ACK payload.
    pub code: i64,
    /// The decoded `data` (a card callback's answer), parsed as JSON.
    pub data: Option<Value>,
    /// Time from pushing the frame to receiving the ACK (`None` for unknown SeqIDs).
    pub latency: Option<Duration>,
    /// The raw frame.
    pub frame: Frame,
}

impl Ack {
    /// The value of header `key` in the ACK frame.
    pub fn header(&self, key: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// A canned HTTP answer: status, JSON body, extra headers.
type Answer = (u16, Value, Vec<(String, String)>);

enum WsCommand {
    Send(Vec<u8>),
    Drop,
}

struct LarkState {
    /// Message resources by `(message_id, file_key)`: `(type, bytes)` ([`FakeLark::add_resource`]).
    resources: HashMap<(String, String), (String, Vec<u8>)>,
    calls: Vec<LarkCall>,
    issued_tokens: Vec<String>,
    valid_tokens: HashSet<String>,
    failures: HashMap<String, VecDeque<Answer>>,
    /// Calls received per route.
    route_calls: HashMap<String, usize>,
    /// Answers for one later call of a route: (route, 1-based number of the call among all
    /// calls of that route, answer) ([`FakeLark::fail_nth`]).
    scheduled: Vec<(String, usize, Answer)>,
    messages: Vec<SentMessage>,
    uuids: HashMap<String, String>,
    patches: Vec<(String, Value)>,
    next_message: u64,
    endpoint_calls: usize,
    issued_tickets: HashSet<String>,
    used_tickets: HashSet<String>,
    next_ticket: u64,
    client_config: Value,
    connections: usize,
    current: Option<(usize, mpsc::UnboundedSender<WsCommand>)>,
    /// Every open connection (several daemons, each with its own), by connection id.
    live: Vec<(usize, mpsc::UnboundedSender<WsCommand>)>,
    acks: Vec<Ack>,
    pushed_at: HashMap<u64, Instant>,
    pings: usize,
    next_seq: u64,
    refused_handshakes: Vec<String>,
    /// Replies and creates are answered only when released ([`FakeLark::hold_sends`]).
    hold_sends: bool,
    held_release: Arc<tokio::sync::Notify>,
    /// `open_id`s a message by `receive_id_type=open_id` cannot reach ([`FakeLark::unreachable`]).
    unreachable: HashSet<String>,
    cardkit: cardkit::CardKit,
}

struct Shared {
    state: Mutex<LarkState>,
    ws_addr: Mutex<Option<SocketAddr>>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, LarkState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Handle to a running fake. Dropping it stops both servers.
pub struct FakeLark {
    shared: Arc<Shared>,
    http_addr: SocketAddr,
    ws_addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for FakeLark {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        if let Some((_, tx)) = self.shared.lock().current.take() {
            let _ = tx.send(WsCommand::Drop);
        }
    }
}

impl FakeLark {
    /// Start the HTTP and websocket servers on `127.0.0.1:0`.
    pub async fn start() -> FakeLark {
        let shared = Arc::new(Shared {
            state: Mutex::new(LarkState {
                resources: HashMap::new(),
                calls: Vec::new(),
                issued_tokens: Vec::new(),
                valid_tokens: HashSet::new(),
                failures: HashMap::new(),
                route_calls: HashMap::new(),
                scheduled: Vec::new(),
                messages: Vec::new(),
                uuids: HashMap::new(),
                patches: Vec::new(),
                next_message: 1,
                endpoint_calls: 0,
                issued_tickets: HashSet::new(),
                used_tickets: HashSet::new(),
                next_ticket: 1,
                client_config: json!({
                    "ReconnectCount": -1,
                    "ReconnectInterval": 1,
                    "ReconnectNonce": 1,
                    "PingInterval": 1,
                }),
                connections: 0,
                current: None,
                live: Vec::new(),
                acks: Vec::new(),
                pushed_at: HashMap::new(),
                pings: 0,
                next_seq: 7_000_000_001,
                refused_handshakes: Vec::new(),
                hold_sends: false,
                unreachable: HashSet::new(),
                held_release: Arc::new(tokio::sync::Notify::new()),
                cardkit: Default::default(),
            }),
            ws_addr: Mutex::new(None),
        });
        let http = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("FakeLark: bind http");
        let http_addr = http.local_addr().expect("FakeLark: http addr");
        let ws = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("FakeLark: bind ws");
        let ws_addr = ws.local_addr().expect("FakeLark: ws addr");
        *shared.ws_addr.lock().unwrap() = Some(ws_addr);
        let app = Router::new()
            .fallback(handle_http)
            .with_state(Arc::clone(&shared));
        let http_task = tokio::spawn(async move {
            let _ = axum::serve(http, app).await;
        });
        let ws_shared = Arc::clone(&shared);
        let ws_task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = ws.accept().await else {
                    break;
                };
                tokio::spawn(serve_ws(Arc::clone(&ws_shared), stream));
            }
        });
        FakeLark {
            shared,
            http_addr,
            ws_addr,
            tasks: vec![http_task, ws_task],
        }
    }

    /// `http://127.0.0.1:PORT` (use as `channels.lark.base_url`).
    pub fn base_url(&self) -> String {
        format!("http://{}", self.http_addr)
    }

    /// The `channels:` YAML lines for this fake (`lark:` indented by two spaces), plus `extra`
    /// lines that must already be indented by four spaces.
    pub fn channel_yaml(&self, extra: &str) -> String {
        format!(
            "  lark:\n    app_id: {APP_ID}\n    app_secret: {APP_SECRET}\n    base_url: {}\n{extra}",
            self.base_url()
        )
    }

    /// Replace the ClientConfig handed out with the endpoint and in pongs.
    pub fn set_client_config(&self, cfg: Value) {
        self.shared.lock().client_config = cfg;
    }

    // ----- HTTP ----------------------------------------------------------------------------

    /// Makes `GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}?type={kind}`
    /// (`image` or `file`) answer `bytes` to a valid tenant token; another `type` answers code
    /// 234001, an unknown key 234003, as Lark does.
    pub fn add_resource(&self, message_id: &str, file_key: &str, kind: &str, bytes: Vec<u8>) {
        self.shared.lock().resources.insert(
            (message_id.to_string(), file_key.to_string()),
            (kind.to_string(), bytes),
        );
    }

    /// Every HTTP request received, in order.
    pub fn calls(&self) -> Vec<LarkCall> {
        self.shared.lock().calls.clone()
    }

    /// Requests whose path contains `needle`.
    pub fn calls_to(&self, needle: &str) -> Vec<LarkCall> {
        self.calls()
            .into_iter()
            .filter(|c| c.path.contains(needle))
            .collect()
    }

    /// Number of `tenant_access_token` requests.
    pub fn token_requests(&self) -> usize {
        self.shared.lock().issued_tokens.len()
    }

    /// Number of `/callback/ws/endpoint` requests.
    pub fn endpoint_calls(&self) -> usize {
        self.shared.lock().endpoint_calls
    }

    /// Invalidate every issued token: calls with them answer HTTP 200, code 99991663.
    pub fn expire_tokens(&self) {
        self.shared.lock().valid_tokens.clear();
    }

    /// Queue a canned answer for the next call of `route` (`endpoint`, `token`, `bot_info`,
    /// `reply`, `create`, `patch`, `get_message`); FIFO. `headers` are added to the answer.
    pub fn fail_next(&self, route: &str, status: u16, body: Value, headers: &[(&str, &str)]) {
        self.shared
            .lock()
            .failures
            .entry(route.to_string())
            .or_default()
            .push_back((
                status,
                body,
                headers
                    .iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            ));
    }

    /// Answer the `n`-th call of `route` counted from now (`n` = 1: the next one) with
    /// `status` and `body`, once; the calls before and after it are answered normally.
    /// [`FakeLark::fail_next`] answers take precedence for the calls they hit.
    pub fn fail_nth(&self, route: &str, n: usize, status: u16, body: Value) {
        assert!(n >= 1, "FakeLark::fail_nth: n counts from 1");
        let mut st = self.shared.lock();
        let so_far = st.route_calls.get(route).copied().unwrap_or(0);
        st.scheduled
            .push((route.to_string(), so_far + n, (status, body, Vec::new())));
    }

    /// Messages the bot sent (replies and creates), each uuid once.
    pub fn messages(&self) -> Vec<SentMessage> {
        let st = self.shared.lock();
        st.messages
            .iter()
            .map(|m| resolve_card(&st.cardkit, m.clone()))
            .collect()
    }

    /// Messages to `open_id` by `receive_id_type=open_id` answer code 230013 ("Bot has NO
    /// availability to this user"), as for a person outside the app's availability range.
    pub fn unreachable(&self, open_id: &str) {
        self.shared.lock().unreachable.insert(open_id.to_string());
    }

    /// While `on`, creating a CardKit card is refused with 99991672 (the app lacks the
    /// `cardkit:card:write` scope).
    pub fn refuse_cardkit(&self, on: bool) {
        self.shared.lock().cardkit.refuse = on;
    }

    /// CardKit card entities created, in order.
    pub fn cards(&self) -> Vec<cardkit::Card> {
        self.shared.lock().cardkit.cards.clone()
    }

    /// CardKit element content writes (any outcome), in order.
    pub fn card_writes(&self) -> Vec<cardkit::CardWrite> {
        self.shared.lock().cardkit.writes.clone()
    }

    /// CardKit settings patches (any outcome), in order.
    pub fn card_settings(&self) -> Vec<cardkit::CardSettings> {
        self.shared.lock().cardkit.settings.clone()
    }

    /// How many accepted settings patches turned a card's streaming mode off: streamed replies
    /// finished (counted without copying the records).
    pub fn finished_cards(&self) -> usize {
        self.shared
            .lock()
            .cardkit
            .settings
            .iter()
            .filter(|s| s.closes_streaming())
            .count()
    }

    /// Wait until `f` holds for the fake's CardKit state; panics after `timeout`.
    pub async fn wait_cardkit(
        &self,
        what: &str,
        timeout: Duration,
        mut f: impl FnMut(&cardkit::CardKit) -> bool,
    ) {
        let deadline = Instant::now() + timeout;
        loop {
            if f(&self.shared.lock().cardkit) {
                return;
            }
            if Instant::now() >= deadline {
                panic!(
                    "FakeLark: timed out after {timeout:?} waiting for {what}.\n{:#?}\n{}",
                    self.shared.lock().cardkit,
                    self.describe()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Card updates (`PATCH`), as (message_id, parsed content).
    pub fn patches(&self) -> Vec<(String, Value)> {
        self.shared.lock().patches.clone()
    }

    /// Wait until at least `n` messages were sent; panics after `timeout`.
    pub async fn wait_for_messages(&self, n: usize, timeout: Duration) -> Vec<SentMessage> {
        let deadline = Instant::now() + timeout;
        loop {
            let m = self.messages();
            if m.len() >= n {
                return m;
            }
            if Instant::now() >= deadline {
                panic!(
                    "FakeLark: timed out after {timeout:?} waiting for {n} message(s), got {}.\n{}",
                    m.len(),
                    self.describe()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Wait until message `index` exists and its card's Markdown ([`SentMessage::card_markdown`])
    /// contains `needle` — a streamed card is created with the first words and filled by later
    /// CardKit writes; returns that message. Panics after `timeout`.
    pub async fn wait_card_containing(
        &self,
        index: usize,
        needle: &str,
        timeout: Duration,
    ) -> SentMessage {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(m) = self.messages().get(index) {
                if m.card_markdown().contains(needle) {
                    return m.clone();
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "FakeLark: timed out after {timeout:?} waiting for message {index} to show {needle:?}.\n{}",
                    self.describe()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Human-readable summary (for panic messages).
    pub fn describe(&self) -> String {
        let st = self.shared.lock();
        let mut out = format!(
            "FakeLark: {} HTTP call(s), {} connection(s), {} ack(s), {} ping(s)\n",
            st.calls.len(),
            st.connections,
            st.acks.len(),
            st.pings
        );
        for c in &st.calls {
            let body = c.body.to_string();
            let body: String = body.chars().take(300).collect();
            out.push_str(&format!(
                "  {} {}?{} -> {} {body}\n",
                c.method, c.path, c.query, c.status
            ));
        }
        for a in &st.acks {
            out.push_str(&format!(
                "  ack seq {} code {} latency {:?}\n",
                a.seq_id, a.code, a.latency
            ));
        }
        if !st.refused_handshakes.is_empty() {
            out.push_str(&format!(
                "  refused handshakes: {:?}\n",
                st.refused_handshakes
            ));
        }
        out
    }

    // ----- websocket -----------------------------------------------------------------------

    /// Number of websocket connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.lock().connections
    }

    /// Handshakes refused (unknown or reused ticket), as request URIs.
    pub fn refused_handshakes(&self) -> Vec<String> {
        self.shared.lock().refused_handshakes.clone()
    }

    /// Number of ping frames received.
    pub fn pings(&self) -> usize {
        self.shared.lock().pings
    }

    /// Wait until at least `n` connections were accepted and one is current.
    pub async fn wait_connections(&self, n: usize, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let st = self.shared.lock();
                if st.connections >= n && st.current.is_some() {
                    return;
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "FakeLark: timed out after {timeout:?} waiting for {n} websocket connection(s).\n{}",
                    self.describe()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Cut the current connection (TCP closed, no close frame).
    pub fn drop_connection(&self) {
        if let Some((_, tx)) = self.shared.lock().current.take() {
            let _ = tx.send(WsCommand::Drop);
        }
    }

    /// Send raw bytes as one binary message on the current connection.
    pub fn push_raw(&self, bytes: Vec<u8>) {
        let st = self.shared.lock();
        let (_, tx) = st
            .current
            .as_ref()
            .expect("FakeLark::push_raw: no websocket connection");
        let _ = tx.send(WsCommand::Send(bytes));
    }

    fn next_seq(&self) -> u64 {
        let mut st = self.shared.lock();
        st.next_seq += 2;
        st.next_seq
    }

    fn push_frame(&self, f: Frame) -> u64 {
        let seq = f.seq_id;
        let bytes = f.to_bytes();
        let mut st = self.shared.lock();
        st.pushed_at.insert(seq, Instant::now());
        let (_, tx) = st
            .current
            .as_ref()
            .expect("FakeLark: no websocket connection to push to");
        let _ = tx.send(WsCommand::Send(bytes));
        seq
    }

    fn data_frame(
        &self,
        kind: &str,
        message_id: &str,
        sum: usize,
        seq: usize,
        payload: Vec<u8>,
    ) -> Frame {
        let seq_id = self.next_seq();
        Frame {
            seq_id,
            log_id: seq_id + 1,
            service: SERVICE_ID,
            method: METHOD_DATA,
            headers: vec![
                header("type", kind),
                header("message_id", message_id),
                header("sum", &sum.to_string()),
                header("seq", &seq.to_string()),
                header("trace_id", &format!("trace-{seq_id}")),
            ],
            payload_encoding: None,
            payload_type: None,
            payload: Some(payload),
            log_id_new: None,
        }
    }

    /// Push one event envelope as a single data frame; returns its SeqID.
    pub fn push_event(&self, envelope: &Value) -> u64 {
        let id = format!("fake-frame-{}", self.next_seq());
        let f = self.data_frame("event", &id, 1, 0, envelope.to_string().into_bytes());
        self.push_frame(f)
    }

    /// Push an envelope split into `parts` fragments (sent in order); returns the SeqID of the
    /// last fragment, the one the client ACKs.
    pub fn push_event_fragmented(&self, envelope: &Value, parts: usize) -> u64 {
        let bytes = envelope.to_string().into_bytes();
        let id = format!("fake-frame-{}", self.next_seq());
        let size = bytes.len().div_ceil(parts.max(1));
        let mut last = 0;
        for (i, chunk) in bytes.chunks(size).enumerate() {
            let f = self.data_frame("event", &id, parts, i, chunk.to_vec());
            last = self.push_frame(f);
        }
        last
    }

    /// Push a `card.action.trigger` (as a `type: event` frame) whose button value is `value`,
    /// pressed by `operator_open_id` in `chat_id`; returns its SeqID.
    pub fn push_card_action(&self, value: Value, operator_open_id: &str, chat_id: &str) -> u64 {
        let env = card_action(value, operator_open_id, chat_id);
        self.push_event(&env)
    }

    /// All ACKs received.
    pub fn acks(&self) -> Vec<Ack> {
        self.shared.lock().acks.clone()
    }

    /// Wait for the ACK of the frame with `seq_id`; panics after `timeout`.
    pub async fn wait_ack(&self, seq_id: u64, timeout: Duration) -> Ack {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(a) = self.acks().into_iter().find(|a| a.seq_id == seq_id) {
                return a;
            }
            if Instant::now() >= deadline {
                panic!(
                    "FakeLark: timed out after {timeout:?} waiting for the ACK of frame {seq_id}.\n{}",
                    self.describe()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

// ----- event builders ----------------------------------------------------------------------

fn now_ms() -> i64 {
    super::unix_now() * 1000
}

/// A fresh `om_…` message id.
pub fn new_message_id() -> String {
    format!("om_{}", uuid::Uuid::new_v4().simple())
}

/// An `im.message.receive_v1` envelope with a text message. `mentions` are
/// `(key, open_id, name)`; a mention of [`BOT_OPEN_ID`] is typed `bot`.
pub fn text_event(
    chat_id: &str,
    chat_type: &str,
    sender_open_id: &str,
    text: &str,
    mentions: &[(&str, &str, &str)],
) -> Value {
    let mentions: Vec<Value> = mentions
        .iter()
        .map(|(key, open_id, name)| {
            json!({
                "key": key,
                "id": {"open_id": open_id, "union_id": format!("on_{open_id}"), "user_id": null},
                "name": name,
                "mentioned_type": if *open_id == BOT_OPEN_ID { "bot" } else { "user" },
                "tenant_key": "736588c9260f175d",
            })
        })
        .collect();
    let create = now_ms().to_string();
    json!({
        "schema": "2.0",
        "header": {
            "event_id": uuid::Uuid::new_v4().simple().to_string(),
            "token": "",
            "create_time": create,
            "event_type": "im.message.receive_v1",
            "tenant_key": "736588c9260f175d",
            "app_id": APP_ID,
        },
        "event": {
            "message": {
                "chat_id": chat_id,
                "chat_type": chat_type,
                "content": json!({"text": text}).to_string(),
                "create_time": create,
                "mentions": mentions,
                "message_id": new_message_id(),
                "message_type": "text",
                "update_time": create,
            },
            "sender": {
                "sender_id": {"open_id": sender_open_id, "union_id": format!("on_{sender_open_id}"), "user_id": null},
                "sender_type": "user",
                "tenant_key": "736588c9260f175d",
            },
        },
    })
}

/// A group message `@Ethan <text>` mentioning the bot.
pub fn group_mention(chat_id: &str, sender_open_id: &str, text: &str) -> Value {
    text_event(
        chat_id,
        "group",
        sender_open_id,
        &format!("@_user_1 {text}"),
        &[("@_user_1", BOT_OPEN_ID, BOT_NAME)],
    )
}

/// A p2p (DM) text message; the chat id is derived from the sender.
pub fn p2p_text(sender_open_id: &str, text: &str) -> Value {
    text_event(
        &format!("oc_p2p_{sender_open_id}"),
        "p2p",
        sender_open_id,
        text,
        &[],
    )
}

/// The `message_id` of an envelope built here.
pub fn message_id(envelope: &Value) -> String {
    envelope["event"]["message"]["message_id"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Set the message's (and header's) `create_time` to `secs_ago` seconds in the past.
pub fn aged(mut envelope: Value, secs_ago: i64) -> Value {
    let t = (now_ms() - secs_ago * 1000).to_string();
    envelope["header"]["create_time"] = json!(t);
    envelope["event"]["message"]["create_time"] = json!(t);
    envelope
}

/// A `card.action.trigger` envelope (schema 2.0; `create_time` in µs as Lark sends it).
pub fn card_action(value: Value, operator_open_id: &str, chat_id: &str) -> Value {
    json!({
        "schema": "2.0",
        "header": {
            "event_id": uuid::Uuid::new_v4().simple().to_string(),
            "token": "",
            "create_time": (now_ms() * 1000).to_string(),
            "event_type": "card.action.trigger",
            "tenant_key": "736588c9260f175d",
            "app_id": APP_ID,
        },
        "event": {
            "operator": {
                "tenant_key": "736588c9260f175d",
                "open_id": operator_open_id,
                "union_id": format!("on_{operator_open_id}"),
            },
            "token": "c-0123456789abcdef",
            "action": {"value": value, "tag": "button", "name": "Button_approve"},
            "host": "im_message",
            "context": {"open_message_id": new_message_id(), "open_chat_id": chat_id},
        },
    })
}

// ----- HTTP handling -----------------------------------------------------------------------

fn answer(status: u16, body: Value, headers: &[(String, String)]) -> Response {
    let mut resp = (
        StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
        Json(body),
    )
        .into_response();
    for (k, v) in headers {
        if let (Ok(name), Ok(value)) = (
            axum::http::HeaderName::from_bytes(k.as_bytes()),
            axum::http::HeaderValue::from_str(v),
        ) {
            resp.headers_mut().insert(name, value);
        }
    }
    resp
}

fn route_of(method: &Method, path: &str) -> &'static str {
    if let Some(route) = cardkit::route_of(method.as_str(), path) {
        return route;
    }
    let msg_path = path.strip_prefix("/open-apis/im/v1/messages");
    match (method.as_str(), path, msg_path) {
        ("POST", "/callback/ws/endpoint", _) => "endpoint",
        ("POST", "/open-apis/auth/v3/tenant_access_token/internal", _) => "token",
        ("GET", "/open-apis/bot/v3/info", _) => "bot_info",
        ("POST", _, Some(rest)) if rest.ends_with("/reply") => "reply",
        ("POST", _, Some("")) => "create",
        ("PATCH", _, Some(rest)) if rest.starts_with('/') => "patch",
        ("GET", _, Some(rest)) if rest.starts_with('/') => "get_message",
        _ => "unknown",
    }
}

async fn handle_http(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let path = uri.path().to_string();
    let query = uri.query().unwrap_or("").to_string();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let token = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::to_string);
    let route = route_of(&method, &path);
    if let Some(resp) = resource(&shared, &method, &path, &query, token.as_deref()) {
        return resp;
    }

    let (status, resp_body, resp_headers) = {
        let mut st = shared.lock();
        let nth = {
            let n = st.route_calls.entry(route.to_string()).or_insert(0);
            *n += 1;
            *n
        };
        let injected = match st.failures.get_mut(route).and_then(VecDeque::pop_front) {
            Some(f) => Some(f),
            None => st
                .scheduled
                .iter()
                .position(|f| f.0 == route && f.1 == nth)
                .map(|i| st.scheduled.remove(i).2),
        };
        let result = match injected {
            Some(f) => f,
            None => answer_route(
                &shared,
                &mut st,
                route,
                &path,
                &query,
                &body,
                token.as_deref(),
            ),
        };
        st.calls.push(LarkCall {
            method: method.to_string(),
            path: path.clone(),
            query: query.clone(),
            body: body.clone(),
            status: result.0,
            token: token.clone(),
        });
        result
    };
    hold_if_asked(&shared, route, &path, &body, &resp_body).await;
    answer(status, resp_body, &resp_headers)
}

/// `GET /open-apis/im/v1/messages/{message_id}/resources/{file_key}?type=image|file`: the
/// bytes (recorded as a call like any other), or `None` for another route.
fn resource(
    shared: &Shared,
    method: &Method,
    path: &str,
    query: &str,
    token: Option<&str>,
) -> Option<Response> {
    let rest = path.strip_prefix("/open-apis/im/v1/messages/")?;
    let (message_id, file_key) = rest.split_once("/resources/")?;
    if method != Method::GET {
        return None;
    }
    let kind = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("type="))
        .unwrap_or("");
    let mut st = shared.lock();
    let found = st
        .resources
        .get(&(message_id.to_string(), file_key.to_string()))
        .cloned();
    let (status, resp) = if !token.is_some_and(|t| st.valid_tokens.contains(t)) {
        (
            200,
            Json(json!({"code": 99991663, "msg": "Invalid access token"})).into_response(),
        )
    } else {
        match found {
            Some((k, bytes)) if k == kind => (200, (StatusCode::OK, bytes).into_response()),
            Some(_) => (
                400,
                (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"code": 234001, "msg": "Invalid request param."})),
                )
                    .into_response(),
            ),
            None => (
                400,
                (
                    StatusCode::BAD_REQUEST,
                    Json(json!({"code": 234003, "msg": "File not in msg."})),
                )
                    .into_response(),
            ),
        }
    };
    st.calls.push(LarkCall {
        method: method.to_string(),
        path: path.to_string(),
        query: query.to_string(),
        body: Value::Null,
        status,
        token: token.map(str::to_string),
    });
    Some(resp)
}

fn ok(body: Value) -> Answer {
    (200, body, Vec::new())
}

fn answer_route(
    shared: &Shared,
    st: &mut LarkState,
    route: &str,
    path: &str,
    query: &str,
    body: &Value,
    token: Option<&str>,
) -> Answer {
    match route {
        "endpoint" => {
            st.endpoint_calls += 1;
            if body["AppID"] != APP_ID || body["AppSecret"] != APP_SECRET {
                return ok(json!({"code": 1000040344, "msg": "invalid app credentials"}));
            }
            let n = st.next_ticket;
            st.next_ticket += 1;
            let ticket = format!("ticket-{n}");
            st.issued_tickets.insert(ticket.clone());
            let ws_addr = shared.ws_addr.lock().unwrap().expect("ws addr");
            let url = format!(
                "ws://{ws_addr}/ws/v2?fpid=493&aid=552564&device_id=dev-{n}&access_key=ak{n}&service_id={SERVICE_ID}&ticket={ticket}"
            );
            ok(
                json!({"code": 0, "msg": "ok", "data": {"URL": url, "ClientConfig": st.client_config}}),
            )
        }
        "token" => {
            if body["app_id"] != APP_ID || body["app_secret"] != APP_SECRET {
                return ok(json!({"code": 10014, "msg": "app secret invalid"}));
            }
            let t = format!("t-fake-{}", st.issued_tokens.len() + 1);
            st.issued_tokens.push(t.clone());
            st.valid_tokens.insert(t.clone());
            ok(json!({"code": 0, "msg": "ok", "tenant_access_token": t, "expire": 7200}))
        }
        _ if !token.is_some_and(|t| st.valid_tokens.contains(t)) => ok(json!({
            "code": 99991663,
            "msg": "Invalid access token for authorization. Please make a request with token attached."
        })),
        "bot_info" => ok(json!({
            "code": 0,
            "msg": "ok",
            "bot": {"activate_status": 2, "app_name": BOT_NAME, "avatar_url": "", "ip_white_list": [], "open_id": BOT_OPEN_ID}
        })),
        "reply" | "create" => {
            let uuid = body["uuid"].as_str().unwrap_or("").to_string();
            if let Some(existing) = st.uuids.get(&uuid).filter(|_| !uuid.is_empty()) {
                return ok(created(existing, body));
            }
            if route == "create" && !query.contains("receive_id_type=") {
                return ok(json!({"code": 230001, "msg": "receive_id_type is required"}));
            }
            let receive_id_type = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("receive_id_type="))
                .map(str::to_string);
            let receive_id = body["receive_id"].as_str().unwrap_or("");
            if route == "create"
                && receive_id_type.as_deref() == Some("open_id")
                && st.unreachable.contains(receive_id)
            {
                return ok(json!({"code": 230013,
                    "msg": "Bot has NO availability to this user."}));
            }
            let message_id = format!("om_bot_{}", st.next_message);
            st.next_message += 1;
            let content = body["content"]
                .as_str()
                .and_then(|c| serde_json::from_str(c).ok())
                .unwrap_or(Value::Null);
            let reply_to = (route == "reply").then(|| {
                path.trim_start_matches("/open-apis/im/v1/messages/")
                    .trim_end_matches("/reply")
                    .to_string()
            });
            let card_entity = (content["type"] == "card")
                .then(|| content["data"]["card_id"].as_str().map(str::to_string))
                .flatten();
            st.messages.push(SentMessage {
                card_entity,
                at: Instant::now(),
                kind: route.to_string(),
                reply_to,
                receive_id: body["receive_id"].as_str().map(str::to_string),
                receive_id_type,
                msg_type: body["msg_type"].as_str().unwrap_or("").to_string(),
                content,
                uuid: uuid.clone(),
                reply_in_thread: body["reply_in_thread"].as_bool().unwrap_or(false),
                message_id: message_id.clone(),
                token: token.unwrap_or("").to_string(),
            });
            if !uuid.is_empty() {
                st.uuids.insert(uuid, message_id.clone());
            }
            ok(created(&message_id, body))
        }
        "patch" => {
            let id = path
                .trim_start_matches("/open-apis/im/v1/messages/")
                .to_string();
            let content = body["content"]
                .as_str()
                .and_then(|c| serde_json::from_str(c).ok())
                .unwrap_or(Value::Null);
            st.patches.push((id, content));
            ok(json!({"code": 0, "msg": "success", "data": {}}))
        }
        "card_create" | "card_content" | "card_settings" => {
            let (status, body) = st.cardkit.answer(route, path, body);
            (status, body, Vec::new())
        }
        "get_message" => {
            let id = path.trim_start_matches("/open-apis/im/v1/messages/");
            let sender = if id.starts_with("om_bot_") {
                json!({"id": APP_ID, "id_type": "app_id", "sender_type": "app", "tenant_key": "736588c9260f175d"})
            } else {
                json!({"id": "ou_someone", "id_type": "open_id", "sender_type": "user", "tenant_key": "736588c9260f175d"})
            };
            ok(
                json!({"code": 0, "msg": "success", "data": {"items": [{"message_id": id, "sender": sender}]}}),
            )
        }
        _ => (
            404,
            json!({"code": 404, "msg": format!("FakeLark: unknown route {path}")}),
            Vec::new(),
        ),
    }
}

/// A message sending a CardKit card entity shows that card as it is now.
fn resolve_card(ck: &cardkit::CardKit, mut m: SentMessage) -> SentMessage {
    if let Some(card) = m
        .card_entity
        .as_deref()
        .and_then(|id| ck.cards.iter().find(|c| c.card_id == id))
    {
        m.content = card.current();
    }
    m
}

fn created(message_id: &str, req: &Value) -> Value {
    json!({
        "code": 0,
        "msg": "success",
        "data": {
            "message_id": message_id,
            "root_id": "",
            "parent_id": "",
            "msg_type": req["msg_type"],
            "create_time": now_ms().to_string(),
            "update_time": now_ms().to_string(),
            "deleted": false,
            "updated": false,
            "chat_id": req["receive_id"],
            "sender": {"id": APP_ID, "id_type": "app_id", "sender_type": "app", "tenant_key": "736588c9260f175d"},
            "body": {"content": req["content"]},
        }
    })
}

// ----- websocket handling ------------------------------------------------------------------

// The handshake callback's signature (with its large error type) is tungstenite's.
#[allow(clippy::result_large_err)]
async fn serve_ws(shared: Arc<Shared>, stream: tokio::net::TcpStream) {
    let check_shared = Arc::clone(&shared);
    let callback = move |req: &tungstenite::handshake::server::Request,
                         resp: tungstenite::handshake::server::Response|
          -> Result<
        tungstenite::handshake::server::Response,
        tungstenite::handshake::server::ErrorResponse,
    > {
        let uri = req.uri().to_string();
        let ticket = req
            .uri()
            .query()
            .unwrap_or("")
            .split('&')
            .find_map(|kv| kv.strip_prefix("ticket="))
            .unwrap_or("")
            .to_string();
        let mut st = check_shared.lock();
        let fresh = req.uri().path() == "/ws/v2"
            && st.issued_tickets.contains(&ticket)
            && st.used_tickets.insert(ticket);
        if fresh {
            Ok(resp)
        } else {
            st.refused_handshakes.push(uri);
            let mut err = tungstenite::handshake::server::ErrorResponse::new(Some(
                "ticket invalid or already used".to_string(),
            ));
            *err.status_mut() = tungstenite::http::StatusCode::FORBIDDEN;
            err.headers_mut()
                .insert("Handshake-Status", "514".parse().unwrap());
            err.headers_mut()
                .insert("Handshake-Autherrcode", "1000040347".parse().unwrap());
            Err(err)
        }
    };
    let Ok(ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else {
        return;
    };
    let (mut tx_ws, mut rx_ws) = ws.split();
    let (tx, mut rx) = mpsc::unbounded_channel::<WsCommand>();
    let conn_id = {
        let mut st = shared.lock();
        st.connections += 1;
        let id = st.connections;
        st.current = Some((id, tx.clone()));
        st.live.push((id, tx.clone()));
        id
    };
    loop {
        tokio::select! {
            cmd = rx.recv() => match cmd {
                Some(WsCommand::Send(bytes)) => {
                    if tx_ws.send(Message::Binary(bytes.into())).await.is_err() {
                        break;
                    }
                }
                Some(WsCommand::Drop) | None => break,
            },
            msg = rx_ws.next() => match msg {
                Some(Ok(Message::Binary(b))) => on_client_frame(&shared, &b, &tx),
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
        }
    }
    let mut st = shared.lock();
    if st.current.as_ref().is_some_and(|(id, _)| *id == conn_id) {
        st.current = None;
    }
    st.live.retain(|(id, _)| *id != conn_id);
    // Dropping the halves closes the TCP connection without a close frame.
}

fn on_client_frame(shared: &Shared, bytes: &[u8], tx: &mpsc::UnboundedSender<WsCommand>) {
    let Ok(f) = Frame::decode_bytes(bytes) else {
        return;
    };
    let mut st = shared.lock();
    if f.method == METHOD_CONTROL && f.frame_type() == "ping" {
        st.pings += 1;
        let pong = Frame {
            seq_id: 0,
            log_id: 0,
            service: f.service,
            method: METHOD_CONTROL,
            headers: vec![header("type", "pong")],
            payload_encoding: None,
            payload_type: None,
            payload: Some(st.client_config.to_string().into_bytes()),
            log_id_new: None,
        };
        let _ = tx.send(WsCommand::Send(pong.to_bytes()));
        return;
    }
    if f.method == METHOD_DATA {
        let parsed = frame::parse_ack_payload(f.payload_bytes());
        let latency = st.pushed_at.get(&f.seq_id).map(|t| t.elapsed());
        st.acks.push(Ack {
            seq_id: f.seq_id,
            headers: f
                .headers
                .iter()
                .map(|h| (h.key.clone(), h.value.clone()))
                .collect(),
            code: parsed.as_ref().map_or(-1, |p| p.code),
            data: parsed
                .and_then(|p| p.data)
                .and_then(|d| serde_json::from_slice(&d).ok()),
            latency,
            frame: f,
        });
    }
}

// ----- several clients at once (replicas) ---------------------------------------------------

impl FakeLark {
    /// The ids of the connections open now, oldest first (Lark delivers each event to one of an
    /// app's connections).
    pub fn live_connections(&self) -> Vec<usize> {
        self.shared.lock().live.iter().map(|(id, _)| *id).collect()
    }

    /// Wait until `n` connections are open at once; panics after `timeout`.
    pub async fn wait_live(&self, n: usize, timeout: Duration) -> Vec<usize> {
        let deadline = Instant::now() + timeout;
        loop {
            let live = self.live_connections();
            if live.len() >= n {
                return live;
            }
            if Instant::now() >= deadline {
                panic!(
                    "FakeLark: timed out after {timeout:?} waiting for {n} open connections (open: {live:?}).\n{}",
                    self.describe()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Push one event envelope on connection `conn` (an id from [`FakeLark::live_connections`]);
    /// `None` when that connection is closed.
    pub fn push_event_to(&self, conn: usize, envelope: &Value) -> Option<u64> {
        let id = format!("fake-frame-{}", self.next_seq());
        let f = self.data_frame("event", &id, 1, 0, envelope.to_string().into_bytes());
        let seq = f.seq_id;
        let bytes = f.to_bytes();
        let mut st = self.shared.lock();
        let (_, tx) = st.live.iter().find(|(c, _)| *c == conn)?;
        tx.send(WsCommand::Send(bytes)).ok()?;
        st.pushed_at.insert(seq, Instant::now());
        Some(seq)
    }

    /// A `card.action.trigger` on connection `conn` (see [`FakeLark::push_card_action`]).
    pub fn push_card_action_to(
        &self,
        conn: usize,
        value: Value,
        operator_open_id: &str,
        chat_id: &str,
    ) -> Option<u64> {
        self.push_event_to(conn, &card_action(value, operator_open_id, chat_id))
    }
}

// ----- long runs: pushing without a connection, reading incrementally -------------------------

impl FakeLark {
    /// Whether a websocket connection is current.
    pub fn is_connected(&self) -> bool {
        self.shared.lock().current.is_some()
    }

    /// Like [`FakeLark::push_event`], but `None` instead of a panic when no connection is
    /// current (e.g. just after [`FakeLark::drop_connection`]).
    pub fn try_push_event(&self, envelope: &Value) -> Option<u64> {
        let id = format!("fake-frame-{}", self.next_seq());
        let f = self.data_frame("event", &id, 1, 0, envelope.to_string().into_bytes());
        let seq = f.seq_id;
        let bytes = f.to_bytes();
        let mut st = self.shared.lock();
        let (_, tx) = st.current.as_ref()?;
        let _ = tx.send(WsCommand::Send(bytes));
        st.pushed_at.insert(seq, Instant::now());
        Some(seq)
    }

    /// Messages accepted after the first `*cursor` ones; moves `*cursor` to the end. Start
    /// with 0.
    pub fn messages_since(&self, cursor: &mut usize) -> Vec<SentMessage> {
        let st = self.shared.lock();
        let from = (*cursor).min(st.messages.len());
        *cursor = st.messages.len();
        st.messages[from..]
            .iter()
            .map(|m| resolve_card(&st.cardkit, m.clone()))
            .collect()
    }

    /// `(seq_id, code)` of the ACKs received after the first `*cursor` ones; moves `*cursor` to
    /// the end. Start with 0.
    pub fn acks_since(&self, cursor: &mut usize) -> Vec<(u64, i64)> {
        let st = self.shared.lock();
        let from = (*cursor).min(st.acks.len());
        *cursor = st.acks.len();
        st.acks[from..].iter().map(|a| (a.seq_id, a.code)).collect()
    }
}

// ----- held sends --------------------------------------------------------------------------

/// [`LarkCall::status`] of a reply or create whose answer is being held
/// ([`FakeLark::hold_sends`]); it becomes 200 if the answer is finally sent.
pub const HELD: u16 = 102;
/// Longest time a held request waits for [`FakeLark::release_held`].
pub const HOLD_MAX: Duration = Duration::from_secs(60);

impl FakeLark {
    /// While `on`, replies and creates are handled as usual (the message is shown, its `uuid`
    /// remembered) but the HTTP answer is withheld until [`FakeLark::release_held`] or
    /// [`HOLD_MAX`]: the bot cannot know the message arrived. Turning it off does not release
    /// requests already held.
    pub fn hold_sends(&self, on: bool) {
        self.shared.lock().hold_sends = on;
    }

    /// Answers every held request now (their status becomes 200).
    pub fn release_held(&self) {
        self.shared.lock().held_release.notify_waiters();
    }

    /// Reply and create requests (any outcome, held ones included), in order.
    pub fn send_requests(&self) -> Vec<LarkCall> {
        self.calls()
            .into_iter()
            .filter(|c| {
                c.method == "POST"
                    && c.path.starts_with("/open-apis/im/v1/messages")
                    && (c.path.ends_with("/reply") || c.path == "/open-apis/im/v1/messages")
            })
            .collect()
    }

    /// Wait until at least `n` reply/create requests arrived (held or not); panics after
    /// `timeout`.
    pub async fn wait_for_send_requests(&self, n: usize, timeout: Duration) -> Vec<LarkCall> {
        let deadline = Instant::now() + timeout;
        loop {
            let r = self.send_requests();
            if r.len() >= n {
                return r;
            }
            if Instant::now() >= deadline {
                panic!(
                    "FakeLark: timed out after {timeout:?} waiting for {n} send request(s), got {}.\n{}",
                    r.len(),
                    self.describe()
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// In hold mode, marks the accepted reply/create just recorded as [`HELD`] and waits for
/// [`FakeLark::release_held`] (at most [`HOLD_MAX`]). If the client goes away first, the server
/// drops this future and the call stays [`HELD`].
async fn hold_if_asked(shared: &Shared, route: &str, path: &str, body: &Value, resp: &Value) {
    if !matches!(route, "reply" | "create") || resp["code"] != 0 {
        return;
    }
    let (index, release) = {
        let mut st = shared.lock();
        if !st.hold_sends {
            return;
        }
        let Some(index) = st
            .calls
            .iter()
            .rposition(|c| c.status == 200 && c.path == path && &c.body == body)
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

// ----- fragments pushed one by one ---------------------------------------------------------

impl FakeLark {
    /// Push only fragments `which` of `envelope` split into `parts`, all under the frame
    /// `message_id` header `frame_id` (a retransmission reuses it); returns their SeqIDs.
    /// With `which` short of all parts, the message stays incomplete on this connection.
    pub fn push_event_fragments(
        &self,
        envelope: &Value,
        parts: usize,
        frame_id: &str,
        which: std::ops::Range<usize>,
    ) -> Vec<u64> {
        let bytes = envelope.to_string().into_bytes();
        let size = bytes.len().div_ceil(parts.max(1));
        bytes
            .chunks(size)
            .enumerate()
            .filter(|(i, _)| which.contains(i))
            .map(|(i, chunk)| {
                let f = self.data_frame("event", frame_id, parts, i, chunk.to_vec());
                self.push_frame(f)
            })
            .collect()
    }
}
