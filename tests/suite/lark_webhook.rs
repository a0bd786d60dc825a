//! The Lark channel in webhook mode, end to end: the real `ethan run` serving
//! `POST /lark/events` on its gateway, `FakeLark` as the Open API, a scripted model, and requests
//! encrypted and signed the way Lark does (`tests/fixtures/lark/webhook_crypto_vectors.json`).

use crate::support::daemon::wait_for_log;
use crate::support::lark::{self, FakeLark};
use crate::support::{Daemon, ScriptedModel, Step, TestHome};
use ethan_channels::lark::webhook::{encrypt, signature};
use serde_json::{json, Value};
use std::time::Duration;

const ENCRYPT_KEY: &str = "test key";
const TOKEN: &str = "xxxxxx";
const GROUP: &str = "oc_5ce6d572455d361153b7xx51da133945";
const WAIT: Duration = Duration::from_secs(30);

fn vectors() -> Value {
    let path = format!(
        "{}/tests/fixtures/lark/webhook_crypto_vectors.json",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_str(&std::fs::read_to_string(path).expect("vectors")).expect("vectors JSON")
}

/// The gateway address the daemon logged (`gateway listening on http://ADDR`).
async fn gateway_url(home: &TestHome) -> String {
    const NEEDLE: &str = "gateway listening on http://";
    wait_for_log(home, NEEDLE, WAIT).await;
    let log = home.log();
    let rest = &log[log.find(NEEDLE).unwrap() + NEEDLE.len()..];
    let addr: String = rest.chars().take_while(|c| !c.is_whitespace()).collect();
    format!("http://{addr}/lark/events")
}

/// The clock, `seconds` ago, as a Lark request timestamp.
fn seconds_ago(seconds: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    (now - seconds).to_string()
}

/// The signature headers of `body` sent at `ts`.
fn signed(body: &str, ts: &str, nonce: &str) -> Vec<(&'static str, String)> {
    let sig = signature(ts, nonce, ENCRYPT_KEY, body.as_bytes());
    vec![
        ("X-Lark-Request-Timestamp", ts.to_string()),
        ("X-Lark-Request-Nonce", nonce.to_string()),
        ("X-Lark-Signature", sig),
    ]
}

/// An encrypted body for `plaintext` and its signature headers.
fn sealed(plaintext: &Value, ts: &str, nonce: &str) -> (String, Vec<(&'static str, String)>) {
    let enc = encrypt(ENCRYPT_KEY, plaintext.to_string().as_bytes(), [7u8; 16]);
    let body = json!({ "encrypt": enc }).to_string();
    let headers = signed(&body, ts, nonce);
    (body, headers)
}

async fn post(url: &str, body: &str, headers: &[(&str, String)]) -> (u16, Value) {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string());
    for (k, v) in headers {
        req = req.header(*k, v);
    }
    let resp = tokio::time::timeout(Duration::from_secs(10), req.send())
        .await
        .expect("the gateway answered in time")
        .expect("request");
    let status = resp.status().as_u16();
    let body = resp.json().await.unwrap_or(Value::Null);
    (status, body)
}

fn with_token(mut envelope: Value) -> Value {
    envelope["header"]["token"] = json!(TOKEN);
    envelope
}

#[tokio::test(flavor = "multi_thread")]
async fn encrypted_verification_signed_event_and_forgeries() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![Step::text("webhook answer")]).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n{}\
         gateway:\n  listen: 127.0.0.1:0\n",
        model.base_url(),
        fake.channel_yaml(&format!(
            "    mode: webhook\n    encrypt_key: \"{ENCRYPT_KEY}\"\n    verification_token: \"{TOKEN}\"\n"
        )),
    ));
    let mut daemon = Daemon::start(&home);
    let url = gateway_url(&home).await;

    // 1. The encrypted url_verification of the shared vectors, signed now (the vector's own
    //    timestamp is long past, and a stale signed request is refused).
    let v = vectors();
    let uv = &v["url_verification"];
    let uv_body = uv["raw_body"].as_str().unwrap();
    let headers = signed(uv_body, &seconds_ago(0), "nonce-uv");
    let (status, body) = post(&url, uv_body, &headers).await;
    assert_eq!(status, 200);
    assert_eq!(body, json!({"challenge": "ajls384kdjx98XX"}));

    // 2. An encrypted and signed group mention: 200 at once, then a threaded reply.
    let event = with_token(lark::group_mention(GROUP, "ou_someone", "via webhook"));
    let msg_id = lark::message_id(&event);
    let (body, headers) = sealed(&event, &seconds_ago(0), "nonce-1");
    let started = std::time::Instant::now();
    let (status, answer) = post(&url, &body, &headers).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, json!({"msg": "success"}));
    assert!(started.elapsed() < Duration::from_secs(3));
    // A streamed card: created with the first words, then filled in.
    let reply = fake.wait_card_containing(0, "webhook answer", WAIT).await;
    assert_eq!(reply.reply_to.as_deref(), Some(msg_id.as_str()));

    // 3. A redelivery of the same event is answered 200 but not replied to again.
    let (status, _) = post(&url, &body, &headers).await;
    assert_eq!(status, 200);

    // 4. Forgeries: a bad signature, a signature for another body, a plaintext body, a wrong
    //    token inside a correctly signed body.
    let other = with_token(lark::group_mention(GROUP, "ou_evil", "forged"));
    let (forged_body, mut forged_headers) = sealed(&other, &seconds_ago(0), "nonce-2");
    forged_headers[2].1 = "0".repeat(64);
    let (status, _) = post(&url, &forged_body, &forged_headers).await;
    assert_eq!(status, 401);
    let (status, _) = post(&url, &forged_body, &headers).await;
    assert_eq!(status, 401);
    let (status, _) = post(&url, &other.to_string(), &[]).await;
    assert_eq!(status, 400);
    let mut wrong_token = other.clone();
    wrong_token["header"]["token"] = json!("not-the-token");
    let (b, h) = sealed(&wrong_token, &seconds_ago(0), "nonce-3");
    let (status, _) = post(&url, &b, &h).await;
    assert_eq!(status, 401);
    // A correctly signed event whose timestamp is ten minutes old (a replay): refused.
    let late = with_token(lark::group_mention(GROUP, "ou_someone", "replayed"));
    let (b, h) = sealed(&late, &seconds_ago(600), "nonce-late");
    let (status, _) = post(&url, &b, &h).await;
    assert_eq!(status, 401);

    // 5. A card button press comes back with the callback answer as the body.
    let press = with_token(lark::card_action(
        json!({"ethan_approval": "req-webhook", "choice": "d"}),
        "ou_someone",
        GROUP,
    ));
    let (b, h) = sealed(&press, &seconds_ago(0), "nonce-4");
    let (status, answer) = post(&url, &b, &h).await;
    assert_eq!(status, 200);
    assert!(
        answer["toast"]["content"]
            .as_str()
            .is_some_and(|c| !c.is_empty()),
        "{answer}"
    );

    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(fake.messages().len(), 1, "{}", fake.describe());
    assert_eq!(model.requests().len(), 1);
    assert_eq!(
        fake.endpoint_calls(),
        0,
        "webhook mode must not open the long connection"
    );
    let log = home.log();
    assert!(
        log.contains("refused a request to /lark/events"),
        "forgeries were not logged"
    );
    assert!(log.contains("missing or wrong X-Lark-Signature"));
    assert!(
        log.contains("a stale or replayed request"),
        "the stale request was not logged"
    );
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn webhook_mode_without_secrets_refuses_to_start() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    home.write_config(&format!(
        "model:\n  base_url: http://127.0.0.1:9/v1\n  api_key: sk-test\n  name: m\n\
         channels:\n{}gateway:\n  listen: 127.0.0.1:0\n",
        fake.channel_yaml("    mode: webhook\n"),
    ));
    let out = crate::support::run_cli(&home, &["run"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(
        stderr.contains("encrypt_key") && stderr.contains("verification_token"),
        "{stderr}"
    );
}
