//! Streamed model answers through the real daemon and the HTTP gateway's SSE stream, against
//! the scripted model answering `"stream": true` requests with SSE chunks: the text arrives as
//! `delta` events that make up the final `text`; tool calls whose arguments arrive in pieces
//! are validated, consented and audited as whole ones; a server refusing `stream` (or
//! `stream_options`) is called without it from then on; a stream that stalls past
//! `model.idle_timeout_secs` is retried from the start (`delta_reset`).

use crate::support::daemon::gateway_addr;
use crate::support::gateway::{final_text, names, streamed_text, Event};
use crate::support::{run_cli, Daemon, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "test-gateway-token-0123456789";
const WAIT: Duration = Duration::from_secs(30);

/// Writes the config (model + gateway, and `extra` under `model:`) and starts the daemon with
/// a temp dir outside the workspace (writes there would need no consent).
fn start(home: &TestHome, model: &ScriptedModel, model_extra: &str) -> Daemon {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: k\n  name: m\n{model_extra}gateway:\n  token: {TOKEN}\n",
        model.base_url()
    ));
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    Daemon::start_with_env(home, &[("TMPDIR", tmp.to_str().unwrap())])
}

/// `POST /api/chat` with this file's token ([`crate::support::gateway::chat`]).
async fn chat(
    base: &str,
    session: &str,
    message: &str,
    on_event: impl FnMut(&str, &Value),
) -> Vec<Event> {
    crate::support::gateway::chat(base, TOKEN, session, message, WAIT, on_event).await
}

/// Asserts that every `delta` / `delta_reset` comes before the `text` and the `done` event.
fn assert_deltas_before_the_end(events: &[Event]) {
    let n = names(events);
    let text_at = n.iter().position(|x| *x == "text").expect("a text event");
    assert_eq!(n.last(), Some(&"done"), "{n:?}");
    assert!(
        n[text_at..]
            .iter()
            .all(|x| *x != "delta" && *x != "delta_reset"),
        "a delta after the text: {n:?}"
    );
}

/// `(tool_call_id, content)` of the tool messages of a request body.
fn tool_results(req: &Value) -> Vec<(String, String)> {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_string(),
                m["content"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn slow_chunks_arrive_as_deltas_before_the_text() {
    let home = TestHome::new();
    let answer = "The quick brown fox jumps over the lazy dog, twice.";
    let model =
        ScriptedModel::start(vec![Step::slow_text(answer, Duration::from_millis(200))]).await;
    let mut daemon = start(&home, &model, "");
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);

    let events = chat(&base, "s1", "tell me about the fox", |_, _| {}).await;
    assert_deltas_before_the_end(&events);
    assert_eq!(final_text(&events), answer);
    assert_eq!(streamed_text(&events), answer);
    let deltas: Vec<&Event> = events.iter().filter(|(n, _, _)| n == "delta").collect();
    assert!(deltas.len() >= 2, "{:?}", names(&events));
    // The model sends a chunk every 200 ms: the first piece is shown long before the last.
    let spread = deltas[deltas.len() - 1].2 - deltas[0].2;
    assert!(
        spread >= Duration::from_millis(600),
        "the pieces came in a burst ({spread:?}): {:?}",
        names(&events)
    );

    let reqs = model.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0]["stream"], true);
    assert_eq!(reqs[0]["stream_options"]["include_usage"], true);
    model.assert_protocol_ok();
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_streamed_tool_call_is_validated_consented_and_audited() {
    let home = TestHome::new();
    std::fs::create_dir_all(home.path().join("workspace")).unwrap();
    std::fs::write(
        home.path().join("workspace/notes.txt"),
        "streamed notes 42\n",
    )
    .unwrap();
    let model = ScriptedModel::start(vec![
        // A valid call and an invalid one, their arguments streamed in pieces.
        Step::tool_calls(&[
            ("r1", "file_read", r#"{"path": "notes.txt"}"#),
            ("v1", "file_read", r#"{"path": 5}"#),
        ]),
        // A call with a side effect: the person is asked.
        Step::tool_call(
            "w1",
            "file_write",
            r#"{"path": "streamed.txt", "content": "written from a stream"}"#,
        ),
        Step::echo_last_tool_result("done: "),
    ])
    .await;
    let mut daemon = start(&home, &model, "");
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);

    let http = reqwest::Client::new();
    let (http2, base2) = (http.clone(), base.clone());
    let events = chat(&base, "s1", "read and write", move |name, data| {
        if name == "consent_request" {
            let id = data["request_id"].as_str().unwrap().to_string();
            let (http, base) = (http2.clone(), base2.clone());
            tokio::spawn(async move {
                let r: Value = http
                    .post(format!("{base}/api/consent/{id}"))
                    .bearer_auth(TOKEN)
                    .json(&json!({"allowed": true}))
                    .send()
                    .await
                    .unwrap()
                    .json()
                    .await
                    .unwrap();
                assert_eq!(r["ok"], true);
            });
        }
    })
    .await;
    assert_deltas_before_the_end(&events);
    let consents: Vec<&Value> = events
        .iter()
        .filter(|(n, _, _)| n == "consent_request")
        .map(|(_, d, _)| d)
        .collect();
    assert_eq!(consents.len(), 1, "{:?}", names(&events));
    assert_eq!(consents[0]["tool"], "file_write");
    let text = final_text(&events);
    assert!(text.starts_with("done: wrote"), "{text}");
    assert_eq!(streamed_text(&events), text);
    assert_eq!(
        std::fs::read_to_string(home.path().join("workspace/streamed.txt")).unwrap(),
        "written from a stream"
    );

    let reqs = model.requests();
    assert_eq!(reqs.len(), 3);
    assert!(reqs.iter().all(|r| r["stream"] == true), "{reqs:?}");
    // The valid call ran; the invalid one came back to the model as a validation error.
    let results: std::collections::HashMap<_, _> = tool_results(&reqs[1]).into_iter().collect();
    assert!(results["r1"].contains("streamed notes 42"), "{results:?}");
    let v1 = &results["v1"];
    assert!(
        v1.starts_with("Error (validation)") && v1.contains("$.path"),
        "{v1}"
    );
    model.assert_protocol_ok();

    // One audit row per call, as for a call that was not streamed.
    let rows: Vec<(String, Option<String>)> =
        crate::support::store::rows(&home, "SELECT tool, error_kind FROM audit ORDER BY id", &[])
            .into_iter()
            .map(|r| (r[0].clone().unwrap_or_default(), r[1].clone()))
            .collect();
    // (A refused call's row is written when it is refused, before the valid calls run.)
    let mut rows = rows;
    rows.sort();
    assert_eq!(
        rows,
        [
            ("file_read".to_string(), None),
            ("file_read".to_string(), Some("validation".to_string())),
            ("file_write".to_string(), None),
        ]
    );
    daemon.stop();
    let audit = run_cli(&home, &["audit", "-n", "10"], None);
    assert!(audit.status.success());
    let listing = String::from_utf8_lossy(&audit.stdout);
    assert!(
        listing.contains("file_write") && listing.contains("validation"),
        "{listing}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_refusing_stream_is_called_without_it() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::text("an answer all at once"),
        Step::text("and the next one too"),
    ])
    .await;
    model.set_refuse_stream(true);
    let mut daemon = start(&home, &model, "");
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);

    let events = chat(&base, "s1", "hello", |_, _| {}).await;
    assert_eq!(final_text(&events), "an answer all at once");
    assert_eq!(streamed_text(&events), "an answer all at once");
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert_eq!(reqs[0]["stream"], true);
    assert!(reqs[1].get("stream").is_none(), "{}", reqs[1]);
    assert!(reqs[1].get("stream_options").is_none(), "{}", reqs[1]);

    // Remembered: the next turn does not try to stream.
    let events = chat(&base, "s1", "again", |_, _| {}).await;
    assert_eq!(final_text(&events), "and the next one too");
    let reqs = model.requests();
    assert_eq!(reqs.len(), 3, "{reqs:?}");
    assert!(reqs[2].get("stream").is_none(), "{}", reqs[2]);
    assert_eq!(model.remaining_steps(), 0);
    daemon.stop();
    let log = home.log();
    assert_eq!(
        log.matches("refuses `stream`").count(),
        1,
        "the refusal is logged once"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_refusing_stream_options_streams_without_them() {
    let home = TestHome::new();
    let answer = "streamed without the usage chunk";
    let model = ScriptedModel::start(vec![Step::text(answer)]).await;
    model.set_refuse_stream_options(true);
    let mut daemon = start(&home, &model, "");
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);

    let events = chat(&base, "s1", "hello", |_, _| {}).await;
    assert_eq!(final_text(&events), answer);
    assert_eq!(streamed_text(&events), answer);
    let deltas = names(&events).iter().filter(|n| **n == "delta").count();
    assert!(deltas >= 2, "{:?}", names(&events));
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2, "{reqs:?}");
    assert!(reqs[0].get("stream_options").is_some());
    assert_eq!(reqs[1]["stream"], true);
    assert!(reqs[1].get("stream_options").is_none(), "{}", reqs[1]);
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_stream_is_retried_from_the_start() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        // The role chunk and two pieces, then 4 s of silence.
        Step::stall(
            3,
            Duration::from_secs(4),
            Step::text("first attempt that stalls midway"),
        ),
        Step::text("the answer of the retry"),
    ])
    .await;
    let mut daemon = start(&home, &model, "  idle_timeout_secs: 1\n");
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);

    let events = chat(&base, "s1", "hello", |_, _| {}).await;
    assert_deltas_before_the_end(&events);
    let n = names(&events);
    let reset_at = n
        .iter()
        .position(|x| *x == "delta_reset")
        .unwrap_or_else(|| panic!("no delta_reset: {events:?}"));
    let before: String = events[..reset_at]
        .iter()
        .filter(|(n, _, _)| n == "delta")
        .map(|(_, d, _)| d["text"].as_str().unwrap())
        .collect();
    assert_eq!(before, "first attempt ", "{n:?}");
    assert_eq!(final_text(&events), "the answer of the retry");
    assert_eq!(streamed_text(&events), "the answer of the retry");
    assert_eq!(model.requests().len(), 2);
    daemon.stop();
    assert!(
        home.log().contains("sent nothing for 1 s"),
        "the stall is logged"
    );
}
