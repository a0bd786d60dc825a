//! The browser's only way out: an HTTP proxy the daemon runs on loopback, through which
//! Chromium makes every connection (the browser tools, `tools::builtin::browser` of the root
//! crate, start it with this proxy and the flags that close its direct paths).
//!
//! One [`BrowserProxy`] per browser context (an Ethan session's browsing), on a port of its
//! own, so each connection is attributed to its session; one more that refuses everything for
//! the browser's default context. What it speaks (RFC 9110 §9.3.6, RFC 9112 §3.2):
//! - `CONNECT host:port` (HTTPS, WebSocket — Chromium tunnels both): the guard judges the
//!   destination and connects to a checked address ([`EgressGuard::connect`]); then `200` and
//!   the bytes are copied both ways. A refusal answers `403` and connects nothing;
//! - a plain-HTTP request in absolute form (`GET http://host:port/path`): judged and connected
//!   the same way, sent on as an origin-form request on a connection of its own, the answer
//!   passed back. Hop-by-hop headers are dropped both ways. A refusal answers `403` with the
//!   reason as text.
//!
//! On top of the guard, a proxy can hold its pages to a [`Zone`] (the browser gives each tab
//! one, by where the tools navigated it): a page opened on a public site reaches public
//! addresses only — never a host of `allow_private`, the owner's network — and a page the tools
//! opened on a host of `allow_private` reaches that host only. And a proxy has a gate
//! ([`BrowserProxy::set_open`]): closed, it refuses every request and cuts every connection it
//! holds (tunnels, WebSockets, requests in flight), so a page can send nothing at all, not even
//! by closing a connection.
//!
//! Nothing reaches a destination before the guard said yes, so a page's pre-connect, DNS
//! prefetch (Chromium resolves nothing itself behind a proxy), WebSocket, worker, service
//! worker, popup, iframe, prefetch, image or beacon toward a refused address never opens a
//! connection there. Refusals are kept per proxy for the tools to report
//! ([`BrowserProxy::take_refused`]); the first host of the owner's network reached is kept for the
//! taint rule ([`BrowserProxy::private_reached`]).

use super::{ConnectFailure, EgressGuard, Reach, Route};
use bytes::Bytes;
use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Time to open a connection to a destination.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Refusals kept for the tools between two looks.
const MAX_REFUSED: usize = 100;

/// Headers that belong to one hop, never passed on (RFC 9110 §7.6.1).
const HOP_BY_HOP: &[&str] = &[
    "connection",
    "proxy-connection",
    "keep-alive",
    "proxy-authorization",
    "proxy-authenticate",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

type Body = BoxBody<Bytes, hyper::Error>;

/// Which hosts the pages behind a proxy may reach, on top of the guard's address rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Zone {
    /// Public addresses only: a host of `allow_private` is refused.
    Public,
    /// This host of `allow_private` (normalised) and nothing else.
    OwnersHost(String),
}

impl Zone {
    /// The zone of a page at `url`: the host's own when `allow_private` lists it, else public.
    pub fn of_url(guard: &EgressGuard, url: &reqwest::Url) -> Zone {
        match url.host_str() {
            Some(h) if guard.host_allowed(h) => Zone::OwnersHost(super::address::normalize_host(h)),
            _ => Zone::Public,
        }
    }

    /// Why a page of this zone may not reach `host`, if it may not.
    fn refuses(&self, guard: &EgressGuard, host: &str) -> Option<String> {
        match self {
            Zone::Public if guard.host_allowed(host) => Some(format!(
                "{host} is a host of your own network (tools.web_fetch.allow_private), and this \
                 page is not on it: a page reaches such a host only when the tools open it \
                 (browser_page goto)"
            )),
            Zone::OwnersHost(own) if !same_host(own, host) => Some(format!(
                "this page is on {own}, a host of your own network, and reaches {own} only"
            )),
            _ => None,
        }
    }
}

/// Whether `a` and `b` name the same host (the same name, or the same address however spelt).
fn same_host(a: &str, b: &str) -> bool {
    let (a, b) = (
        super::address::normalize_host(a),
        super::address::normalize_host(b),
    );
    a == b
        || matches!(
            (a.parse::<std::net::IpAddr>(), b.parse::<std::net::IpAddr>()),
            (Ok(x), Ok(y)) if x == y
        )
}

/// Why a closed gate refuses.
const GATE_CLOSED: &str = "this conversation has read private data, and no tool is acting on \
     this page now: after a private read a page reaches the network only while browser_page acts \
     on it (goto, click, type, select), each asked first";

struct State {
    guard: EgressGuard,
    /// `Some(why)`: refuse everything (the browser's default context).
    refuse_all: Option<String>,
    /// The hosts its pages may reach; `None`: whatever the guard allows.
    zone: Option<Zone>,
    /// Whether requests are let through at all ([`BrowserProxy::set_open`]).
    open: std::sync::atomic::AtomicBool,
    /// Cancelled to cut every connection of the proxy (a child of the proxy's stop token);
    /// replaced by a fresh one each time.
    connections: Mutex<CancellationToken>,
    stop: CancellationToken,
    /// Who the connections are for, in the log.
    name: String,
    refused: Mutex<Vec<String>>,
    private: Mutex<Option<String>>,
}

impl State {
    fn refuse(&self, what: String) {
        let mut r = self.refused.lock().unwrap_or_else(|p| p.into_inner());
        if r.len() < MAX_REFUSED {
            r.push(what);
        }
    }

    /// The token the connections accepted now end with.
    fn connections(&self) -> CancellationToken {
        self.connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn reached(&self, reach: Reach, host: &str) {
        if reach == Reach::OwnersNetwork {
            self.private
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert_with(|| host.to_string());
        }
    }
}

/// One running proxy; stopped (with its tunnels) when dropped.
pub struct BrowserProxy {
    addr: SocketAddr,
    state: Arc<State>,
    stop: CancellationToken,
}

impl Drop for BrowserProxy {
    fn drop(&mut self) {
        self.stop.cancel();
        self.state.guard.shared().remove_proxy(self.addr);
    }
}

impl BrowserProxy {
    /// A proxy on a fresh loopback port whose connections pass `guard`; `name` says whose they
    /// are (logs).
    pub async fn start(guard: EgressGuard, name: &str) -> std::io::Result<Self> {
        Self::start_with(guard, name, None, None).await
    }

    /// A proxy whose pages reach `zone` only (and what the guard allows there).
    pub async fn start_in(guard: EgressGuard, name: &str, zone: Zone) -> std::io::Result<Self> {
        Self::start_with(guard, name, None, Some(zone)).await
    }

    /// A proxy that refuses every request, saying `why`.
    pub async fn refusing(guard: EgressGuard, why: &str) -> std::io::Result<Self> {
        Self::start_with(guard, "browser", Some(why.to_string()), None).await
    }

    async fn start_with(
        guard: EgressGuard,
        name: &str,
        refuse_all: Option<String>,
        zone: Option<Zone>,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        // Refused as a destination by every guard sharing this one's `Egress`: a page must not
        // reach one proxy through another (it would act under another session's name).
        guard.shared().add_proxy(addr);
        let stop = CancellationToken::new();
        let state = Arc::new(State {
            guard,
            refuse_all,
            zone,
            open: std::sync::atomic::AtomicBool::new(true),
            connections: Mutex::new(stop.child_token()),
            stop: stop.clone(),
            name: name.to_string(),
            refused: Mutex::new(Vec::new()),
            private: Mutex::new(None),
        });
        ethan_core::task::spawn(accept_loop(listener, state.clone(), stop.clone()));
        Ok(Self { addr, state, stop })
    }

    /// The zone its pages are held to (`None`: the guard's rule alone).
    pub fn zone(&self) -> Option<&Zone> {
        self.state.zone.as_ref()
    }

    /// Open or close the gate. Closing also cuts every connection the proxy holds, at once:
    /// what a page had open (a tunnel, a WebSocket, a request in flight) ends then, not when
    /// the page is closed or does something later.
    pub fn set_open(&self, open: bool) {
        self.state
            .open
            .store(open, std::sync::atomic::Ordering::SeqCst);
        if !open {
            let mut c = self
                .state
                .connections
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            c.cancel();
            *c = self.state.stop.child_token();
        }
    }

    /// Whether the gate is open.
    pub fn is_open(&self) -> bool {
        self.state.open.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The proxy as Chromium's `--proxy-server` takes it: `http://127.0.0.1:<port>`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The requests refused since the last call, each `destination: why`.
    pub fn take_refused(&self) -> Vec<String> {
        std::mem::take(&mut *self.state.refused.lock().unwrap_or_else(|p| p.into_inner()))
    }

    /// The requests refused since the last [`BrowserProxy::take_refused`], left in place.
    pub fn peek_refused(&self) -> Vec<String> {
        self.state
            .refused
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The first host of the owner's network (`allow_private`) this proxy connected to.
    pub fn private_reached(&self) -> Option<String> {
        self.state
            .private
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

async fn accept_loop(
    listener: tokio::net::TcpListener,
    state: Arc<State>,
    stop: CancellationToken,
) {
    loop {
        let (stream, _) = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    tracing::debug!("browser proxy accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        // The connection ends when the proxy stops or its connections are cut.
        let (state, stop) = (state.clone(), state.connections());
        ethan_core::task::spawn(async move {
            let for_requests = stop.clone();
            let service = hyper::service::service_fn(move |req| {
                let (state, stop) = (state.clone(), for_requests.clone());
                async move { Ok::<_, Infallible>(handle(&state, req, stop).await) }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::select! {
                _ = stop.cancelled() => {}
                r = conn => if let Err(e) = r { tracing::debug!("browser proxy connection: {e}") },
            }
        });
    }
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    let mut r = Response::new(
        Full::new(Bytes::from(body))
            .map_err(|never| match never {})
            .boxed(),
    );
    *r.status_mut() = status;
    let h = r.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        hyper::header::CACHE_CONTROL,
        hyper::header::HeaderValue::from_static("no-store"),
    );
    r
}

/// The host and port of a request: the authority of `CONNECT`, the absolute URI otherwise.
fn destination(req: &Request<Incoming>) -> Option<(String, u16, bool)> {
    let uri = req.uri();
    let auth = uri.authority()?;
    let connect = req.method() == Method::CONNECT;
    if !connect && uri.scheme_str() != Some("http") {
        return None;
    }
    let port = auth.port_u16().unwrap_or(if connect { 443 } else { 80 });
    Some((auth.host().to_string(), port, connect))
}

async fn handle(state: &State, req: Request<Incoming>, stop: CancellationToken) -> Response<Body> {
    let Some((host, port, connect)) = destination(&req) else {
        return text(
            StatusCode::BAD_REQUEST,
            "this proxy takes CONNECT and absolute http:// requests only".into(),
        );
    };
    let shown = if connect {
        format!("{host}:{port} (a tunnel for https or a WebSocket)")
    } else {
        req.uri().to_string()
    };
    if let Some(why) = &state.refuse_all {
        state.guard.record(Route::Browser, &host, port, "refused");
        return text(StatusCode::FORBIDDEN, format!("Refused: {why}"));
    }
    // The most basic reason first: the guard's address rule (without resolving), then the
    // page's zone, then the gate.
    let unlisted = state
        .guard
        .check_host_port(&host, port, &[])
        .err()
        .map(|r| r.to_string());
    let outside = || {
        state
            .zone
            .as_ref()
            .and_then(|z| z.refuses(&state.guard, &host))
    };
    let closed =
        || (!state.open.load(std::sync::atomic::Ordering::SeqCst)).then(|| GATE_CLOSED.to_string());
    if let Some(why) = unlisted.or_else(outside).or_else(closed) {
        state.guard.record(Route::Browser, &host, port, "refused");
        tracing::info!("browser ({}): {shown} refused: {why}", state.name);
        state.refuse(format!("{shown}: {why}"));
        return text(
            StatusCode::FORBIDDEN,
            format!("Refused by Ethan's egress guard: {why}"),
        );
    }
    let (tcp, reach) = match state
        .guard
        .connect(Route::Browser, &host, port, &[], CONNECT_TIMEOUT)
        .await
    {
        Ok(c) => c,
        Err(ConnectFailure::Refused(r)) => {
            tracing::info!("browser ({}): {shown} refused: {r}", state.name);
            state.refuse(format!("{shown}: {r}"));
            return text(
                StatusCode::FORBIDDEN,
                format!("Refused by Ethan's egress guard: {r}"),
            );
        }
        Err(ConnectFailure::Network(e)) => {
            return text(StatusCode::BAD_GATEWAY, format!("{shown}: {e}"));
        }
    };
    if stop.is_cancelled() || !state.open.load(std::sync::atomic::Ordering::SeqCst) {
        // Cut while the connection was being made: nothing is sent on it.
        drop(tcp);
        state.refuse(format!("{shown}: {GATE_CLOSED}"));
        return text(
            StatusCode::FORBIDDEN,
            format!("Refused by Ethan's egress guard: {GATE_CLOSED}"),
        );
    }
    state.reached(reach, &host);
    if connect {
        ethan_core::task::spawn(tunnel(req, tcp, stop));
        return Response::new(Full::new(Bytes::new()).map_err(|n| match n {}).boxed());
    }
    match forward(req, tcp, stop).await {
        Ok(r) => r,
        Err(e) => text(StatusCode::BAD_GATEWAY, format!("{shown}: {e}")),
    }
}

/// Copy the bytes of an accepted `CONNECT` both ways until either side closes.
async fn tunnel(
    req: Request<Incoming>,
    mut upstream: tokio::net::TcpStream,
    stop: CancellationToken,
) {
    let upgraded = match hyper::upgrade::on(req).await {
        Ok(u) => u,
        Err(e) => {
            tracing::debug!("browser proxy upgrade: {e}");
            return;
        }
    };
    let mut client = TokioIo::new(upgraded);
    tokio::select! {
        biased;
        _ = stop.cancelled() => {}
        _ = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {}
    }
}

fn strip_hop_by_hop(headers: &mut hyper::HeaderMap) {
    let named: Vec<String> = headers
        .get_all(hyper::header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|n| n.trim().to_ascii_lowercase())
        .filter(|n| !n.is_empty())
        .collect();
    for h in HOP_BY_HOP
        .iter()
        .copied()
        .chain(named.iter().map(String::as_str))
    {
        headers.remove(h);
    }
}

/// Send a plain-HTTP request on `upstream` in origin form and return the answer.
async fn forward(
    req: Request<Incoming>,
    upstream: tokio::net::TcpStream,
    stop: CancellationToken,
) -> Result<Response<Body>, String> {
    let (mut parts, body) = req.into_parts();
    let path = parts
        .uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "/".into());
    if !parts.headers.contains_key(hyper::header::HOST) {
        if let Some(a) = parts.uri.authority() {
            if let Ok(v) = hyper::header::HeaderValue::from_str(a.as_str()) {
                parts.headers.insert(hyper::header::HOST, v);
            }
        }
    }
    parts.uri = path.parse().map_err(|e| format!("bad path: {e}"))?;
    strip_hop_by_hop(&mut parts.headers);
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(upstream))
        .await
        .map_err(|e| e.to_string())?;
    ethan_core::task::spawn(async move {
        tokio::select! {
            biased;
            _ = stop.cancelled() => {}
            r = conn => if let Err(e) = r { tracing::debug!("browser proxy upstream: {e}") },
        }
    });
    let resp = sender
        .send_request(Request::from_parts(parts, body))
        .await
        .map_err(|e| e.to_string())?;
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers);
    Ok(Response::from_parts(parts, body.boxed()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StaticLookup;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    async fn ask(proxy: &BrowserProxy, request: &str) -> String {
        let mut s = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 4096];
        let n = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .unwrap()
            .unwrap();
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    /// A tunnel or a forwarded request toward a loopback address the guard refuses connects
    /// nothing there; one toward a host of `allow_private` goes through and is remembered.
    #[tokio::test]
    async fn refused_destinations_are_never_connected() {
        let refused = tokio::net::TcpListener::bind("127.0.0.2:0").await.unwrap();
        let rport = refused.local_addr().unwrap().port();
        let app = axum::Router::new().fallback(|| async { "allowed page" });
        let ok = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let okport = ok.local_addr().unwrap().port();
        tokio::spawn(async move {
            let _ = axum::serve(ok, app).await;
        });
        let guard = EgressGuard::new(&["127.0.0.1".into()], Arc::new(StaticLookup::new()));
        let proxy = BrowserProxy::start(guard.clone(), "test").await.unwrap();
        let r = ask(
            &proxy,
            &format!("CONNECT 127.0.0.2:{rport} HTTP/1.1\r\nHost: 127.0.0.2:{rport}\r\n\r\n"),
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 403"), "{r}");
        let r = ask(
            &proxy,
            &format!("GET http://127.0.0.2:{rport}/x HTTP/1.1\r\nHost: 127.0.0.2:{rport}\r\n\r\n"),
        )
        .await;
        assert!(
            r.starts_with("HTTP/1.1 403") && r.contains("loopback"),
            "{r}"
        );
        let accepted = tokio::time::timeout(Duration::from_millis(300), refused.accept()).await;
        assert!(accepted.is_err(), "the refused address was connected to");
        let refusals = proxy.take_refused();
        assert_eq!(refusals.len(), 2, "{refusals:?}");
        assert!(refusals[1].starts_with(&format!("http://127.0.0.2:{rport}/x")));
        assert!(proxy.private_reached().is_none());

        let r = ask(
            &proxy,
            &format!(
                "GET http://127.0.0.1:{okport}/ HTTP/1.1\r\nHost: 127.0.0.1:{okport}\r\n\
                 Proxy-Connection: keep-alive\r\n\r\n"
            ),
        )
        .await;
        assert!(
            r.starts_with("HTTP/1.1 200") && r.contains("allowed page"),
            "{r}"
        );
        assert_eq!(proxy.private_reached().as_deref(), Some("127.0.0.1"));

        let all = BrowserProxy::refusing(guard, "no conversation")
            .await
            .unwrap();
        let r = ask(
            &all,
            &format!("GET http://127.0.0.1:{okport}/ HTTP/1.1\r\nHost: x\r\n\r\n"),
        )
        .await;
        assert!(r.starts_with("HTTP/1.1 403"), "{r}");
    }

    /// A TCP echo server on `ip`; its port.
    async fn echo(ip: &str) -> u16 {
        let l = tokio::net::TcpListener::bind(format!("{ip}:0"))
            .await
            .unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        port
    }

    fn connect_to(ip: &str, port: u16) -> String {
        format!("CONNECT {ip}:{port} HTTP/1.1\r\nHost: {ip}:{port}\r\n\r\n")
    }

    /// A page held to the public zone reaches no host of `allow_private`; one held to a host of
    /// `allow_private` reaches that host only.
    #[tokio::test]
    async fn a_zone_holds_its_pages_to_its_hosts() {
        let (one, three) = (echo("127.0.0.1").await, echo("127.0.0.3").await);
        let guard = EgressGuard::new(
            &["127.0.0.1".into(), "127.0.0.3".into()],
            Arc::new(StaticLookup::new()),
        );
        let public = BrowserProxy::start_in(guard.clone(), "t", Zone::Public)
            .await
            .unwrap();
        let r = ask(&public, &connect_to("127.0.0.1", one)).await;
        assert!(
            r.starts_with("HTTP/1.1 403") && r.contains("own network"),
            "{r}"
        );
        let nas = BrowserProxy::start_in(guard, "t", Zone::OwnersHost("127.0.0.1".into()))
            .await
            .unwrap();
        let r = ask(&nas, &connect_to("127.0.0.3", three)).await;
        assert!(
            r.starts_with("HTTP/1.1 403") && r.contains("127.0.0.1 only"),
            "{r}"
        );
        let r = ask(&nas, &connect_to("127.0.0.1", one)).await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
        assert_eq!(public.take_refused().len(), 1);
        assert_eq!(nas.take_refused().len(), 1);
    }

    /// Closing the gate cuts a tunnel the page had open and refuses every new request until it
    /// opens again.
    #[tokio::test]
    async fn a_closed_gate_cuts_what_is_open_and_lets_nothing_through() {
        let port = echo("127.0.0.1").await;
        let guard = EgressGuard::new(&["127.0.0.1".into()], Arc::new(StaticLookup::new()));
        let proxy = BrowserProxy::start(guard, "t").await.unwrap();
        let mut s = tokio::net::TcpStream::connect(proxy.addr).await.unwrap();
        s.write_all(connect_to("127.0.0.1", port).as_bytes())
            .await
            .unwrap();
        let mut buf = vec![0u8; 4096];
        let n = s.read(&mut buf).await.unwrap();
        assert!(String::from_utf8_lossy(&buf[..n]).starts_with("HTTP/1.1 200"));
        s.write_all(b"ping").await.unwrap();
        let n = s.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"ping");

        proxy.set_open(false);
        assert!(!proxy.is_open());
        let end = tokio::time::timeout(Duration::from_secs(5), s.read(&mut buf))
            .await
            .expect("the tunnel was cut");
        assert!(matches!(end, Ok(0) | Err(_)), "{end:?}");
        let r = ask(&proxy, &connect_to("127.0.0.1", port)).await;
        assert!(
            r.starts_with("HTTP/1.1 403") && r.contains("no tool is acting"),
            "{r}"
        );

        proxy.set_open(true);
        let r = ask(&proxy, &connect_to("127.0.0.1", port)).await;
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
}
