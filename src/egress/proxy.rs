//! The browser's only way out: an HTTP proxy the daemon runs on loopback, through which
//! Chromium makes every connection ([`crate::tools::builtin::browser`] starts it with this
//! proxy and the flags that close its direct paths).
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

struct State {
    guard: EgressGuard,
    /// `Some(why)`: refuse everything (the browser's default context).
    refuse_all: Option<String>,
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

    fn reached(&self, reach: Reach, host: &str) {
        if reach == Reach::OwnersNetwork {
            self.private
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert_with(|| host.to_string());
        }
    }
}

/// The addresses of the proxies running in this process: a page must not reach one proxy
/// through another (it would act under another session's name), whatever `allow_private` says.
static LISTENERS: std::sync::LazyLock<Mutex<std::collections::HashSet<SocketAddr>>> =
    std::sync::LazyLock::new(Default::default);

/// Whether `addr` is a browser proxy of this process.
pub fn is_proxy(addr: SocketAddr) -> bool {
    LISTENERS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .contains(&addr)
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
        LISTENERS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.addr);
    }
}

impl BrowserProxy {
    /// A proxy on a fresh loopback port whose connections pass `guard`; `name` says whose they
    /// are (logs).
    pub async fn start(guard: EgressGuard, name: &str) -> std::io::Result<Self> {
        Self::start_with(guard, name, None).await
    }

    /// A proxy that refuses every request, saying `why`.
    pub async fn refusing(guard: EgressGuard, why: &str) -> std::io::Result<Self> {
        Self::start_with(guard, "browser", Some(why.to_string())).await
    }

    async fn start_with(
        guard: EgressGuard,
        name: &str,
        refuse_all: Option<String>,
    ) -> std::io::Result<Self> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        LISTENERS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(addr);
        let state = Arc::new(State {
            guard,
            refuse_all,
            name: name.to_string(),
            refused: Mutex::new(Vec::new()),
            private: Mutex::new(None),
        });
        let stop = CancellationToken::new();
        tokio::spawn(accept_loop(listener, state.clone(), stop.clone()));
        Ok(Self { addr, state, stop })
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
        let (state, stop) = (state.clone(), stop.clone());
        tokio::spawn(async move {
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
        super::record(Route::Browser, &host, port, "refused");
        return text(StatusCode::FORBIDDEN, format!("Refused: {why}"));
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
    state.reached(reach, &host);
    if connect {
        tokio::spawn(tunnel(req, tcp, stop));
        return Response::new(Full::new(Bytes::new()).map_err(|n| match n {}).boxed());
    }
    match forward(req, tcp).await {
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
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!("browser proxy upstream: {e}");
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
    use crate::egress::StaticLookup;
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
}
