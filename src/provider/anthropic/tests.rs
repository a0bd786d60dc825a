//! The client against a loopback Messages server: headers, the base URL, retries, streams that
//! break, and what the person keeps when a stream fails for good.

use super::*;
use crate::config::ProviderKind;
use ethan_core::event::TurnEvent;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Answers of a loopback server, one per request, in order.
type Answer = Box<dyn FnOnce() -> axum::response::Response + Send>;

/// `(path, headers, body)` of each request the server received.
type Seen = Arc<Mutex<Vec<(String, axum::http::HeaderMap, Value)>>>;

/// A loopback server answering with `answers`, and a client for it (`base_url` + `suffix`,
/// key `key`) with a 1 ms backoff.
async fn client_seeing(answers: Vec<Answer>, suffix: &str, key: &str) -> (AnthropicClient, Seen) {
    use std::collections::VecDeque;
    let answers = Arc::new(Mutex::new(answers.into_iter().collect::<VecDeque<_>>()));
    let seen: Seen = Arc::default();
    let seen2 = Arc::clone(&seen);
    let app = axum::Router::new().fallback(
        move |uri: axum::http::Uri, headers: axum::http::HeaderMap, body: axum::body::Bytes| {
            seen2.lock().unwrap().push((
                uri.path().to_string(),
                headers,
                serde_json::from_slice(&body).unwrap_or(Value::Null),
            ));
            let next = answers.lock().unwrap().pop_front();
            async move {
                match next {
                    Some(answer) => answer(),
                    None => axum::response::IntoResponse::into_response((
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                        "no more answers",
                    )),
                }
            }
        },
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let ep = ModelEndpoint {
        provider: ProviderKind::Anthropic,
        base_url: format!("http://{addr}{suffix}"),
        api_key: Secret::new(key),
        name: "claude-test".into(),
        max_tokens: None,
    };
    let mut client = AnthropicClient::for_endpoint(&ep, &ModelConfig::default()).unwrap();
    client.core.backoff = Duration::from_millis(1);
    (client, seen)
}

fn json_answer(status: u16, body: Value) -> Answer {
    Box::new(move || {
        axum::response::IntoResponse::into_response((
            axum::http::StatusCode::from_u16(status).unwrap(),
            axum::Json(body),
        ))
    })
}

fn text_message(text: &str) -> Value {
    json!({"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
        "content": [{"type": "text", "text": text}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 3, "output_tokens": 2}})
}

/// An SSE event line pair for `v` (named by its `type`).
fn event(v: Value) -> Result<String, ()> {
    let kind = v["type"].as_str().unwrap_or("").to_string();
    Ok(format!("event: {kind}\ndata: {v}\n\n"))
}

fn start() -> Result<String, ()> {
    event(
        json!({"type": "message_start", "message": {"id": "m", "type": "message",
        "role": "assistant", "content": [], "model": "claude-test",
        "usage": {"input_tokens": 4, "output_tokens": 1}}}),
    )
}

fn text_start() -> Result<String, ()> {
    event(json!({"type": "content_block_start", "index": 0,
        "content_block": {"type": "text", "text": ""}}))
}

fn piece(t: &str) -> Result<String, ()> {
    event(json!({"type": "content_block_delta", "index": 0,
        "delta": {"type": "text_delta", "text": t}}))
}

fn end() -> Vec<Result<String, ()>> {
    vec![
        event(json!({"type": "content_block_stop", "index": 0})),
        event(
            json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 9}}),
        ),
        event(json!({"type": "message_stop"})),
    ]
}

/// A 200 `text/event-stream` response sending `parts`, 10 ms apart; an `Err` cuts the
/// connection.
fn sse(parts: Vec<Result<String, ()>>) -> Answer {
    Box::new(move || {
        let parts = parts.into_iter().map(|p| {
            p.map(axum::body::Bytes::from)
                .map_err(|()| std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "cut"))
        });
        let parts = futures::StreamExt::then(futures::stream::iter(parts), |p| async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            p
        });
        axum::response::Response::builder()
            .header("content-type", "text/event-stream")
            .body(axum::body::Body::from_stream(parts))
            .unwrap()
    })
}

async fn streamed(client: &AnthropicClient) -> (Result<Completion, ProviderError>, Vec<TurnEvent>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let result = client
        .complete_streaming(
            &ethan_core::provider::owned([ChatMessage::user("hi")]),
            &[],
            &tx,
        )
        .await;
    drop(tx);
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    (result, events)
}

fn delta(t: &str) -> TurnEvent {
    TurnEvent::Delta(t.to_string())
}

#[tokio::test]
async fn sends_the_key_and_version_to_v1_messages_whatever_the_base_url() {
    for suffix in ["", "/", "/v1", "/v1/"] {
        let (client, seen) = client_seeing(
            vec![json_answer(200, text_message("hello"))],
            suffix,
            "sk-ant-k1",
        )
        .await;
        let c = client
            .complete(&ethan_core::provider::owned([ChatMessage::user("hi")]), &[])
            .await
            .unwrap();
        assert_eq!(c.message.content.as_deref(), Some("hello"));
        assert_eq!(c.model, "claude-test");
        assert_eq!(c.usage.unwrap().input_tokens, 3);
        let seen = seen.lock().unwrap();
        let (path, headers, body) = &seen[0];
        assert_eq!(path, "/v1/messages", "base url suffix {suffix:?}");
        assert_eq!(headers["x-api-key"], "sk-ant-k1");
        assert_eq!(headers["anthropic-version"], API_VERSION);
        assert_eq!(headers["content-type"], "application/json");
        assert!(headers.get("authorization").is_none());
        assert_eq!(body["max_tokens"], 8192);
    }
    // An OAuth token goes as a bearer token.
    let (client, seen) = client_seeing(
        vec![json_answer(200, text_message("hi"))],
        "",
        "sk-ant-oat01-t",
    )
    .await;
    client
        .complete(&ethan_core::provider::owned([ChatMessage::user("hi")]), &[])
        .await
        .unwrap();
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].1["authorization"], "Bearer sk-ant-oat01-t");
    assert!(seen[0].1.get("x-api-key").is_none());
}

#[tokio::test]
async fn overloaded_is_retried_and_a_400_is_not() {
    let overloaded = || {
        json_answer(
            529,
            json!({"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}),
        )
    };
    let (client, seen) = client_seeing(
        vec![
            overloaded(),
            overloaded(),
            json_answer(200, text_message("made it")),
        ],
        "",
        "k",
    )
    .await;
    let c = client
        .complete(&ethan_core::provider::owned([ChatMessage::user("hi")]), &[])
        .await
        .unwrap();
    assert_eq!(c.message.content.as_deref(), Some("made it"));
    assert_eq!(seen.lock().unwrap().len(), 3);

    let (client, seen) = client_seeing(
        vec![json_answer(
            400,
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}),
        )],
        "",
        "k",
    )
    .await;
    let e = client
        .complete(&ethan_core::provider::owned([ChatMessage::user("hi")]), &[])
        .await
        .unwrap_err();
    assert!(matches!(e, ProviderError::Http { status: 400, .. }), "{e}");
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn a_broken_stream_is_reset_and_retried_from_the_start() {
    let mut last = vec![
        start(),
        text_start(),
        piece("Hello"),
        Ok(": ping\n\n".into()),
    ];
    last.push(event(json!({"type": "ping"})));
    last.push(piece(" again"));
    last.extend(end());
    let (client, seen) = client_seeing(
        vec![
            // Cut midway; ended without message_stop; an overloaded error event.
            sse(vec![start(), text_start(), piece("Hel"), Err(())]),
            sse(vec![start(), text_start(), piece("Hi")]),
            sse(vec![
                start(),
                event(json!({"type": "error",
                    "error": {"type": "overloaded_error", "message": "Overloaded"}})),
            ]),
            sse(last),
        ],
        "",
        "k",
    )
    .await;
    let (result, events) = streamed(&client).await;
    let c = result.unwrap();
    assert_eq!(c.message.content.as_deref(), Some("Hello again"));
    assert_eq!(c.usage.unwrap().output_tokens, 9);
    assert_eq!(
        events,
        [
            delta("Hel"),
            TurnEvent::DeltaReset,
            delta("Hi"),
            TurnEvent::DeltaReset,
            delta("Hello"),
            delta(" again")
        ]
    );
    assert!(seen
        .lock()
        .unwrap()
        .iter()
        .all(|(_, _, b)| b["stream"] == true));
}

#[tokio::test]
async fn a_failure_for_good_after_text_keeps_the_text() {
    let answers: Vec<Answer> = (0..=MAX_RETRIES)
        .map(|i| {
            sse(vec![
                start(),
                text_start(),
                piece(&format!("part{i}")),
                Err(()),
            ])
        })
        .collect();
    let (client, _) = client_seeing(answers, "", "k").await;
    let (result, events) = streamed(&client).await;
    match result {
        Err(ProviderError::Interrupted { shown, cause }) => {
            assert_eq!(shown, format!("part{MAX_RETRIES}"));
            assert!(matches!(*cause, ProviderError::BadResponse(_)), "{cause}");
        }
        other => panic!("{other:?}"),
    }
    // Each retry withdrew the pieces before it; the last ones stay.
    assert_eq!(events.last(), Some(&delta(&format!("part{MAX_RETRIES}"))));
}

#[tokio::test]
async fn pings_alone_stall_and_a_whole_json_answer_is_one_piece() {
    let pings = || -> Answer {
        Box::new(move || {
            let parts = futures::StreamExt::then(futures::stream::iter(0..20), |_| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok::<_, std::io::Error>(axum::body::Bytes::from(
                    "event: ping\ndata: {\"type\": \"ping\"}\n\n",
                ))
            });
            axum::response::Response::builder()
                .header("content-type", "text/event-stream")
                .body(axum::body::Body::from_stream(parts))
                .unwrap()
        })
    };
    let mut answers: Vec<Answer> = (0..MAX_RETRIES).map(|_| pings()).collect();
    answers.push(json_answer(200, text_message("all at once")));
    let (mut client, _) = client_seeing(answers, "", "k").await;
    client.core.idle_timeout_secs = 1;
    let (result, events) = streamed(&client).await;
    assert_eq!(
        result.unwrap().message.content.as_deref(),
        Some("all at once")
    );
    assert_eq!(events, [delta("all at once")]);
}

#[tokio::test]
async fn check_reads_the_model_list_and_refused_keys() {
    let (client, seen) = client_seeing(vec![json_answer(200, json!({"data": []}))], "", "k").await;
    assert!(client.check().await.unwrap().contains("claude-test"));
    assert_eq!(seen.lock().unwrap()[0].0, "/v1/models");
    let (client, _) = client_seeing(vec![json_answer(404, json!({}))], "", "k").await;
    assert!(client.check().await.unwrap().contains("no /v1/models"));
    let (client, _) = client_seeing(
        vec![json_answer(
            401,
            json!({"type": "error", "error": {"type": "authentication_error",
                "message": "invalid x-api-key"}}),
        )],
        "",
        "k",
    )
    .await;
    assert!(matches!(
        client.check().await,
        Err(ProviderError::Auth { status: 401, .. })
    ));
}
