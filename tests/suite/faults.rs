//! Fault injection against the real daemon: the model endpoint failing (500, garbage, a body cut
//! off midway, no answer before the timeout) and the Telegram Bot API answering 5xx on
//! `getUpdates` and `sendMessage`. Each ends with an answer or one clear sentence for the user,
//! and the daemon keeps serving.

use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const OWNER: i64 = 218485655;
/// Generous: teloxide itself waits 10 s after a Bot API 5xx, and CI machines are busy.
const WAIT: Duration = Duration::from_secs(45);

fn write_config(home: &TestHome, tg: &FakeTelegram, model_url: &str, model_extra: &str) {
    home.write_config(&format!(
        "model:\n  base_url: {model_url}\n  api_key: sk-test\n  name: test-model\n{model_extra}\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n\
         owners: [\"telegram:{OWNER}\"]\n",
        tg.token(),
        tg.base_url()
    ));
}

/// Waits until a sent message contains `needle`; returns its text.
async fn wait_for_text(tg: &FakeTelegram, needle: &str) -> String {
    let mut found = String::new();
    crate::support::wait_until(&format!("a reply containing {needle:?}"), WAIT, || match tg
        .sent_texts()
        .into_iter()
        .find(|t| t.contains(needle))
    {
        Some(t) => {
            found = t;
            true
        }
        None => false,
    })
    .await;
    found
}

/// The one short sentence a user gets for a failure: not empty, no detail dump.
fn assert_short_sentence(text: &str) {
    assert!(!text.is_empty() && text.len() <= 120, "{text:?}");
    assert_eq!(text.lines().count(), 1, "{text:?}");
    assert!(
        !text.contains('{') && !text.contains("HTTP/1.1"),
        "{text:?}"
    );
}

// ----- a raw TCP model fake: what an axum handler cannot send ---------------------------------

#[derive(Clone)]
enum Raw {
    /// `200 OK` with a body that is not JSON.
    Garbage,
    /// Headers announce more bytes than are sent, then the connection closes.
    Truncated,
    /// A normal completion with this text.
    Answer(&'static str),
}

#[derive(Clone)]
struct RawModel {
    addr: SocketAddr,
    script: Arc<Mutex<(VecDeque<Raw>, Raw)>>,
    requests: Arc<Mutex<usize>>,
}

impl RawModel {
    /// Serves `script` in order, then `default` for every further request.
    async fn start(script: Vec<Raw>, default: Raw) -> RawModel {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let m = RawModel {
            addr: listener.local_addr().unwrap(),
            script: Arc::new(Mutex::new((script.into(), default))),
            requests: Arc::new(Mutex::new(0)),
        };
        let server = m.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let s = server.clone();
                tokio::spawn(async move {
                    let _ = s.serve(stream).await;
                });
            }
        });
        m
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn set(&self, script: Vec<Raw>, default: Raw) {
        *self.script.lock().unwrap() = (script.into(), default);
    }

    fn requests(&self) -> usize {
        *self.requests.lock().unwrap()
    }

    async fn serve(&self, mut stream: TcpStream) -> std::io::Result<()> {
        // Keep-alive is answered one request per connection (`Connection: close`).
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        let head_end = loop {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let n = stream.read(&mut chunk).await?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        if head.starts_with("get") {
            let body = json!({"object": "list", "data": [{"id": "test-model", "object": "model"}]});
            return respond(&mut stream, &body.to_string(), None).await;
        }
        let request: Value = serde_json::from_slice(&buf[head_end..]).unwrap_or(Value::Null);
        *self.requests.lock().unwrap() += 1;
        let step = {
            let mut s = self.script.lock().unwrap();
            let default = s.1.clone();
            s.0.pop_front().unwrap_or(default)
        };
        match step {
            Raw::Garbage => respond(&mut stream, "<html>502 upstream oops</html>", None).await,
            Raw::Truncated => {
                let full =
                    crate::support::model::text_completion(&request, "THIS MUST NOT BE SHOWN")
                        .to_string();
                respond(&mut stream, &full[..full.len() / 2], Some(full.len() + 100)).await
            }
            Raw::Answer(text) => {
                let body = crate::support::model::text_completion(&request, text).to_string();
                respond(&mut stream, &body, None).await
            }
        }
    }
}

async fn respond(
    stream: &mut TcpStream,
    body: &str,
    claimed: Option<usize>,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        claimed.unwrap_or(body.len())
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.flush().await?;
    stream.shutdown().await
}

// ----- the model endpoint --------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn model_500_then_recovers() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::server_error(),
        Step::text("recovered after a 500"),
    ])
    .await;
    write_config(&home, &tg, &model.base_url(), "");
    let mut daemon = Daemon::start(&home);
    tg.push_text(OWNER, OWNER, "hello");
    wait_for_text(&tg, "recovered after a 500").await;
    assert_eq!(tg.sent_messages().len(), 1, "{}", tg.describe_calls());
    assert_eq!(model.requests().len(), 2, "{}", model.describe());
    assert!(daemon.is_running());
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn model_garbage_gives_one_sentence_and_daemon_keeps_serving() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = RawModel::start(vec![], Raw::Garbage).await;
    write_config(&home, &tg, &model.base_url(), "");
    let mut daemon = Daemon::start(&home);
    tg.push_text(OWNER, OWNER, "first");
    let sent = tg.wait_for_sent(1, WAIT).await;
    let text = sent[0]["text"].as_str().unwrap_or_default().to_string();
    assert_short_sentence(&text);
    assert!(text.contains("couldn't read"), "{text:?}");
    assert!(model.requests() >= 2, "garbage was not retried");

    model.set(vec![], Raw::Answer("answer after garbage"));
    tg.push_text(OWNER, OWNER, "second");
    wait_for_text(&tg, "answer after garbage").await;
    assert_eq!(tg.sent_messages().len(), 2, "{}", tg.describe_calls());
    assert!(daemon.is_running());
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn model_body_cut_off_midway() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    // One cut-off body, then a whole one: the retry delivers the answer.
    let model = RawModel::start(vec![Raw::Truncated], Raw::Answer("whole answer")).await;
    write_config(&home, &tg, &model.base_url(), "");
    let mut daemon = Daemon::start(&home);
    tg.push_text(OWNER, OWNER, "first");
    wait_for_text(&tg, "whole answer").await;
    assert_eq!(model.requests(), 2);

    // Only cut-off bodies: one short sentence, nothing of the partial body.
    model.set(vec![], Raw::Truncated);
    tg.push_text(OWNER, OWNER, "second");
    let sent = tg.wait_for_sent(2, WAIT).await;
    let text = sent[1]["text"].as_str().unwrap_or_default();
    assert_short_sentence(text);
    assert!(!text.contains("MUST NOT"), "{text:?}");
    assert!(daemon.is_running());
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn model_silent_until_timeout() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let slow = || Step::delay(Duration::from_secs(30), Step::text("TOO LATE"));
    let model = ScriptedModel::start(vec![slow(), slow(), slow(), slow(), slow()]).await;
    write_config(&home, &tg, &model.base_url(), "  timeout_secs: 1\n");
    let mut daemon = Daemon::start(&home);
    tg.push_text(OWNER, OWNER, "are you there?");
    let text = wait_for_text(&tg, "took too long").await;
    assert_short_sentence(&text);
    assert!(!tg.sent_texts().iter().any(|t| t.contains("TOO LATE")));
    assert!(daemon.is_running());
    daemon.stop();
}

// ----- the Telegram Bot API ------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread")]
async fn telegram_getupdates_5xx_polling_recovers() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let err = |code: u16| json!({"ok": false, "error_code": code, "description": "Bad Gateway"});
    // One failure only: teloxide itself sleeps 10 s after any 5xx before returning the error,
    // then the poller backs off 1 s.
    tg.fail_next("getUpdates", 502, err(502));
    let model = ScriptedModel::start(vec![Step::text("answered after 5xx polls")]).await;
    write_config(&home, &tg, &model.base_url(), "");
    tg.push_text(OWNER, OWNER, "hello");
    let mut daemon = Daemon::start(&home);
    wait_for_text(&tg, "answered after 5xx polls").await;
    assert_eq!(tg.pending_failures("getUpdates"), 0);
    assert_eq!(tg.sent_messages().len(), 1, "{}", tg.describe_calls());
    assert!(daemon.is_running());
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn telegram_sendmessage_5xx_is_retried_and_delivered_once() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let err = json!({"ok": false, "error_code": 500, "description": "Internal Server Error"});
    tg.fail_next("sendMessage", 500, err);
    let model =
        ScriptedModel::start(vec![Step::text("first reply"), Step::text("second reply")]).await;
    write_config(&home, &tg, &model.base_url(), "");
    let mut daemon = Daemon::start(&home);
    tg.push_text(OWNER, OWNER, "one");
    // teloxide waits 10 s after a 5xx before reporting it; the router then retries.
    wait_for_text(&tg, "first reply").await;
    assert_eq!(tg.pending_failures("sendMessage"), 0);
    let delivered = tg
        .sent_texts()
        .iter()
        .filter(|t| t.contains("first reply"))
        .count();
    assert_eq!(delivered, 1, "{}", tg.describe_calls());

    tg.push_text(OWNER, OWNER, "two");
    wait_for_text(&tg, "second reply").await;
    assert!(daemon.is_running());
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn telegram_part_failing_midway_is_resent_alone_and_every_part_arrives_once_in_order() {
    use ethan_channels::telegram::chunk::{chunk_html, TELEGRAM_TEXT_LIMIT};
    use ethan_channels::telegram::render::markdown_to_html;

    let mut answer = String::new();
    let mut n = 0;
    while answer.len() < 14_000 {
        n += 1;
        answer.push_str(&format!(
            "Paragraph {n:04}: a long answer goes out in several Telegram messages.\n\n"
        ));
    }
    let parts = chunk_html(&markdown_to_html(&answer), TELEGRAM_TEXT_LIMIT);
    assert!(parts.len() >= 4, "{} parts", parts.len());

    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let err = json!({"ok": false, "error_code": 500, "description": "Internal Server Error"});
    tg.fail_nth("sendMessage", 3, 500, err);
    let model = ScriptedModel::start(vec![Step::text(answer)]).await;
    write_config(&home, &tg, &model.base_url(), "");
    let mut daemon = Daemon::start(&home);
    tg.push_text(OWNER, OWNER, "tell me everything");
    // teloxide waits 10 s after a 5xx before reporting it; the router then retries.
    let last = parts.last().cloned().unwrap_or_default();
    crate::support::wait_until("the last part is sent", WAIT, || {
        tg.sent_texts().contains(&last)
    })
    .await;
    assert_eq!(tg.pending_failures("sendMessage"), 0);
    // Every part exactly once, in order: nothing shown before the failure is sent again.
    let first_line = |t: &String| t.lines().next().unwrap_or("").to_string();
    let sent = tg.sent_texts();
    assert_eq!(
        sent.iter().map(first_line).collect::<Vec<_>>(),
        parts.iter().map(first_line).collect::<Vec<_>>(),
        "the first line of each part sent"
    );
    assert!(
        sent == parts,
        "the parts sent differ from the answer's parts"
    );
    // The failed third part was the one sent again, right after its failure.
    let calls: Vec<(String, u16)> = tg
        .all_calls()
        .into_iter()
        .filter(|c| c.method.eq_ignore_ascii_case("sendMessage"))
        .map(|c| (c.body["text"].as_str().unwrap_or("").to_string(), c.status))
        .collect();
    assert_eq!(calls[2], (parts[2].clone(), 500));
    assert_eq!(calls[3], (parts[2].clone(), 200));
    assert_eq!(calls.len(), parts.len() + 1);
    assert!(daemon.is_running());
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn telegram_ui_card_send_5xx_is_retried_and_the_card_shown_once_before_the_answer() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let err = json!({"ok": false, "error_code": 500, "description": "Internal Server Error"});
    tg.fail_next("sendMessage", 500, err);
    let card = json!({"card": {"type": "compare", "title": "Phones", "columns": ["Model", "Price"],
        "rows": [{"values": ["Alpha", "$399"]}, {"values": ["Beta", "$499"]}]}});
    let model = ScriptedModel::start(vec![
        Step::tool_call("u1", "ui_card", &card.to_string()),
        Step::text("Alpha is cheaper."),
    ])
    .await;
    write_config(&home, &tg, &model.base_url(), "");
    let mut daemon = Daemon::start(&home);
    tg.push_text(OWNER, OWNER, "compare the phones");
    // teloxide waits 10 s after a 5xx before reporting it; the router then retries the card.
    wait_for_text(&tg, "Alpha is cheaper.").await;
    let sent = tg.sent_texts();
    assert_eq!(sent.len(), 2, "{}", tg.describe_calls());
    assert!(
        sent[0].contains("Phones") && sent[0].contains("Beta"),
        "{sent:?}"
    );
    assert_eq!(sent[1], "Alpha is cheaper.");
    assert!(daemon.is_running());
    daemon.stop();
}
