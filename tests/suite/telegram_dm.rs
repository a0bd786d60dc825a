//! The walking skeleton end to end: the real `ethan run` against a loopback fake Bot API and a
//! scripted OpenAI-compatible model. A Telegram DM makes the model call a tool, the answer reaches
//! `sendMessage`, and a restart does not answer the same update twice.

use crate::support::telegram::fixture;
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use ethan_channels::telegram::chunk::utf16_len;
use ethan_channels::telegram::render::{html_to_display_text, markdown_to_html};
use serde_json::{json, Value};
use std::time::Duration;

const OWNER: i64 = 218485655; // `from.id` of tests/fixtures/telegram/update_private_text.json
const WAIT: Duration = Duration::from_secs(30);

fn write_config(home: &TestHome, tg: &FakeTelegram, model: &ScriptedModel, extra: &str) {
    home.write_config(&tg.owner_config(&model.base_url(), OWNER, extra));
}

fn inbound_state(home: &TestHome, event_id: &str) -> Option<String> {
    crate::support::store::value(
        home,
        "SELECT state FROM inbound_events WHERE channel = 'telegram' AND event_id = ?1",
        &[event_id],
    )
}

fn tool_messages(req: &Value) -> Vec<Value> {
    req["messages"]
        .as_array()
        .map(|m| m.iter().filter(|m| m["role"] == "tool").cloned().collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn dm_tool_call_answer_and_no_reanswer_after_restart() {
    let home = TestHome::new();
    let outside = tempfile::tempdir().unwrap();
    let file = outside.path().join("launch.txt");
    std::fs::write(&file, "The launch code is 4242.").unwrap();
    let tg = FakeTelegram::start().await;
    let args = json!({ "path": file.display().to_string() }).to_string();
    let model = ScriptedModel::start(vec![
        Step::tool_call("call_1", "file_read", &args),
        Step::echo_last_tool_result("The file says: "),
    ])
    .await;
    write_config(&home, &tg, &model, "");
    tg.push_update(fixture("update_private_text.json"));

    let mut daemon = Daemon::start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["chat_id"], json!(OWNER), "{sent:?}");
    let text = sent[0]["text"].as_str().unwrap();
    assert!(text.contains("The launch code is 4242."), "{text}");

    // The model saw the user's text, then exactly one result for call_1.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2, "{}", model.describe());
    assert_eq!(
        crate::support::model::last_user_text(&reqs[0]),
        "hello there"
    );
    let tools = tool_messages(&reqs[1]);
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["tool_call_id"], "call_1");
    model.assert_protocol_ok();
    // The owner is offered the fast-path tools up front (side effects ask for approval).
    let offered: Vec<&str> = reqs[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["file_read", "find_tools", "shell"]);

    crate::support::wait_until("the update is marked done", WAIT, || {
        inbound_state(&home, "892252934").as_deref() == Some("done")
    })
    .await;
    daemon.stop();

    // The Bot API forgets the offset and offers the same update again after the restart.
    tg.set_redeliver_all(true);
    let polls_before = tg.getupdates_count();
    let mut daemon = Daemon::start(&home);
    tg.wait_for_getupdates(polls_before + 3, WAIT).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(tg.sent_messages().len(), 1, "{}", tg.describe_calls());
    assert_eq!(model.requests().len(), 2, "the model was called again");
    daemon.stop();

    // The secret API key never reached the log.
    let log = home.log();
    assert!(!log.contains("sk-test-secret-value"), "{log}");
    assert!(
        !log.contains(tg.token()),
        "the bot token leaked into the log"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn long_answer_is_split_into_valid_ordered_chunks() {
    let mut answer =
        String::from("# Report\n\nHere is everything 😀, with *emphasis* & <angles>.\n\n");
    while answer.chars().count() < 6000 {
        answer.push_str("Line with emoji 🎉🚀 and CJK 你好世界 & more <text>.\n");
    }
    answer.push_str("\n```rust\n");
    while answer.chars().count() < 10_000 {
        answer.push_str("fn main() { println!(\"<😀> & 你好\"); }\n");
    }
    answer.push_str("```\n\nDone.");
    assert!(answer.chars().count() >= 10_000);

    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![Step::text(answer.clone())]).await;
    write_config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "write me a long report");
    let mut daemon = Daemon::start(&home);

    let expected = html_to_display_text(&markdown_to_html(&answer));
    // Wait until the whole answer has arrived.
    crate::support::wait_until("all chunks are sent", WAIT, || {
        let shown: String = tg
            .sent_messages()
            .iter()
            .map(|m| html_to_display_text(m["text"].as_str().unwrap_or("")))
            .collect();
        shown.len() >= expected.len()
    })
    .await;
    let sent = tg.sent_messages();
    assert!(
        sent.len() >= 3,
        "expected several chunks, got {}",
        sent.len()
    );
    for m in &sent {
        let t = m["text"].as_str().unwrap();
        assert!(
            utf16_len(t) <= 4096,
            "chunk of {} UTF-16 units",
            utf16_len(t)
        );
        assert_eq!(m["parse_mode"], "HTML");
    }
    // The code block cut by a split is reopened with its language.
    let reopened = sent
        .iter()
        .skip(1)
        .filter(|m| {
            m["text"]
                .as_str()
                .unwrap()
                .starts_with("<pre><code class=\"language-rust\">")
        })
        .count();
    assert!(reopened >= 1, "no chunk reopens the rust code block");
    let shown: String = sent
        .iter()
        .map(|m| html_to_display_text(m["text"].as_str().unwrap()))
        .collect();
    assert_eq!(shown, expected);
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn answer_cut_off_at_the_length_limit_ends_with_a_note() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![Step::length_limited(
        "The three reasons are:\n\n```text\nfirst, the",
    )])
    .await;
    write_config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "why?");
    let mut daemon = Daemon::start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    let shown = html_to_display_text(sent[0]["text"].as_str().unwrap_or(""));
    assert!(shown.starts_with("The three reasons are:"), "{shown:?}");
    assert!(
        shown
            .trim_end()
            .ends_with("… (the answer was cut off at the model's length limit)"),
        "{shown:?}"
    );
    // The note is outside the code block the cut left open.
    let html = sent[0]["text"].as_str().unwrap_or("");
    let note_at = html.find("(the answer was cut off").unwrap_or(0);
    assert!(html[..note_at].contains("</pre>"), "{html}");
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn rejected_html_goes_out_as_plain_text_and_429_is_waited_out() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::text("**Bold** answer & <stuff>"),
        Step::text("second answer"),
    ])
    .await;
    write_config(&home, &tg, &model, "");
    tg.fail_next("sendMessage", 400, FakeTelegram::bad_request_entities());
    tg.push_text(OWNER, OWNER, "first");
    let mut daemon = Daemon::start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert!(
        sent[0].get("parse_mode").is_none() || sent[0]["parse_mode"].is_null(),
        "{:?}",
        sent[0]
    );
    assert_eq!(sent[0]["text"], "Bold answer & <stuff>");

    tg.fail_next("sendMessage", 429, FakeTelegram::too_many_requests(1));
    let started = std::time::Instant::now();
    tg.push_text(OWNER, OWNER, "second");
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retry_after was not honoured"
    );
    assert_eq!(sent[1]["text"], "second answer");
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn strangers_get_a_note_and_commands_work() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![]).await;
    write_config(&home, &tg, &model, "");
    // A malformed update must not stop the poller or hide the next one.
    tg.push_update(json!({"update_id": 10, "message": {"message_id": "not a number", "chat": 5}}));
    tg.push_update(FakeTelegram::text_update(11, 777, 777, "hi, who are you?"));
    tg.push_update(FakeTelegram::text_update(12, OWNER, OWNER, "/help"));
    tg.push_update(FakeTelegram::text_update(13, OWNER, OWNER, "/new"));
    let mut daemon = Daemon::start(&home);
    let sent = tg.wait_for_sent(3, WAIT).await;
    let to = |chat: i64| -> Vec<String> {
        sent.iter()
            .filter(|m| m["chat_id"] == json!(chat))
            .map(|m| m["text"].as_str().unwrap().to_string())
            .collect()
    };
    let stranger = to(777);
    assert_eq!(stranger.len(), 1);
    assert!(stranger[0].contains("allow list"), "{stranger:?}");
    let owner = to(OWNER);
    assert!(
        owner[0].contains("/new") && owner[0].contains("/stop"),
        "{owner:?}"
    );
    assert!(owner[1].contains("fresh conversation"), "{owner:?}");
    assert!(model.requests().is_empty(), "the model must not be called");
    let commands = tg.calls("setMyCommands");
    assert_eq!(commands.len(), 1);
    let names: Vec<&str> = commands[0]["commands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["command"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["start", "help", "new", "stop"]);
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn ui_card_reaches_telegram_as_an_html_table() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let card = json!({"card": {"type": "compare", "title": "Phones", "columns": ["Model", "Price", "Battery"],
        "rows": [{"values": ["Alpha", "$399", "4500 mAh"]}, {"values": ["Beta", "$499", "5000 mAh"]}]}});
    let model = ScriptedModel::start(vec![
        Step::tool_call("u1", "ui_card", &card.to_string()),
        Step::text("Beta has the bigger battery."),
    ])
    .await;
    write_config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "compare the phones");
    let mut daemon = Daemon::start(&home);
    let sent = tg.wait_for_sent(2, WAIT).await;
    let card_text = sent[0]["text"].as_str().unwrap();
    assert_eq!(sent[0]["parse_mode"], "HTML");
    assert!(card_text.contains("<pre>"), "{card_text}");
    for name in ["Model", "Price", "Battery", "Alpha", "Beta"] {
        assert!(card_text.contains(name), "{name} missing: {card_text}");
    }
    assert_eq!(sent[1]["text"], "Beta has the bigger battery.");
    // The model was told the card is already shown.
    let reqs = model.requests();
    let result = tool_messages(&reqs[1]);
    assert!(result[0]["content"]
        .as_str()
        .unwrap()
        .contains("already shown"));
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn stop_cancels_the_running_turn() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![Step::delay(
        Duration::from_secs(4),
        Step::text("too late"),
    )])
    .await;
    write_config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "think hard");
    let mut daemon = Daemon::start(&home);
    model.wait_for_requests(1, WAIT).await;
    tg.push_text(OWNER, OWNER, "/stop");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["text"], "Stopped.");
    tokio::time::sleep(Duration::from_secs(5)).await;
    let texts = tg.sent_texts();
    assert!(!texts.iter().any(|t| t.contains("too late")), "{texts:?}");
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_killed_midway_is_answered_once_after_restart() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::delay(Duration::from_secs(30), Step::text("never delivered")),
        Step::text("answer after restart"),
    ])
    .await;
    write_config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "question");
    let mut daemon = Daemon::start(&home);
    model.wait_for_requests(1, WAIT).await;
    daemon.kill();
    let mut daemon = Daemon::start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["text"], "answer after restart");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(tg.sent_messages().len(), 1);
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn conflict_is_logged_once_and_polling_recovers() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![Step::text("back online")]).await;
    write_config(&home, &tg, &model, "");
    for _ in 0..3 {
        tg.fail_next("getUpdates", 409, FakeTelegram::conflict());
    }
    tg.push_text(OWNER, OWNER, "hello?");
    let mut daemon = Daemon::start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["text"], "back online");
    daemon.stop();
    let log = home.log();
    assert_eq!(log.matches("409 Conflict").count(), 1, "{log}");
}

/// Telegram may restart `update_id` numbering after a week without updates: a new message whose
/// id matches an old, finished record is a new message, not a redelivery.
#[tokio::test(flavor = "multi_thread")]
async fn a_new_update_reusing_an_old_update_id_is_answered() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::text("first answer"),
        Step::text("second answer"),
    ])
    .await;
    write_config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "first");
    let mut daemon = Daemon::start(&home);
    tg.wait_for_sent(1, WAIT).await;
    daemon.stop();

    // A record of the next update id, answered ten days ago.
    let reused = tg.next_update_id();
    let old = chrono::Utc::now().timestamp() - 10 * 86_400;
    crate::support::store::execute(
        &home,
        "INSERT INTO inbound_events
         (channel, event_id, session_key, payload, state, attempts, received_at, updated_at)
         VALUES ('telegram', ?1, 'telegram:old', '{}', 'done', 1, ?2, ?2)",
        &[&reused.to_string(), &old.to_string()],
    );

    let mut daemon = Daemon::start(&home);
    assert_eq!(tg.push_text(OWNER, OWNER, "second"), reused);
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert!(
        sent[1]["text"].as_str().unwrap().contains("second answer"),
        "{sent:?}"
    );
    // The reply reaches the fake just before the daemon records the event as done.
    crate::support::wait_until("the reused update is done", WAIT, || {
        inbound_state(&home, &reused.to_string()).as_deref() == Some("done")
    })
    .await;
    daemon.stop();
    home.assert_no_panic();
}

/// At start, retention removes answered events older than `retention.inbound_days` and old
/// `lark.seen:*` keys; a recent event delivered again is still recognised and not re-answered.
/// (That unfinished events are kept is tested on the store: the daemon moves them on at start.)
#[tokio::test(flavor = "multi_thread")]
async fn retention_prunes_old_events_at_start_and_a_recent_redelivery_is_not_reanswered() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::text("first answer"),
        Step::text("second answer"),
    ])
    .await;
    write_config(&home, &tg, &model, "");
    let first = tg.push_text(OWNER, OWNER, "first");
    let mut daemon = Daemon::start(&home);
    tg.wait_for_sent(1, WAIT).await;
    daemon.stop();

    let old = chrono::Utc::now().timestamp() - 10 * 86_400;
    crate::support::store::execute(
        &home,
        "INSERT INTO inbound_events
         (channel, event_id, session_key, payload, state, attempts, received_at, updated_at)
         VALUES ('lark', 'old-done', 'lark:old', '{}', 'done', 1, ?1, ?1)",
        &[&old.to_string()],
    );
    crate::support::store::execute(
        &home,
        "INSERT INTO kv (key, value) VALUES ('lark.seen:om_old', ?1), ('lark.seen:om_new', ?2)",
        &[
            &old.to_string(),
            &chrono::Utc::now().timestamp().to_string(),
        ],
    );

    // Telegram offers every update again, the answered one included.
    tg.set_redeliver_all(true);
    let mut daemon = Daemon::start(&home);
    let lark_state = |id: &str| -> Option<String> {
        crate::support::store::value(
            &home,
            "SELECT state FROM inbound_events WHERE channel = 'lark' AND event_id = ?1",
            &[id],
        )
    };
    crate::support::wait_until("the old answered event is pruned", WAIT, || {
        lark_state("old-done").is_none()
    })
    .await;
    let seen = |key: &str| -> bool {
        crate::support::store::row(&home, "SELECT 1 FROM kv WHERE key = ?1", &[key]).is_some()
    };
    assert!(!seen("lark.seen:om_old") && seen("lark.seen:om_new"));

    let second = tg.push_text(OWNER, OWNER, "second");
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert!(
        sent[1]["text"].as_str().unwrap().contains("second answer"),
        "{sent:?}"
    );
    // Marked done once Telegram's answer to the send is back, just after the fake recorded it.
    crate::support::wait_until("the second update is marked done", WAIT, || {
        inbound_state(&home, &second.to_string()).as_deref() == Some("done")
    })
    .await;
    // The redelivered first update came before the second and was not run again.
    assert_eq!(model.requests().len(), 2, "{}", model.describe());
    assert_eq!(
        inbound_state(&home, &first.to_string()).as_deref(),
        Some("done")
    );
    daemon.stop();
    home.assert_no_panic();
}
