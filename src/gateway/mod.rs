//! The HTTP gateway (docs/channels.md): one axum server on `gateway.listen` (default 127.0.0.1:8900;
//! port 0 takes a free port, which is logged), started by `ethan run` unless
//! `gateway.enabled: false`.
//!
//! Routes: `GET /healthz` and `GET /metrics` (no auth); `POST /api/chat` (a turn as a
//! Server-Sent Events stream) and `POST /api/consent/{request_id}` (web consent), both behind
//! `Authorization: Bearer <gateway.token>` ([`auth`]) and refused from a foreign page's
//! `Origin` ([`guard`]); the web chat page at `GET /` and its API under `/web/api/` ([`page`]);
//! the webhook routes channels contribute (`POST /telegram/webhook`, `POST /lark/events`),
//! which check their platform's secret instead.
//!
//! Web turns are not run here: they are handed to a [`TurnQueue`] (the daemon's session queues),
//! so they keep the same per-session order and cap on turns in flight as chat turns.

pub mod auth;
pub mod chat;
pub mod guard;
pub mod health;
pub mod page;

use crate::agent::{Agent, TurnInput, TurnReply};
use crate::consent::Consent;
use crate::store::DaemonStoreRef;
use axum::routing::{get, post};
use ethan_channels::{Channel, ChannelKind};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Runs turns in their session's order, under the daemon's cap on turns in flight.
#[async_trait::async_trait]
pub trait TurnQueue: Send + Sync {
    /// Queue `input` behind the turns already queued or running in `input.session_key` and run
    /// it when its turn comes (it waits, it is never refused). `cancel` stops the turn, or
    /// drops it while it still waits. `None` when the turn was not run: cancelled before it
    /// started, or the daemon is stopping.
    async fn run(&self, input: TurnInput, cancel: CancellationToken) -> Option<TurnReply>;

    /// Turns running or waiting now (for `/healthz`).
    fn in_flight(&self) -> usize {
        0
    }
}

/// What the gateway's handlers share.
pub struct GatewayState {
    pub agent: Arc<Agent>,
    pub consent: Arc<Consent>,
    pub store: DaemonStoreRef,
    /// The bearer token for `/api/*`, read where it lives at each request.
    pub tokens: auth::Tokens,
    pub channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    /// Where `POST /api/chat` turns are run.
    pub turns: Arc<dyn TurnQueue>,
    /// The web page's state (`None`: no page is served).
    pub page: Option<Arc<page::PageState>>,
    /// The daemon's metrics registry, served at `/metrics`.
    pub metrics: Arc<crate::metrics::Metrics>,
}

/// The gateway's own routes (channels' webhook routes are merged in by the daemon).
pub fn router(state: Arc<GatewayState>) -> axum::Router {
    let page = state.page.clone();
    let api = axum::Router::new()
        .route("/healthz", get(health::healthz))
        .route("/metrics", get(health::metrics))
        .route("/api/chat", post(chat::chat))
        .route("/api/consent/{request_id}", post(chat::consent))
        .with_state(state);
    match page {
        Some(p) => api.merge(page::router(p)),
        None => api,
    }
}

/// Bind `listen` (port 0 = any free port; the chosen address is logged).
pub async fn bind(listen: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(listen).await?;
    tracing::info!("gateway listening on http://{}", listener.local_addr()?);
    Ok(listener)
}

/// Serve `router` on an already bound listener until `shutdown` fires (in-flight requests are
/// finished first). Connections are `TCP_NODELAY`: a streamed answer's small `delta` events go
/// out as they come instead of waiting for the client's delayed ACK (~40 ms each). Handlers see
/// the peer's address (`ConnectInfo<SocketAddr>`: the page's sign-in asks it).
pub async fn serve_listener(
    listener: TcpListener,
    router: axum::Router,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    use axum::serve::ListenerExt;
    let listener = listener.tap_io(|tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY on a gateway connection: {e}");
        }
    });
    axum::serve(
        listener,
        router.into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async move {
        let _ = shutdown.changed().await;
    })
    .await
}
