//! Streamed replies on Lark, end to end: the real `ethan run` against `FakeLark` (Open API,
//! CardKit, long connection) and a scripted model that streams its answer in chunks 200 ms
//! apart. A direct chat sees one CardKit streaming card fill in (tool progress above the
//! answer) and close (a group sees only tool progress until the answer is complete:
//! `tests/suite/public_room_lark.rs`); a missing CardKit scope falls back to ordinary reply cards with one warning; a
//! `kill -9` mid-stream is finished in the same card after the restart.

use crate::support::lark::cardkit::CardKit;
use crate::support::lark::{self, FakeLark};
use crate::support::{Daemon, ScriptedModel, Step, TestHome};
use std::time::Duration;

const OWNER: &str = "ou_84aad35d084aa403a838cf73ee18467";
const WAIT: Duration = Duration::from_secs(40);
const GAP: Duration = Duration::from_millis(200);

fn write_config(home: &TestHome, fake: &FakeLark, model: &ScriptedModel) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n{}owners: [\"lark:{OWNER}\"]\n",
        model.base_url(),
        fake.channel_yaml("    streaming: card\n    stream_interval_ms: 300\n"),
    ));
}

/// Whether the card `card_id` got a settings patch closing streaming.
fn closed(ck: &CardKit, card_id: Option<&str>) -> bool {
    ck.settings
        .iter()
        .any(|s| s.closes_streaming() && card_id.is_none_or(|id| s.card_id == id))
}

/// Every accepted operation on `card_id` (content writes and settings) as (sequence, time), in
/// the order received.
fn operations(ck: &CardKit, card_id: &str) -> Vec<(i64, tokio::time::Instant)> {
    let mut ops: Vec<(i64, tokio::time::Instant)> = ck
        .writes
        .iter()
        .filter(|w| w.card_id == card_id)
        .map(|w| (w.sequence, w.at))
        .chain(
            ck.settings
                .iter()
                .filter(|s| s.card_id == card_id)
                .map(|s| (s.sequence, s.at)),
        )
        .collect();
    ops.sort_by_key(|(_, at)| *at);
    ops
}

fn answer_writes(ck: &CardKit, card_id: &str) -> Vec<String> {
    ck.writes
        .iter()
        .filter(|w| w.card_id == card_id && w.element_id == "answer" && w.code == 0)
        .map(|w| w.content.clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_direct_chat_sees_one_streaming_card_fill_in_with_tool_progress_and_close() {
    const ANSWER: &str = "Here is what I found: the tool search worked, and this answer \
                          arrives in many small pieces while the model writes it.";
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("f1", "find_tools", r#"{"query": "calendar"}"#),
        Step::slow_text(ANSWER, GAP),
    ])
    .await;
    write_config(&home, &fake, &model);
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;

    let event = lark::p2p_text(OWNER, "what tools are there?");
    let msg_id = lark::message_id(&event);
    fake.push_event(&event);
    fake.wait_cardkit("streaming closed", WAIT, |ck| closed(ck, None))
        .await;
    // Anything sent after the close would be a second answer; give it a moment to show.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let cards = fake.cards();
    assert_eq!(cards.len(), 1, "{:#?}", cards);
    let card = &cards[0];
    assert_eq!(card.created["schema"], "2.0");
    assert_eq!(card.created["config"]["streaming_mode"], true);
    assert!(card.created["config"]["summary"]["content"].is_string());
    let ids: Vec<&str> = card.created["body"]["elements"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["element_id"].as_str())
        .collect();
    assert_eq!(ids, ["tool_progress", "answer"], "{}", card.created);

    // The card, and nothing else, went out as the reply to the user's message.
    let sent = fake.messages();
    assert_eq!(sent.len(), 1, "{}", fake.describe());
    assert_eq!(sent[0].kind, "reply");
    assert_eq!(sent[0].reply_to.as_deref(), Some(msg_id.as_str()));
    assert_eq!(sent[0].msg_type, "interactive");
    assert_eq!(sent[0].card_id().as_deref(), Some(card.card_id.as_str()));
    assert!(!sent[0].uuid.is_empty());

    // Content PUTs with strictly increasing sequence, all accepted, the answer growing to the
    // whole answer; the close comes last.
    let ck_writes = fake.card_writes();
    assert!(ck_writes.iter().all(|w| w.code == 0), "{ck_writes:#?}");
    let answers = {
        let ck = CardKit {
            writes: ck_writes.clone(),
            ..Default::default()
        };
        answer_writes(&ck, &card.card_id)
    };
    assert!(
        answers.len() >= 2,
        "the answer was not streamed: {answers:#?}"
    );
    assert!(answers[0].len() < ANSWER.len(), "{answers:#?}");
    assert_eq!(answers.last().map(String::as_str), Some(ANSWER));
    assert_eq!(card_content(&fake, "answer"), ANSWER);
    let settings = fake.card_settings();
    let all = CardKit {
        writes: ck_writes,
        settings: settings.clone(),
        ..Default::default()
    };
    let ops = operations(&all, &card.card_id);
    for pair in ops.windows(2) {
        assert!(pair[1].0 > pair[0].0, "sequence not increasing: {ops:?}");
    }
    // Never more than 10 operations per second on the card (the create counts too).
    let mut times: Vec<tokio::time::Instant> = ops.iter().map(|(_, at)| *at).collect();
    times.push(card.created_at);
    times.sort();
    for w in times.windows(11) {
        assert!(
            w[10] - w[0] >= Duration::from_millis(1000),
            "11 operations within {:?}",
            w[10] - w[0]
        );
    }
    let last = settings.last().unwrap();
    assert_eq!(last.settings["config"]["streaming_mode"], false);
    assert_eq!(last.sequence, ops.last().unwrap().0);

    // Tool progress above the answer.
    let progress = card_content(&fake, "tool_progress");
    assert!(progress.contains("`find_tools`"), "{progress}");
    assert!(progress.contains("done"), "{progress}");

    model.assert_protocol_ok();
    home.assert_no_panic();
    daemon.stop();
}

/// The current content of `element` in the (only) card.
fn card_content(fake: &FakeLark, element: &str) -> String {
    fake.cards()[0]
        .contents
        .get(element)
        .cloned()
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_cardkit_scope_falls_back_to_card_replies_with_one_warning() {
    const FIRST: &str = "The first answer, sent the ordinary way.";
    const SECOND: &str = "The second answer, also an ordinary card.";
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    fake.refuse_cardkit(true);
    let model = ScriptedModel::start(vec![
        Step::slow_text(FIRST, GAP),
        Step::slow_text(SECOND, GAP),
    ])
    .await;
    write_config(&home, &fake, &model);
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;

    let one = lark::p2p_text(OWNER, "first question");
    fake.push_event(&one);
    fake.wait_for_messages(1, WAIT).await;
    let two = lark::p2p_text(OWNER, "second question");
    fake.push_event(&two);
    let sent = fake.wait_for_messages(2, WAIT).await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    let sent_now = fake.messages();
    assert_eq!(sent_now.len(), 2, "{}", fake.describe());
    for (m, (event, answer)) in sent.iter().zip([(&one, FIRST), (&two, SECOND)]) {
        // Today's reply card: schema 2.0, the answer in one markdown element.
        assert_eq!(m.kind, "reply");
        assert_eq!(
            m.reply_to.as_deref(),
            Some(lark::message_id(event).as_str())
        );
        assert_eq!(m.msg_type, "interactive");
        assert_eq!(m.card_id(), None, "{m:?}");
        assert_eq!(m.content["schema"], "2.0");
        assert_eq!(m.card_markdown(), answer);
    }
    assert!(fake.cards().is_empty());
    // The refusal is remembered: the second reply did not try CardKit again.
    assert_eq!(
        fake.calls_to("/open-apis/cardkit/v1/cards").len(),
        1,
        "{}",
        fake.describe()
    );
    let log = home.log();
    let warnings: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("WARN") && l.contains("cardkit:card:write"))
        .collect();
    assert_eq!(warnings.len(), 1, "{log}");
    home.assert_no_panic();
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_mid_stream_is_finished_in_the_same_card_after_the_restart() {
    const ANSWER: &str = "One two three four five six seven eight nine ten eleven twelve \
                          thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty.";
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![
        Step::slow_text(ANSWER, GAP),
        // The turn is run again after the restart.
        Step::slow_text(ANSWER, Duration::from_millis(50)),
    ])
    .await;
    write_config(&home, &fake, &model);
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    let event = lark::p2p_text(OWNER, "count to twenty");
    let msg_id = lark::message_id(&event);
    fake.push_event(&event);
    fake.wait_cardkit("the first content write", WAIT, |ck| {
        ck.writes.iter().any(|w| w.code == 0)
    })
    .await;
    daemon.kill();
    let before = fake.card_writes();
    let max_before = before.iter().map(|w| w.sequence).max().unwrap_or(0);
    assert!(!closed_now(&fake), "closed before the kill");
    let card_id = fake.cards()[0].card_id.clone();

    let mut daemon = Daemon::start(&home);
    fake.wait_cardkit("streaming closed after the restart", WAIT, |ck| {
        closed(ck, Some(&card_id))
    })
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;

    // One card, finished in place with sequences above every earlier one.
    let cards = fake.cards();
    assert_eq!(cards.len(), 1, "a second card was created: {cards:#?}");
    let writes = fake.card_writes();
    assert!(writes.iter().all(|w| w.card_id == card_id));
    assert!(writes.iter().all(|w| w.code == 0), "{writes:#?}");
    let after: Vec<_> = writes[before.len()..].to_vec();
    assert!(!after.is_empty(), "nothing written after the restart");
    assert!(after.iter().all(|w| w.sequence > max_before), "{writes:#?}");
    assert_eq!(card_content(&fake, "answer"), ANSWER);
    let settings = fake.card_settings();
    assert!(settings.iter().all(|s| s.sequence > max_before));

    // The card message was shown once (a repeated send carries the same uuid); no other
    // message carries the answer.
    let shown = fake.messages();
    assert_eq!(shown.len(), 1, "{}", fake.describe());
    assert_eq!(shown[0].card_id().as_deref(), Some(card_id.as_str()));
    assert_eq!(shown[0].reply_to.as_deref(), Some(msg_id.as_str()));
    let requests = fake.send_requests();
    assert!(
        requests
            .iter()
            .all(|r| r.body["uuid"] == requests[0].body["uuid"]),
        "{}",
        fake.describe()
    );
    home.assert_no_panic();
    daemon.stop();
}

fn closed_now(fake: &FakeLark) -> bool {
    fake.card_settings()
        .iter()
        .any(|s| s.settings["config"]["streaming_mode"] == false)
}
