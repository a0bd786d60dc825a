//! A reply whose send was in flight when the daemon was killed: the turn is not run again, and
//! the reply is never shown twice. Telegram (no idempotent send): the reply is not sent again and
//! a warning says so. Lark: it is sent again with the same `uuid`, which Lark shows once.
//!
//! The real `ethan run` against loopback fakes that receive the reply's request but withhold the
//! answer (`hold_send_message` / `hold_sends`), then `kill -9`, then a restart.

use crate::support::lark::{self, FakeLark};
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::json;
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(30);

fn inbound_state(home: &TestHome, channel: &str, event_id: &str) -> Option<String> {
    crate::support::store::value(
        home,
        "SELECT state FROM inbound_events WHERE channel = ?1 AND event_id = ?2",
        &[channel, event_id],
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn telegram_reply_cut_off_by_a_kill_is_not_sent_twice() {
    const FIRST: i64 = 5101;
    const SECOND: i64 = 5102;
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::text("the first answer"),
        Step::text("the second answer"),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n\
         owners: [\"telegram:{FIRST}\", \"telegram:{SECOND}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));

    // The reply reaches Telegram, but the daemon never learns that it did.
    tg.hold_send_message(true);
    let update = tg.push_text(FIRST, FIRST, "the first question");
    let event_id = update.to_string();
    let mut daemon = Daemon::start(&home);
    tg.wait_for_calls("sendMessage", 1, WAIT).await;
    let held = tg.held_send_messages();
    assert_eq!(held.len(), 1, "{}", tg.describe_calls());
    assert_eq!(held[0]["chat_id"], json!(FIRST));
    assert_eq!(held[0]["text"], "the first answer");
    crate::support::wait_until("the event is recorded as sending", WAIT, || {
        inbound_state(&home, "telegram", &event_id).as_deref() == Some("sending")
    })
    .await;
    daemon.kill();

    // Restart against a Bot API that answers normally; another chat asks meanwhile.
    tg.hold_send_message(false);
    let mut daemon = Daemon::start(&home);
    tg.push_text(SECOND, SECOND, "the second question");
    crate::support::wait_until("the second chat is answered", WAIT, || {
        tg.sent_messages()
            .iter()
            .any(|m| m["chat_id"] == json!(SECOND))
    })
    .await;
    // Anything queued for the first chat at start would have gone out before this point.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let to_first = tg.send_message_calls_to(FIRST);
    assert_eq!(to_first.len(), 1, "{}", tg.describe_calls());
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2, "{}", model.describe());
    assert_eq!(
        crate::support::model::last_user_text(&reqs[1]),
        "the second question"
    );
    assert_eq!(
        inbound_state(&home, "telegram", &event_id).as_deref(),
        Some("unconfirmed")
    );
    let log = home.log();
    let warning = format!(
        "to telegram event {event_id} in telegram:{FIRST} was being sent when the daemon \
         stopped; Telegram has no idempotent send, so it is not sent again"
    );
    assert!(log.contains(&warning), "missing {warning:?} in:\n{log}");
    assert!(
        !log.contains(&format!("resuming unfinished telegram event {event_id}")),
        "the turn was re-run:\n{log}"
    );
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn lark_reply_cut_off_by_a_kill_is_sent_again_with_the_same_uuid() {
    const OWNER: &str = "ou_84aad35d084aa403a838cf73ee18467";
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![Step::text("the lark answer")]).await;
    // The ordinary reply card (a streaming card cut off by a kill: tests/suite/streaming_lark.rs).
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n{}owners: [\"lark:{OWNER}\"]\n",
        model.base_url(),
        fake.channel_yaml("    streaming: off\n"),
    ));

    // Lark shows the reply, but the daemon never gets the answer to its request.
    fake.hold_sends(true);
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    let event = lark::p2p_text(OWNER, "a question");
    let event_id = lark::message_id(&event);
    fake.push_event(&event);
    let first = fake.wait_for_send_requests(1, WAIT).await;
    assert_eq!(
        first[0].status,
        crate::support::lark::HELD,
        "{}",
        fake.describe()
    );
    assert_eq!(fake.messages().len(), 1);
    crate::support::wait_until("the event is recorded as sending", WAIT, || {
        inbound_state(&home, "lark", &event_id).as_deref() == Some("sending")
    })
    .await;
    daemon.kill();

    fake.hold_sends(false);
    let mut daemon = Daemon::start(&home);
    fake.wait_for_send_requests(2, WAIT).await;
    crate::support::wait_until("the re-sent reply is confirmed", WAIT, || {
        inbound_state(&home, "lark", &event_id).as_deref() == Some("done")
    })
    .await;

    let requests = fake.send_requests();
    assert_eq!(requests.len(), 2, "{}", fake.describe());
    let uuid = requests[0].body["uuid"].as_str().unwrap_or("");
    assert!(!uuid.is_empty(), "{:?}", requests[0].body);
    assert_eq!(requests[1].body["uuid"], requests[0].body["uuid"]);
    assert_eq!(requests[1].path, requests[0].path);
    assert_eq!(requests[1].body["content"], requests[0].body["content"]);
    let shown = fake.messages();
    assert_eq!(shown.len(), 1, "{}", fake.describe());
    assert!(
        shown[0].card_markdown().contains("the lark answer"),
        "{:?}",
        shown[0]
    );
    assert_eq!(shown[0].reply_to.as_deref(), Some(event_id.as_str()));
    assert_eq!(model.requests().len(), 1, "the turn was run again");
    let log = home.log();
    assert!(
        log.contains(&format!(
            "to lark event {event_id} in lark:oc_p2p_{OWNER} was being sent when the daemon \
             stopped; sending it again with the same idempotency key"
        )),
        "{log}"
    );
    daemon.stop();
}
