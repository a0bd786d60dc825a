//! The intake never waits on one chat: a chat flooded with messages against a slow model (on
//! Telegram and on Lark), a command reply whose send fails and is retried, or a button press
//! being answered, does not delay another chat's answer. Each test
//! measures the other chat's latency twice in the same run (once quiet, once with the load) and
//! compares the two.

use crate::support::lark::{self, FakeLark};
use crate::support::model::text_completion;
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::Instant;

/// The longest wait for one answer: far above a normal answer, below what a stalled intake
/// takes in these tests.
const WAIT: Duration = Duration::from_secs(30);
/// How long every model answer takes.
const MODEL_DELAY: Duration = Duration::from_millis(300);
/// Chats (private chats: the chat id is the user id).
const CHAT_A: i64 = 5001;
const CHAT_B: i64 = 5002;

/// A slow answer that repeats the last user message: `echo: <text>`.
fn slow_echo() -> Step {
    Step::delay(
        MODEL_DELAY,
        Step::custom(|req| {
            let last = req
                .get("messages")
                .and_then(Value::as_array)
                .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
                .map(|m| match &m["content"] {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .unwrap_or_default();
            (200, text_completion(req, &format!("echo: {last}")))
        }),
    )
}

async fn start(steps: usize) -> (TestHome, FakeTelegram, ScriptedModel, Daemon) {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start((0..steps).map(|_| slow_echo()).collect()).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    dm_policy: open\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let daemon = Daemon::start(&home);
    (home, tg, model, daemon)
}

/// Sends `text` in chat B and returns how long its answer (a message to B containing `text`)
/// took to be sent; panics after [`WAIT`].
async fn answer_time_in_b(tg: &FakeTelegram, text: &str) -> Duration {
    let started = Instant::now();
    tg.push_text(CHAT_B, CHAT_B, text);
    let answered = || {
        tg.send_message_calls_to(CHAT_B)
            .iter()
            .any(|b| b["text"].as_str().is_some_and(|t| t.contains(text)))
    };
    crate::support::wait_until(&format!("chat B answered {text:?}"), WAIT, answered).await;
    started.elapsed()
}

/// The loaded latency may be a few times the quiet one (two turns share two cores), never the
/// length of the other chat's backlog.
fn assert_not_delayed(quiet: Duration, loaded: Duration, what: &str) {
    let limit = quiet * 3 + Duration::from_secs(1);
    assert!(
        loaded <= limit,
        "chat B took {loaded:?} to be answered while {what}, against {quiet:?} while chat A was \
         quiet (limit {limit:?})"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flooded_chat_does_not_delay_another_chats_answer() {
    const FLOOD: usize = 200;
    let (home, tg, model, mut daemon) = start(FLOOD + 20).await;
    answer_time_in_b(&tg, "b-warm-up").await;
    let quiet = answer_time_in_b(&tg, "b-quiet").await;

    // Chat A sends 200 messages at once, each answered after the model's delay, in order.
    for i in 0..FLOOD {
        tg.push_text(CHAT_A, CHAT_A, &format!("a-{i}"));
    }
    let flooded = answer_time_in_b(&tg, "b-flooded").await;
    assert_not_delayed(quiet, flooded, "chat A had 200 messages waiting");

    // Chat A is still answered in order, one turn at a time.
    crate::support::wait_until("chat A's first answers", WAIT, || {
        tg.send_message_calls_to(CHAT_A).len() >= 3
    })
    .await;
    let a_texts: Vec<String> = tg
        .send_message_calls_to(CHAT_A)
        .iter()
        .filter_map(|b| b["text"].as_str().map(str::to_string))
        .collect();
    for (i, t) in a_texts.iter().enumerate() {
        assert!(t.contains(&format!("a-{i}")), "answer {i} of chat A: {t:?}");
    }
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_command_reply_being_retried_does_not_delay_another_chat() {
    let (home, tg, model, mut daemon) = start(10).await;
    answer_time_in_b(&tg, "b-warm-up").await;
    let quiet = answer_time_in_b(&tg, "b-quiet").await;

    // Chat A's /claim is answered at once, but its send fails with a 5xx (the Bot API client
    // waits 10 s before it reports one) and is retried.
    let err = json!({"ok": false, "error_code": 500, "description": "Internal Server Error"});
    tg.fail_next("sendMessage", 500, err);
    tg.push_text(CHAT_A, CHAT_A, "/claim WRONGCODE");
    crate::support::wait_until("chat A's /claim reply was tried", WAIT, || {
        !tg.send_message_calls_to(CHAT_A).is_empty()
    })
    .await;
    let retrying = answer_time_in_b(&tg, "b-during-retry").await;
    assert_not_delayed(quiet, retrying, "chat A's command reply was being retried");

    // Chat A still gets its reply once the retry goes through.
    crate::support::wait_until("chat A's /claim reply", WAIT, || {
        tg.sent_texts()
            .iter()
            .any(|t| t.contains("claim code is not valid"))
    })
    .await;
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_button_press_being_answered_does_not_delay_another_chat() {
    let (home, tg, model, mut daemon) = start(10).await;
    answer_time_in_b(&tg, "b-warm-up").await;
    let quiet = answer_time_in_b(&tg, "b-quiet").await;

    // A button press in chat A, whose answerCallbackQuery fails with a 5xx (the Bot API client
    // waits 10 s before it reports one).
    let err = json!({"ok": false, "error_code": 500, "description": "Internal Server Error"});
    tg.fail_next("answerCallbackQuery", 500, err);
    let id = tg.next_update_id();
    tg.push_update(FakeTelegram::callback_update(id, CHAT_A, CHAT_A, "x"));
    tg.wait_for_calls("answerCallbackQuery", 1, WAIT).await;
    let pressing = answer_time_in_b(&tg, "b-during-press").await;
    assert_not_delayed(
        quiet,
        pressing,
        "a button press in chat A was being answered",
    );
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}

/// Sends `text` from `sender` in a Lark DM and returns how long its answer (a message containing
/// `text`) took to be sent; panics after [`WAIT`].
async fn lark_answer_time(fake: &FakeLark, sender: &str, text: &str) -> Duration {
    let started = Instant::now();
    fake.push_event(&lark::p2p_text(sender, text));
    let answered = || {
        fake.messages()
            .iter()
            .any(|m| m.content.to_string().contains(text))
    };
    crate::support::wait_until(&format!("{sender} answered {text:?}"), WAIT, answered).await;
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_flooded_lark_chat_does_not_delay_another_lark_chat() {
    const FLOOD: usize = 200;
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start((0..FLOOD + 20).map(|_| slow_echo()).collect()).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\nchannels:\n{}\
         gateway:\n  listen: 127.0.0.1:0\n",
        model.base_url(),
        fake.channel_yaml("    dm_policy: open\n"),
    ));
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    lark_answer_time(&fake, "ou_b", "b-warm-up").await;
    let quiet = lark_answer_time(&fake, "ou_b", "b-quiet").await;

    for i in 0..FLOOD {
        fake.push_event(&lark::p2p_text("ou_a", &format!("a-{i}")));
    }
    let flooded = lark_answer_time(&fake, "ou_b", "b-flooded").await;
    assert_not_delayed(quiet, flooded, "chat A had 200 messages waiting");
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}
