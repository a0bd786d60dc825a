//! The one way out, attacked: what a hostile page, a hostile request to the browser's proxy, a
//! rebinding name server and a booby-trapped skill folder try, and the guard refuses. Against
//! Debian's Chromium where a browser is involved, on loopback (`127.0.0.1` is in
//! `allow_private`; `127.0.0.2` is a refused address whose TCP listener counts accepts and whose
//! UDP socket on the same port counts datagrams):
//! - a page trying the ways out `browser_egress` does not (WebTransport, speculation rules,
//!   module preload, style sheets, `@import`, fonts, media, `<object>`, `<embed>`, SVG images,
//!   `srcset`, a meta refresh in a frame, a form posted into a frame, `<a ping>`, XHR, dynamic
//!   `import()`, a `blob:` worker's `importScripts` and `fetch`, popups opened with `noopener`
//!   or sent away after opening, a service worker's background sync and background fetch,
//!   `keepalive` fetches and beacons as the tab closes, TURN over UDP and TLS) and every
//!   spelling of the refused address (IPv4-mapped, IPv4-compatible, NAT64, 6to4, integer, hex,
//!   octal, short, trailing dot) gets no TCP accept and no datagram there; nor does it reach
//!   another conversation's proxy on an allowed address, or a `file:` URL;
//! - requests written straight to a browser proxy (pipelined, userinfo, origin-form, `https`
//!   in absolute form, a chunked body smuggling a second request, legacy IPv4 spellings a
//!   resolver accepts) reach no refused address;
//! - a name that resolves to a public address when the tool checks it and to the refused one
//!   when Chromium connects (DNS rebinding) reaches nothing there;
//! - a page patching every function the tools' scripts use learns nothing of what they look
//!   for, and the labels an approval shows are the page's real ones;
//! - `eval_readonly` with a side effect reaches no server;
//! - `goto` and `browser_tab new` open http(s) only, and a redirect to `file:` shows nothing of
//!   the file;
//! - an action refuses a page that changed under it since the read: one that navigated away,
//!   slid another button over the one read, or moved it into a frame; and a new empty tab is
//!   not the page last read;
//! - `skill_read` follows no link and no `..` out of the skill's folder.

use super::browser::browser_or_skip;
use axum::extract::{OriginalUri, State};
use axum::http::Method;
use axum::response::IntoResponse;
use ethan::config::BrowserConfig;
use ethan::egress::proxy::BrowserProxy;
use ethan::egress::{EgressGuard, Lookup, SystemLookup};
use ethan::tools::builtin::browser::hub::BrowserHub;
use ethan::tools::builtin::browser::page::BrowserPage;
use ethan::tools::builtin::browser::tab::BrowserTab;
use ethan::tools::skill_read::SkillRead;
use ethan::tools::{ErrorKind, Tool, ToolContext, ToolResult};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const CALL_LIMIT: Duration = Duration::from_secs(60);

/// A TCP listener on `127.0.0.2` counting the connections it accepts, and a UDP socket on the
/// same port counting datagrams.
struct Refused {
    addr: SocketAddr,
    accepts: Arc<AtomicUsize>,
    datagrams: Arc<AtomicUsize>,
}

impl Refused {
    async fn start() -> Refused {
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
        let udp = tokio::net::UdpSocket::bind(addr).await.expect("bind UDP");
        let datagrams = Arc::new(AtomicUsize::new(0));
        let d = datagrams.clone();
        tokio::spawn(async move {
            let mut buf = [0u8; 2048];
            while udp.recv_from(&mut buf).await.is_ok() {
                d.fetch_add(1, Ordering::SeqCst);
            }
        });
        Refused {
            addr,
            accepts,
            datagrams,
        }
    }

    fn port(&self) -> u16 {
        self.addr.port()
    }

    fn accepts(&self) -> usize {
        self.accepts.load(Ordering::SeqCst)
    }

    fn datagrams(&self) -> usize {
        self.datagrams.load(Ordering::SeqCst)
    }
}

type Pages = Arc<Mutex<HashMap<String, (String, String)>>>;

/// The allowed site on `127.0.0.1`: pages by path, every request it got (`METHOD uri body`).
struct Site {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<String>>>,
    pages: Pages,
}

/// A 1×1 PNG.
const PNG: &[u8] = &[
    0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x48, 0x44, 0x52,
    0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x01, 0x08, 0x06, 0x00, 0x00, 0x00, 0x1f, 0x15, 0xc4,
    0x89, 0x00, 0x00, 0x00, 0x0d, 0x49, 0x44, 0x41, 0x54, 0x78, 0x9c, 0x63, 0xf8, 0xcf, 0xc0, 0xf0,
    0x1f, 0x00, 0x05, 0x00, 0x01, 0xff, 0x89, 0x99, 0x3d, 0x1d, 0x00, 0x00, 0x00, 0x00, 0x49, 0x45,
    0x4e, 0x44, 0xae, 0x42, 0x60, 0x82,
];

impl Site {
    async fn start() -> Site {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let pages: Pages = Arc::new(Mutex::new(HashMap::new()));
        async fn handler(
            State((seen, pages)): State<(Arc<Mutex<Vec<String>>>, Pages)>,
            method: Method,
            OriginalUri(uri): OriginalUri,
            body: String,
        ) -> axum::response::Response {
            seen.lock().unwrap().push(format!("{method} {uri} {body}"));
            if uri.path() == "/ok.png" {
                return ([("content-type", "image/png")], PNG).into_response();
            }
            if uri.path() == "/redirect" {
                let to = uri.query().unwrap_or_default().trim_start_matches("to=");
                return (
                    axum::http::StatusCode::FOUND,
                    [("location", to.to_string())],
                    "",
                )
                    .into_response();
            }
            let page = pages.lock().unwrap().get(uri.path()).cloned();
            match page {
                Some((ct, body)) => ([("content-type", ct)], body).into_response(),
                None => "ok".into_response(),
            }
        }
        let app = axum::Router::new()
            .fallback(handler)
            .with_state((seen.clone(), pages.clone()));
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(l, app).await;
        });
        Site { addr, seen, pages }
    }

    fn serve(&self, path: &str, content_type: &str, body: &str) {
        self.pages.lock().unwrap().insert(
            path.to_string(),
            (content_type.to_string(), body.to_string()),
        );
    }

    fn html(&self, path: &str, body: &str) {
        self.serve(path, "text/html; charset=utf-8", body);
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<String> {
        self.seen.lock().unwrap().clone()
    }
}

fn hub_with(guard: EgressGuard) -> Arc<BrowserHub> {
    let hub = BrowserHub::new(
        BrowserConfig {
            executable: String::new(),
            idle_secs: 300,
        },
        guard,
    );
    hub.set_page_reader(Arc::new(ethan::media::page::ChildPages::alone()));
    hub
}

fn hub() -> Arc<BrowserHub> {
    hub_with(EgressGuard::new(
        &["127.0.0.1".to_string()],
        Arc::new(SystemLookup),
    ))
}

fn ctx(home: &std::path::Path, session: &str) -> ToolContext {
    ToolContext {
        session_key: format!("terminal:{session}"),
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

/// The page of ways out `browser_egress` does not try; `{R}` is the refused address,
/// `{RPORT}` its port, `{OTHER}` the port of another conversation's proxy on `127.0.0.1`.
const MORE_WAYS_OUT: &str = r##"<!doctype html>
<html><head><meta charset="utf-8"><title>More ways out</title>
<link rel="modulepreload" href="http://{R}/modulepreload.js">
<link rel="stylesheet" href="http://{R}/style.css">
<link rel="icon" href="http://{R}/icon.png">
<link rel="manifest" href="http://{R}/manifest.json">
<style>
@import url("http://{R}/import.css");
body { background-image: url("http://{R}/background.png"); }
@font-face { font-family: Far; src: url("http://{R}/font.woff2"); }
h1 { font-family: Far, serif; }
</style>
<script type="speculationrules">
{"prefetch": [{"source": "list", "urls": ["http://{R}/speculative-prefetch"]}],
 "prerender": [{"source": "list", "urls": ["http://{R}/speculative-prerender"]}]}
</script>
</head>
<body>
<h1>More ways out</h1>
<p id="status">starting</p>
<img src="/ok.png" alt="allowed">
<img srcset="http://{R}/srcset.png 1x" alt="srcset">
<picture><source srcset="http://{R}/picture.png"><img alt="picture"></picture>
<video src="http://{R}/video.webm" preload="auto"></video>
<audio src="http://{R}/audio.ogg" preload="auto"></audio>
<object data="http://{R}/object" width="10" height="10"></object>
<embed src="http://{R}/embed" width="10" height="10">
<svg width="10" height="10"><image href="http://{R}/svg-image.png" width="10" height="10"/></svg>
<input type="image" src="http://{R}/input-image.png" alt="go">
<iframe srcdoc="<meta http-equiv=refresh content='0;url=http://{R}/meta-refresh'>"></iframe>
<iframe name="sink"></iframe>
<form id="f" action="http://{R}/form-post" method="post" target="sink"><input name="a" value="b"></form>
<a id="ping" href="#here" ping="http://{R}/ping">a link that pings</a>
<script src="http://{R}/script.js"></script>
<script>
addEventListener('load', () => setTimeout(attempt, 50));
function attempt() {
const R = '{R}';
const done = [];
const note = s => done.push(s);
const quiet = f => { try { const p = f(); if (p && p.catch) p.catch(() => {}); } catch (e) { note('threw ' + e.name); } };
quiet(() => { const t = new WebTransport('https://' + R + '/webtransport'); t.closed.catch(() => {}); return t.ready; });
quiet(() => { const x = new XMLHttpRequest(); x.open('GET', 'http://' + R + '/xhr'); x.send(); });
quiet(() => import('http://' + R + '/dynamic-import.js'));
quiet(() => fetch('file:///etc/passwd'));
quiet(() => { const f = document.createElement('iframe'); f.src = 'file:///etc/passwd'; document.body.append(f); });
quiet(() => document.getElementById('f').submit());
quiet(() => document.getElementById('ping').click());
const wsrc = "try { importScripts('http://" + R + "/import-scripts.js'); } catch (e) {}\n" +
  "fetch('http://" + R + "/blob-worker', {mode: 'no-cors'}).catch(() => {});\n" +
  "postMessage('blob worker ran');";
const bw = new Worker(URL.createObjectURL(new Blob([wsrc], {type: 'text/javascript'})));
bw.onmessage = e => note(e.data);
quiet(() => window.open('http://' + R + '/popup-noopener', '_blank', 'noopener'));
quiet(() => { const w = window.open('about:blank'); if (w) w.location = 'http://' + R + '/popup-sent-away'; });
quiet(() => window.open('file:///etc/passwd'));
for (const u of [
  'http://[::ffff:127.0.0.2]:{RPORT}/mapped',
  'http://[::ffff:7f00:2]:{RPORT}/mapped-hex',
  'http://[::127.0.0.2]:{RPORT}/compatible',
  'http://[64:ff9b::7f00:2]:{RPORT}/nat64',
  'http://[64:ff9b:1::7f00:2]:{RPORT}/nat64-local',
  'http://[2002:7f00:2::]:{RPORT}/6to4',
  'http://2130706434:{RPORT}/integer',
  'http://0x7f.0.0.2:{RPORT}/hex',
  'http://0177.0.0.02:{RPORT}/octal',
  'http://127.2:{RPORT}/short',
  'http://127.0.0.2.:{RPORT}/trailing-dot',
]) {
  quiet(() => fetch(u, {mode: 'no-cors'}));
  quiet(() => new WebSocket(u.replace('http:', 'ws:')));
}
quiet(() => {
  const pc = new RTCPeerConnection({iceTransportPolicy: 'relay', iceServers: [
    {urls: 'turn:' + R + '?transport=udp', username: 'u', credential: 'c'},
    {urls: 'turns:' + R + '?transport=tcp', username: 'u', credential: 'c'}]});
  pc.createDataChannel('x');
  return pc.createOffer().then(o => pc.setLocalDescription(o));
});
if (navigator.serviceWorker) {
  navigator.serviceWorker.register('/sw-more.js').then(() => navigator.serviceWorker.ready)
    .then(reg => {
      note('service worker ready');
      if (reg.sync) quiet(() => reg.sync.register('later'));
      if (reg.backgroundFetch) quiet(() => reg.backgroundFetch.fetch('bg', ['http://' + R + '/background-fetch']));
    }, e => note('service worker refused: ' + e.name));
}
addEventListener('pagehide', () => {
  fetch('http://' + R + '/keepalive', {keepalive: true, mode: 'no-cors'}).catch(() => {});
  navigator.sendBeacon('http://' + R + '/pagehide-beacon', 'x');
});
setTimeout(() => {
  document.getElementById('status').textContent = 'all attempts made: ' + done.join(', ');
}, 3000);
}
</script>
</body></html>"##;

/// A page reaching for another conversation's proxy, on the allowed address.
const OTHER_PROXY: &str = r#"<!doctype html><title>Another proxy</title><body><p>ready</p><script>
fetch('http://127.0.0.1:{OTHER}/through-another-proxy', {mode: 'no-cors'}).catch(() => {});
try { new WebSocket('ws://127.0.0.1:{OTHER}/through-another-proxy'); } catch (e) {}
</script></body>"#;

const SW_MORE: &str = "self.addEventListener('sync', e => e.waitUntil(\n\
    fetch('http://{R}/sw-sync', {mode: 'no-cors'}).catch(() => {})));\n\
    self.addEventListener('backgroundfetchsuccess', () => {});\n\
    self.addEventListener('activate', e => e.waitUntil(\n\
    fetch('http://{R}/sw-activate', {mode: 'no-cors'}).catch(() => {})));\n";

#[tokio::test(flavor = "multi_thread")]
async fn every_other_way_out_of_a_page_and_every_spelling_of_a_refused_address_is_refused() {
    if !browser_or_skip(
        "every_other_way_out_of_a_page_and_every_spelling_of_a_refused_address_is_refused",
    ) {
        return;
    }
    let refused = Refused::start().await;
    let site = Site::start().await;
    // Another conversation's proxy, on the allowed address.
    let guard = EgressGuard::new(&["127.0.0.1".to_string()], Arc::new(SystemLookup));
    let other = BrowserProxy::start(guard.clone(), "terminal:someone-else")
        .await
        .unwrap();
    let other_port = other.url().rsplit(':').next().unwrap().to_string();
    let fill = |s: &str| {
        s.replace("{R}", &refused.addr.to_string())
            .replace("{RPORT}", &refused.port().to_string())
            .replace("{OTHER}", &other_port)
    };
    site.html("/more.html", &fill(MORE_WAYS_OUT));
    site.serve("/sw-more.js", "text/javascript", &fill(SW_MORE));
    site.html("/other-proxy.html", &fill(OTHER_PROXY));
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path(), "more-ways-out");
    let hub = hub_with(guard);
    let page = BrowserPage(hub.clone());
    let tab = BrowserTab(hub.clone());

    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": site.url("/more.html")}),
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
    tokio::time::sleep(Duration::from_secs(2)).await;
    let read = call(&page, &ctx, json!({"action": "read"})).await;
    assert!(read.ok, "{read:?}");
    // The page's last chance: what it sends as its tab closes.
    let closed = call(&tab, &ctx, json!({"action": "close"})).await;
    assert!(closed.ok, "{closed:?}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let text = format!("{}\n{}", r.output, read.output);

    assert_eq!(
        refused.accepts(),
        0,
        "a connection reached the refused port; the page said:\n{text}"
    );
    assert_eq!(
        refused.datagrams(),
        0,
        "a datagram reached the refused port (WebTransport, TURN or QUIC around the proxy)"
    );
    let seen = site.seen();
    assert!(
        seen.iter().any(|s| s.starts_with("GET /ok.png")),
        "the allowed image was not fetched: {seen:?}"
    );
    assert!(
        read.output.contains("blob worker ran") && read.output.contains("service worker ready"),
        "{}",
        read.output
    );
    // What reached the proxy was refused there and reported.
    assert!(
        text.contains("refused by the egress guard") && text.contains("/style.css"),
        "{text}"
    );
    // Another conversation's proxy, on an address the guard allows, is never a destination.
    let o = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": site.url("/other-proxy.html")}),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    let o_read = call(&page, &ctx, json!({"action": "read"})).await;
    let o_text = format!("{}\n{}", o.output, o_read.output);
    assert!(
        o_text.matches("one of Ethan's own browser proxies").count() >= 2,
        "the other conversation's proxy was not refused:\n{o_text}"
    );
    // Nothing of a local file.
    assert!(!text.contains("root:x:0:0"), "{text}");
    assert_eq!(other.take_refused(), Vec::<String>::new());
    hub.shutdown().await;
}

/// Send `request` on a new connection to `proxy` and read until it closes or goes quiet.
async fn ask(proxy: &BrowserProxy, request: &[u8]) -> String {
    let addr = proxy.url().trim_start_matches("http://").to_string();
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(request).await.unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 8192];
    loop {
        match tokio::time::timeout(Duration::from_millis(1500), s.read(&mut buf)).await {
            Ok(Ok(0)) | Err(_) | Ok(Err(_)) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread")]
async fn requests_written_to_the_proxy_by_hand_reach_no_refused_address() {
    let refused = Refused::start().await;
    let site = Site::start().await;
    let r = refused.addr;
    let rp = refused.port();
    let a = site.addr;
    let guard = EgressGuard::new(&["127.0.0.1".to_string()], Arc::new(SystemLookup));
    let proxy = BrowserProxy::start(guard, "terminal:by-hand")
        .await
        .unwrap();

    // A refused tunnel, in every spelling a resolver takes.
    for host in [
        r.to_string(),
        format!("[::ffff:127.0.0.2]:{rp}"),
        format!("[::127.0.0.2]:{rp}"),
        format!("2130706434:{rp}"),
        format!("0x7f000002:{rp}"),
        format!("0177.0.0.2:{rp}"),
        format!("127.2:{rp}"),
        format!("127.0.0.2.:{rp}"),
    ] {
        let answer = ask(
            &proxy,
            format!("CONNECT {host} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes(),
        )
        .await;
        assert!(
            !answer.starts_with("HTTP/1.1 200"),
            "CONNECT {host} opened a tunnel: {answer}"
        );
    }
    // A second request pipelined after an allowed one, on the same connection.
    let answer = ask(
        &proxy,
        format!(
            "GET http://{a}/first HTTP/1.1\r\nHost: {a}\r\n\r\n\
             GET http://{r}/second HTTP/1.1\r\nHost: {r}\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    assert!(answer.contains("HTTP/1.1 403"), "{answer}");
    // Userinfo that names the allowed host; origin form with the refused host in `Host`;
    // `https` in absolute form; HTTP/1.0 without a host.
    for request in [
        format!("GET http://{a}@{r}/userinfo HTTP/1.1\r\nHost: {a}\r\n\r\n"),
        format!("GET /origin-form HTTP/1.1\r\nHost: {r}\r\n\r\n"),
        format!("GET https://{r}/absolute-https HTTP/1.1\r\nHost: {r}\r\n\r\n"),
        format!("GET http://{r}/http10 HTTP/1.0\r\n\r\n"),
        format!("GET ws://{r}/ws-scheme HTTP/1.1\r\nHost: {r}\r\n\r\n"),
    ] {
        let answer = ask(&proxy, request.as_bytes()).await;
        assert!(
            answer.contains(" 403 Forbidden") || answer.contains(" 400 Bad Request"),
            "{request:?} was not refused: {answer}"
        );
    }
    // A chunked body to the allowed site that carries a second request for the refused one:
    // the proxy parses what follows the body as a request of its own, and refuses it.
    let smuggled = format!("GET http://{r}/smuggled HTTP/1.1\r\nHost: {r}\r\n\r\n");
    let answer = ask(
        &proxy,
        format!(
            "POST http://{a}/smuggle HTTP/1.1\r\nHost: {a}\r\nTransfer-Encoding: chunked\r\n\
             Content-Length: 4\r\n\r\n0\r\n\r\n{smuggled}"
        )
        .as_bytes(),
    )
    .await;
    assert!(
        answer.contains(" 403 Forbidden") || answer.contains("connection: close"),
        "the request after the chunked body was neither refused nor the connection closed: \
         {answer}"
    );
    // A tunnel to the allowed site whose `Host` names the refused one goes to the allowed site.
    let answer = ask(
        &proxy,
        format!(
            "CONNECT {a} HTTP/1.1\r\nHost: {r}\r\n\r\nGET /in-tunnel HTTP/1.1\r\nHost: {r}\r\n\r\n"
        )
        .as_bytes(),
    )
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");

    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(refused.accepts(), 0, "a hand-written request reached it");
    let seen = site.seen();
    assert!(
        seen.iter().any(|s| s.starts_with("GET /first"))
            && seen.iter().any(|s| s.starts_with("GET /in-tunnel")),
        "the allowed site did not get the allowed requests: {seen:?}"
    );
    assert!(
        !seen
            .iter()
            .any(|s| s.contains("/second") || s.contains("/userinfo")),
        "{seen:?}"
    );
    let refusals = proxy.take_refused();
    assert!(
        refusals.iter().any(|s| s.contains("/second")),
        "{refusals:?}"
    );
}

/// Resolves `host` to `first` on the first lookup and to `then` on every later one.
struct Rebinding {
    host: String,
    first: IpAddr,
    then: IpAddr,
    lookups: AtomicUsize,
}

impl Lookup for Rebinding {
    fn lookup(
        &self,
        host: &str,
    ) -> Pin<Box<dyn Future<Output = std::io::Result<Vec<IpAddr>>> + Send>> {
        let answer = if host.eq_ignore_ascii_case(&self.host) {
            let n = self.lookups.fetch_add(1, Ordering::SeqCst);
            Ok(vec![if n == 0 { self.first } else { self.then }])
        } else {
            Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("no address for {host}"),
            ))
        };
        Box::pin(async move { answer })
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_that_rebinds_to_a_refused_address_after_the_check_reaches_nothing_there() {
    if !browser_or_skip(
        "a_name_that_rebinds_to_a_refused_address_after_the_check_reaches_nothing_there",
    ) {
        return;
    }
    let refused = Refused::start().await;
    let lookup = Arc::new(Rebinding {
        host: "rebind.test".into(),
        // A public address (the documentation ranges count as reserved), never dialled: the
        // tool's check only resolves, and every later lookup answers the refused address.
        first: "93.184.215.14".parse().unwrap(),
        then: "127.0.0.2".parse().unwrap(),
        lookups: AtomicUsize::new(0),
    });
    let hub = hub_with(EgressGuard::new(&[], lookup.clone()));
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path(), "rebinding");
    let page = BrowserPage(hub.clone());
    let url = format!("http://rebind.test:{}/", refused.port());
    let r = call(&page, &ctx, json!({"action": "goto", "url": url})).await;
    assert!(!r.ok, "the rebinding page loaded: {r:?}");
    let why = r.error.clone().unwrap_or_default();
    assert!(
        why.contains("loopback") || why.contains("127.0.0.2"),
        "the refusal does not say why: {r:?}"
    );
    assert!(
        lookup.lookups.load(Ordering::SeqCst) >= 2,
        "the tool's check and the proxy's connect each resolve the name"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(refused.accepts(), 0, "the rebound address was connected to");
    hub.shutdown().await;
}

/// A page that patches, in its own world, every function and getter the tools' scripts call,
/// each patch reporting to its server what it was called with.
const PATCHED: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Patched</title><script>
(() => {
  const send = navigator.sendBeacon.bind(navigator);
  let busy = false;
  const leak = (what, args) => {
    if (busy) return;
    busy = true;
    try {
      let s = '';
      try { s = Array.prototype.map.call(args, a => { try { return String(a); } catch (e) { return '?'; } }).join('|'); } catch (e) {}
      send('/leak?' + what + '=' + encodeURIComponent(s.slice(0, 200)), 'x');
    } catch (e) {}
    busy = false;
  };
  const wrap = (obj, name) => {
    const d = Object.getOwnPropertyDescriptor(obj, name);
    if (!d) return;
    if (typeof d.value === 'function') {
      const f = d.value;
      Object.defineProperty(obj, name, {configurable: true, writable: true,
        value: function (...a) { leak(name, a); return f.apply(this, a); }});
    } else if (d.get) {
      const g = d.get;
      Object.defineProperty(obj, name, {configurable: true,
        get() { leak(name, []); return g.call(this); }, set: d.set});
    }
  };
  for (const n of ['includes', 'indexOf', 'trim', 'replace', 'slice', 'toLowerCase', 'split'])
    wrap(String.prototype, n);
  for (const n of ['push', 'map', 'find', 'some', 'join', 'slice'])
    wrap(Array.prototype, n);
  wrap(Array, 'from');
  wrap(JSON, 'stringify');
  wrap(Object, 'assign');
  wrap(CSS, 'escape');
  wrap(window, 'getComputedStyle');
  for (const n of ['querySelector', 'querySelectorAll', 'elementFromPoint'])
    wrap(Document.prototype, n);
  for (const n of ['getBoundingClientRect', 'scrollIntoView', 'getAttribute', 'closest',
                   'querySelector', 'dispatchEvent'])
    wrap(Element.prototype, n);
  wrap(EventTarget.prototype, 'dispatchEvent');
  wrap(Node.prototype, 'contains');
  wrap(Node.prototype, 'isConnected');
  for (const n of ['innerText', 'focus', 'isContentEditable'])
    wrap(HTMLElement.prototype, n);
  wrap(HTMLSelectElement.prototype, 'options');
  wrap(HTMLInputElement.prototype, 'value');
  wrap(Document.prototype, 'activeElement');
  wrap(Document.prototype, 'readyState');
  wrap(Element.prototype, 'outerHTML');
  Object.defineProperty(Object.prototype, '__ethan', {configurable: true,
    set(v) { leak('__ethan-set', [JSON.stringify(Object.keys(v || {}))]); },
    get() { leak('__ethan-get', []); return undefined; }});
  window.Event = new Proxy(window.Event, {construct(t, a) { leak('Event', a); return Reflect.construct(t, a); }});
})();
</script></head>
<body>
<h1>Order form</h1>
<p>The real text of this page is: clementine.</p>
<label for="card">Card number</label><input id="card" name="card">
<select name="size" aria-label="Size"><option value="s">small</option><option value="l">large</option></select>
<button type="button" id="go">Pay now</button>
<p id="state"></p>
<script>
document.getElementById('go').addEventListener('click', () => {
  document.getElementById('state').textContent = 'paid';
});
// The channel works: the page's own use of a patched function reaches its server.
'x'.includes('control-probe');
</script>
</body></html>"#;

#[tokio::test(flavor = "multi_thread")]
async fn a_page_patching_every_function_the_tools_use_learns_nothing_of_what_they_look_for() {
    if !browser_or_skip(
        "a_page_patching_every_function_the_tools_use_learns_nothing_of_what_they_look_for",
    ) {
        return;
    }
    let site = Site::start().await;
    site.html("/patched.html", PATCHED);
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path(), "patched");
    let hub = hub();
    let page = BrowserPage(hub.clone());

    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": site.url("/patched.html")}),
    )
    .await;
    assert!(r.ok, "{r:?}");
    for want in [
        "The real text of this page is: clementine",
        "[1] input text \"Card number\"",
        "[2] select \"Size\"",
        "[3] button \"Pay now\"",
    ] {
        assert!(r.output.contains(want), "{want}: {}", r.output);
    }
    // What an approval would show is the page's real labels.
    let click = json!({"action": "click", "element": 3});
    let shown = page.describe(&click, &ctx).consent.unwrap_or_default();
    assert!(shown.contains("\"Pay now\""), "{shown}");
    let missing = call(
        &page,
        &ctx,
        json!({"action": "wait", "text": "KIWI-SECRET-5521", "ms": 600}),
    )
    .await;
    assert_eq!(missing.error_kind, Some(ErrorKind::Timeout), "{missing:?}");
    let found = call(&page, &ctx, json!({"action": "wait", "text": "clementine"})).await;
    assert!(found.ok, "{found:?}");
    let typed = call(
        &page,
        &ctx,
        json!({"action": "type", "element": 1, "text": "4111"}),
    )
    .await;
    assert!(typed.ok, "{typed:?}");
    let selected = call(
        &page,
        &ctx,
        json!({"action": "select", "element": 2, "value": "large"}),
    )
    .await;
    assert!(selected.ok, "{selected:?}");
    let clicked = call(&page, &ctx, click).await;
    assert!(clicked.ok, "{clicked:?}");
    let state = call(&page, &ctx, json!({"action": "wait", "text": "paid"})).await;
    assert!(state.ok, "the click did not reach the button: {state:?}");

    tokio::time::sleep(Duration::from_millis(800)).await;
    let leaks: Vec<String> = site
        .seen()
        .into_iter()
        .filter(|s| s.contains("/leak?"))
        .collect();
    assert!(
        leaks.iter().any(|s| s.contains("control-probe")),
        "the page's leak channel did not work: {leaks:?}"
    );
    for s in &leaks {
        for tell in [
            "KIWI",
            "clementine",
            "__ethan",
            "ethan",
            "a%5Bhref%5D",
            "contenteditable",
            "large",
        ] {
            assert!(
                !s.contains(tell),
                "the page learned {tell:?} of what the tools did: {s}"
            );
        }
    }
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn eval_readonly_with_a_side_effect_reaches_no_server() {
    if !browser_or_skip("eval_readonly_with_a_side_effect_reaches_no_server") {
        return;
    }
    let site = Site::start().await;
    site.html(
        "/eval.html",
        "<!doctype html><title>Eval</title><body><h1>Eval</h1>\
         <form id=f action=/evalleak-form method=post><input name=a value=b></form><script>\
         Object.defineProperty(window, 'trap', {get() { \
           fetch('/evalleak-getter'); return 1; }});\
         window.helper = () => { navigator.sendBeacon('/evalleak-helper', 'x'); return 2; };\
         </script></body>",
    );
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path(), "eval");
    let hub = hub();
    let page = BrowserPage(hub.clone());
    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": site.url("/eval.html")}),
    )
    .await;
    assert!(r.ok, "{r:?}");
    let ro = call(
        &page,
        &ctx,
        json!({"action": "eval_readonly", "expression": "document.title"}),
    )
    .await;
    assert!(ro.ok && ro.output.contains("Eval"), "{ro:?}");
    for expression in [
        "fetch('/evalleak-fetch')",
        "import('/evalleak-import.js')",
        "new Image().src = '/evalleak-image'",
        "navigator.sendBeacon('/evalleak-beacon', 'x')",
        "(() => { const x = new XMLHttpRequest(); x.open('GET', '/evalleak-xhr'); x.send(); })()",
        "new WebSocket('ws://' + location.host + '/evalleak-ws')",
        "new EventSource('/evalleak-events')",
        "window.open('/evalleak-popup')",
        "location.href = '/evalleak-navigate'",
        "document.getElementById('f').submit()",
        "document.body.insertAdjacentHTML('beforeend', '<img src=/evalleak-html>')",
        "setTimeout(() => fetch('/evalleak-timeout'), 0)",
        "Promise.resolve().then(() => fetch('/evalleak-microtask'))",
        "trap",
        "helper()",
        "new Worker('/evalleak-worker.js')",
    ] {
        let _ = call(
            &page,
            &ctx,
            json!({"action": "eval_readonly", "expression": expression}),
        )
        .await;
    }
    tokio::time::sleep(Duration::from_millis(1000)).await;
    let leaks: Vec<String> = site
        .seen()
        .into_iter()
        .filter(|s| s.contains("evalleak"))
        .collect();
    assert!(
        leaks.is_empty(),
        "eval_readonly had a side effect: {leaks:?}"
    );
    let now = call(&page, &ctx, json!({"action": "read"})).await;
    assert!(now.output.contains("/eval.html"), "{}", now.output);
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_browser_opens_http_urls_only_and_a_redirect_to_a_file_shows_nothing() {
    if !browser_or_skip("the_browser_opens_http_urls_only_and_a_redirect_to_a_file_shows_nothing") {
        return;
    }
    let site = Site::start().await;
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path(), "schemes");
    let hub = hub();
    let page = BrowserPage(hub.clone());
    let tab = BrowserTab(hub.clone());
    for url in [
        "file:///etc/passwd",
        "view-source:http://127.0.0.1/",
        "chrome://version",
        "data:text/html,<h1>x</h1>",
        "javascript:alert(1)",
        "blob:http://127.0.0.1/0a1b",
        "about:blank",
        "ftp://127.0.0.1/",
        "ws://127.0.0.1/",
        "devtools://devtools/bundled/inspector.html",
    ] {
        for (tool, args) in [
            (&page as &dyn Tool, json!({"action": "goto", "url": url})),
            (&tab as &dyn Tool, json!({"action": "new", "url": url})),
        ] {
            let r = call(tool, &ctx, args).await;
            assert!(!r.ok, "{} opened {url}: {r:?}", tool.decl().name);
            assert!(!r.output.contains("root:x:0:0"), "{r:?}");
        }
    }
    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": site.url("/redirect?to=file:///etc/passwd")}),
    )
    .await;
    let shown = format!("{} {}", r.output, r.error.clone().unwrap_or_default());
    assert!(!shown.contains("root:x:0:0"), "{shown}");
    if r.ok {
        let read = call(&page, &ctx, json!({"action": "read"})).await;
        assert!(!read.output.contains("root:x:0:0"), "{}", read.output);
    }
    hub.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn skill_read_follows_no_link_or_dot_dot_out_of_the_skill_folder() {
    let home = tempfile::tempdir().unwrap();
    let h = home.path();
    let secret = "api_key: sk-test-NOTFORSKILLS0123456789";
    std::fs::write(h.join("config.yaml"), secret).unwrap();
    std::fs::create_dir_all(h.join("workspace")).unwrap();
    std::fs::write(h.join("workspace/plan.txt"), "workspace text").unwrap();
    let skill = h.join("skills/notes");
    std::fs::create_dir_all(skill.join("sub")).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: notes\ndescription: How to file notes\n---\nFile them.",
    )
    .unwrap();
    std::fs::write(skill.join("ok.md"), "a file of the skill").unwrap();
    std::os::unix::fs::symlink(h.join("config.yaml"), skill.join("settings.md")).unwrap();
    std::os::unix::fs::symlink(h, skill.join("sub/home")).unwrap();
    std::os::unix::fs::symlink("../../..", skill.join("sub/up")).unwrap();
    std::os::unix::fs::symlink(h.join("workspace"), skill.join("workspace")).unwrap();
    let mut ctx = ToolContext::local(h.join("workspace"));
    ctx.ethan_home = Some(h.to_path_buf());

    let ok: ethan::tools::ToolResult = SkillRead
        .run(json!({"name": "notes", "file": "ok.md"}), &ctx)
        .await
        .into();
    assert!(ok.ok && ok.output.contains("a file of the skill"), "{ok:?}");
    for file in [
        "settings.md",
        "../../config.yaml",
        "sub/../../../config.yaml",
        "sub/home/config.yaml",
        "sub/up/config.yaml",
        "workspace/plan.txt",
        "/etc/passwd",
        "",
        ".",
        "sub",
    ] {
        let r: ethan::tools::ToolResult = SkillRead
            .run(json!({"name": "notes", "file": file}), &ctx)
            .await
            .into();
        assert!(!r.ok, "{file:?} was read: {r:?}");
        for leaked in ["NOTFORSKILLS", "workspace text", "root:x:0:0"] {
            assert!(!r.output.contains(leaked), "{file:?}: {r:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_action_refuses_a_page_that_changed_under_it_since_the_read() {
    if !browser_or_skip("an_action_refuses_a_page_that_changed_under_it_since_the_read") {
        return;
    }
    let site = Site::start().await;
    site.html(
        "/checkout",
        "<!doctype html><title>Checkout</title><body><h1>Cart</h1><form method=post \
         action=/order><button>Place order</button></form></body>",
    );
    // Leaves for the checkout once the tools have read it.
    site.html(
        "/leaves",
        "<!doctype html><title>Article</title><body><h1>Article</h1>\
         <button type=button>Read more</button><script>\
         setTimeout(() => { location = '/checkout'; }, 1500);</script></body>",
    );
    // Slides a form button over the one the tools read.
    site.html(
        "/covers",
        "<!doctype html><title>Article</title><body><h1>Article</h1>\
         <button type=button id=b style=\"width:200px;height:60px\">Read more</button>\
         <form method=post action=/order><button id=o style=\"position:absolute;left:0;top:0;\
         width:100vw;height:100vh;opacity:0.01;display:none\">Place order</button></form>\
         <script>setTimeout(() => { document.getElementById('o').style.display = 'block'; }, \
         1500);</script></body>",
    );
    // Moves the button the tools read into a same-origin frame.
    site.html(
        "/moves",
        "<!doctype html><title>Article</title><body><h1>Article</h1>\
         <button type=button id=b aria-label=\"Read more\">Read more</button>\
         <iframe id=f srcdoc=\"<form method=post action=/order target=_top></form>\" \
         style=\"position:absolute;left:0;top:0;width:100vw;height:100vh;border:0\"></iframe>\
         <script>setTimeout(() => { const f = document.getElementById('f'); \
         f.contentDocument.forms[0].append(document.getElementById('b')); \
         f.contentDocument.forms[0].lastChild.type = 'submit'; }, 1500);</script></body>",
    );
    let dir = tempfile::tempdir().unwrap();
    let ctx = ctx(dir.path(), "changed");
    let hub = hub();
    let page = BrowserPage(hub.clone());
    let tab = BrowserTab(hub.clone());
    let click = json!({"action": "click", "element": 1});
    for path in ["/leaves", "/covers", "/moves"] {
        let r = call(
            &page,
            &ctx,
            json!({"action": "goto", "url": site.url(path)}),
        )
        .await;
        assert!(r.ok && r.output.contains("\"Read more\""), "{path}: {r:?}");
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let c = call(&page, &ctx, click.clone()).await;
        assert!(!c.ok, "{path}: the click went through: {c:?}");
    }
    // A new empty tab is not the page last read either.
    let r = call(
        &page,
        &ctx,
        json!({"action": "goto", "url": site.url("/checkout")}),
    )
    .await;
    assert!(r.ok, "{r:?}");
    let blank = call(&tab, &ctx, json!({"action": "new"})).await;
    assert!(blank.ok, "{blank:?}");
    let c = call(&page, &ctx, click).await;
    assert!(
        !c.ok
            && c.error
                .as_deref()
                .unwrap_or("")
                .contains("not the page last read"),
        "{c:?}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let orders: Vec<String> = site
        .seen()
        .into_iter()
        .filter(|s| s.starts_with("POST /order"))
        .collect();
    assert!(orders.is_empty(), "an order was placed: {orders:?}");
    hub.shutdown().await;
}
