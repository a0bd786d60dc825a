//! What `getUpdates` may bring besides the messages Ethan handles, from outside: update kinds
//! Ethan does not handle (real `message_reaction` and `my_chat_member` updates), a message with
//! a field of a later Bot API, and an update whose message does not read. The first two are
//! skipped, the message is answered, the malformed one is logged with its id and skipped, and
//! the offset moves past all of them (none comes again, none holds up the rest).

use crate::support::telegram::fixture;
use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const OWNER: i64 = 218485655; // `from.id` of tests/fixtures/telegram/update_private_text.json
const WAIT: Duration = Duration::from_secs(30);

/// `fixture` with its `update_id` set to `id` (the fake offers updates in id order).
fn numbered(name: &str, id: i64) -> Value {
    let mut v = fixture(name);
    v["update_id"] = json!(id);
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn unknown_kinds_and_fields_are_skipped_or_read_and_a_bad_update_holds_up_nothing() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![Step::text("Read you.")]).await;
    home.write_config(&tg.owner_config(&model.base_url(), OWNER, ""));
    tg.push_update(numbered("update_message_reaction.json", 1));
    tg.push_update(numbered("update_my_chat_member.json", 2));
    // The owner's message with a date that is no number: it cannot be read.
    let mut bad = numbered("update_private_text.json", 3);
    bad["message"]["date"] = json!("yesterday");
    tg.push_update(bad);
    // The owner's message with fields of a later Bot API, in the message and in its chat.
    let mut later = numbered("update_private_text.json", 4);
    later["message"]["checklist_of_2030"] = json!({"tasks": [{"id": 1, "text": "x"}]});
    later["message"]["chat"]["is_forum_of_2030"] = json!(true);
    later["message"]["entities"] = json!([{"type": "a_kind_of_2030", "offset": 0, "length": 5}]);
    tg.push_update(later);

    let mut daemon = Daemon::start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["chat_id"], json!(OWNER), "{sent:?}");
    assert!(
        sent[0]["text"].as_str().unwrap_or("").contains("Read you."),
        "{sent:?}"
    );
    // The model was asked once, with the readable message's text.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 1, "{}", model.describe());
    assert_eq!(
        crate::support::model::last_user_text(&reqs[0]),
        "hello there"
    );
    // Every update was acknowledged: the next poll asks from 5 on.
    crate::support::wait_until("getUpdates asks past all four updates", WAIT, || {
        tg.getupdates_offsets().contains(&Some(5))
    })
    .await;
    // Only the readable message became an inbound event; the bad one was logged by its id.
    let events = crate::support::store::rows(
        &home,
        "SELECT event_id FROM inbound_events WHERE channel = 'telegram' ORDER BY event_id",
        &[],
    );
    assert_eq!(events, vec![vec![Some("4".to_string())]]);
    let log = home.log();
    assert!(log.contains("telegram update 3 could not be read"), "{log}");
    daemon.stop();
    home.assert_no_panic();
}

/// An update whose `update_id` does not read (here above the Bot API's 32 bits) at the end of
/// a batch cannot be acknowledged: it comes again at once. The poller then pauses as after a
/// failure, instead of asking again in a tight loop.
#[tokio::test(flavor = "multi_thread")]
async fn an_update_without_a_readable_id_does_not_spin_the_poller() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![]).await;
    home.write_config(&tg.owner_config(&model.base_url(), OWNER, ""));
    tg.push_update(numbered("update_private_text.json", 1 << 32));
    let mut daemon = Daemon::start(&home);
    tg.wait_for_getupdates(1, WAIT).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let polls = tg.calls("getUpdates").len();
    // Paused 1 s, then 2 s: a handful of polls in 3 s; spinning, it was hundreds.
    assert!(polls <= 6, "{polls} getUpdates calls in 3 s");
    daemon.stop();
}
