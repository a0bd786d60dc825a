//! Attacks on "the daemon's browser proxies are never a destination" from a review of that
//! rule, kept as regressions. What got through once: the proxies were matched by their exact
//! address, and on Linux `[::ffff:127.0.0.1]:P` and `[::ffff:0.0.0.0]:P` reach a listener on
//! `127.0.0.1:P` — so an owner's `allow_private` listing a mapped spelling, or a listed name (or
//! an endpoint's name) whose AAAA record is `::ffff:127.0.0.1`, let `web_fetch`, MCP over HTTP
//! and one session's browser reach another's proxy. Now a destination is matched in the
//! kernel's terms (`Egress::is_proxy`). What held is kept too: every other spelling of
//! loopback, and redirects at each hop. Proof that a request reached a proxy: the proxy's own
//! 400 answer to an origin-form request.

use crate::support::search_fakes::{tool_ctx, FakeSite};
use ethan::config::WebFetchConfig;
use ethan::egress::proxy::BrowserProxy;
use ethan::egress::{
    ConnectFailure, Egress, EgressClient, EgressError, Endpoint, Lookup, Route, StaticLookup,
    SystemLookup,
};
use ethan::metrics::Metrics;
use ethan::tools::web_fetch::WebFetch;
use ethan::tools::{Tool, ToolResult};
use serde_json::json;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const PROXY_400: &str = "this proxy takes CONNECT and absolute http:// requests only";

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

async fn start_proxy(egress: &Egress) -> (BrowserProxy, u16) {
    let proxy = BrowserProxy::start(egress.guard(&[], Arc::new(SystemLookup)), "telegram:victim")
        .await
        .expect("the browser proxy starts");
    let port = proxy.url().rsplit(':').next().unwrap().parse().unwrap();
    (proxy, port)
}

/// What one request through an [`EgressClient`] (as `web_fetch` builds it) did:
/// `REACHED-PROXY`, `refused: …`, `http error: …`, or `status …`.
async fn probe(c: &EgressClient, url: &str) -> String {
    match tokio::time::timeout(Duration::from_secs(10), c.get(url).send()).await {
        Err(_) => "timeout".into(),
        Ok(Err(EgressError::Refused(r))) => format!("refused: {r}"),
        Ok(Err(EgressError::Http(e))) => format!("http error: {e:?}"),
        Ok(Ok(resp)) => {
            let status = resp.status();
            let body = resp.text().await.unwrap_or_default();
            if body.contains(PROXY_400) {
                format!("REACHED-PROXY (status {status}, body {body:?})")
            } else {
                format!(
                    "status {status}: {}",
                    body.chars().take(80).collect::<String>()
                )
            }
        }
    }
}

async fn fetch(tool: &WebFetch, url: &str) -> ToolResult {
    let dir = std::env::temp_dir();
    tokio::time::timeout(
        Duration::from_secs(20),
        tool.run(json!({ "url": url }), &tool_ctx(&dir)),
    )
    .await
    .expect("web_fetch finished in time")
    .into()
}

/// The tool's text when it reached the proxy: the proxy's body, or (web_fetch does not show a
/// 4xx body) "answered HTTP 400 Bad Request" from the proxy's port, where nothing else listens.
fn tool_reached_proxy(r: &ToolResult) -> bool {
    let e = r.error.as_deref().unwrap_or("");
    r.output.contains(PROXY_400) || e.contains(PROXY_400) || e.contains("answered HTTP 400")
}

/// Other spellings of the proxy's loopback address, with `127.0.0.1` and `localhost`
/// in allow_private (the configuration the fix is about), through the HTTP client `web_fetch`
/// uses and through the `web_fetch` tool itself.
#[tokio::test(flavor = "multi_thread")]
async fn spellings_of_the_proxy_address() {
    let egress = Egress::new(Arc::new(Metrics::new()));
    let (_proxy, p) = start_proxy(&egress).await;
    let allow = vec!["127.0.0.1".to_string(), "localhost".to_string()];
    let guard = egress.guard(&allow, Arc::new(SystemLookup));
    let c = EgressClient::new(&guard, Route::WebFetch, Vec::new(), |b| b).unwrap();
    let cfg = WebFetchConfig {
        allow_private: allow.clone(),
        ..Default::default()
    };
    let tool = WebFetch::guarded(&cfg, egress.guard(&allow, Arc::new(SystemLookup)))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));
    let urls = [
        format!("http://127.0.0.1:{p}/"),
        format!("http://127.1:{p}/"),
        format!("http://0x7f000001:{p}/"),
        format!("http://2130706433:{p}/"),
        format!("http://0177.0.0.1:{p}/"),
        format!("http://0x7f.0.0.1:{p}/"),
        format!("http://127.0.1:{p}/"),
        format!("http://localhost:{p}/"),
        format!("http://localhost.:{p}/"),
        format!("http://LOCALHOST:{p}/"),
        format!("http://[::ffff:127.0.0.1]:{p}/"),
        format!("http://[::ffff:7f00:1]:{p}/"),
        format!("http://[::ffff:0.0.0.0]:{p}/"),
        format!("http://[::ffff:0:127.0.0.1]:{p}/"),
        format!("http://[::127.0.0.1]:{p}/"),
        format!("http://0.0.0.0:{p}/"),
        format!("http://0:{p}/"),
        format!("http://[::]:{p}/"),
        format!("http://[::1]:{p}/"),
        format!("http://[fe80::1%25lo]:{p}/"),
        format!("http://127.0.0.2:{p}/"),
        format!("https://127.0.0.1:{p}/"),
        format!("https://localhost:{p}/"),
        format!("http://user:pw@127.0.0.1:{p}/"),
        format!("http://127.0.0.1:{p}@example.com/"),
    ];
    let mut through = Vec::new();
    for url in &urls {
        let got = probe(&c, url).await;
        println!("a1 client  {url} -> {got}");
        if got.starts_with("REACHED") {
            through.push(format!("client {url}"));
        }
        let r = fetch(&tool, url).await;
        println!(
            "a1 web_fetch {url} -> kind {:?} error {:?}",
            r.error_kind,
            r.error
                .as_deref()
                .map(|e| e.chars().take(120).collect::<String>())
        );
        if tool_reached_proxy(&r) {
            through.push(format!("web_fetch {url}"));
        }
    }
    assert!(through.is_empty(), "got through: {through:?}");
}

/// `allow_private` lists another spelling of loopback (`::ffff:127.0.0.1`,
/// `0.0.0.0`, `::ffff:0.0.0.0`): the mapped ones got through when proxies were matched by
/// exact address.
#[tokio::test(flavor = "multi_thread")]
async fn allow_private_lists_another_spelling_of_loopback() {
    let egress = Egress::new(Arc::new(Metrics::new()));
    let (_proxy, p) = start_proxy(&egress).await;
    let mut through = Vec::new();
    for (listed, url) in [
        (
            "::ffff:127.0.0.1",
            format!("http://[::ffff:127.0.0.1]:{p}/"),
        ),
        ("0.0.0.0", format!("http://0.0.0.0:{p}/")),
        ("::ffff:0.0.0.0", format!("http://[::ffff:0.0.0.0]:{p}/")),
        ("127.0.0.1", format!("http://[::ffff:127.0.0.1]:{p}/")),
    ] {
        let guard = egress.guard(&[listed.to_string()], Arc::new(SystemLookup));
        let c = EgressClient::new(&guard, Route::WebFetch, Vec::new(), |b| b).unwrap();
        let got = probe(&c, &url).await;
        println!("a2 allow_private [{listed}] {url} -> {got}");
        if got.starts_with("REACHED") {
            through.push(format!("[{listed}] {url}"));
        }
    }
    assert!(through.is_empty(), "got through: {through:?}");
}

/// A name in allow_private (or a configured endpoint's name) whose DNS answer is the
/// IPv4-mapped IPv6 form of the proxy's address, `::ffff:127.0.0.1` (an AAAA record). Got
/// through when the pre-check (`check_proxies`) and the connector compared exact addresses:
/// the kernel reports the peer as `[::ffff:127.0.0.1]:P`, not `127.0.0.1:P`.
#[tokio::test(flavor = "multi_thread")]
async fn listed_name_resolving_to_ipv4_mapped_loopback() {
    let egress = Egress::new(Arc::new(Metrics::new()));
    let (_proxy, p) = start_proxy(&egress).await;
    let lookup: Arc<dyn Lookup> = Arc::new(
        StaticLookup::new()
            .with("mine.test", &[ip("::ffff:127.0.0.1")])
            .with("mcp.test", &[ip("::ffff:127.0.0.1")]),
    );
    let mut through = Vec::new();

    // web_fetch's client, the name in allow_private.
    let guard = egress.guard(&["mine.test".into()], lookup.clone());
    let c = EgressClient::new(&guard, Route::WebFetch, Vec::new(), |b| b).unwrap();
    let url = format!("http://mine.test:{p}/");
    let got = probe(&c, &url).await;
    println!("a3 client allow_private [mine.test] {url} -> {got}");
    if got.starts_with("REACHED") {
        through.push(format!("client {url}"));
    }

    // The web_fetch tool itself.
    let cfg = WebFetchConfig {
        allow_private: vec!["mine.test".into()],
        ..Default::default()
    };
    let tool = WebFetch::guarded(&cfg, egress.guard(&cfg.allow_private, lookup.clone()))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));
    let r = fetch(&tool, &url).await;
    println!(
        "a3 web_fetch {url} -> kind {:?} error {:?} output {:?}",
        r.error_kind,
        r.error,
        r.output.chars().take(200).collect::<String>()
    );
    if tool_reached_proxy(&r) {
        through.push(format!("web_fetch tool {url}"));
    }

    // An endpoint whose configured port is the proxy's (an owner's MCP url by name).
    let guard = egress.guard(&[], lookup.clone());
    let ep = format!("http://mcp.test:{p}/mcp");
    let c = EgressClient::new(&guard, Route::Mcp, Endpoint::all_of([ep.as_str()]), |b| b).unwrap();
    let got = probe(&c, &ep).await;
    println!("a3 mcp endpoint {ep} -> {got}");
    if got.starts_with("REACHED") {
        through.push(format!("mcp endpoint {ep}"));
    }

    assert!(through.is_empty(), "got through: {through:?}");
}

/// The browser's own path. `EgressGuard::connect` (what a browser proxy dials for a
/// page) with the same IPv4-mapped answer, and the full chain: a page in session A, through
/// proxy A, opens a tunnel to proxy B and speaks to it.
#[tokio::test(flavor = "multi_thread")]
async fn browser_proxy_a_tunnels_to_proxy_b_via_ipv4_mapped_name() {
    let egress = Egress::new(Arc::new(Metrics::new()));
    let lookup: Arc<dyn Lookup> =
        Arc::new(StaticLookup::new().with("mine.test", &[ip("::ffff:127.0.0.1")]));
    let allow = vec!["mine.test".to_string()];
    let proxy_b = BrowserProxy::start(egress.guard(&allow, lookup.clone()), "telegram:victim")
        .await
        .unwrap();
    let pb: u16 = proxy_b.url().rsplit(':').next().unwrap().parse().unwrap();
    let proxy_a = BrowserProxy::start(egress.guard(&allow, lookup.clone()), "lark:attacker")
        .await
        .unwrap();
    let a_addr = proxy_a.url().trim_start_matches("http://").to_string();

    let guard = egress.guard(&allow, lookup.clone());
    let direct = guard
        .connect(Route::Browser, "mine.test", pb, &[], Duration::from_secs(2))
        .await;
    let direct_ok = direct.is_ok();
    println!(
        "a4 guard.connect(mine.test:{pb}) -> {}",
        match &direct {
            Ok((s, r)) => format!("CONNECTED to {:?} ({r:?})", s.peer_addr()),
            Err(ConnectFailure::Refused(r)) => format!("refused: {r}"),
            Err(e) => format!("failed: {e}"),
        }
    );
    drop(direct);

    // A page's wss://mine.test:PB/ (Chromium sends CONNECT to its proxy), then bytes inside.
    let mut s = tokio::net::TcpStream::connect(&a_addr).await.unwrap();
    s.write_all(
        format!("CONNECT mine.test:{pb} HTTP/1.1\r\nHost: mine.test:{pb}\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut buf = vec![0u8; 4096];
    let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
        .await
        .unwrap()
        .unwrap();
    let head = String::from_utf8_lossy(&buf[..n]).to_string();
    println!("a4 proxy A answered the CONNECT: {head:?}");
    let mut inside = String::new();
    if head.starts_with("HTTP/1.1 200") {
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut all = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(5), s.read_to_end(&mut all)).await;
        inside = String::from_utf8_lossy(&all).to_string();
        println!("a4 inside the tunnel, proxy B answered: {inside:?}");
    }
    assert!(
        !direct_ok && !inside.contains(PROXY_400),
        "got through: the browser path reached proxy B (direct connect ok: {direct_ok})"
    );
}

/// Redirects from an allowed loopback site to the proxy, through the `web_fetch`
/// tool (which follows hops itself) and through a following client (`web_search`'s kind, whose
/// redirect policy calls `check_url` only, not `check_proxies`).
#[tokio::test(flavor = "multi_thread")]
async fn redirects_to_the_proxy() {
    let egress = Egress::new(Arc::new(Metrics::new()));
    let (_proxy, p) = start_proxy(&egress).await;
    let site = FakeSite::start().await;
    let lookup: Arc<dyn Lookup> = Arc::new(
        StaticLookup::new()
            .with("localhost", &[ip("127.0.0.1")])
            .with("mine.test", &[ip("::ffff:127.0.0.1")]),
    );
    let allow = vec![
        "127.0.0.1".to_string(),
        "localhost".to_string(),
        "mine.test".to_string(),
    ];
    let targets = [
        format!("http://127.0.0.1:{p}/"),
        format!("http://localhost:{p}/"),
        format!("http://[::ffff:127.0.0.1]:{p}/"),
        format!("http://mine.test:{p}/"),
    ];
    let cfg = WebFetchConfig {
        allow_private: allow.clone(),
        ..Default::default()
    };
    let tool = WebFetch::guarded(&cfg, egress.guard(&allow, lookup.clone()))
        .reading_with(std::sync::Arc::new(ethan::media::page::ChildPages::alone()));
    let guard = egress.guard(&allow, lookup.clone());
    let base = format!("http://127.0.0.1:{}", site.port());
    let following = EgressClient::following(
        &guard,
        Route::WebSearch,
        Endpoint::all_of([base.as_str()]),
        5,
        |b| b,
    )
    .unwrap();
    let mut through = Vec::new();
    for t in &targets {
        let from = site.url(&format!("/redirect?to={}", urlencode(t)));
        let r = fetch(&tool, &from).await;
        println!(
            "a5 web_fetch {from} -> kind {:?} error {:?} reached {}",
            r.error_kind,
            r.error
                .as_deref()
                .map(|e| e.chars().take(160).collect::<String>()),
            tool_reached_proxy(&r)
        );
        if tool_reached_proxy(&r) {
            through.push(format!("web_fetch redirect to {t}"));
        }
        let got = probe(&following, &from).await;
        println!("a5 following client {from} -> {got}");
        if got.starts_with("REACHED") {
            through.push(format!("following client redirect to {t}"));
        }
    }
    assert!(through.is_empty(), "got through: {through:?}");
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
