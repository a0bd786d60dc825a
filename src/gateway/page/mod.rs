//! The web chat page the gateway serves at `GET /`: sign in with the gateway token, a list of
//! the owner's web sessions, a conversation that streams as the model writes, a line per tool
//! call, approvals with their buttons, cards as HTML tables, lists and stat blocks.
//!
//! The page is a channel of the daemon ([`channel::WebChannel`], `ChannelKind::Web`): its
//! messages go through the router like chat messages (recorded first, run in the session's
//! queue, re-run after a restart), and what the turn shows reaches the page through the
//! [`hub::Hub`] and the session's event stream ([`stream`]). Everything the model wrote is
//! rendered to HTML and sanitised on the server ([`render`]); the page inserts only that.
//!
//! # Risk, and the paths it opens
//! Whoever holds a signed-in page is the owner: they approve shell commands. So the page is a
//! target, and each way in is closed where it opens:
//! - **the token**: exchanged once ([`api::login`]) for a session ([`session`]) of two halves,
//!   an `HttpOnly`, `SameSite=Strict` cookie (`Secure` over TLS) and a header the page keeps;
//!   it expires after 7 days, signing out ends it on the server ([`revoked`]) and `ethan
//!   gateway token --rotate` ends every one. Guesses of the token are compared at most one a
//!   second in all, right ones no faster than wrong ones ([`throttle`]). Sign-in over plain
//!   HTTP from another machine is refused (the token would cross the network in clear);
//! - **cross-site requests (CSRF)**: `SameSite=Strict`, and every change must carry this
//!   gateway's `Origin` ([`crate::gateway::guard`]), and the session header (which a form or a
//!   cross-origin `fetch` cannot add without a preflight nobody answers);
//! - **another page on the same machine** (`localhost:3000` is "same-site" and receives our
//!   cookie, since cookies ignore ports): its `Origin` is refused, and it lacks the header; a
//!   cookie of the same name it sets does not shadow the owner's (every value is tried);
//! - **XSS through model output**: no model text is inserted as HTML in the browser; answers
//!   and cards are Markdown/HTML rendered and sanitised on the server with nothing that runs or
//!   loads, and no class but a code block's `language-…` (an answer cannot dress as the page's
//!   own approvals or messages); the Content-Security-Policy allows no inline script, no
//!   `eval`, and only this origin's files, and requires Trusted Types for any HTML insertion;
//! - **clickjacking**: `frame-ancestors 'none'` and `X-Frame-Options: DENY`;
//! - **DNS rebinding**: the page and its API answer only an IP address, `localhost` or
//!   `gateway.public_url` as `Host`.

pub mod api;
pub mod assets;
pub mod channel;
pub mod history;
pub mod hub;
pub mod render;
pub mod revoked;
pub mod session;
pub mod stream;
pub mod throttle;

use super::auth::Tokens;
use super::guard::PublicUrl;
use crate::consent::Consent;
use crate::store::DaemonStoreRef;
use axum::response::Response;
use axum::routing::{get, post};
use ethan_channels::InboundSink;
use std::sync::Arc;
use tokio::sync::watch;

/// What the page's handlers share.
pub struct PageState {
    pub hub: Arc<hub::Hub>,
    /// Where the page's messages are published (the router).
    pub sink: Arc<dyn InboundSink>,
    pub store: DaemonStoreRef,
    pub consent: Arc<Consent>,
    pub tokens: Tokens,
    /// `gateway.public_url`, when the gateway is served under a name.
    pub public: Option<PublicUrl>,
    /// Fires when the daemon stops (ends the event streams).
    pub shutdown: watch::Receiver<bool>,
    /// The sign-in guesses, compared one a second ([`throttle`]).
    pub guesses: throttle::Guesses,
}

/// The page's routes, every response with the security headers.
pub fn router(state: Arc<PageState>) -> axum::Router {
    axum::Router::new()
        .route("/", get(assets::index))
        .route("/assets/{name}", get(assets::asset))
        .route("/web/api/login", post(api::login))
        .route("/web/api/logout", post(api::logout))
        .route("/web/api/me", get(api::me))
        .route("/web/api/sessions", get(api::sessions))
        .route("/web/api/sessions/{id}", get(api::conversation))
        .route("/web/api/sessions/{id}/messages", post(api::send))
        .route("/web/api/sessions/{id}/stop", post(api::stop))
        .route("/web/api/sessions/{id}/events", get(api::events))
        .route("/web/api/consent/{request_id}", post(api::consent))
        .layer(axum::middleware::map_response(with_headers))
        .with_state(state)
}

async fn with_headers(mut r: Response) -> Response {
    super::guard::security_headers(r.headers_mut());
    r
}
