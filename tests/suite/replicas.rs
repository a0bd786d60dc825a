//! Several `ethan run` processes (replicas) on one PostgreSQL database, each with its own
//! `ETHAN_HOME`, against one FakeLark (a long connection per replica) or one FakeTelegram and
//! one scripted model: every event is answered once, a chat's replies come in the order asked,
//! a replica killed mid-turn is taken over within the lease, the Telegram poller moves when it
//! dies, and an approval asked on one replica is answered by a press that reaches another.
//!
//! These run on the throwaway cluster of `ethan::store::pg::cluster` whatever
//! `ETHAN_TEST_STORE` says, and fail (never skip) when PostgreSQL cannot be started.

use crate::support::daemon::{fresh_pg_database, wait_for_log};
use crate::support::lark::{self, FakeLark};
use crate::support::model::echo_user;
use crate::support::telegram::FakeTelegram;
use crate::support::{wait_until, Daemon, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::time::{Duration, Instant};

const OWNER: &str = "ou_84aad35d084aa403a838cf73ee18467";
const TG_OWNER: i64 = 4242;
const WAIT: Duration = Duration::from_secs(60);

/// `n` homes sharing one database, each configured by `config(url)`.
pub(super) fn homes(n: usize, url: &str, config: impl Fn(&str) -> String) -> Vec<TestHome> {
    (0..n)
        .map(|_| {
            let home = TestHome::new();
            home.write_config(&config(url));
            home
        })
        .collect()
}

fn lark_config(fake: &FakeLark, model: &ScriptedModel, url: &str, lease: u64) -> String {
    format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n{}\
         owners: [\"lark:{OWNER}\"]\ngateway:\n  listen: 127.0.0.1:0\n\
         store:\n  url: \"{url}\"\n  lease_secs: {lease}\n",
        model.base_url(),
        fake.channel_yaml("    streaming: off\n"),
    )
}

/// Start one replica per home, one after another, so the `i`-th connection id returned is the
/// `i`-th replica's.
pub(super) async fn start_lark(homes: &[TestHome], fake: &FakeLark) -> (Vec<Daemon>, Vec<usize>) {
    let mut daemons = Vec::new();
    let mut conns: Vec<usize> = Vec::new();
    for (i, home) in homes.iter().enumerate() {
        daemons.push(Daemon::start(home));
        let live = fake.wait_live(i + 1, WAIT).await;
        let new = live
            .into_iter()
            .find(|c| !conns.contains(c))
            .expect("the new replica's connection");
        conns.push(new);
    }
    (daemons, conns)
}

/// A group mention in `chat` whose platform order is `create_ms`.
fn mention_at(chat: &str, text: &str, create_ms: i64) -> Value {
    let mut e = lark::group_mention(chat, OWNER, text);
    e["header"]["create_time"] = json!(create_ms.to_string());
    e["event"]["message"]["create_time"] = json!(create_ms.to_string());
    e
}

/// The replies recorded so far, as (message replied to, card text).
fn replies(fake: &FakeLark) -> Vec<(String, String)> {
    fake.messages()
        .into_iter()
        .filter_map(|m| Some((m.reply_to.clone()?, m.card_markdown())))
        .collect()
}

/// The replicas' shared database, read by the test: which events are recorded.
struct Recorded(tokio_postgres::Client);

impl Recorded {
    async fn connect(url: &str) -> Self {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect to the replicas' database: {e}"));
        tokio::spawn(conn);
        Recorded(client)
    }

    /// The ids of every Lark event in `inbound_events`.
    async fn event_ids(&self) -> std::collections::HashSet<String> {
        self.0
            .query(
                "SELECT event_id FROM inbound_events WHERE channel = 'lark'",
                &[],
            )
            .await
            .unwrap_or_else(|e| panic!("read the recorded events: {e}"))
            .iter()
            .map(|r| r.get(0))
            .collect()
    }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[tokio::test(flavor = "multi_thread")]
async fn messages_spread_over_three_replicas_are_each_answered_once_in_each_chats_order() {
    const CHATS: usize = 50;
    const PER_CHAT: usize = 10;
    let url = fresh_pg_database();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(echo_user(CHATS * PER_CHAT)).await;
    let homes = homes(3, &url, |url| lark_config(&fake, &model, url, 30));
    let (mut daemons, conns) = start_lark(&homes, &fake).await;

    // Each chat asks its questions one after another, each question to another replica's
    // connection; the chats run side by side. The next question goes once the previous one is
    // in the store: the order promised is that of the recorded events. (An ACK alone is not
    // enough: under load a replica acknowledges after `RECORD_WAIT` with the event still queued
    // for recording, so Lark does not send it again.)
    let db = Recorded::connect(&url).await;
    let base = now_ms() - 60_000;
    let mut asked: HashMap<String, Vec<String>> = HashMap::new();
    let mut next = vec![0usize; CHATS];
    let mut waiting: Vec<Option<String>> = vec![None; CHATS];
    let mut pushed = 0usize;
    let deadline = Instant::now() + WAIT;
    while pushed < CHATS * PER_CHAT || waiting.iter().any(Option::is_some) {
        assert!(
            Instant::now() < deadline,
            "intake stalled: {}",
            fake.describe()
        );
        let recorded = db.event_ids().await;
        for c in 0..CHATS {
            if waiting[c].as_ref().is_some_and(|id| !recorded.contains(id)) {
                continue;
            }
            waiting[c] = None;
            if next[c] == PER_CHAT {
                continue;
            }
            let k = next[c];
            let chat = format!("oc_chat{c:02}");
            let text = format!("c{c:02}-q{k:02}");
            let event = mention_at(&chat, &text, base + (k as i64) * 10);
            let conn = conns[(c + k) % conns.len()];
            fake.push_event_to(conn, &event)
                .expect("a replica's connection closed");
            let id = lark::message_id(&event);
            asked.entry(chat).or_default().push(id.clone());
            waiting[c] = Some(id);
            next[c] += 1;
            pushed += 1;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    let total = CHATS * PER_CHAT;
    wait_until("every question answered", WAIT, || {
        replies(&fake).len() >= total
    })
    .await;
    // Nothing more comes: a second answer would show within the sweep.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let replies = replies(&fake);
    assert_eq!(replies.len(), total, "each question answered once");
    let position: HashMap<&str, usize> = replies
        .iter()
        .enumerate()
        .map(|(i, (to, _))| (to.as_str(), i))
        .collect();
    assert_eq!(position.len(), total, "no question answered twice");
    for (chat, ids) in &asked {
        let order: Vec<usize> = ids.iter().map(|id| position[id.as_str()]).collect();
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "{chat}: replies out of the order asked: {order:?}"
        );
    }
    for (to, text) in &replies {
        assert!(text.starts_with("answer to: c"), "{to}: {text}");
    }
    // The work was spread: every replica ran turns.
    for home in &homes {
        assert!(
            home.log().contains("runs lark event"),
            "a replica ran no turn:\n{}",
            home.log()
        );
    }
    for d in &mut daemons {
        d.stop();
    }
    for home in &homes {
        home.assert_no_panic();
        assert!(
            !home.path().join("ethan.db").exists(),
            "a SQLite file was created beside the PostgreSQL store"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_same_event_delivered_to_two_replicas_is_answered_once() {
    let url = fresh_pg_database();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(echo_user(4)).await;
    let homes = homes(2, &url, |url| lark_config(&fake, &model, url, 30));
    let (mut daemons, conns) = start_lark(&homes, &fake).await;

    let event = lark::group_mention("oc_twice", OWNER, "only once please");
    let a = fake.push_event_to(conns[0], &event).unwrap();
    let b = fake.push_event_to(conns[1], &event).unwrap();
    for seq in [a, b] {
        assert_eq!(fake.wait_ack(seq, WAIT).await.code, 200);
    }
    fake.wait_for_messages(1, WAIT).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sent = replies(&fake);
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert_eq!(sent[0].1, "answer to: only once please");
    assert_eq!(model.requests().len(), 1, "one turn");
    for d in &mut daemons {
        d.stop();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_killed_mid_turn_is_taken_over_and_answers_once_within_the_lease() {
    const LEASE: u64 = 5;
    let url = fresh_pg_database();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![
        // The first replica's request: it dies while waiting for this.
        Step::delay(Duration::from_secs(30), Step::text("never delivered")),
        Step::text("answered after the takeover"),
    ])
    .await;
    let homes = homes(2, &url, |url| lark_config(&fake, &model, url, LEASE));
    let (mut daemons, conns) = start_lark(&homes, &fake).await;

    let event = lark::group_mention("oc_kill", OWNER, "a long question");
    let id = lark::message_id(&event);
    fake.push_event_to(conns[0], &event).unwrap();
    wait_until("the model got the turn", WAIT, || {
        model.requests().len() == 1
    })
    .await;
    let runner = homes
        .iter()
        .position(|h| h.log().contains(&format!("runs lark event {id}")))
        .expect("a replica logs the turn it runs");
    let killed_at = Instant::now();
    daemons[runner].kill();

    let sent = fake.wait_for_messages(1, WAIT).await;
    let took = killed_at.elapsed();
    assert_eq!(sent[0].reply_to.as_deref(), Some(id.as_str()));
    assert_eq!(sent[0].card_markdown(), "answered after the takeover");
    assert!(
        took < Duration::from_secs(LEASE + 10),
        "taken over after {took:?} (lease {LEASE} s)"
    );
    let other = 1 - runner;
    assert!(
        homes[other]
            .log()
            .contains(&format!("taking over unfinished lark event {id}")),
        "{}",
        homes[other].log()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(replies(&fake).len(), 1, "answered once");
    daemons[other].stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn an_approval_asked_on_one_replica_is_answered_by_a_press_on_another() {
    let url = fresh_pg_database();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "call_1",
            "shell",
            r#"{"command":"touch replica-approved.txt && echo approved-on-the-asking-replica"}"#,
        ),
        Step::echo_last_tool_result("Result: "),
    ])
    .await;
    let homes = homes(2, &url, |url| lark_config(&fake, &model, url, 30));
    let (mut daemons, conns) = start_lark(&homes, &fake).await;

    let event = lark::p2p_text(OWNER, "please create the marker file");
    let chat = event["event"]["message"]["chat_id"]
        .as_str()
        .unwrap()
        .to_string();
    let id = lark::message_id(&event);
    fake.push_event_to(conns[0], &event).unwrap();
    let sent = fake.wait_for_messages(1, WAIT).await;
    let card = &sent[0];
    assert_eq!(
        card.content["header"]["title"]["content"],
        "Approval needed"
    );
    let value = card.content["body"]["elements"][1]["columns"][0]["elements"][0]["behaviors"][0]
        ["value"]
        .clone();
    assert_eq!(value["choice"], "o", "{value}");
    let asking = homes
        .iter()
        .position(|h| h.log().contains(&format!("runs lark event {id}")))
        .expect("a replica logs the turn it runs");
    let other = 1 - asking;
    // The press goes to the connection of the replica that is *not* waiting.
    let press_conn = conns[other];
    let seq = fake
        .push_card_action_to(press_conn, value.clone(), OWNER, &chat)
        .unwrap();
    let ack = fake.wait_ack(seq, WAIT).await;
    let data = ack.data.expect("callback data");
    assert_eq!(data["toast"]["type"], "success", "{data}");
    assert!(
        data["card"]["data"].to_string().contains("Approved"),
        "{data}"
    );

    let sent = fake.wait_for_messages(2, WAIT).await;
    assert!(
        sent[1]
            .card_markdown()
            .contains("approved-on-the-asking-replica"),
        "{:?}",
        sent[1]
    );
    assert!(
        homes[other]
            .log()
            .contains("answered here for the replica that asked"),
        "the press was taken by the replica that was not waiting:\n{}",
        homes[other].log()
    );
    let marker = |h: &TestHome| h.path().join("workspace").join("replica-approved.txt");
    assert!(
        marker(&homes[asking]).exists(),
        "the call ran on the asking replica"
    );
    assert!(!marker(&homes[other]).exists(), "and only there");
    // A second press finds nothing waiting.
    let seq = fake
        .push_card_action_to(press_conn, value, OWNER, &chat)
        .unwrap();
    let data = fake.wait_ack(seq, WAIT).await.data.expect("callback data");
    assert_eq!(data["toast"]["type"], "error", "{data}");
    model.assert_protocol_ok();
    for d in &mut daemons {
        d.stop();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_telegram_poller_moves_to_another_replica_when_it_dies_and_nothing_is_lost() {
    const LEASE: u64 = 5;
    let url = fresh_pg_database();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(echo_user(20)).await;
    let homes = homes(2, &url, |url| {
        format!(
            "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
             channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
             owners: [\"telegram:{TG_OWNER}\"]\ngateway:\n  listen: 127.0.0.1:0\n\
             store:\n  url: \"{url}\"\n  lease_secs: {LEASE}\n",
            model.base_url(),
            tg.token(),
            tg.base_url()
        )
    });
    let mut daemons: Vec<Daemon> = homes.iter().map(Daemon::start).collect();
    let poller = |homes: &[TestHome]| {
        homes
            .iter()
            .position(|h| h.log().contains("polls Telegram now"))
    };
    wait_until("a replica polls", WAIT, || poller(&homes).is_some()).await;
    let first = poller(&homes).unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        !homes[1 - first].log().contains("polls Telegram now"),
        "only one poller at a time"
    );

    for i in 0..3 {
        tg.push_text(TG_OWNER, TG_OWNER, &format!("before {i}"));
    }
    tg.wait_for_sent(3, WAIT).await;

    let killed_at = Instant::now();
    daemons[first].kill();
    // Updates sent while nobody polls are kept by Telegram and taken by the next poller.
    for i in 0..3 {
        tg.push_text(TG_OWNER, TG_OWNER, &format!("after {i}"));
    }
    let other = 1 - first;
    wait_for_log(&homes[other], "polls Telegram now", WAIT).await;
    let took = killed_at.elapsed();
    assert!(
        took < Duration::from_secs(LEASE + 5 + 2),
        "the next poller started after {took:?} (lease {LEASE} s + 5 s)"
    );
    tg.wait_for_sent(6, WAIT).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut texts = tg.sent_texts();
    texts.sort();
    let mut expected: Vec<String> = (0..3)
        .map(|i| format!("answer to: before {i}"))
        .chain((0..3).map(|i| format!("answer to: after {i}")))
        .collect();
    expected.sort();
    assert_eq!(texts, expected, "every update answered once");
    daemons[other].stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stop_taken_in_by_another_replica_stops_the_turn() {
    let url = fresh_pg_database();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![Step::delay(
        Duration::from_secs(30),
        Step::text("too late"),
    )])
    .await;
    let homes = homes(2, &url, |url| lark_config(&fake, &model, url, 30));
    let (mut daemons, conns) = start_lark(&homes, &fake).await;

    let event = lark::group_mention("oc_stop", OWNER, "a very long task");
    let id = lark::message_id(&event);
    fake.push_event_to(conns[0], &event).unwrap();
    wait_until("the model got the turn", WAIT, || {
        model.requests().len() == 1
    })
    .await;
    let runner = homes
        .iter()
        .position(|h| h.log().contains(&format!("runs lark event {id}")))
        .expect("a replica logs the turn it runs");
    let other = 1 - runner;
    let asked = Instant::now();
    fake.push_event_to(
        conns[other],
        &lark::group_mention("oc_stop", OWNER, "/stop"),
    )
    .unwrap();
    let sent = fake.wait_for_messages(1, WAIT).await;
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "stopped after {:?}",
        asked.elapsed()
    );
    assert_eq!(sent[0].reply_to.as_deref(), Some(id.as_str()));
    assert!(sent[0].card_markdown().contains("Stopped"), "{:?}", sent[0]);
    assert!(
        homes[runner]
            .log()
            .contains("/stop taken in by another replica"),
        "{}",
        homes[runner].log()
    );
    // No second answer to the /stop itself.
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(replies(&fake).len(), 1, "{:?}", replies(&fake));
    for d in &mut daemons {
        d.stop();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_web_approval_asked_on_one_replica_is_answered_on_another() {
    const TOKEN: &str = "replica-test-token";
    let url = fresh_pg_database();
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "w1",
            "file_write",
            r#"{"path": "web-approved.txt", "content": "ok"}"#,
        ),
        Step::text("written"),
    ])
    .await;
    let homes = homes(2, &url, |url| {
        format!(
            "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
             gateway:\n  listen: 127.0.0.1:0\n  token: {TOKEN}\n\
             store:\n  url: \"{url}\"\n",
            model.base_url()
        )
    });
    let mut daemons: Vec<Daemon> = homes.iter().map(Daemon::start).collect();
    let a = format!(
        "http://{}",
        crate::support::daemon::gateway_addr(&homes[0], WAIT).await
    );
    let b = format!(
        "http://{}",
        crate::support::daemon::gateway_addr(&homes[1], WAIT).await
    );

    // The turn runs on A; its approval is answered through B's gateway.
    let answers = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let answers2 = answers.clone();
    let events = crate::support::gateway::chat(
        &a,
        TOKEN,
        "s1",
        "write the file",
        WAIT,
        move |name, data| {
            if name == "consent_request" {
                let id = data["request_id"].as_str().unwrap().to_string();
                let (b, answers) = (b.clone(), answers2.clone());
                tokio::spawn(async move {
                    let r: Value = reqwest::Client::new()
                        .post(format!("{b}/api/consent/{id}"))
                        .bearer_auth(TOKEN)
                        .json(&json!({"allowed": true}))
                        .send()
                        .await
                        .unwrap()
                        .json()
                        .await
                        .unwrap();
                    answers.lock().unwrap().push(r);
                });
            }
        },
    )
    .await;
    let names = crate::support::gateway::names(&events);
    assert!(names.contains(&"consent_request"), "{names:?}");
    assert_eq!(
        crate::support::gateway::final_text(&events),
        "written",
        "{events:?}"
    );
    assert_eq!(
        answers.lock().unwrap()[0]["ok"],
        true,
        "{:?}",
        answers.lock().unwrap()
    );
    let written = |h: &TestHome| h.path().join("workspace").join("web-approved.txt").exists();
    assert!(
        written(&homes[0]) && !written(&homes[1]),
        "the call ran on A"
    );
    assert!(
        homes[1]
            .log()
            .contains("answered here for the replica that asked"),
        "{}",
        homes[1].log()
    );
    for d in &mut daemons {
        d.stop();
    }
}
