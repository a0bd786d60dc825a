//! The page's API, under `/web/api/` (JSON; see `docs/channels.md`, "The web page"):
//!
//! | route | what |
//! |---|---|
//! | `POST login` `{token}` | the gateway token for a session: `Set-Cookie` and `{csrf}` |
//! | `POST logout` | ends the session (on the server too) and clears the cookie |
//! | `GET me` | `{ok: true}` when signed in (else 401) |
//! | `GET sessions` | the web sessions, newest first: `[{id, title, updated_at}]` |
//! | `GET sessions/{id}` | the conversation ([`super::history::Conversation`]) |
//! | `POST sessions/{id}/messages` `{id, text}` | send a message (`id`: the page's, for dedupe) |
//! | `POST sessions/{id}/stop` | stop the turn running (as `/stop`) |
//! | `GET sessions/{id}/events` | the live events, as Server-Sent Events (`Last-Event-ID`) |
//! | `POST consent/{request_id}` `{choice}` | answer an approval: `once`, `session`, `deny` |
//!
//! Every route but `login` needs the session cookie and its `X-Ethan-Csrf` header; every one
//! checks `Host`; those that change something check `Origin`, reads check `Sec-Fetch-Site`
//! ([`crate::gateway::guard`]). Sign-in is refused over plain HTTP from another machine, and
//! its guesses are compared one a second ([`super::throttle`]).

use super::session::{self, Signer, Valid, CSRF_HEADER};
use super::{history, revoked, PageState};
use crate::gateway::guard;
use axum::extract::connect_info::ConnectInfo;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::sse::{KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ethan_channels::{
    ApprovalChoice, ApprovalDecision, ChannelKind, ChatKind, ChatRef, InboundEvent, PublishOutcome,
    Sender,
};
use serde::Deserialize;
use serde_json::{json, Value};
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// Longest message the page sends, in bytes.
const MAX_TEXT: usize = 32 * 1024;

fn error(status: StatusCode, msg: &str) -> Response {
    (status, no_store(), Json(json!({ "error": msg }))).into_response()
}

/// A check that failed: the status and the message for the page.
struct Refused(StatusCode, &'static str);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        error(self.0, self.1)
    }
}

fn no_store() -> [(header::HeaderName, HeaderValue); 1] {
    [(header::CACHE_CONTROL, HeaderValue::from_static("no-store"))]
}

fn ok(v: Value) -> Response {
    (no_store(), Json(v)).into_response()
}

/// What a request must show.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Need {
    /// A read: `Host`, `Sec-Fetch-Site`, a foreign `Origin` refused, a session.
    Read,
    /// A change: `Host`, `Origin` present and this gateway's, a session.
    Write,
}

/// The `Host` check; the host on success.
fn host_of(s: &PageState, h: &HeaderMap) -> Result<String, Refused> {
    match guard::host(h) {
        Some(host) if guard::host_allowed(&host, s.public.as_ref()) => Ok(host),
        _ => Err(Refused(
            StatusCode::MISDIRECTED_REQUEST,
            "this page is served only at an address (http://127.0.0.1:8900/), localhost or \
             gateway.public_url: another name could be a DNS rebinding attack",
        )),
    }
}

/// The origin checks of `need` (see [`Need`]).
fn origin_ok(s: &PageState, h: &HeaderMap, host: &str, need: Need) -> Result<(), Refused> {
    let refused = || {
        Err(Refused(
            StatusCode::FORBIDDEN,
            "refused: the request does not come from this page (Origin)",
        ))
    };
    match (guard::origin(h), need) {
        (Some(o), _) if !guard::same_origin(&o, host, s.public.as_ref()) => return refused(),
        (None, Need::Write) => return refused(),
        _ => {}
    }
    if need == Need::Read && !guard::fetch_site_ok(h) {
        return refused();
    }
    Ok(())
}

/// `Host`, origin and session checks: the session, or the response to send when one fails.
/// Every session cookie the request carries is tried (another port's page can add one of the
/// same name); a session that signed out is refused.
async fn gate(s: &PageState, h: &HeaderMap, need: Need) -> Result<Valid, Refused> {
    let host = host_of(s, h)?;
    origin_ok(s, h, &host, need)?;
    let signed_out = || Refused(StatusCode::UNAUTHORIZED, "sign in with the gateway token");
    let unavailable = |e: crate::store::StoreError| {
        tracing::error!("cannot check a web session: {e}");
        Refused(
            StatusCode::SERVICE_UNAVAILABLE,
            "the database is unavailable",
        )
    };
    let cookies = session::cookies_of(h);
    let Some(csrf) = h.get(CSRF_HEADER).and_then(|v| v.to_str().ok()) else {
        return Err(signed_out());
    };
    if cookies.is_empty() {
        return Err(signed_out());
    }
    let Some(signer) = Signer::load(&s.tokens, false).await.map_err(unavailable)? else {
        return Err(signed_out());
    };
    let now = crate::store::now();
    let Some(valid) = cookies.iter().find_map(|c| signer.verify(c, csrf, now)) else {
        return Err(signed_out());
    };
    if revoked::is_revoked(&s.store, &valid.nonce)
        .await
        .map_err(unavailable)?
    {
        return Err(signed_out());
    }
    Ok(valid)
}

/// The peer's address, when the server recorded it.
fn peer_of(req: &Request) -> Option<IpAddr> {
    req.extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip())
}

/// A session or message id the page made: 1–64 of `[A-Za-z0-9_-]`.
fn valid_id(id: &str) -> bool {
    (1..=64).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

fn bad_id() -> Response {
    error(StatusCode::BAD_REQUEST, "ids are 1-64 of A-Z a-z 0-9 _ -")
}

#[derive(Deserialize)]
struct Login {
    token: String,
}

pub async fn login(State(s): State<Arc<PageState>>, req: Request) -> Response {
    let peer = peer_of(&req);
    let h = req.headers().clone();
    let host = match host_of(&s, &h) {
        Ok(host) => host,
        Err(r) => return r.into_response(),
    };
    if let Err(r) = origin_ok(&s, &h, &host, Need::Write) {
        return r.into_response();
    }
    let tls = guard::over_tls(&h, s.public.as_ref(), peer);
    if !tls && !peer.is_some_and(guard::is_loopback) {
        return error(
            StatusCode::FORBIDDEN,
            "signing in over plain HTTP is allowed only from this machine: the token and the \
             session would cross the network in clear. Put a TLS reverse proxy in front \
             (gateway.public_url: https://…).",
        );
    }
    let body = match axum::body::to_bytes(req.into_body(), 8 * 1024).await {
        Ok(b) => b,
        Err(_) => return error(StatusCode::BAD_REQUEST, "the request is too large"),
    };
    let Ok(Login { token }) = serde_json::from_slice::<Login>(&body) else {
        return error(StatusCode::BAD_REQUEST, "expected {\"token\": \"…\"}");
    };
    // Right or wrong, a guess waits its turn before it is compared: one a second in all.
    match s.guesses.decide(s.tokens.matches(&token)).await {
        None => {
            tracing::warn!("web page sign-in refused: too many sign-ins waiting");
            let mut r = error(
                StatusCode::TOO_MANY_REQUESTS,
                "too many sign-ins are waiting: try again in a few seconds",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            return r;
        }
        Some(Ok(true)) => {}
        Some(Ok(false)) => {
            tracing::warn!("web page sign-in with a wrong token");
            return error(
                StatusCode::UNAUTHORIZED,
                "wrong token: `ethan gateway token` prints it",
            );
        }
        Some(Err(e)) => {
            tracing::error!("cannot read the gateway token: {e}");
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the database is unavailable",
            );
        }
    }
    let signer = match Signer::load(&s.tokens, true).await {
        Ok(Some(signer)) => signer,
        Ok(None) => return error(StatusCode::UNAUTHORIZED, "no gateway token"),
        Err(e) => {
            tracing::error!("cannot make a web session: {e}");
            return error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the database is unavailable",
            );
        }
    };
    let issued = signer.issue(crate::store::now());
    tracing::info!("web page signed in");
    let cookie = session::set_cookie(&issued.cookie, tls);
    (
        [
            (header::SET_COOKIE, cookie),
            (header::CACHE_CONTROL, "no-store".to_string()),
        ],
        Json(json!({"ok": true, "csrf": issued.csrf})),
    )
        .into_response()
}

pub async fn logout(State(s): State<Arc<PageState>>, req: Request) -> Response {
    let h = req.headers();
    let valid = match gate(&s, h, Need::Write).await {
        Ok(v) => v,
        Err(r) => return r.into_response(),
    };
    if let Err(e) = revoked::revoke(&s.store, &valid, crate::store::now()).await {
        tracing::error!("cannot end a web session: {e}");
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "the database is unavailable: the session could not be ended; sign out again",
        );
    }
    tracing::info!("web page signed out");
    let tls = guard::over_tls(h, s.public.as_ref(), peer_of(&req));
    (
        [(header::SET_COOKIE, session::clear_cookie(tls))],
        Json(json!({"ok": true})),
    )
        .into_response()
}

pub async fn me(State(s): State<Arc<PageState>>, h: HeaderMap) -> Response {
    match gate(&s, &h, Need::Read).await {
        Ok(_) => ok(json!({"ok": true})),
        Err(r) => r.into_response(),
    }
}

pub async fn sessions(State(s): State<Arc<PageState>>, h: HeaderMap) -> Response {
    if let Err(r) = gate(&s, &h, Need::Read).await {
        return r.into_response();
    }
    match s.store.list_sessions("web:", 200).await {
        Ok(list) => ok(Value::Array(
            list.into_iter()
                .map(|l| {
                    let title = l.title.map(|t| {
                        let one: String = t.split_whitespace().collect::<Vec<_>>().join(" ");
                        crate::consent::display::visible(&one.chars().take(80).collect::<String>())
                    });
                    json!({
                        "id": l.key.strip_prefix("web:").unwrap_or(&l.key),
                        "title": title,
                        "updated_at": l.updated_at,
                    })
                })
                .collect(),
        )),
        Err(e) => {
            tracing::error!("cannot list web sessions: {e}");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the database is unavailable",
            )
        }
    }
}

pub async fn conversation(
    State(s): State<Arc<PageState>>,
    Path(id): Path<String>,
    h: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &h, Need::Read).await {
        return r.into_response();
    }
    if !valid_id(&id) {
        return bad_id();
    }
    match history::load(&s.store, &s.hub, &id).await {
        Ok(c) => ok(json!(c)),
        Err(e) => {
            tracing::error!("cannot load web session {id}: {e}");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the database is unavailable",
            )
        }
    }
}

#[derive(Deserialize)]
struct Message {
    id: String,
    text: String,
}

/// Publish `text` in web session `session` as event `event_id`.
async fn publish(s: &PageState, session: &str, event_id: &str, text: String) -> Response {
    let ev = InboundEvent {
        channel: ChannelKind::Web,
        event_id: event_id.to_string(),
        message_id: None,
        chat: ChatRef {
            id: session.to_string(),
            kind: ChatKind::Direct,
            thread: None,
        },
        sender: Sender {
            id: "gateway".into(),
            display_name: "owner".into(),
            is_bot: false,
        },
        text,
        addressed: true,
        reply_to: None,
        sent_at: crate::store::now(),
        seq: 0,
        attachments: Vec::new(),
        relayed: None,
        unfetched: None,
    };
    match s.sink.publish(ev).await {
        Ok(outcome) => ok(json!({
            "ok": true,
            "duplicate": outcome == PublishOutcome::Duplicate,
        })),
        Err(e) => {
            tracing::error!("cannot take in a web message: {e}");
            error(
                StatusCode::SERVICE_UNAVAILABLE,
                "the message could not be recorded (database unavailable); send it again",
            )
        }
    }
}

pub async fn send(
    State(s): State<Arc<PageState>>,
    Path(session): Path<String>,
    h: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = gate(&s, &h, Need::Write).await {
        return r.into_response();
    }
    let Ok(m) = serde_json::from_slice::<Message>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "expected {\"id\": \"…\", \"text\": \"…\"}",
        );
    };
    if !valid_id(&session) || !valid_id(&m.id) {
        return bad_id();
    }
    if m.text.trim().is_empty() || m.text.len() > MAX_TEXT {
        return error(
            StatusCode::BAD_REQUEST,
            "the message is empty or longer than 32 KB",
        );
    }
    publish(&s, &session, &format!("page:{}", m.id), m.text).await
}

pub async fn stop(
    State(s): State<Arc<PageState>>,
    Path(session): Path<String>,
    h: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &h, Need::Write).await {
        return r.into_response();
    }
    if !valid_id(&session) {
        return bad_id();
    }
    let id = format!("stop:{}", uuid::Uuid::new_v4().simple());
    publish(&s, &session, &id, "/stop".into()).await
}

/// An approval's answer. The page also names its session; it is not needed (the approval is
/// resolved in the session that asked for it) and not trusted.
#[derive(Deserialize)]
struct ConsentAnswer {
    choice: String,
}

pub async fn consent(
    State(s): State<Arc<PageState>>,
    Path(request_id): Path<String>,
    h: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = gate(&s, &h, Need::Write).await {
        return r.into_response();
    }
    let Ok(a) = serde_json::from_slice::<ConsentAnswer>(&body) else {
        return error(
            StatusCode::BAD_REQUEST,
            "expected {\"choice\": \"once\" | \"session\" | \"deny\"}",
        );
    };
    let choice = match a.choice.as_str() {
        "once" => ApprovalChoice::Once,
        "session" => ApprovalChoice::Session,
        "deny" => ApprovalChoice::Deny,
        _ => return error(StatusCode::BAD_REQUEST, "choice: once, session or deny"),
    };
    if !valid_id(&request_id) {
        return bad_id();
    }
    let ack = s
        .consent
        .decide(&ApprovalDecision {
            channel: ChannelKind::Web,
            request_id: request_id.clone(),
            choice,
            user_id: "gateway".into(),
            chat_id: String::new(),
        })
        .await;
    if ack.accepted {
        let outcome = ack.outcome.clone().unwrap_or_else(|| ack.toast.clone());
        s.hub.consent_resolved(&request_id, &outcome);
    }
    ok(json!({"ok": ack.accepted, "message": ack.toast, "outcome": ack.outcome}))
}

pub async fn events(
    State(s): State<Arc<PageState>>,
    Path(session): Path<String>,
    h: HeaderMap,
) -> Response {
    if let Err(r) = gate(&s, &h, Need::Read).await {
        return r.into_response();
    }
    if !valid_id(&session) {
        return bad_id();
    }
    let last = h
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .map(|v| s.hub.parse_id(v));
    let stream = super::stream::follow(s.clone(), session, last);
    (
        no_store(),
        Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))),
    )
        .into_response()
}
