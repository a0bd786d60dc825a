//! The browser's one way out, from the attacker's side, on a real headless Chromium (Debian's
//! `chromium`), against pages served on loopback from `tests/fixtures/browser/`:
//! - a page that tries every way out it has (WebSocket from the page and from a worker, a popup,
//!   a SharedWorker's `fetch`, a service worker, an iframe, `<link rel=preconnect>`,
//!   `dns-prefetch`, `prefetch` and `preload`, an image, a beacon, `fetch`, `EventSource`,
//!   WebRTC) toward a loopback port that `allow_private` does not list: a TCP listener there
//!   accepts no connection at all — accepts are counted, not requests — and a UDP socket on the
//!   same port gets no datagram, while the page's own allowed resources load and each way out is
//!   reported refused;
//! - a page that patches `String.prototype.includes`, `indexOf`, `trim`, `querySelector` and the
//!   `innerText` getter learns nothing of what `wait` looks for, and `read` returns the page's
//!   real text and labels;
//! - through the daemon, after a private read, `wait` and `type` with the private text ask the
//!   owner, and once refused the page's server receives nothing of it; `read` still works.

use super::browser::browser_or_skip;
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use axum::extract::{OriginalUri, State};
use axum::response::{Html, IntoResponse};
use axum::routing::get;
use ethan::config::BrowserConfig;
use ethan::egress::{EgressGuard, SystemLookup};
use ethan::tools::builtin::browser::hub::BrowserHub;
use ethan::tools::builtin::browser::page::BrowserPage;
use ethan::tools::{ErrorKind, Tool, ToolContext, ToolResult};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OWNER: i64 = 218485655;
const CALL_LIMIT: Duration = Duration::from_secs(60);
const WAIT: Duration = Duration::from_secs(90);
/// The private text: no credential shape, so approvals show it in full.
const PRIVATE: &str = "OWNERPLAN-7731 merge with Acme in May";

/// A TCP listener on `127.0.0.2` that counts the connections it accepts (and closes them),
/// and a UDP socket on the same port that counts the datagrams it gets (WebRTC, QUIC).
struct Counter {
    addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    datagrams: Arc<AtomicUsize>,
}

impl Counter {
    async fn start() -> Counter {
        let l = tokio::net::TcpListener::bind("127.0.0.2:0")
            .await
            .expect("bind 127.0.0.2 (loopback)");
        let addr = l.local_addr().unwrap();
        let accepts = Arc::new(AtomicUsize::new(0));
        let n = accepts.clone();
        tokio::spawn(async move {
            while let Ok((s, _)) = l.accept().await {
                n.fetch_add(1, Ordering::SeqCst);
                drop(s);
            }
        });
        let udp = tokio::net::UdpSocket::bind(addr)
            .await
            .expect("bind UDP on the same port");
        let datagrams = Arc::new(AtomicUsize::new(0));
        let d = datagrams.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while udp.recv_from(&mut buf).await.is_ok() {
                d.fetch_add(1, Ordering::SeqCst);
            }
        });
        Counter {
            addr,
            accepts,
            datagrams,
        }
    }

    fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }
}

/// The allowed site (`127.0.0.1`, in `allow_private`): the fixture pages with `{{REFUSED}}`
/// filled in, the worker scripts, `/ok.png`, `/ok.json`, `/leak` — and every request it got.
struct Site {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    /// `/swap` answers `now` once set.
    swap: Arc<std::sync::atomic::AtomicBool>,
}

const WORKER_JS: &str = "try { new WebSocket('ws://{{REFUSED}}/worker-ws'); } catch (e) {}\n\
    fetch('http://{{REFUSED}}/worker-fetch', {mode: 'no-cors'}).catch(() => {});\n\
    postMessage('worker ran');\n";
const SHARED_JS: &str = "onconnect = e => {\n\
    fetch('http://{{REFUSED}}/shared-fetch', {mode: 'no-cors'}).catch(() => {});\n\
    e.ports[0].postMessage('shared worker ran');\n};\n";
const SW_JS: &str = "self.addEventListener('install', e => e.waitUntil(\n\
    fetch('http://{{REFUSED}}/sw-install', {mode: 'no-cors'}).catch(() => {})));\n\
    self.addEventListener('activate', () => {\n\
    fetch('http://{{REFUSED}}/sw-activate', {mode: 'no-cors'}).catch(() => {}); });\n";
/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

impl Site {
    async fn start(refused: SocketAddr) -> Site {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/browser");
        let fill = move |s: &str| s.replace("{{REFUSED}}", &refused.to_string());
        let page = |name: &str| {
            let text = fill(&std::fs::read_to_string(fixtures.join(name)).unwrap());
            move || async move { Html(text) }
        };
        let script = |name: &'static str, body: &str| {
            let body = fill(body);
            let seen = seen.clone();
            move || async move {
                seen.lock().unwrap().push(format!("/{name}"));
                ([("content-type", "text/javascript")], body)
            }
        };
        async fn record(
            State(seen): State<Arc<Mutex<Vec<String>>>>,
            OriginalUri(uri): OriginalUri,
            body: String,
        ) -> axum::response::Response {
            seen.lock().unwrap().push(format!("{uri} {body}"));
            match uri.path() {
                "/ok.png" => ([("content-type", "image/png")], PNG).into_response(),
                "/ok.json" => {
                    ([("content-type", "application/json")], r#"{"ok": true}"#).into_response()
                }
                _ => "".into_response(),
            }
        }
        let swap = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let flag = swap.clone();
        let app = axum::Router::new()
            .route(
                "/swap",
                get(move || {
                    let now = flag.load(Ordering::SeqCst);
                    async move {
                        if now {
                            "now"
                        } else {
                            "not yet"
                        }
                    }
                }),
            )
            .route("/egress.html", get(page("egress.html")))
            .route("/hostile.html", get(page("hostile.html")))
            .route("/worker.js", get(script("worker.js", WORKER_JS)))
            .route("/shared.js", get(script("shared.js", SHARED_JS)))
            .route("/sw.js", get(script("sw.js", SW_JS)))
            .fallback(record)
            .with_state(seen.clone());
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(l, app).await;
        });
        Site { addr, seen, swap }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn hub() -> Arc<BrowserHub> {
    let hub = BrowserHub::new(
        BrowserConfig {
            executable: String::new(),
            idle_secs: 300,
        },
        EgressGuard::new(&["127.0.0.1".to_string()], Arc::new(SystemLookup)),
    );
    hub.set_page_reader(Arc::new(ethan::media::page::ChildPages::alone()));
    hub
}

fn ctx(home: &std::path::Path) -> ToolContext {
    ToolContext {
        session_key: "terminal:browser-egress".into(),
        ethan_home: Some(home.to_path_buf()),
        ..ToolContext::local(home.to_path_buf())
    }
}

async fn call(tool: &dyn Tool, ctx: &ToolContext, args: Value) -> ToolResult {
    tokio::time::timeout(CALL_LIMIT, tool.run(args, ctx))
        .await
        .expect("browser call finished in time")
        .into()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_way_out_of_a_page_reaches_a_refused_port_while_its_own_resources_load() {
    if !browser_or_skip("no_way_out_of_a_page_reaches_a_refused_port_while_its_own_resources_load")
    {
        return;
    }
    let refused = Counter::start().await;
    let site = Site::start(refused.addr).await;
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let hub = hub();
    let page = BrowserPage(hub.clone());

    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": site.url("/egress.html")}),
    )
    .await;
    assert!(r.ok, "{r:?}");
    let w = call(
        &page,
        &ctx,
        json!({"action": "wait", "text": "all attempts made", "ms": 15000}),
    )
    .await;
    assert!(w.ok, "{w:?}");
    // Time for late attempts (the service worker's activation, the popup, ICE gathering).
    tokio::time::sleep(Duration::from_secs(2)).await;
    let read = call(&page, &ctx, json!({"action": "read"})).await;
    assert!(read.ok, "{read:?}");
    let text = format!("{}\n{}", r.output, read.output);

    assert_eq!(
        refused.accepts(),
        0,
        "a connection reached the refused port; the page said:\n{text}"
    );
    // The page's own resources, from the allowed site, loaded.
    let seen = site.seen();
    assert!(
        seen.iter().any(|s| s.starts_with("/ok.png")),
        "the allowed image was not fetched: {seen:?}"
    );
    for ran in [
        "allowed fetch true",
        "worker ran",
        "shared worker ran",
        "service worker registered",
    ] {
        assert!(read.output.contains(ran), "{ran}: {}", read.output);
    }
    // Each way out was tried, reached the proxy, and was refused there: the page's requests,
    // the popup's, the workers' and the service worker's, and the tunnels (https, WebSockets).
    for way in [
        "/pixel.png",
        "/preload.png",
        "/prefetch",
        "/frame",
        "/beacon",
        "/fetch",
        "/events",
        "/popup",
        "/worker-fetch",
        "/shared-fetch",
        "/sw-install",
    ] {
        let refused_way = format!("http://{}{way}: ", refused.addr);
        assert!(
            text.contains(&refused_way),
            "{way} was not refused:\n{text}"
        );
    }
    assert!(
        text.matches("(a tunnel for https or a WebSocket)").count() >= 3,
        "{text}"
    );
    // What the guard refused is reported, with the destination and the reason.
    assert!(
        text.contains("refused by the egress guard")
            && text.contains(&refused.addr.to_string())
            && text.contains("loopback"),
        "{text}"
    );
    assert_eq!(refused.accepts(), 0);
    assert_eq!(
        refused.datagrams.load(Ordering::SeqCst),
        0,
        "a datagram reached the refused port (WebRTC or QUIC around the proxy)"
    );
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_page_that_patches_its_javascript_learns_nothing_and_read_gets_the_real_text() {
    if !browser_or_skip(
        "a_page_that_patches_its_javascript_learns_nothing_and_read_gets_the_real_text",
    ) {
        return;
    }
    let refused = Counter::start().await;
    let site = Site::start(refused.addr).await;
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path());
    let hub = hub();
    let page = BrowserPage(hub.clone());

    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": site.url("/hostile.html")}),
    )
    .await;
    assert!(r.ok, "{r:?}");
    // The real text and labels, not what the patched getters say.
    for out in [
        &r.output,
        &call(&page, &ctx, json!({"action": "read"})).await.output,
    ] {
        assert!(
            out.contains("The real text of this page is: tangerine"),
            "{out}"
        );
        assert!(out.contains("input text \"Card number\""), "{out}");
        assert!(out.contains("button \"Pay now\""), "{out}");
        assert!(!out.contains("Nothing to see here"), "{out}");
    }
    // `wait` finds text that is there, and looks for the private text without the page seeing it.
    let found = call(&page, &ctx, json!({"action": "wait", "text": "tangerine"})).await;
    assert!(found.ok, "{found:?}");
    let missing = call(
        &page,
        &ctx,
        json!({"action": "wait", "text": PRIVATE, "ms": 800}),
    )
    .await;
    assert_eq!(missing.error_kind, Some(ErrorKind::Timeout), "{missing:?}");
    // Typing goes to the field the read named (the page's patched querySelectorAll lies).
    let typed = call(
        &page,
        &ctx,
        json!({"action": "type", "element": 1, "text": "4111 1111"}),
    )
    .await;
    assert!(typed.ok, "{typed:?}");
    // The page relabels a button after it was read: a click on it is refused, since the owner
    // would have approved what the read showed.
    site.swap.store(true, Ordering::SeqCst);
    let w = call(
        &page,
        &ctx,
        json!({"action": "wait", "text": "label swapped"}),
    )
    .await;
    assert!(w.ok, "{w:?}");
    let clicked = call(&page, &ctx, json!({"action": "click", "element": 3})).await;
    assert_eq!(
        clicked.error_kind,
        Some(ErrorKind::Validation),
        "{clicked:?}"
    );
    assert!(
        clicked
            .error
            .as_deref()
            .unwrap_or("")
            .contains("changed since the last read"),
        "{clicked:?}"
    );

    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = site.seen();
    assert!(
        seen.iter().any(|s| s.starts_with("/typed?v=4111%201111")),
        "the text did not land in the card field: {seen:?}"
    );
    // The channel works: the page's own call reached its server.
    assert!(
        seen.iter().any(|s| s.contains("control-probe")),
        "the page's leak channel did not work: {seen:?}"
    );
    let encoded: String = url_encoded(PRIVATE);
    for s in &seen {
        assert!(
            !s.contains("tangerine") && !s.contains(&encoded) && !s.contains("OWNERPLAN"),
            "the page learned what the tools looked for: {s}"
        );
        assert!(
            !s.contains("ethan") && !s.contains("data-ethan"),
            "the page saw the tools' own names: {s}"
        );
    }
    hub.shutdown().await;
}

fn url_encoded(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Through the daemon: a tainted session hands nothing to a page without the owner's yes.

/// Approval requests the bot posted: (chat, text, buttons).
fn approvals(tg: &FakeTelegram) -> Vec<(i64, String, Vec<String>)> {
    tg.sent_messages()
        .iter()
        .filter_map(|m| {
            let row = m["reply_markup"]["inline_keyboard"][0].as_array()?;
            Some((
                m["chat_id"].as_i64().unwrap_or_default(),
                m["text"].as_str().unwrap_or_default().to_string(),
                row.iter()
                    .filter_map(|b| b["callback_data"].as_str().map(str::to_string))
                    .collect(),
            ))
        })
        .collect()
}

/// Answer each approval with the button `choose(text)` picks (`ap:o:`, `ap:s:` or `ap:d:`)
/// until a sent message contains `final_text`; every approval text, in order.
async fn drive(
    tg: &FakeTelegram,
    final_text: &str,
    choose: impl Fn(&str) -> &'static str,
) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    let mut answered = 0;
    loop {
        let asked = approvals(tg);
        for (chat, text, buttons) in &asked[answered..] {
            let want = choose(text);
            let data = buttons
                .iter()
                .find(|b| b.starts_with(want))
                .unwrap_or_else(|| panic!("no {want} button for {text}"));
            let id = tg.next_update_id();
            tg.push_update(FakeTelegram::callback_update(id, OWNER, *chat, data));
        }
        answered = asked.len();
        if tg
            .sent_messages()
            .iter()
            .any(|m| m["text"].as_str().is_some_and(|t| t.contains(final_text)))
        {
            return asked.into_iter().map(|a| a.1).collect();
        }
        assert!(
            Instant::now() < deadline,
            "no {final_text:?} within {WAIT:?}; calls:\n{}",
            tg.describe_calls()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn tool_results(model: &ScriptedModel) -> Vec<String> {
    model
        .last_request()
        .map(|r| {
            r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn after_a_private_read_wait_and_type_ask_and_a_refusal_sends_the_page_nothing() {
    if !browser_or_skip(
        "after_a_private_read_wait_and_type_ask_and_a_refusal_sends_the_page_nothing",
    ) {
        return;
    }
    let refused = Counter::start().await;
    let site = Site::start(refused.addr).await;
    let home = TestHome::new();
    home.write_file("workspace/plan.txt", PRIVATE);
    let tg = FakeTelegram::start().await;
    let hostile = site.url("/hostile.html");
    let model = ScriptedModel::start(vec![
        Step::tool_call("r1", "file_read", &json!({"path": "plan.txt"}).to_string()),
        Step::tool_call(
            "b1",
            "browser_page",
            &json!({"action": "goto", "url": hostile}).to_string(),
        ),
        Step::tool_call(
            "b2",
            "browser_page",
            &json!({"action": "wait", "text": PRIVATE, "ms": 500}).to_string(),
        ),
        Step::tool_call(
            "b3",
            "browser_page",
            &json!({"action": "type", "element": 1, "text": PRIVATE}).to_string(),
        ),
        Step::tool_call("b4", "browser_page", &json!({"action": "read"}).to_string()),
        Step::text("done: hostile page"),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n\
         tools:\n  web_fetch:\n    allow_private: [\"127.0.0.1\"]\n  \
         browser:\n    idle_secs: 60\n",
        model.base_url(),
        tg.token(),
        tg.base_url(),
    ));
    tg.push_text(OWNER, OWNER, "check out with my plan");
    let mut daemon = Daemon::start(&home);
    // The owner lets the page load, and refuses anything that hands it the plan.
    let asked = drive(&tg, "done: hostile page", |text| {
        if text.contains("OWNERPLAN") {
            "ap:d:"
        } else {
            "ap:o:"
        }
    })
    .await;
    assert_eq!(asked.len(), 3, "{asked:#?}");
    assert!(asked[0].contains(&hostile), "{}", asked[0]);
    for (i, what) in [(1, "wait until the page shows"), (2, "type")] {
        assert!(
            asked[i].contains("private data")
                && asked[i].contains(PRIVATE)
                && asked[i].contains(what),
            "{}",
            asked[i]
        );
    }
    let results = tool_results(&model);
    assert!(results[0].contains("OWNERPLAN"), "{}", results[0]);
    assert!(results[2].contains("refused"), "{}", results[2]);
    assert!(results[3].contains("refused"), "{}", results[3]);
    assert!(
        results[4].contains("The real text of this page is: tangerine"),
        "{}",
        results[4]
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let encoded = url_encoded(PRIVATE);
    for s in site.seen() {
        assert!(
            !s.contains("OWNERPLAN") && !s.contains(&encoded),
            "the page's server received the private text: {s}"
        );
    }
    assert_eq!(refused.accepts(), 0);
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}
