//! The HTTP gateway (DESIGN §8): one axum server on `gateway.listen`.
//!
//! For now it serves the routes channels contribute — `POST /lark/events` in Lark webhook mode;
//! `/healthz`, `/api/*` and the Telegram webhook come later. The daemon binds first (so a port
//! already in use stops the start with a clear error), then serves until shutdown.

use std::net::SocketAddr;
use tokio::net::TcpListener;
use tokio::sync::watch;

/// Bind `listen` (port 0 = any free port; the chosen address is logged).
pub async fn bind(listen: SocketAddr) -> std::io::Result<TcpListener> {
    let listener = TcpListener::bind(listen).await?;
    tracing::info!("gateway listening on http://{}", listener.local_addr()?);
    Ok(listener)
}

/// Serve `router` on an already bound listener until `shutdown` fires (in-flight requests are
/// finished first).
pub async fn serve_listener(
    listener: TcpListener,
    router: axum::Router,
    mut shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(async move {
            let _ = shutdown.changed().await;
        })
        .await
}

/// [`bind`] then [`serve_listener`].
pub async fn serve(
    listen: SocketAddr,
    router: axum::Router,
    shutdown: watch::Receiver<bool>,
) -> std::io::Result<()> {
    let listener = bind(listen).await?;
    serve_listener(listener, router, shutdown).await
}
