//! Fault injection on the platform transports, against the real daemon: the Telegram Bot API
//! cutting `getUpdates` connections mid-answer, and the Lark long connection dropping between
//! the fragments of one event. Each ends with the message answered exactly once, a clear line
//! in the log, and the daemon serving other sessions.

use crate::support::lark::{self, FakeLark};
use crate::support::{Daemon, FakeTelegram, ScriptedModel, TestHome};
use serde_json::Value;
use std::time::Duration;

/// Generous: the poller backs off 1 s, 2 s, 4 s, … and CI machines are busy.
const WAIT: Duration = Duration::from_secs(45);

// ----- Telegram: getUpdates connections cut ---------------------------------------------------

const TG_OWNER: i64 = 218485655;
const TG_OTHER: i64 = 5550123;

#[tokio::test(flavor = "multi_thread")]
async fn telegram_getupdates_connection_cut_polling_recovers_and_answers_once() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(crate::support::model::echo_user(4)).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    allow_from: [{TG_OTHER}]\n\
         owners: [\"telegram:{TG_OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    // The message waits; the first three polls that would carry it get half an answer and a
    // closed connection.
    let first = tg.push_text(TG_OWNER, TG_OWNER, "queued before the cuts");
    tg.drop_next_polls(3);
    let mut daemon = Daemon::start(&home);

    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(
        sent[0]["text"],
        "answer to: queued before the cuts",
        "{}",
        tg.describe_calls()
    );
    assert_eq!(tg.dropped_polls(), 3, "{}", tg.describe_calls());
    assert_eq!(tg.pending_drops(), 0);
    // The cut answers were not half-processed: the update went to the model once.
    assert_eq!(model.requests().len(), 1, "{}", model.describe());
    // It was confirmed only after it was recorded: no poll before the answer skipped it.
    let offsets = tg.getupdates_offsets();
    let dropped_offsets: Vec<Option<i64>> = tg
        .all_calls()
        .iter()
        .filter(|c| c.method.eq_ignore_ascii_case("getUpdates") && c.status == 0)
        .map(|c| c.body.get("offset").and_then(Value::as_i64))
        .collect();
    assert!(
        dropped_offsets.iter().all(|o| o.unwrap_or(0) <= first),
        "a cut poll confirmed the update: {dropped_offsets:?} (all offsets {offsets:?})"
    );
    let log = home.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("telegram getUpdates failed"))
        .collect();
    assert!(
        warnings.len() >= 3 && warnings.iter().all(|l| l.contains("retrying in")),
        "no clear warning for each cut poll in the log: {warnings:#?}"
    );

    // Later polls work, and another session is served.
    tg.push_text(TG_OTHER, TG_OTHER, "another session");
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1]["text"], "answer to: another session");
    assert_eq!(sent[1]["chat_id"].as_i64(), Some(TG_OTHER));
    // Nothing more arrives: the first message stays answered exactly once.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let texts = tg.sent_texts();
    assert_eq!(
        texts
            .iter()
            .filter(|t| t.contains("queued before the cuts"))
            .count(),
        1,
        "{texts:?}"
    );
    assert_eq!(texts.len(), 2, "{}", tg.describe_calls());
    assert_eq!(model.requests().len(), 2);
    assert!(daemon.is_running());
    home.assert_no_panic();
    daemon.stop();
}

// ----- Lark: the long connection dropped between fragments -------------------------------------

const LARK_OWNER: &str = "ou_84aad35d084aa403a838cf73ee18467";
const LARK_OTHER: &str = "ou_0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f";

#[tokio::test(flavor = "multi_thread")]
async fn lark_connection_dropped_mid_fragment_event_redelivered_and_answered_once() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(crate::support::model::echo_user(4)).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n{}\
         owners: [\"lark:{LARK_OWNER}\"]\n",
        model.base_url(),
        // Whole reply cards: this test reads each answer from the message that carries it
        // (streamed cards are covered by tests/suite/streaming_lark.rs).
        fake.channel_yaml(&format!(
            "    allow_from: [\"{LARK_OTHER}\"]\n    streaming: off\n"
        )),
    ));
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;

    // The first of two fragments arrives, then the connection is cut.
    let event = lark::p2p_text(LARK_OWNER, "a message split in two");
    let message_id = lark::message_id(&event);
    let cut = fake.push_event_fragments(&event, 2, "frame-cut-1", 0..1);
    fake.drop_connection();
    fake.wait_connections(2, WAIT).await;
    crate::support::daemon::wait_for_log(&home, "lark long connection lost", WAIT).await;

    // The half event was neither processed nor acknowledged.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(fake.messages().is_empty(), "{}", fake.describe());
    assert!(model.requests().is_empty(), "{}", model.describe());
    assert!(
        !fake.acks().iter().any(|a| cut.contains(&a.seq_id)),
        "the lone fragment was acknowledged (the platform would not redeliver the event)\n{}",
        fake.describe()
    );
    assert!(
        !home.log().contains("not a JSON object"),
        "the lone fragment reached the event parser"
    );

    // The platform redelivers the unacknowledged event, whole, on the new connection.
    let seqs = fake.push_event_fragments(&event, 2, "frame-cut-1", 0..2);
    let ack = fake.wait_ack(*seqs.last().unwrap(), WAIT).await;
    assert_eq!(ack.code, 200, "{}", fake.describe());
    let sent = fake.wait_for_messages(1, WAIT).await;
    assert_eq!(sent[0].reply_to.as_deref(), Some(message_id.as_str()));
    assert!(
        sent[0].card_markdown().contains("a message split in two")
            || sent[0]
                .content
                .to_string()
                .contains("a message split in two"),
        "{:?}",
        sent[0]
    );

    // Another session is served on the same connection.
    let other = lark::p2p_text(LARK_OTHER, "another session");
    fake.push_event(&other);
    let sent = fake.wait_for_messages(2, WAIT).await;
    assert_eq!(
        sent[1].reply_to.as_deref(),
        Some(lark::message_id(&other).as_str())
    );

    tokio::time::sleep(Duration::from_millis(1000)).await;
    let replies = fake
        .messages()
        .iter()
        .filter(|m| m.reply_to.as_deref() == Some(message_id.as_str()))
        .count();
    assert_eq!(replies, 1, "{}", fake.describe());
    assert_eq!(model.requests().len(), 2, "{}", model.describe());
    let log = home.log();
    assert!(
        log.matches("lark long connection established").count() >= 2,
        "the reconnect is not logged"
    );
    assert!(daemon.is_running());
    home.assert_no_panic();
    daemon.stop();
}
