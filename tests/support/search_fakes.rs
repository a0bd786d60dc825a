//! Loopback fakes for the web tools' tests: the three search providers and a small web site.
//!
//! - [`FakeProvider`]: one search provider on `127.0.0.1:0` — DuckDuckGo's HTML endpoint
//!   (`GET /html/?q=`), Tavily (`POST /search`, `Authorization: Bearer <key>`) or SearXNG
//!   (`GET /search?q=&format=json`). Its [`Behaviour`] can be switched at any time (answer,
//!   fail with a status, SearXNG without the JSON format, DuckDuckGo CAPTCHA page); every request
//!   is counted. Result titles name the provider and the query (`DuckDuckGo result 1 for rust`).
//! - [`FakeSite`]: pages for `web_fetch` — an HTML article, plain text, a PNG, GBK and
//!   ISO-8859-1 pages, an unlabelled binary, a big body, 404, and `/redirect?to=<url>` (302).
//!   The paths requested are recorded, so a test can show a refused target was never reached.
//! - [`tool_ctx`]: a `ToolContext` for calling a tool directly.

#![allow(dead_code)]

use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use ethan::tools::ToolContext;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tokio::task::JoinHandle;

/// Which provider a [`FakeProvider`] imitates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    DuckDuckGo,
    Tavily,
    SearXng,
}

/// How a [`FakeProvider`] answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Behaviour {
    /// Two results (per query).
    Answer,
    /// An empty result list.
    Empty,
    /// This HTTP status with a provider-like error body.
    Fail(u16),
    /// DuckDuckGo: the CAPTCHA ("anomaly") page with HTTP 202.
    Captcha,
}

/// The API key the Tavily fake accepts.
pub const TAVILY_KEY: &str = "tvly-test-key";

struct ProviderState {
    kind: Kind,
    behaviour: Mutex<Behaviour>,
    hits: AtomicUsize,
    queries: Mutex<Vec<String>>,
}

/// A fake search provider.
pub struct FakeProvider {
    pub addr: SocketAddr,
    state: Arc<ProviderState>,
    task: JoinHandle<()>,
}

impl Drop for FakeProvider {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn name(kind: Kind) -> &'static str {
    match kind {
        Kind::DuckDuckGo => "DuckDuckGo",
        Kind::Tavily => "Tavily",
        Kind::SearXng => "SearXNG",
    }
}

fn results(kind: Kind, q: &str) -> Vec<(String, String, String)> {
    (1..=2)
        .map(|i| {
            (
                format!("{} result {i} for {q}", name(kind)),
                format!("https://example.com/{}/{i}", name(kind).to_lowercase()),
                format!("Snippet {i} about {q}."),
            )
        })
        .collect()
}

fn ddg_page(q: &str, hits: &[(String, String, String)]) -> String {
    let mut body = String::from(
        r#"<!DOCTYPE html><html><head><title>DuckDuckGo</title></head><body><div id="links" class="results">
        <div class="result results_links results_links_deep result--ad"><div class="links_main">
        <h2 class="result__title"><a class="result__a" href="https://duckduckgo.com/y.js?ad_domain=ads.example">An ad</a></h2>
        <a class="result__snippet" href="https://duckduckgo.com/y.js">Buy things</a></div></div>"#,
    );
    for (t, u, s) in hits {
        let enc: String = url_encode(u);
        body.push_str(&format!(
            r#"<div class="result results_links results_links_deep web-result"><div class="links_main links_deep result__body">
            <h2 class="result__title"><a rel="nofollow" class="result__a" href="//duckduckgo.com/l/?uddg={enc}&amp;rut=abc">{t}</a></h2>
            <div class="result__extras"><a class="result__url" href="//duckduckgo.com/l/?uddg={enc}">{u}</a></div>
            <a class="result__snippet" href="//duckduckgo.com/l/?uddg={enc}">{s}</a></div></div>"#
        ));
    }
    if hits.is_empty() {
        body.push_str(
            r#"<div class="result results_links results_links_deep result--no-result"><div class="no-results">No results.</div></div>"#,
        );
    }
    body.push_str(&format!(
        "</div><form><input name=\"q\" value=\"{q}\"></form></body></html>"
    ));
    body
}

fn url_encode(s: &str) -> String {
    s.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

async fn provider_handler(
    State(st): State<Arc<ProviderState>>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Option<Json<Value>>,
) -> Response {
    st.hits.fetch_add(1, Ordering::SeqCst);
    let q = match st.kind {
        Kind::Tavily => body
            .as_ref()
            .and_then(|b| b.get("query"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        _ => params.get("q").cloned().unwrap_or_default(),
    };
    if let Ok(mut qs) = st.queries.lock() {
        qs.push(q.clone());
    }
    let behaviour = st
        .behaviour
        .lock()
        .map(|b| b.clone())
        .unwrap_or(Behaviour::Answer);
    let hits = match behaviour {
        Behaviour::Answer => results(st.kind, &q),
        Behaviour::Empty => Vec::new(),
        Behaviour::Fail(code) => {
            let status = StatusCode::from_u16(code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let body = match st.kind {
                Kind::Tavily => json!({"detail": {"error": "Something went wrong"}}).to_string(),
                Kind::SearXng if code == 403 => "<html><body>403 Forbidden</body></html>".into(),
                _ => "error".into(),
            };
            return (status, body).into_response();
        }
        Behaviour::Captcha => {
            return (
                StatusCode::ACCEPTED,
                [(header::CONTENT_TYPE, "text/html")],
                r#"<html><body><div class="anomaly-modal__modal"><form id="challenge-form" action="//duckduckgo.com/anomaly.js?sv=html"></form></div></body></html>"#,
            )
                .into_response();
        }
    };
    match st.kind {
        Kind::DuckDuckGo => (
            [(header::CONTENT_TYPE, "text/html; charset=UTF-8")],
            ddg_page(&q, &hits),
        )
            .into_response(),
        Kind::Tavily => {
            let auth = headers
                .get(header::AUTHORIZATION)
                .and_then(|v| v.to_str().ok())
                .unwrap_or("");
            if auth != format!("Bearer {TAVILY_KEY}") {
                return (
                    StatusCode::UNAUTHORIZED,
                    Json(json!({"detail": {"error": "Unauthorized: missing or invalid API key."}})),
                )
                    .into_response();
            }
            let max = body
                .as_ref()
                .and_then(|b| b.get("max_results"))
                .and_then(Value::as_u64)
                .unwrap_or(5) as usize;
            let results: Vec<Value> = hits
                .iter()
                .take(max)
                .map(|(t, u, s)| json!({"title": t, "url": u, "content": s, "score": 0.9}))
                .collect();
            Json(json!({"query": q, "answer": null, "images": [], "results": results, "response_time": 0.5}))
                .into_response()
        }
        Kind::SearXng => {
            if params.get("format").map(String::as_str) != Some("json") {
                return (StatusCode::FORBIDDEN, "format not allowed").into_response();
            }
            let results: Vec<Value> = hits
                .iter()
                .map(|(t, u, s)| json!({"title": t, "url": u, "content": s, "engine": "fake", "score": 1.0}))
                .collect();
            Json(json!({"query": q, "number_of_results": results.len(), "results": results, "answers": [], "suggestions": []}))
                .into_response()
        }
    }
}

impl FakeProvider {
    pub async fn start(kind: Kind) -> FakeProvider {
        let state = Arc::new(ProviderState {
            kind,
            behaviour: Mutex::new(Behaviour::Answer),
            hits: AtomicUsize::new(0),
            queries: Mutex::new(Vec::new()),
        });
        let app = match kind {
            Kind::DuckDuckGo => Router::new().route("/html/", get(provider_handler)),
            Kind::Tavily => Router::new().route("/search", post(provider_handler)),
            Kind::SearXng => Router::new().route("/search", get(provider_handler)),
        }
        .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeProvider { addr, state, task }
    }

    /// `http://127.0.0.1:<port>`, for `tools.web_search.<provider>.base_url`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn set(&self, b: Behaviour) {
        if let Ok(mut cur) = self.state.behaviour.lock() {
            *cur = b;
        }
    }

    /// Requests received so far.
    pub fn hits(&self) -> usize {
        self.state.hits.load(Ordering::SeqCst)
    }

    pub fn queries(&self) -> Vec<String> {
        self.state
            .queries
            .lock()
            .map(|q| q.clone())
            .unwrap_or_default()
    }
}

/// A small web site for `web_fetch`.
pub struct FakeSite {
    pub addr: SocketAddr,
    requested: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl Drop for FakeSite {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The article served at `/article.html`.
pub const ARTICLE_HTML: &str = r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Otters of the Northern Coast</title>
<style>body { font-family: serif }</style>
<script>window.tracking = "do not show this";</script></head>
<body>
<nav><a href="/">Home</a> | <a href="/about">About</a> | <a href="/contact">Contact</a></nav>
<article>
<h1>Otters of the Northern Coast</h1>
<p>Sea otters spend most of their lives in the water, where they eat, sleep and raise their
young. They keep warm with the densest fur of any animal rather than with a layer of blubber,
and they groom it for hours every day so that it traps air.</p>
<p>Along the northern coast the population has grown steadily since the hunting ban. Kelp
forests recover where otters return, because the otters eat the sea urchins that would
otherwise graze the kelp down to bare rock.</p>
<p>Researchers count the animals from the cliffs every spring. The latest survey found more
than two thousand otters, the highest number since counting began.</p>
</article>
<footer>Copyright 2024 Coastal Trust</footer>
</body></html>"#;

/// The text served at `/notes.txt`.
pub const PLAIN_TEXT: &str = "line one\n  <b>not html</b>\nline three\n";

async fn site_handler(
    State(requested): State<Arc<Mutex<Vec<String>>>>,
    uri: Uri,
    Query(params): Query<HashMap<String, String>>,
) -> Response {
    if let Ok(mut r) = requested.lock() {
        r.push(uri.path().to_string());
    }
    match uri.path() {
        "/article.html" => (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            ARTICLE_HTML,
        )
            .into_response(),
        "/notes.txt" => ([(header::CONTENT_TYPE, "text/plain")], PLAIN_TEXT).into_response(),
        "/data.json" => (
            [(header::CONTENT_TYPE, "application/json")],
            r#"{"a": [1, 2, 3]}"#,
        )
            .into_response(),
        "/image.png" => (
            [(header::CONTENT_TYPE, "image/png")],
            b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01".to_vec(),
        )
            .into_response(),
        "/blob" => (
            [(header::CONTENT_TYPE, "application/octet-stream")],
            b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0".to_vec(),
        )
            .into_response(),
        "/gbk.html" => {
            // Declared in a <meta> only; the header has no charset.
            let html = "<html><head><meta http-equiv=\"Content-Type\" content=\"text/html; charset=gbk\"><title>中文标题</title></head><body><article><p>这是一个用 GBK 编码的网页。它的内容应该被正确解码，而不是变成乱码。这一段文字足够长，可以被当作正文。</p><p>第二段：编码检测来自 meta 标签。</p></article></body></html>";
            let (bytes, _, _) = encoding_rs::GBK.encode(html);
            ([(header::CONTENT_TYPE, "text/html")], bytes.into_owned()).into_response()
        }
        "/latin1.txt" => {
            let (bytes, _, _) = encoding_rs::WINDOWS_1252.encode("Crème brûlée à la française\n");
            (
                [(header::CONTENT_TYPE, "text/plain; charset=ISO-8859-1")],
                bytes.into_owned(),
            )
                .into_response()
        }
        "/big.txt" => (
            [(header::CONTENT_TYPE, "text/plain")],
            "0123456789".repeat(10_000),
        )
            .into_response(),
        "/redirect" => {
            let to = params.get("to").cloned().unwrap_or_else(|| "/".into());
            (StatusCode::FOUND, [(header::LOCATION, to)], "").into_response()
        }
        "/loop" => (StatusCode::FOUND, [(header::LOCATION, "/loop")], "").into_response(),
        "/secret" => ([(header::CONTENT_TYPE, "text/plain")], "internal secret").into_response(),
        _ => (StatusCode::NOT_FOUND, "not found").into_response(),
    }
}

impl FakeSite {
    pub async fn start() -> FakeSite {
        let requested = Arc::new(Mutex::new(Vec::new()));
        let app = Router::new()
            .fallback(site_handler)
            .with_state(requested.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeSite {
            addr,
            requested,
            task,
        }
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:<port><path>`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Paths requested so far.
    pub fn requested(&self) -> Vec<String> {
        self.requested.lock().map(|r| r.clone()).unwrap_or_default()
    }
}

/// A context for calling a tool directly, working in `dir`.
pub fn tool_ctx(dir: &Path) -> ToolContext {
    ToolContext {
        trace_id: "t".into(),
        session_key: "terminal:test".into(),
        ..ToolContext::local(dir.to_path_buf())
    }
}
