//! `POST /api/chat {session?, message}` → a Server-Sent Events stream of the turn:
//! `delta` {text} (a piece of the answer as the model writes it), `delta_reset` {} (forget the
//! pieces since the last reset: a retry starts over, or they were a preamble to tool calls),
//! `tool_start` {id, name, summary}, `tool_end` {id, name, ms, ok, denied}, `consent_request`
//! {request_id, tool, description, always}, `ui` {messages: [A2UI]}, `text` {text} (the whole
//! answer: the deltas after the last reset, plus the note when the model's length limit cut it
//! off), then `done` {session, outcome} or `error` {message}. The session key is `web:<session>` (a new one when
//! none is given). The turn runs in the session's queue ([`super::TurnQueue`]): a request on a
//! session whose turn is still running waits for it (the stream stays open, without events,
//! until its turn starts). Closing the stream cancels the turn, or drops it while it waits.
//!
//! `POST /api/consent/{request_id} {allowed, choice?, message?}` → `{ok}`: `ok: false` for an
//! unknown or expired id; `choice` (`once`, `session`, `deny`) says more than `allowed`. The
//! token holder counts as the owner for web consent.
//!
//! Both refuse a request whose `Origin` is a page other than the gateway's own (403): a program
//! sends none.

use super::GatewayState;
use crate::agent::{TurnEvent, TurnInput, TurnOutcome};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::Json;
use ethan_channels::{ApprovalChoice, ApprovalDecision, ChannelKind};
use serde::Deserialize;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        Json(json!({"error": "missing or wrong `Authorization: Bearer <token>` (see `ethan gateway token`)"})),
    )
        .into_response()
}

fn foreign() -> Response {
    (
        StatusCode::FORBIDDEN,
        Json(json!({"error": "refused: sent by a page of another origin"})),
    )
        .into_response()
}

/// The bearer and `Origin` checks of `/api/*`; the response when one fails.
async fn check(s: &GatewayState, headers: &HeaderMap) -> Result<(), Response> {
    if super::guard::foreign_origin(headers) {
        return Err(foreign());
    }
    if !s.tokens.bearer_ok(headers).await {
        return Err(unauthorized());
    }
    Ok(())
}

fn bad_request(msg: String) -> Response {
    (StatusCode::BAD_REQUEST, Json(json!({"error": msg}))).into_response()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ChatRequest {
    #[serde(default)]
    session: Option<String>,
    message: String,
}

fn event(name: &str, data: Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

fn turn_event(e: TurnEvent) -> Event {
    match e {
        TurnEvent::Text(text) => event("text", json!({"text": text})),
        TurnEvent::Delta(text) => event("delta", json!({"text": text})),
        TurnEvent::DeltaReset => event("delta_reset", json!({})),
        TurnEvent::ToolStart { id, name, summary } => event(
            "tool_start",
            json!({"id": id, "name": name, "summary": summary}),
        ),
        TurnEvent::ToolEnd {
            id,
            name,
            ms,
            ok,
            denied,
        } => event(
            "tool_end",
            json!({"id": id, "name": name, "ms": ms, "ok": ok, "denied": denied}),
        ),
        TurnEvent::ConsentRequest {
            request_id,
            tool,
            description,
            always,
        } => event(
            "consent_request",
            json!({"request_id": request_id, "tool": tool, "description": description, "always": always}),
        ),
        TurnEvent::Ui(messages) => event("ui", json!({"messages": messages})),
    }
}

pub async fn chat(
    State(s): State<Arc<GatewayState>>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = check(&s, &headers).await {
        return r;
    }
    let req: ChatRequest = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return bad_request(format!(
                "expected {{\"message\": \"…\", \"session\"?: \"…\"}}: {e}"
            ))
        }
    };
    if req.message.trim().is_empty() {
        return bad_request("`message` is empty".into());
    }
    let session = req
        .session
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| uuid::Uuid::new_v4().simple().to_string());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let cancel = CancellationToken::new();
    let input = TurnInput {
        session_key: format!("web:{session}"),
        channel: ChannelKind::Web,
        chat_id: session.clone(),
        user_id: "gateway".into(),
        is_owner: true,
        text: req.message,
        trace_id: uuid::Uuid::new_v4().simple().to_string(),
        chat: None,
        unattended: false,
        allowed_tools: None,
        events: Some(tx),
        model: None,
        job_id: None,
        images: Vec::new(),
        private_input: None,
        outside_input: None,
        child: None,
        fence: None,
    };
    let turns = s.turns.clone();
    let metrics = s.metrics.clone();
    let c2 = cancel.clone();
    let turn = ethan_core::task::spawn(async move { turns.run(input, c2).await });
    let guard = cancel.drop_guard();
    let stream = async_stream(move |yield_| async move {
        let _guard = guard; // dropping the stream cancels the turn
        while let Some(e) = rx.recv().await {
            yield_(turn_event(e));
        }
        match turn.await {
            Ok(None) => yield_(event(
                "error",
                json!({"message": "the turn was not run: the daemon is stopping; send it again after the restart"}),
            )),
            Ok(Some(reply)) => match reply.outcome {
                TurnOutcome::Answer(_) | TurnOutcome::IterationCap(_) | TurnOutcome::Stopped => {
                    let outcome = reply.outcome.label();
                    metrics.turns.with_label_values(&["web", outcome]).inc();
                    yield_(event(
                        "done",
                        json!({"session": session, "outcome": outcome}),
                    ));
                }
                TurnOutcome::Failed {
                    user_message,
                    detail,
                } => {
                    tracing::error!("web turn failed: {detail}");
                    metrics.turns.with_label_values(&["web", "failed"]).inc();
                    yield_(event("error", json!({"message": user_message})));
                }
            },
            Err(e) => yield_(event(
                "error",
                json!({"message": format!("the turn crashed: {e}")}),
            )),
        }
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// A tiny generator: `f` gets a `yield_` callback; the events it yields form the stream.
fn async_stream<F, Fut>(f: F) -> impl futures::Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(Box<dyn Fn(Event) + Send + Sync>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<Event>();
    let fut = f(Box::new(move |e| {
        let _ = tx.send(e);
    }));
    let task = ethan_core::task::spawn(fut);
    futures::stream::unfold((rx, Some(AbortOnDrop(task))), |(mut rx, task)| async move {
        rx.recv().await.map(|e| (Ok(e), (rx, task)))
    })
}

/// Aborts the producer when the stream (the client connection) goes away.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[derive(Debug, Deserialize)]
struct ConsentAnswer {
    allowed: bool,
    #[serde(default)]
    choice: Option<ApprovalChoice>,
    #[serde(default)]
    #[allow(dead_code)]
    message: Option<String>,
}

pub async fn consent(
    State(s): State<Arc<GatewayState>>,
    Path(request_id): Path<String>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    if let Err(r) = check(&s, &headers).await {
        return r;
    }
    let answer: ConsentAnswer = match serde_json::from_slice(&body) {
        Ok(a) => a,
        Err(e) => {
            return bad_request(format!(
                "expected {{\"allowed\": true|false, \"message\"?: \"…\"}}: {e}"
            ))
        }
    };
    let ack = s
        .consent
        .decide(&ApprovalDecision {
            channel: ChannelKind::Web,
            request_id,
            choice: match (answer.allowed, answer.choice) {
                (false, _) => ApprovalChoice::Deny,
                (true, Some(c)) => c,
                (true, None) => ApprovalChoice::Once,
            },
            user_id: "gateway".into(),
            chat_id: String::new(),
        })
        .await;
    Json(json!({"ok": ack.accepted, "message": ack.toast})).into_response()
}
