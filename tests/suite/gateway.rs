//! The HTTP gateway through the real daemon: an SSE chat turn whose tool call is approved through
//! the consent endpoint, expired consent ids, auth, health and metrics, Telegram webhook ingress,
//! and SIGTERM during a turn.

use crate::support::daemon::gateway_addr;
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "test-gateway-token-0123456789";
const WAIT: Duration = Duration::from_secs(30);

fn start(home: &TestHome) -> Daemon {
    // The workspace must not be inside the temp dir, where file writes need no consent.
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    Daemon::start_with_env(home, &[("TMPDIR", tmp.to_str().unwrap())])
}

/// Read SSE events until `done` or `error`, calling `on_event` for each (name, data).
async fn read_events(
    resp: reqwest::Response,
    mut on_event: impl FnMut(&str, &Value),
) -> Vec<(String, Value)> {
    let mut resp = resp;
    let mut buf = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let chunk = tokio::time::timeout_at(deadline, resp.chunk())
            .await
            .expect("SSE stream timed out")
            .expect("SSE read");
        let Some(chunk) = chunk else { break };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let mut name = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim());
                }
            }
            if name.is_empty() {
                continue; // keep-alive comment
            }
            let value: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
            on_event(&name, &value);
            let last = name == "done" || name == "error";
            events.push((name, value));
            if last {
                return events;
            }
        }
    }
    events
}

#[tokio::test(flavor = "multi_thread")]
async fn sse_turn_with_web_consent_auth_health_and_metrics() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "w1",
            "file_write",
            r#"{"path": "web.txt", "content": "from the web"}"#,
        ),
        Step::echo_last_tool_result("done: "),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: k\n  name: m\ngateway:\n  token: {TOKEN}\n",
        model.base_url()
    ));
    let mut daemon = start(&home);
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);
    let http = reqwest::Client::new();

    // Health needs no token; with no chat channel, the store is all there is.
    let health: Value = http
        .get(format!("{base}/healthz"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["store"], "up");
    assert_eq!(health["status"], "ok");

    // Unauthorised requests are refused.
    let r = http
        .post(format!("{base}/api/chat"))
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .post(format!("{base}/api/chat"))
        .bearer_auth("wrong")
        .json(&json!({"message": "hi"}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = http
        .post(format!("{base}/api/consent/abc"))
        .json(&json!({"allowed": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    // An unknown (or expired) consent id answers ok: false.
    let r: Value = http
        .post(format!("{base}/api/consent/doesnotexist"))
        .bearer_auth(TOKEN)
        .json(&json!({"allowed": true}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["ok"], false);

    let metrics_before = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        !metrics_before.contains("ethan_turns_total{channel=\"web\""),
        "{metrics_before}"
    );

    let resp = http
        .post(format!("{base}/api/chat"))
        .bearer_auth(TOKEN)
        .json(&json!({"session": "s1", "message": "write a file"}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let consent_url = std::sync::Arc::new(std::sync::Mutex::new(None));
    let (c2, http2, base2) = (consent_url.clone(), http.clone(), base.clone());
    let events = read_events(resp, move |name, data| {
        if name == "consent_request" {
            let id = data["request_id"].as_str().unwrap().to_string();
            *c2.lock().unwrap() = Some(id.clone());
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
    // The answer streams: its pieces (after the last reset) make up the text.
    let mut streamed = String::new();
    for (name, data) in &events {
        match name.as_str() {
            "delta" => streamed.push_str(data["text"].as_str().unwrap()),
            "delta_reset" => streamed.clear(),
            _ => {}
        }
    }
    let events: Vec<(String, Value)> = events
        .into_iter()
        .filter(|(n, _)| n != "delta" && n != "delta_reset")
        .collect();
    let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["tool_start", "consent_request", "tool_end", "text", "done"],
        "{events:?}"
    );
    assert_eq!(streamed, events[3].1["text"].as_str().unwrap());
    let consent = &events[1].1;
    assert_eq!(consent["tool"], "file_write");
    assert_eq!(consent["always"], false);
    assert_eq!(events[2].1["ok"], true);
    assert!(events[3].1["text"]
        .as_str()
        .unwrap()
        .starts_with("done: wrote"));
    assert_eq!(events[4].1["session"], "s1");
    assert_eq!(
        std::fs::read_to_string(home.path().join("workspace/web.txt")).unwrap(),
        "from the web"
    );
    // The answered id is gone.
    let id = consent_url.lock().unwrap().clone().unwrap();
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
    assert_eq!(r["ok"], false);

    let metrics = http
        .get(format!("{base}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        metrics.contains("ethan_turns_total{channel=\"web\",outcome=\"answer\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ethan_tool_calls_total{outcome=\"ok\",tool=\"file_write\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ethan_consent_requests_total{outcome=\"approved_once\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("ethan_model_request_seconds_count"),
        "{metrics}"
    );
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn telegram_webhook_checks_the_secret() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![Step::text("hello from the webhook")]).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: k\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    mode: webhook\n\
         \x20   webhook_url: https://bot.example.com/telegram/webhook\n    webhook_secret: s3cret_Token\n\
         owners: [\"telegram:42\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let mut daemon = start(&home);
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);
    // setWebhook goes out as multipart form data (teloxide), recorded raw.
    let set = tg
        .wait_for_calls("setWebhook", 1, WAIT)
        .await
        .remove(0)
        .to_string();
    assert!(set.contains("s3cret_Token"), "{set}");
    assert!(
        set.contains("https://bot.example.com/telegram/webhook"),
        "{set}"
    );
    assert_eq!(tg.getupdates_count(), 0, "webhook mode does not poll");

    let update = FakeTelegram::text_update(77, 42, 42, "hi via webhook");
    let http = reqwest::Client::new();
    let wrong = http
        .post(format!("{base}/telegram/webhook"))
        .header("X-Telegram-Bot-Api-Secret-Token", "nope")
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), 401);
    let missing = http
        .post(format!("{base}/telegram/webhook"))
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(missing.status(), 401);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        model.requests().is_empty(),
        "a forged update reached the model"
    );

    let ok = http
        .post(format!("{base}/telegram/webhook"))
        .header("X-Telegram-Bot-Api-Secret-Token", "s3cret_Token")
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["text"], "hello from the webhook");
    assert_eq!(sent[0]["chat_id"], json!(42));
    // A redelivery of the same update is not answered twice.
    let again = http
        .post(format!("{base}/telegram/webhook"))
        .header("X-Telegram-Bot-Api-Secret-Token", "s3cret_Token")
        .json(&update)
        .send()
        .await
        .unwrap();
    assert_eq!(again.status(), 200);
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(tg.sent_messages().len(), 1);
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_during_a_turn_loses_no_event() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::delay(Duration::from_secs(60), Step::text("never")),
        Step::text("answered after the restart"),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: k\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\nowners: [\"telegram:42\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    tg.push_text(42, 42, "slow question");
    let mut daemon = start(&home);
    model.wait_for_requests(1, WAIT).await;
    let started = std::time::Instant::now();
    let status = daemon.stop();
    assert!(
        status.success(),
        "SIGTERM should end the daemon cleanly: {status:?}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "shutdown took {:?}",
        started.elapsed()
    );
    assert!(
        home.log().contains("answered after the restart")
            || home.log().contains("will be answered after the restart")
    );
    let mut daemon = start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["text"], "answered after the restart");
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_second_api_turn_on_a_busy_session_waits_for_the_first() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::delay(Duration::from_secs(1), Step::text("the first answer")),
        Step::text("the second answer"),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: k\n  name: m\ngateway:\n  token: {TOKEN}\n",
        model.base_url()
    ));
    let mut daemon = start(&home);
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);
    let http = reqwest::Client::new();
    let ask = |message: &'static str| {
        let (http, base) = (http.clone(), base.clone());
        async move {
            let resp = http
                .post(format!("{base}/api/chat"))
                .bearer_auth(TOKEN)
                .json(&json!({"session": "shared", "message": message}))
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200);
            read_events(resp, |_, _| {}).await
        }
    };

    // The first turn is in the model (a slow answer) when the second request comes.
    let first = tokio::spawn(ask("first question"));
    model.wait_for_requests(1, WAIT).await;
    let second = tokio::spawn(ask("second question"));
    let (first, second) = (first.await.unwrap(), second.await.unwrap());
    for events in [&first, &second] {
        assert_eq!(events.last().unwrap().0, "done", "{events:?}");
    }

    // The second turn's model request came after the first turn ended: its history holds the
    // first question and answer, before the second question.
    let requests = model.wait_for_requests(2, WAIT).await;
    let history: Vec<String> = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| format!("{}: {}", m["role"].as_str().unwrap_or("?"), m["content"]))
        .collect();
    let at = |needle: &str| history.iter().position(|m| m.contains(needle));
    let (q1, a1, q2) = (
        at("first question"),
        at("the first answer"),
        at("second question"),
    );
    assert!(
        q1.is_some() && a1.is_some() && q1 < a1 && a1 < q2,
        "the second turn ran beside the first: {history:#?}"
    );
    model.assert_protocol_ok();
    daemon.stop();
}
