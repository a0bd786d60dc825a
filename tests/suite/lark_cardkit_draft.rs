//! The Lark channel's streaming card ([`ethan_channels::Draft`]) driven directly against
//! `FakeLark` (Open API + CardKit): the calls a daemon makes (`open_draft`, `update`, `finish`)
//! and what Lark receives — the card, its sequences, a finish repeated after a failure or a
//! restart, a long answer, refusals. The daemon end to end is in `tests/suite/streaming_lark.rs`.

use crate::support::lark::{FakeLark, APP_ID, APP_SECRET};
use async_trait::async_trait;
use ethan_channels::lark::{LarkChannel, LarkConfig};
use ethan_channels::{
    Channel, ChannelError, ChatKind, ChatRef, DraftHandle, DraftLog, DraftTarget, DraftView,
    StreamMode, ToolLine, ToolState,
};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const GROUP: &str = "oc_5ce6d572455d361153b7xx51da133945";
const ASKED: &str = "om_user_question_1";
const INTERVAL: Duration = Duration::from_millis(300);

/// The handles a draft recorded, in order (the daemon keeps them in its store).
#[derive(Default)]
struct Recorded(Mutex<Vec<DraftHandle>>);

#[async_trait]
impl DraftLog for Recorded {
    async fn record(&self, handle: &DraftHandle) -> Result<(), ChannelError> {
        self.0.lock().unwrap().push(handle.clone());
        Ok(())
    }
}

impl Recorded {
    fn all(&self) -> Vec<DraftHandle> {
        self.0.lock().unwrap().clone()
    }
}

fn channel(fake: &FakeLark, streaming: StreamMode) -> LarkChannel {
    LarkChannel::new(LarkConfig {
        app_id: APP_ID.into(),
        app_secret: APP_SECRET.into(),
        base_url: fake.base_url(),
        streaming,
        stream_interval: INTERVAL,
        ..LarkConfig::default()
    })
    .expect("channel")
}

fn target(resume: Option<DraftHandle>) -> DraftTarget {
    DraftTarget {
        chat: ChatRef {
            id: GROUP.into(),
            kind: ChatKind::Group,
            thread: None,
        },
        reply_to: Some(ASKED.into()),
        idempotency_key: Some(format!("reply:lark:{ASKED}")),
        resume,
    }
}

fn view(text: &str, tools: &[(&str, ToolState)]) -> DraftView {
    DraftView {
        tools: tools
            .iter()
            .map(|(name, state)| ToolLine {
                name: name.to_string(),
                state: *state,
            })
            .collect(),
        text: text.into(),
    }
}

/// Every accepted operation's sequence on the card, in the order received.
fn sequences(fake: &FakeLark, card_id: &str) -> Vec<i64> {
    let mut ops: Vec<(tokio::time::Instant, i64)> = fake
        .card_writes()
        .iter()
        .filter(|w| w.card_id == card_id && w.code == 0)
        .map(|w| (w.at, w.sequence))
        .chain(
            fake.card_settings()
                .iter()
                .filter(|s| s.card_id == card_id && s.code == 0)
                .map(|s| (s.at, s.sequence)),
        )
        .collect();
    ops.sort();
    ops.into_iter().map(|(_, s)| s).collect()
}

fn assert_increasing(seqs: &[i64]) {
    for w in seqs.windows(2) {
        assert!(w[1] > w[0], "sequence not increasing: {seqs:?}");
    }
}

fn content(fake: &FakeLark, element: &str) -> String {
    fake.cards()[0]
        .contents
        .get(element)
        .cloned()
        .unwrap_or_default()
}

fn is_closed(fake: &FakeLark) -> bool {
    fake.card_settings()
        .last()
        .is_some_and(|s| s.closes_streaming())
}

#[tokio::test(flavor = "multi_thread")]
async fn draft_fills_one_card_and_a_repeated_finish_shows_the_answer_once() {
    let fake = FakeLark::start().await;
    let chan = channel(&fake, StreamMode::Card);
    let log = Arc::new(Recorded::default());
    let mut draft = chan.open_draft(target(None), log.clone()).expect("a draft");
    assert_eq!(draft.interval(), INTERVAL);

    // Nothing to show yet: no card.
    draft.update(&view("", &[])).await.unwrap();
    assert!(fake.cards().is_empty());
    draft
        .update(&view("", &[("file_read", ToolState::Running)]))
        .await
        .unwrap();
    let cards = fake.cards();
    assert_eq!(cards.len(), 1);
    let card_id = cards[0].card_id.clone();
    assert_eq!(cards[0].created["config"]["streaming_mode"], true);
    // The handle was recorded, naming the card, before the card was sent; then again with the
    // message that shows it.
    let recorded = log.all();
    assert_eq!(recorded.len(), 2);
    assert_eq!(recorded[0].0["card_id"], card_id.as_str());
    assert!(recorded[0].0["created_ms"].as_i64().unwrap() > 0);
    assert!(recorded[0].0.get("message_id").is_none());
    assert_eq!(recorded[1].0["card_id"], card_id.as_str());
    assert!(recorded[1].0["message_id"].is_string());
    // The card went out as the reply.
    let sent = fake.messages();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].reply_to.as_deref(), Some(ASKED));
    assert_eq!(sent[0].msg_type, "interactive");
    assert_eq!(sent[0].card_id().as_deref(), Some(card_id.as_str()));
    assert!(content(&fake, "tool_progress").contains("`file_read` running"));

    for text in ["Hel", "Hello wor"] {
        tokio::time::sleep(INTERVAL).await;
        draft
            .update(&view(text, &[("file_read", ToolState::Done)]))
            .await
            .unwrap();
        assert_eq!(content(&fake, "answer"), text);
    }
    let done = [ToolLine {
        name: "file_read".into(),
        state: ToolState::Done,
    }];
    let sent_ref = draft.finish("Hello world", &done).await.unwrap();
    assert_eq!(sent_ref.message_ids, [sent[0].message_id.clone()]);
    assert_eq!(content(&fake, "answer"), "Hello world");
    assert!(content(&fake, "tool_progress").contains("`file_read` done"));
    assert!(is_closed(&fake));
    let settings = fake.card_settings();
    assert_eq!(
        settings.last().unwrap().settings["config"]["summary"]["content"],
        "Hello world"
    );

    // finish again (the daemon retrying after an unclear failure): same card, same message.
    let again = draft.finish("Hello world", &done).await.unwrap();
    assert_eq!(again.message_ids, sent_ref.message_ids);
    assert_eq!(fake.messages().len(), 1, "{}", fake.describe());
    assert_eq!(fake.cards().len(), 1);
    assert_eq!(content(&fake, "answer"), "Hello world");
    assert!(is_closed(&fake));
    assert_increasing(&sequences(&fake, &card_id));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draft_opened_again_from_its_handle_finishes_in_the_same_card() {
    let fake = FakeLark::start().await;
    let log = Arc::new(Recorded::default());
    {
        let chan = channel(&fake, StreamMode::Auto);
        let mut draft = chan.open_draft(target(None), log.clone()).unwrap();
        draft.update(&view("The answer so", &[])).await.unwrap();
        tokio::time::sleep(INTERVAL).await;
        draft.update(&view("The answer so far", &[])).await.unwrap();
        // The process dies here: no finish.
    }
    let before = sequences(&fake, &fake.cards()[0].card_id);
    let handle = log.all().pop().expect("a recorded handle");
    tokio::time::sleep(Duration::from_millis(150)).await;

    // A new process (a new channel, nothing in memory) resumes.
    let chan = channel(&fake, StreamMode::Auto);
    let mut draft = chan.open_draft(target(Some(handle)), log.clone()).unwrap();
    let sent = draft
        .finish("The answer so far, complete.", &[])
        .await
        .unwrap();
    assert_eq!(fake.cards().len(), 1, "a second card");
    let card_id = fake.cards()[0].card_id.clone();
    let all = sequences(&fake, &card_id);
    assert_eq!(all.len(), before.len() + 2, "answer write + close: {all:?}");
    assert_increasing(&all);
    assert!(fake.card_writes().iter().all(|w| w.code == 0));
    assert_eq!(content(&fake, "answer"), "The answer so far, complete.");
    assert!(is_closed(&fake));
    // The handle named the card's message: it was not posted again.
    let requests = fake.send_requests();
    assert_eq!(requests.len(), 1, "{}", fake.describe());
    let shown = fake.messages();
    assert_eq!(shown.len(), 1);
    assert_eq!(sent.message_ids, [shown[0].message_id.clone()]);
    assert_eq!(log.all().len(), 2, "no new card, no new handle");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_long_answer_continues_in_an_ordinary_card_once() {
    let fake = FakeLark::start().await;
    let chan = channel(&fake, StreamMode::Card);
    let log = Arc::new(Recorded::default());
    let mut draft = chan.open_draft(target(None), log).unwrap();
    let paragraph = "word ".repeat(200);
    let long: String = (0..40)
        .map(|i| format!("Paragraph {i}: {paragraph}"))
        .collect::<Vec<_>>()
        .join("\n\n");
    assert!(long.len() > 30 * 1024);
    draft.update(&view("Paragraph 0:", &[])).await.unwrap();
    let sent = draft.finish(&long, &[]).await.unwrap();
    assert_eq!(sent.message_ids.len(), 2, "{sent:?}");
    let shown = fake.messages();
    assert_eq!(shown.len(), 2, "{}", fake.describe());
    assert!(shown[0].card_id().is_some());
    // The continuation is today's reply card holding the rest.
    assert_eq!(shown[1].card_id(), None);
    assert_eq!(shown[1].content["schema"], "2.0");
    let in_card = content(&fake, "answer");
    let rest = shown[1].card_markdown();
    assert!(in_card.starts_with("Paragraph 0:"));
    assert!(rest.contains("Paragraph 39:"));
    assert!(!in_card.contains("Paragraph 39:"));
    assert!(is_closed(&fake));
    // Again: nothing new is shown.
    draft.finish(&long, &[]).await.unwrap();
    assert_eq!(fake.messages().len(), 2, "{}", fake.describe());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_missing_scope_falls_back_to_a_reply_card_and_stops_trying() {
    let fake = FakeLark::start().await;
    fake.refuse_cardkit(true);
    let chan = channel(&fake, StreamMode::Card);
    let log = Arc::new(Recorded::default());
    let mut draft = chan.open_draft(target(None), log.clone()).unwrap();
    draft.update(&view("Hi", &[])).await.unwrap();
    draft.update(&view("Hi there", &[])).await.unwrap();
    let sent = draft.finish("Hi there, friend.", &[]).await.unwrap();
    assert_eq!(sent.message_ids.len(), 1);
    let shown = fake.messages();
    assert_eq!(shown.len(), 1);
    assert_eq!(shown[0].card_id(), None);
    assert_eq!(shown[0].card_markdown(), "Hi there, friend.");
    assert!(log.all().is_empty());
    assert_eq!(fake.calls_to("/cardkit/").len(), 1, "create tried once");
    // The next reply does not stream at all.
    assert!(chan.open_draft(target(None), log).is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn streaming_off_opens_no_draft() {
    let fake = FakeLark::start().await;
    let chan = channel(&fake, StreamMode::Off);
    assert!(chan
        .open_draft(target(None), Arc::new(Recorded::default()))
        .is_none());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_write_refused_after_the_card_was_shown_ends_in_an_ordinary_reply() {
    let fake = FakeLark::start().await;
    let chan = channel(&fake, StreamMode::Card);
    let mut draft = chan
        .open_draft(target(None), Arc::new(Recorded::default()))
        .unwrap();
    draft.update(&view("Partial", &[])).await.unwrap();
    let refusal = json!({"code": 300311, "msg": "card entity is invalid"});
    for _ in 0..4 {
        fake.fail_next("card_content", 200, refusal.clone(), &[]);
    }
    tokio::time::sleep(INTERVAL).await;
    assert!(draft.update(&view("Partial answer", &[])).await.is_err());
    let sent = draft.finish("Partial answer, whole.", &[]).await.unwrap();
    let shown = fake.messages();
    assert_eq!(shown.len(), 2, "{}", fake.describe());
    assert!(shown[0].card_id().is_some());
    assert_eq!(shown[1].card_markdown(), "Partial answer, whole.");
    assert_eq!(sent.message_ids, [shown[1].message_id.clone()]);
    // The card was closed so it does not look like it is still writing.
    assert!(is_closed(&fake));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finish_after_a_restart_reopens_a_closed_card_instead_of_sending_again() {
    let fake = FakeLark::start().await;
    let log = Arc::new(Recorded::default());
    {
        let chan = channel(&fake, StreamMode::Card);
        let mut draft = chan.open_draft(target(None), log.clone()).unwrap();
        draft.update(&view("Almost", &[])).await.unwrap();
        draft.finish("Almost done.", &[]).await.unwrap();
        // The process dies before the daemon notes the reply as delivered.
    }
    assert!(is_closed(&fake));
    let handle = log.all().pop().unwrap();
    tokio::time::sleep(Duration::from_millis(150)).await;
    let chan = channel(&fake, StreamMode::Card);
    let mut draft = chan.open_draft(target(Some(handle)), log).unwrap();
    let sent = draft.finish("Almost done.", &[]).await.unwrap();
    // The content write met a closed card (300309); streaming was opened again, the answer
    // written, and the card closed.
    let writes = fake.card_writes();
    assert_eq!(
        writes.iter().map(|w| w.code).collect::<Vec<_>>(),
        [0, 300309, 0],
        "{writes:#?}"
    );
    let settings = fake.card_settings();
    let modes: Vec<_> = settings
        .iter()
        .map(|s| s.settings["config"]["streaming_mode"].clone())
        .collect();
    assert_eq!(modes, [json!(false), json!(true), json!(false)]);
    assert!(is_closed(&fake));
    assert_eq!(content(&fake, "answer"), "Almost done.");
    let shown = fake.messages();
    assert_eq!(shown.len(), 1, "{}", fake.describe());
    assert_eq!(sent.message_ids, [shown[0].message_id.clone()]);
}
