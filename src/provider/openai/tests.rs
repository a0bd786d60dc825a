use super::*;
use crate::provider::http::MAX_STREAM_BYTES;
use crate::provider::types::Role;
use serde_json::json;
use std::time::Duration;

#[test]
fn pictures_are_image_url_parts_after_the_text() {
    let img = ethan_core::message::ImagePart {
        mime: "image/png".into(),
        data: std::sync::Arc::from(&b"\x89PNG"[..]),
        path: "/w/inbox/p.png".into(),
    };
    let m = ChatMessage::user_with_images("what is it?", vec![img]);
    let v = serde_json::to_value(body::Message::of(&m)).unwrap();
    assert_eq!(
        v["content"],
        json!([{"type": "text", "text": "what is it?"},
                   {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw=="}}])
    );
    // Without pictures the content stays a string.
    let m = ChatMessage::user("hi");
    assert_eq!(
        serde_json::to_value(body::Message::of(&m)).unwrap()["content"],
        json!("hi")
    );
}

#[test]
fn classifies_errors() {
    let ctx = r#"{"error":{"message":"This model's maximum context length is 8192 tokens","code":"context_length_exceeded"}}"#;
    assert!(matches!(
        classify_error(400, ctx),
        ProviderError::ContextLength(_)
    ));
    assert!(matches!(
        classify_error(401, "{}"),
        ProviderError::Auth { .. }
    ));
    let e = classify_error(503, r#"{"error":{"message":"overloaded"}}"#);
    assert!(e.is_transient());
    assert!(e.to_string().contains("overloaded"));
    assert!(!classify_error(400, "bad").is_transient());
}

#[test]
fn recognises_a_refused_streaming_parameter() {
    let streamed = Sent {
        stream: true,
        stream_options: true,
    };
    let plain = Sent {
        stream: true,
        stream_options: false,
    };
    let err =
        |m: &str| json!({"error": {"message": m, "type": "invalid_request_error"}}).to_string();
    assert_eq!(
        refused_parameter(400, &err("stream is not supported"), streamed),
        Some(Refused::Stream)
    );
    assert_eq!(
        refused_parameter(
            400,
            &err("Unrecognized request argument supplied: stream"),
            plain
        ),
        Some(Refused::Stream)
    );
    assert_eq!(
        refused_parameter(
            400,
            &err("Unrecognized request argument supplied: stream_options"),
            streamed
        ),
        Some(Refused::StreamOptions)
    );
    let by_param = json!({"error": {"message": "not allowed", "param": "stream"}}).to_string();
    assert_eq!(
        refused_parameter(400, &by_param, plain),
        Some(Refused::Stream)
    );
    assert_eq!(
        refused_parameter(400, &err("This model does not support streaming."), plain),
        Some(Refused::Stream)
    );
    // Not about streaming, not a 400, or a parameter the request did not carry.
    assert_eq!(
        refused_parameter(
            400,
            &err("logprobs are not supported when streaming"),
            streamed
        ),
        None
    );
    assert_eq!(
        refused_parameter(400, &err("upstream model failed"), streamed),
        None
    );
    assert_eq!(
        refused_parameter(500, &err("stream is not supported"), streamed),
        None
    );
    assert_eq!(
        refused_parameter(400, &err("stream_options is not supported"), plain),
        None
    );
    assert_eq!(
        refused_parameter(400, &err("stream is not supported"), Sent::default()),
        None
    );
}

#[test]
fn parses_tool_calls_and_garbage() {
    let ok = r#"{"choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"c1","type":"function","function":{"name":"file_read","arguments":"{\"path\":\"a\"}"}}]}}]}"#;
    let c = parse_completion(ok, true).unwrap();
    assert_eq!(c.message.tool_calls[0].name, "file_read");
    assert_eq!(c.finish_reason, Some(FinishReason::ToolCalls));
    assert!(!c.truncated());
    let cut = r#"{"choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"The first half"}}]}"#;
    let c = parse_completion(cut, true).unwrap();
    assert!(c.truncated());
    assert_eq!(c.message.content.as_deref(), Some("The first half"));
    assert!(matches!(
        parse_completion("<html>", true),
        Err(ProviderError::BadResponse(_))
    ));
    assert!(matches!(
        parse_completion(r#"{"choices":[]}"#, true),
        Err(ProviderError::BadResponse(_))
    ));
}

/// Answers of a loopback server, one per request, in order.
type Answer = Box<dyn FnOnce() -> axum::response::Response + Send>;

/// Request bodies a loopback server received.
type Seen = Arc<std::sync::Mutex<Vec<Value>>>;

/// A loopback Chat Completions server answering with `answers`; the client talks to it with
/// a 1 ms backoff.
async fn client_for(answers: Vec<Answer>) -> OpenAiClient {
    client_seeing(answers).await.0
}

/// [`client_for`], and the request bodies the server receives.
async fn client_seeing(answers: Vec<Answer>) -> (OpenAiClient, Seen) {
    use std::collections::VecDeque;
    use std::sync::Mutex;
    let answers = Arc::new(Mutex::new(answers.into_iter().collect::<VecDeque<_>>()));
    let seen: Seen = Arc::default();
    let seen2 = Arc::clone(&seen);
    let app = axum::Router::new().fallback(move |body: axum::body::Bytes| {
        seen2
            .lock()
            .unwrap()
            .push(serde_json::from_slice(&body).unwrap_or(Value::Null));
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
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let mut client = OpenAiClient::new(&ModelConfig {
        base_url: format!("http://{addr}/v1"),
        ..ModelConfig::default()
    })
    .unwrap();
    client.core.backoff = Duration::from_millis(1);
    (client, seen)
}

/// A 200 response of `content_type` sending `parts`, 10 ms apart, the last one possibly an
/// error (a dropped connection).
fn body_of(content_type: &'static str, parts: Vec<Result<String, ()>>) -> Answer {
    Box::new(move || {
        let parts = parts.into_iter().map(|p| {
            p.map(axum::body::Bytes::from)
                .map_err(|()| std::io::Error::new(std::io::ErrorKind::ConnectionAborted, "cut"))
        });
        // A pause before each part, so what comes before a cut is sent before it.
        let parts = futures::StreamExt::then(futures::stream::iter(parts), |p| async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            p
        });
        axum::response::Response::builder()
            .header("content-type", content_type)
            .body(axum::body::Body::from_stream(parts))
            .unwrap()
    })
}

fn piece(text: &str) -> Result<String, ()> {
    Ok(format!(
        "data: {}\n\n",
        json!({"choices": [{"index": 0, "delta": {"content": text}}]})
    ))
}

fn end() -> Result<String, ()> {
    Ok(
        "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n\
             data: [DONE]\n\n"
            .to_string(),
    )
}

async fn streamed(client: &OpenAiClient) -> (Result<Completion, ProviderError>, Vec<TurnEvent>) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let user = ChatMessage {
        role: Role::User,
        content: Some("hi".into()),
        tool_calls: Vec::new(),
        tool_call_id: None,
        opaque: None,
        is_error: false,
        images: Vec::new(),
        sent_at: None,
        derived: Default::default(),
    };
    let result = client
        .complete_streaming(&ethan_core::provider::owned([user]), &[], &tx)
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
async fn a_broken_stream_is_reset_and_retried_from_the_start() {
    let sse = "text/event-stream";
    let client = client_for(vec![
        // Dropped midway, cut before its end, garbage in a data line: each retried.
        body_of(sse, vec![piece("Hel"), piece("lo"), Err(())]),
        body_of(sse, vec![piece("Hi")]),
        body_of(sse, vec![Ok("data: {oops\n\n".into())]),
        body_of(sse, vec![piece("Hello"), piece(" again"), end()]),
    ])
    .await;
    let (result, events) = streamed(&client).await;
    let c = result.unwrap();
    assert_eq!(c.message.content.as_deref(), Some("Hello again"));
    assert_eq!(c.finish_reason, Some(FinishReason::Stop));
    assert_eq!(
        events,
        [
            delta("Hel"),
            delta("lo"),
            TurnEvent::DeltaReset,
            delta("Hi"),
            TurnEvent::DeltaReset,
            delta("Hello"),
            delta(" again")
        ]
    );
}

#[tokio::test]
async fn a_failure_after_the_retries_keeps_the_pieces_shown_last() {
    let sse = "text/event-stream";
    let answers: Vec<Answer> = (0..=MAX_RETRIES)
        .map(|_| body_of(sse, vec![piece("part"), Err(())]))
        .collect();
    let client = client_for(answers).await;
    let (result, events) = streamed(&client).await;
    match result {
        Err(ProviderError::Interrupted { shown, cause }) => {
            assert_eq!(shown, "part");
            assert!(matches!(*cause, ProviderError::BadResponse(_)), "{cause:?}");
        }
        other => panic!("expected Interrupted, got {other:?}"),
    }
    // Each retry withdrew the attempt before it; the last attempt's piece stays shown.
    assert_eq!(events.len(), 2 * (MAX_RETRIES as usize + 1) - 1);
    assert_eq!(events.last(), Some(&delta("part")));
}

#[tokio::test]
async fn a_whole_json_answer_is_one_piece() {
    let whole = json!({"choices": [{"index": 0, "finish_reason": "stop",
            "message": {"role": "assistant", "content": "all at once"}}]})
    .to_string();
    let client = client_for(vec![
        body_of("application/json", vec![Ok(whole)]),
        // A stream under the wrong content type is still read as one.
        body_of(
            "application/json",
            vec![piece("two "), piece("pieces"), end()],
        ),
    ])
    .await;
    let (result, events) = streamed(&client).await;
    assert_eq!(
        result.unwrap().message.content.as_deref(),
        Some("all at once")
    );
    assert_eq!(events, [delta("all at once")]);
    let (result, events) = streamed(&client).await;
    assert_eq!(
        result.unwrap().message.content.as_deref(),
        Some("two pieces")
    );
    assert_eq!(events, [delta("two "), delta("pieces")]);
}

#[tokio::test]
async fn a_refusal_of_stream_is_shared_by_clones() {
    let refusal: Answer = Box::new(|| {
        axum::response::IntoResponse::into_response((
            axum::http::StatusCode::BAD_REQUEST,
            axum::Json(json!({"error": {"message": "stream is not supported"}})),
        ))
    });
    let whole = |t: &str| {
        body_of(
            "application/json",
            vec![Ok(json!({"choices": [{"index": 0, "finish_reason": "stop",
                    "message": {"role": "assistant", "content": t}}]})
            .to_string())],
        )
    };
    let (client, seen) = client_seeing(vec![refusal, whole("first"), whole("second")]).await;
    let (result, events) = streamed(&client).await;
    assert_eq!(result.unwrap().message.content.as_deref(), Some("first"));
    assert_eq!(events, [delta("first")]);
    let (result, _) = streamed(&client.clone()).await;
    assert_eq!(result.unwrap().message.content.as_deref(), Some("second"));
    let streams: Vec<Value> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|b| b["stream"].clone())
        .collect();
    assert_eq!(streams, [json!(true), Value::Null, Value::Null]);
}

#[tokio::test]
async fn a_server_sending_only_keep_alive_comments_stalls() {
    let sse = "text/event-stream";
    let keep_alive = |n: usize| -> Answer {
        Box::new(move || {
            let parts = futures::StreamExt::then(futures::stream::iter(0..n), |_| async {
                tokio::time::sleep(Duration::from_millis(300)).await;
                Ok::<_, std::io::Error>(axum::body::Bytes::from_static(b": ping\n\n"))
            });
            axum::response::Response::builder()
                .header("content-type", "text/event-stream")
                .body(axum::body::Body::from_stream(parts))
                .unwrap()
        })
    };
    let mut answers: Vec<Answer> = (0..MAX_RETRIES).map(|_| keep_alive(20)).collect();
    answers.push(body_of(sse, vec![piece("Awake"), end()]));
    let mut client = client_for(answers).await;
    client.core.idle_timeout_secs = 1;
    let (result, _) = streamed(&client).await;
    // Comments every 300 ms never count as progress: each of those answers stalled after
    // a second and was retried; the last one answered.
    assert_eq!(result.unwrap().message.content.as_deref(), Some("Awake"));
}

#[tokio::test]
async fn a_stream_larger_than_the_cap_fails_instead_of_growing() {
    let sse = "text/event-stream";
    // A line that never ends: 9 MiB without a newline.
    let huge = || -> Result<String, ()> { Ok("x".repeat(MAX_STREAM_BYTES + (1 << 20))) };
    let answers: Vec<Answer> = (0..=MAX_RETRIES)
        .map(|_| body_of(sse, vec![huge()]))
        .collect();
    let client = client_for(answers).await;
    let (result, _) = streamed(&client).await;
    match result {
        Err(ProviderError::BadResponse(m)) => assert!(m.contains("exceeded 8 MiB"), "{m}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn a_complete_answer_without_done_or_close_is_taken() {
    let answer: Answer = Box::new(|| {
        let first = futures::stream::iter([Ok::<_, std::io::Error>(axum::body::Bytes::from(
                format!(
                    "{}data: {{\"choices\":[{{\"index\":0,\"delta\":{{}},\"finish_reason\":\"stop\"}}]}}\n\n",
                    piece("Whole").unwrap()
                ),
            ))]);
        // Then nothing, and the connection stays open.
        let rest = futures::stream::pending();
        axum::response::Response::builder()
            .header("content-type", "text/event-stream")
            .body(axum::body::Body::from_stream(futures::StreamExt::chain(
                first, rest,
            )))
            .unwrap()
    });
    let mut client = client_for(vec![answer]).await;
    client.core.idle_timeout_secs = 1;
    let (result, events) = streamed(&client).await;
    assert_eq!(result.unwrap().message.content.as_deref(), Some("Whole"));
    assert_eq!(events, [delta("Whole")]);
}
