//! The Lark channel over the long connection, end to end: the real `ethan run` against
//! `FakeLark` (Open API + websocket speaking pbbp2 frames) and a scripted model.

use crate::support::lark::{self, FakeLark, APP_SECRET, BOT_OPEN_ID};
use crate::support::{Daemon, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const OWNER: &str = "ou_84aad35d084aa403a838cf73ee18467";
const GROUP: &str = "oc_5ce6d572455d361153b7xx51da133945";
const WAIT: Duration = Duration::from_secs(30);

fn write_config(home: &TestHome, fake: &FakeLark, model: &ScriptedModel, extra: &str) {
    write_config_lark(home, fake, model, "", extra);
}

/// As [`write_config`], with `lark_extra` lines (indented by four spaces) under `channels.lark`.
fn write_config_lark(
    home: &TestHome,
    fake: &FakeLark,
    model: &ScriptedModel,
    lark_extra: &str,
    extra: &str,
) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test-secret-value\n  name: test-model\n\
         channels:\n{}\
         owners: [\"lark:{OWNER}\"]\ngateway:\n  listen: 127.0.0.1:0\n{extra}",
        model.base_url(),
        fake.channel_yaml(lark_extra),
    ));
}

fn inbound_state(home: &TestHome, event_id: &str) -> Option<String> {
    crate::support::store::value(
        home,
        "SELECT state FROM inbound_events WHERE channel = 'lark' AND event_id = ?1",
        &[event_id],
    )
}

fn assert_no_secrets(home: &TestHome) {
    let log = home.log();
    assert!(
        !log.contains(APP_SECRET),
        "the app secret leaked into the log"
    );
    assert!(
        !log.contains("t-fake-"),
        "a tenant_access_token leaked into the log"
    );
    assert!(
        !log.contains("sk-test-secret-value"),
        "the model key leaked"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn group_mention_is_acked_fast_and_answered_with_a_threaded_card() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![
        Step::text("Hello from **Ethan**\nsecond line"),
        Step::text("answer to your reply"),
    ])
    .await;
    write_config(&home, &fake, &model, "");
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;

    // Junk first: none of it may stop the connection or get an answer.
    fake.push_raw(b"\xff\xff\xffnot a frame".to_vec());
    let unknown = fake.push_event(
        &json!({"schema": "2.0", "header": {"event_type": "im.chat.updated_v1"}, "event": {}}),
    );
    let not_json = {
        let mut e = lark::group_mention(GROUP, "ou_a", "x");
        e["event"] = json!("broken");
        fake.push_event(&e)
    };
    let stale = fake.push_event(&lark::aged(
        lark::group_mention(GROUP, "ou_a", "old news"),
        3600,
    ));
    let unaddressed = fake.push_event(&lark::text_event(
        GROUP,
        "group",
        "ou_a",
        "just chatting",
        &[],
    ));
    for seq in [unknown, not_json, stale, unaddressed] {
        let ack = fake.wait_ack(seq, WAIT).await;
        assert_eq!(ack.code, 200, "{ack:?}");
    }

    let event = lark::group_mention(GROUP, "ou_someone", "what is up?");
    let msg_id = lark::message_id(&event);
    let seq = fake.push_event(&event);
    let ack = fake.wait_ack(seq, WAIT).await;
    assert_eq!(ack.code, 200);
    assert!(ack.latency.unwrap() < Duration::from_secs(3), "{ack:?}");
    assert!(ack.header("biz_rt").is_some(), "{ack:?}");
    assert_eq!(ack.header("type"), Some("event"));

    // A streamed card is created with the first words and filled in by later writes.
    let reply = &fake
        .wait_card_containing(0, "Hello from **Ethan**", WAIT)
        .await;
    assert_eq!(reply.kind, "reply", "{reply:?}");
    assert_eq!(reply.reply_to.as_deref(), Some(msg_id.as_str()));
    assert_eq!(reply.msg_type, "interactive");
    assert_eq!(reply.content["schema"], "2.0");
    assert_eq!(reply.content["body"]["elements"][0]["tag"], "markdown");
    assert!(
        reply.card_markdown().contains("Hello from **Ethan**"),
        "{reply:?}"
    );
    assert!(!reply.uuid.is_empty());

    // The model saw the text without the mention, once.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 1, "{}", model.describe());
    assert_eq!(
        crate::support::model::last_user_text(&reqs[0]),
        "what is up?"
    );
    crate::support::wait_until("the event is done", WAIT, || {
        inbound_state(&home, &msg_id).as_deref() == Some("done")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(fake.messages().len(), 1, "{}", fake.describe());
    assert_eq!(model.requests().len(), 1);
    assert!(
        home.log().contains("skipping lark message"),
        "the stale event was not logged"
    );
    assert!(fake.pings() >= 1, "no ping frame was sent");

    // A reply to the bot's message, without a mention, is addressed to the bot.
    let mut follow_up = lark::text_event(GROUP, "group", "ou_someone", "and then?", &[]);
    follow_up["event"]["message"]["parent_id"] = json!(reply.message_id);
    follow_up["event"]["message"]["root_id"] = json!(msg_id);
    fake.push_event(&follow_up);
    let answer = fake
        .wait_card_containing(1, "answer to your reply", WAIT)
        .await;
    assert_eq!(
        answer.reply_to.as_deref(),
        Some(lark::message_id(&follow_up).as_str())
    );
    daemon.stop();
    assert_no_secrets(&home);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_event_three_times_and_a_restart_give_one_reply() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![Step::text("just once")]).await;
    write_config(&home, &fake, &model, "");
    let event = lark::group_mention(GROUP, "ou_someone", "hello");
    let msg_id = lark::message_id(&event);

    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    let seqs: Vec<u64> = (0..3).map(|_| fake.push_event(&event)).collect();
    for s in seqs {
        assert_eq!(fake.wait_ack(s, WAIT).await.code, 200);
    }
    fake.wait_for_messages(1, WAIT).await;
    crate::support::wait_until("the event is done", WAIT, || {
        inbound_state(&home, &msg_id).as_deref() == Some("done")
    })
    .await;
    daemon.stop();

    // After a restart Lark delivers it once more.
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(2, WAIT).await;
    let s = fake.push_event(&event);
    assert_eq!(fake.wait_ack(s, WAIT).await.code, 200);
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(fake.messages().len(), 1, "{}", fake.describe());
    assert_eq!(model.requests().len(), 1, "the model was called again");
    daemon.stop();
    assert_no_secrets(&home);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_two_fragment_event_is_answered_once() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![Step::text("got your long message")]).await;
    write_config(&home, &fake, &model, "");
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;

    let event = lark::p2p_text(
        OWNER,
        &format!("please read: {}", "lorem ipsum ".repeat(100)),
    );
    let msg_id = lark::message_id(&event);
    let last = fake.push_event_fragmented(&event, 2);
    let ack = fake.wait_ack(last, WAIT).await;
    assert_eq!(ack.code, 200);
    assert_eq!(ack.header("sum"), Some("2"));
    fake.wait_for_messages(1, WAIT).await;
    // The reply is a streamed card: it holds the whole answer once it is finished.
    crate::support::wait_until("the card shows the whole answer", WAIT, || {
        fake.messages()[0]
            .card_markdown()
            .contains("got your long message")
    })
    .await;
    let sent = fake.messages();
    assert_eq!(sent[0].reply_to.as_deref(), Some(msg_id.as_str()));
    assert!(sent[0].card_markdown().contains("got your long message"));
    // Only the completing fragment is acknowledged.
    assert_eq!(fake.acks().len(), 1, "{}", fake.describe());
    let reqs = model.requests();
    assert_eq!(reqs.len(), 1);
    assert!(crate::support::model::last_user_text(&reqs[0]).starts_with("please read: lorem ipsum"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(fake.messages().len(), 1);
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_connection_reconnects_with_a_fresh_url() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![Step::text("back again")]).await;
    write_config(&home, &fake, &model, "");
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    assert_eq!(fake.endpoint_calls(), 1);

    fake.drop_connection();
    fake.wait_connections(2, WAIT).await;
    assert!(
        fake.endpoint_calls() >= 2,
        "the endpoint was not fetched again"
    );
    assert!(
        fake.refused_handshakes().is_empty(),
        "{:?}",
        fake.refused_handshakes()
    );

    let event = lark::group_mention(GROUP, "ou_someone", "still there?");
    let s = fake.push_event(&event);
    assert_eq!(fake.wait_ack(s, WAIT).await.code, 200);
    let sent = fake.wait_for_messages(1, WAIT).await;
    assert_eq!(
        sent[0].reply_to.as_deref(),
        Some(lark::message_id(&event).as_str())
    );
    assert!(home.log().contains("lark long connection lost"));
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_token_is_refreshed_and_the_reply_still_goes_out() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![Step::text("fresh token reply")]).await;
    // The reply is the first call made with the token (with streaming, creating the card is).
    write_config_lark(&home, &fake, &model, "    streaming: off\n", "");
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    assert_eq!(fake.token_requests(), 1);

    // The token the daemon holds is now rejected with HTTP 200 and code 99991663.
    fake.expire_tokens();
    let event = lark::group_mention(GROUP, "ou_someone", "hi");
    fake.push_event(&event);
    let sent = fake.wait_for_messages(1, WAIT).await;
    assert_eq!(sent[0].token, "t-fake-2");
    assert_eq!(fake.token_requests(), 2);
    let replies = fake.calls_to("/reply");
    assert_eq!(replies.len(), 2, "{}", fake.describe());
    assert_eq!(replies[0].token.as_deref(), Some("t-fake-1"));
    assert_eq!(replies[1].token.as_deref(), Some("t-fake-2"));
    // The retried request carried the same uuid.
    assert_eq!(replies[0].body["uuid"], replies[1].body["uuid"]);
    daemon.stop();
    assert_no_secrets(&home);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_card_goes_out_as_a_post_and_rate_limits_are_waited_out() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![
        Step::text("**plain** fallback"),
        Step::text("after the wait"),
    ])
    .await;
    // The ordinary reply card refused (a refused streaming card: tests/suite/lark_cardkit_draft.rs).
    write_config_lark(&home, &fake, &model, "    streaming: off\n", "");
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;

    fake.fail_next(
        "reply",
        200,
        json!({"code": 230099, "msg": "Failed to create card content, ext=ErrCode: 200621"}),
        &[],
    );
    fake.push_event(&lark::group_mention(GROUP, "ou_someone", "one"));
    let sent = fake.wait_for_messages(1, WAIT).await;
    assert_eq!(sent[0].msg_type, "post", "{:?}", sent[0]);
    assert_eq!(sent[0].content["zh_cn"]["content"][0][0]["tag"], "md");
    assert_eq!(
        sent[0].content["zh_cn"]["content"][0][0]["text"],
        "**plain** fallback"
    );
    assert!(home.log().contains("230099"));

    fake.fail_next(
        "reply",
        429,
        json!({"code": 99991400, "msg": "request trigger frequency limit"}),
        &[("x-ogw-ratelimit-reset", "1")],
    );
    let started = std::time::Instant::now();
    fake.push_event(&lark::group_mention(GROUP, "ou_someone", "two"));
    let sent = fake.wait_for_messages(2, WAIT).await;
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "x-ogw-ratelimit-reset was not honoured"
    );
    assert_eq!(sent[1].msg_type, "interactive");
    fake.wait_card_containing(1, "after the wait", WAIT).await;
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_card_button_press_reaches_the_daemon_and_is_answered_in_the_ack() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![]).await;
    write_config(&home, &fake, &model, "");
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;

    let seq = fake.push_card_action(
        json!({"ethan_approval": "req-unknown", "choice": "o"}),
        OWNER,
        GROUP,
    );
    let ack = fake.wait_ack(seq, WAIT).await;
    assert_eq!(ack.code, 200);
    assert!(ack.latency.unwrap() < Duration::from_secs(3));
    let data = ack.data.expect("a card callback ACK carries data");
    let toast = &data["toast"];
    assert!(
        ["success", "info", "error", "warning"].contains(&toast["type"].as_str().unwrap_or("")),
        "{data}"
    );
    assert!(
        !toast["content"].as_str().unwrap_or("").is_empty(),
        "{data}"
    );
    assert!(
        home.log().contains("req-unknown"),
        "the press did not reach the daemon"
    );

    // A card action that is not an approval is answered with `{}` (no UI change).
    let seq = fake.push_card_action(json!({"action": "something else"}), OWNER, GROUP);
    let ack = fake.wait_ack(seq, WAIT).await;
    assert_eq!(ack.data, Some(json!({})));
    assert!(model.requests().is_empty());
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_checks_lark_and_hints_when_no_event_arrived() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    // The configured model is not in the fake's list: each doctor run tries one token.
    let model = ScriptedModel::start(vec![Step::text("O"), Step::text("O"), Step::text("O")]).await;
    write_config(&home, &fake, &model, "");

    let out = crate::support::run_cli(&home, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("ok    lark: tenant_access_token: ok"),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("bot info: Ethan Test (open_id {BOT_OPEN_ID})")),
        "{stdout}"
    );
    assert!(!stdout.contains("no event has arrived"), "{stdout}");

    // The daemon ran, but no event came: doctor points at the subscription.
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    crate::support::wait_until("the start time is stored", WAIT, || {
        crate::support::store::row(
            &home,
            "SELECT value FROM kv WHERE key = 'lark.started_at'",
            &[],
        )
        .is_some()
    })
    .await;
    daemon.stop();
    let out = crate::support::run_cli(&home, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("no event has arrived since the daemon started"),
        "{stdout}"
    );
    assert!(stdout.contains("im.message.receive_v1"), "{stdout}");
    assert!(!stdout.contains(APP_SECRET));

    // Wrong credentials fail the check.
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-x\n  name: m\nchannels:\n  lark:\n    app_id: cli_wrong\n    app_secret: nope\n    base_url: {}\n",
        model.base_url(),
        fake.base_url()
    ));
    let out = crate::support::run_cli(&home, &["doctor"], None);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success());
    assert!(
        stdout.contains("FAIL  lark: tenant_access_token"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_owner_approves_a_shell_call_by_button_and_a_strangers_press_does_not_count() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "call_1",
            "shell",
            r#"{"command":"touch lark-approved.txt && echo approved-run-42"}"#,
        ),
        Step::echo_last_tool_result("Result: "),
    ])
    .await;
    // The approval card and the answer as separate messages (a streaming card would come first
    // and hold the answer; see tests/suite/streaming_lark.rs).
    write_config_lark(&home, &fake, &model, "    streaming: off\n", "");
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;

    let event = lark::p2p_text(OWNER, "please create the marker file");
    let chat = event["event"]["message"]["chat_id"]
        .as_str()
        .unwrap()
        .to_string();
    fake.push_event(&event);
    let sent = fake.wait_for_messages(1, WAIT).await;
    let card = &sent[0];
    assert_eq!(card.msg_type, "interactive", "{card:?}");
    assert_eq!(
        card.content["header"]["title"]["content"],
        "Approval needed"
    );
    let buttons: Vec<Value> = card.content["body"]["elements"][1]["columns"]
        .as_array()
        .expect("a row of buttons")
        .iter()
        .map(|c| c["elements"][0]["behaviors"][0]["value"].clone())
        .collect();
    assert!(buttons.len() >= 2, "{buttons:?}");
    let request_id = buttons[0]["ethan_approval"].as_str().unwrap().to_string();
    assert_eq!(buttons[0]["choice"], "o");
    let marker = home.path().join("workspace").join("lark-approved.txt");

    // Someone else presses "Approve once": refused, the card stays, nothing runs.
    let seq = fake.push_card_action(
        json!({"ethan_approval": request_id, "choice": "o"}),
        "ou_stranger",
        &chat,
    );
    let ack = fake.wait_ack(seq, WAIT).await;
    let data = ack.data.expect("callback data");
    assert_eq!(data["toast"]["type"], "error", "{data}");
    assert!(data.get("card").is_none(), "{data}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!marker.exists(), "the command ran after a stranger's press");
    assert_eq!(model.requests().len(), 1);

    // The owner presses it: the card shows the outcome and the command runs.
    let seq = fake.push_card_action(
        json!({"ethan_approval": request_id, "choice": "o"}),
        OWNER,
        &chat,
    );
    let ack = fake.wait_ack(seq, WAIT).await;
    assert!(ack.latency.unwrap() < Duration::from_secs(3));
    let data = ack.data.expect("callback data");
    assert_eq!(data["toast"]["type"], "success", "{data}");
    assert_eq!(data["card"]["type"], "raw");
    let new_card = data["card"]["data"].to_string();
    assert!(!new_card.contains("\"button\""), "{new_card}");
    assert!(new_card.contains("Approved"), "{new_card}");
    fake.wait_card_containing(1, "approved-run-42", WAIT).await;
    assert!(marker.exists());
    model.assert_protocol_ok();
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn ui_card_reaches_lark_as_an_interactive_reply() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let card = json!({"card": {"type": "compare", "title": "Phones", "columns": ["Model", "Price"],
        "rows": [{"values": ["Alpha", "$399"]}, {"values": ["Beta", "$499"]}]}});
    let model = ScriptedModel::start(vec![
        Step::tool_call("u1", "ui_card", &card.to_string()),
        Step::text("Beta costs more."),
    ])
    .await;
    // Cards and the answer as separate messages, without a streaming card.
    write_config_lark(&home, &fake, &model, "    streaming: off\n", "");
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    let event = lark::group_mention(GROUP, OWNER, "compare the phones");
    let asked = lark::message_id(&event);
    fake.push_event(&event);
    let sent = fake.wait_for_messages(2, WAIT).await;
    let card_msg = &sent[0];
    assert_eq!(card_msg.msg_type, "interactive");
    assert_eq!(card_msg.kind, "reply");
    assert_eq!(card_msg.reply_to.as_deref(), Some(asked.as_str()));
    assert_eq!(card_msg.content["schema"], "2.0");
    let text = card_msg.content.to_string();
    for name in ["Phones", "Model", "Price", "Alpha", "Beta"] {
        assert!(text.contains(name), "{name} missing: {text}");
    }
    assert!(sent[1].card_markdown().contains("Beta costs more."));
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_reply_card_failing_midway_is_resent_alone_and_every_card_arrives_once_in_order() {
    use ethan_channels::lark::render::{split_markdown, CARD_TEXT_LIMIT};

    let mut answer = String::new();
    let mut n = 0;
    while answer.len() < 3 * CARD_TEXT_LIMIT - 4096 {
        n += 1;
        answer.push_str(&format!(
            "Paragraph {n:05}: a long answer goes out in several Lark cards.\n\n"
        ));
    }
    let parts = split_markdown(&answer, CARD_TEXT_LIMIT);
    assert!(parts.len() >= 3, "{} parts", parts.len());

    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![Step::text(answer.clone())]).await;
    write_config(&home, &fake, &model, "");
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    // The third card's request fails with an unreadable 500: a transport failure, retried.
    fake.fail_nth("reply", 3, 500, json!("upstream connect error"));
    fake.push_event(&lark::p2p_text(OWNER, "tell me everything"));
    crate::support::wait_until("every card is shown", WAIT, || {
        fake.messages().len() >= parts.len()
    })
    .await;
    let first_line = |t: &str| t.trim_start().lines().next().unwrap_or("").to_string();
    let shown: Vec<String> = fake
        .messages()
        .iter()
        .map(|m| first_line(&m.card_markdown()))
        .collect();
    let expected: Vec<String> = parts.iter().map(|p| first_line(p)).collect();
    assert_eq!(shown, expected);
    // Only the failed card was requested again: no request for a card already shown.
    let requests = fake.send_requests();
    assert_eq!(
        requests.iter().map(|c| c.status).collect::<Vec<_>>(),
        [vec![200, 200, 500], vec![200; parts.len() - 2]].concat()
    );
    assert_eq!(requests[2].body["uuid"], requests[3].body["uuid"]);
    assert!(daemon.is_running());
    daemon.stop();
}
