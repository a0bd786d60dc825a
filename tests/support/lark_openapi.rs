//! A small fake of the Lark Open API routes the Lark tools use (calendar, chat history, chat
//! members, send, user-token refresh), separate from [`super::lark::FakeLark`] so that file is
//! left alone. Include with `#[path = "support/lark_openapi.rs"] mod lark_openapi;`.
//!
//! - `POST /open-apis/auth/v3/tenant_access_token/internal` → `t-bot`.
//! - `POST /open-apis/authen/v2/oauth/token` (refresh) → `u-fresh-N`.
//! - `POST /open-apis/calendar/v4/calendars/primary` → `cal_primary` (`cal_user` for a user).
//! - `GET  …/events/instance_view` → the events whose start lies in `[start_time, end_time)`;
//!   code 193103 when the window is over 40 days.
//! - `GET  /open-apis/im/v1/messages` → the scripted messages, `page_size` per page with
//!   `page_token` = the next index.
//! - `GET  /open-apis/im/v1/chats/{id}/members` → the scripted members.
//! - `POST /open-apis/im/v1/messages` → `om_sent_N`.
//!
//! `fail(path_prefix, code, msg)` answers the next matching call with that code. Every request
//! is recorded with its method, path, query, Authorization and body.

#![allow(dead_code)]

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::IntoResponse;
use axum::{Json, Router};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub path: String,
    pub query: HashMap<String, String>,
    pub auth: String,
    pub body: Value,
}

#[derive(Default)]
struct State0 {
    calls: Vec<Call>,
    events: Vec<Value>,
    messages: Vec<Value>,
    members: Vec<Value>,
    failures: Vec<(String, i64, String)>,
    refreshes: usize,
    sent: usize,
    /// User tokens the fake accepts (others get 99991677).
    valid_user_tokens: Vec<String>,
}

type Shared = Arc<Mutex<State0>>;

pub struct FakeOpenApi {
    state: Shared,
    addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeOpenApi {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeOpenApi {
    pub async fn start() -> Self {
        let state: Shared = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let app = Router::new().fallback(handle).with_state(state.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Self { state, addr, task }
    }
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn set_events(&self, events: Vec<Value>) {
        self.state.lock().unwrap().events = events;
    }
    pub fn set_messages(&self, messages: Vec<Value>) {
        self.state.lock().unwrap().messages = messages;
    }
    pub fn set_members(&self, members: Vec<Value>) {
        self.state.lock().unwrap().members = members;
    }
    pub fn accept_user_token(&self, t: &str) {
        self.state
            .lock()
            .unwrap()
            .valid_user_tokens
            .push(t.to_string());
    }
    pub fn fail(&self, path_prefix: &str, code: i64, msg: &str) {
        self.state
            .lock()
            .unwrap()
            .failures
            .push((path_prefix.into(), code, msg.into()));
    }
    pub fn calls(&self) -> Vec<Call> {
        self.state.lock().unwrap().calls.clone()
    }
    pub fn calls_to(&self, needle: &str) -> Vec<Call> {
        self.calls()
            .into_iter()
            .filter(|c| c.path.contains(needle))
            .collect()
    }
    pub fn refreshes(&self) -> usize {
        self.state.lock().unwrap().refreshes
    }
}

fn ok(data: Value) -> axum::response::Response {
    Json(json!({"code": 0, "msg": "success", "data": data})).into_response()
}

async fn handle(
    State(state): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> axum::response::Response {
    let path = uri.path().to_string();
    let query: HashMap<String, String> = uri
        .query()
        .map(|q| {
            url_pairs(q)
                .into_iter()
                .collect::<HashMap<String, String>>()
        })
        .unwrap_or_default();
    let auth = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .trim_start_matches("Bearer ")
        .to_string();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut st = state.lock().unwrap();
    st.calls.push(Call {
        method: method.to_string(),
        path: path.clone(),
        query: query.clone(),
        auth: auth.clone(),
        body: body.clone(),
    });
    if path == "/open-apis/auth/v3/tenant_access_token/internal" {
        return Json(json!({"code": 0, "tenant_access_token": "t-bot", "expire": 7200}))
            .into_response();
    }
    if path == "/open-apis/authen/v2/oauth/token" {
        st.refreshes += 1;
        let n = st.refreshes;
        let t = format!("u-fresh-{n}");
        st.valid_user_tokens.push(t.clone());
        return Json(json!({
            "code": 0, "access_token": t, "expires_in": 7200,
            "refresh_token": format!("r-fresh-{n}"), "token_type": "Bearer"
        }))
        .into_response();
    }
    if let Some(i) = st.failures.iter().position(|(p, _, _)| path.starts_with(p)) {
        let (_, code, msg) = st.failures.remove(i);
        return (
            axum::http::StatusCode::BAD_REQUEST,
            Json(json!({"code": code, "msg": msg})),
        )
            .into_response();
    }
    let as_user = auth.starts_with("u-");
    if as_user && !st.valid_user_tokens.contains(&auth) {
        return Json(json!({"code": 99991677, "msg": "user access token expired"})).into_response();
    }
    if !as_user && auth != "t-bot" {
        return Json(json!({"code": 99991663, "msg": "invalid tenant token"})).into_response();
    }
    let q = |k: &str| query.get(k).cloned().unwrap_or_default();
    match (method.as_str(), path.as_str()) {
        ("POST", "/open-apis/calendar/v4/calendars/primary") => {
            let id = if as_user { "cal_user" } else { "cal_primary" };
            ok(json!({"calendars": [{"calendar": {"calendar_id": id, "summary": "Primary"}}]}))
        }
        ("GET", p) if p.ends_with("/events/instance_view") => {
            let s: i64 = q("start_time").parse().unwrap_or(0);
            let e: i64 = q("end_time").parse().unwrap_or(0);
            if e - s > 40 * 86_400 {
                return Json(json!({"code": 193103, "msg": "time range exceeds 40 days"}))
                    .into_response();
            }
            let items: Vec<Value> = st
                .events
                .iter()
                .filter(|ev| {
                    let t: i64 = ev
                        .pointer("/start_time/timestamp")
                        .and_then(Value::as_str)
                        .and_then(|s| s.parse().ok())
                        .unwrap_or(0);
                    t >= s && t < e
                })
                .cloned()
                .collect();
            ok(json!({"items": items}))
        }
        ("GET", "/open-apis/im/v1/messages") => {
            let size: usize = q("page_size").parse().unwrap_or(20);
            let from: usize = q("page_token").parse().unwrap_or(0);
            let all = &st.messages;
            let page: Vec<Value> = all.iter().skip(from).take(size).cloned().collect();
            let next = from + page.len();
            let more = next < all.len();
            ok(json!({
                "items": page,
                "has_more": more,
                "page_token": if more { next.to_string() } else { String::new() },
            }))
        }
        ("GET", p) if p.starts_with("/open-apis/im/v1/chats/") && p.ends_with("/members") => {
            ok(json!({"items": st.members.clone(), "has_more": false, "page_token": ""}))
        }
        ("POST", "/open-apis/im/v1/messages") => {
            st.sent += 1;
            ok(json!({"message_id": format!("om_sent_{}", st.sent), "chat_id": body["receive_id"]}))
        }
        _ => (
            axum::http::StatusCode::NOT_FOUND,
            Json(json!({"code": 404, "msg": format!("no route {method} {path}")})),
        )
            .into_response(),
    }
}

fn url_pairs(q: &str) -> Vec<(String, String)> {
    reqwest::Url::parse(&format!("http://x/?{q}"))
        .expect("query")
        .query_pairs()
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect()
}
