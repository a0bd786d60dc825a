//! `GET /healthz`: 200 when the store and every enabled chat channel are up, else 503 (the web
//! page, served here, is not listed); the JSON body
//! gives each part's state, the version and pid, the turns in flight and the approvals waiting
//! (read by `ethan status`). `GET /metrics`: Prometheus text ([`crate::metrics`]).

use super::GatewayState;
use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::Json;
use ethan_channels::ChannelKind;
use serde_json::json;
use std::sync::Arc;

pub async fn healthz(State(s): State<Arc<GatewayState>>) -> impl IntoResponse {
    let store_ok = s.store.schema_version().await.is_ok();
    let mut channels = serde_json::Map::new();
    let mut all_up = store_ok;
    // The web page is served by this gateway: it is up whenever this answers.
    for (kind, ch) in s.channels.iter().filter(|(k, _)| **k != ChannelKind::Web) {
        let up = ch.is_up();
        all_up &= up;
        channels.insert(kind.as_str().into(), json!(if up { "up" } else { "down" }));
    }
    let status = if all_up {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (
        status,
        Json(json!({
            "status": if all_up { "ok" } else { "degraded" },
            "store": if store_ok { "up" } else { "down" },
            "channels": channels,
            "version": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "turns_in_flight": s.turns.in_flight(),
            "pending_approvals": s.consent.pending_count(),
        })),
    )
}

pub async fn metrics(State(s): State<Arc<GatewayState>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(),
    )
}
