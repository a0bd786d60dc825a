use super::*;
use crate::stream::ToolState;
use crate::telegram::chunk::utf16_len;

#[test]
fn modes_per_chat() {
    use ChatKind::{Direct, Group};
    assert_eq!(resolve_mode(StreamMode::Off, Direct), None);
    assert_eq!(resolve_mode(StreamMode::Off, Group), None);
    for auto in [StreamMode::Auto, StreamMode::Card, StreamMode::Draft] {
        assert_eq!(resolve_mode(auto, Direct), Some(Shown::Draft));
        assert_eq!(resolve_mode(auto, Group), Some(Shown::Edit));
    }
    assert_eq!(resolve_mode(StreamMode::Edit, Direct), Some(Shown::Edit));
    assert_eq!(resolve_mode(StreamMode::Edit, Group), Some(Shown::Edit));
}

#[test]
fn groups_never_update_faster_than_once_a_second() {
    let fast = Duration::from_millis(300);
    assert_eq!(stream_interval(fast, ChatKind::Direct), fast);
    assert_eq!(stream_interval(fast, ChatKind::Group), GROUP_MIN_INTERVAL);
    let slow = Duration::from_millis(2500);
    assert_eq!(stream_interval(slow, ChatKind::Group), slow);
}

#[test]
fn draft_ids_are_stable_and_non_zero() {
    let a = draft_id("reply:telegram:42");
    assert_eq!(a, draft_id("reply:telegram:42"));
    assert_ne!(a, draft_id("reply:telegram:43"));
    // Known value: pins the hash, so a restarted daemon animates the same draft.
    assert_eq!(draft_id(""), 0x011c_9dc5);
    for key in (0..2000).map(|i| format!("reply:telegram:{i}")) {
        assert!(draft_id(&key) > 0, "{key}");
    }
}

#[test]
fn handle_round_trip() {
    let h = handle_for(&[1001, 1002]);
    assert_eq!(h.0, json!({"message_ids": [1001, 1002]}));
    let stored = serde_json::to_string(&h).expect("serialize");
    let back: DraftHandle = serde_json::from_str(&stored).expect("parse");
    assert_eq!(message_ids(&back), vec![1001, 1002]);
    assert_eq!(
        message_ids(&DraftHandle(json!({"message_ids": ["7", 8, null]}))),
        vec![7, 8]
    );
    assert!(message_ids(&DraftHandle(json!({"card_id": "c"}))).is_empty());
    assert!(message_ids(&DraftHandle(json!([1, 2]))).is_empty());
}

fn long_view() -> DraftView {
    let text = (0..400)
        .map(|i| format!("Line {i}: the answer grows **steadily** — ✨ item {i}."))
        .collect::<Vec<_>>()
        .join("\n\n");
    DraftView {
        tools: vec![ToolLine {
            name: "shell".into(),
            state: ToolState::Done,
        }],
        text,
    }
}

#[test]
fn a_long_view_is_cut_at_clean_boundaries() {
    let view = long_view();
    let md = view_markdown(&view);
    assert!(md.starts_with("✅ `shell` done\n\n"), "{md}");
    let parts = message_parts(&md);
    assert!(parts.len() >= 3, "{} parts", parts.len());
    for part in &parts {
        assert!(utf16_len(part) <= TELEGRAM_TEXT_LIMIT);
    }
    // Nothing lost or doubled, and every cut falls at a line end.
    let whole = html_to_display_text(&markdown_to_html(&md));
    let joined: String = parts.iter().map(|p| html_to_display_text(p)).collect();
    assert_eq!(joined, whole);
    for part in &parts[..parts.len() - 1] {
        assert!(html_to_display_text(part).ends_with('\n'), "{part}");
    }
    // The cut of the first part stays where it is as the text grows.
    let mut longer = view.clone();
    longer.text.push_str("\n\nOne more line.");
    assert_eq!(message_parts(&view_markdown(&longer))[0], parts[0]);
    // A draft shows the part being written.
    assert_eq!(draft_html(&view), parts.last().cloned());
}

#[test]
fn an_empty_view_shows_nothing() {
    assert_eq!(draft_html(&DraftView::default()), None);
    let tools_only = DraftView {
        tools: vec![ToolLine {
            name: "web_search".into(),
            state: ToolState::Running,
        }],
        text: String::new(),
    };
    let html = draft_html(&tools_only).expect("progress");
    assert!(html.contains("web_search"), "{html}");
}

/// The draft against a loopback Bot API (axum on 127.0.0.1:0): what it sends, in order.
mod against_a_bot_api {
    use super::*;
    use crate::channel::Channel;
    use crate::model::ChatRef;
    use crate::telegram::{TelegramChannel, TelegramConfig};
    use axum::extract::State;
    use axum::http::{StatusCode, Uri};
    use axum::Json;
    use std::collections::{HashMap, VecDeque};
    use std::sync::Mutex;

    const GROUP: i64 = -100500;
    const USER: i64 = 4242;

    #[derive(Default)]
    struct Api {
        /// `(lowercase method, body)` and `record:{handle}` entries, in order.
        log: Mutex<Vec<(String, Value)>>,
        texts: Mutex<HashMap<i64, String>>,
        /// When each `editMessageText` arrived.
        edit_times: Mutex<Vec<std::time::Instant>>,
        next_id: Mutex<i64>,
        refuse_drafts: AtomicBool,
        /// Error answers for the next calls of a method.
        failures: Mutex<VecDeque<(String, usize, u16, Value)>>,
    }

    impl Api {
        fn calls(&self, method: &str) -> Vec<Value> {
            let log = self.log.lock().unwrap();
            log.iter()
                .filter(|(m, _)| m == method)
                .map(|(_, b)| b.clone())
                .collect()
        }
        fn methods(&self) -> Vec<String> {
            let log = self.log.lock().unwrap();
            log.iter().map(|(m, _)| m.clone()).collect()
        }
        fn fail(&self, method: &str, status: u16, body: Value) {
            self.fail_after(method, 0, status, body);
        }
        /// Fail the call of `method` that comes after `skip` more successful ones.
        fn fail_after(&self, method: &str, skip: usize, status: u16, body: Value) {
            let mut failures = self.failures.lock().unwrap();
            failures.push_back((method.to_string(), skip, status, body));
        }
    }

    async fn serve(
        State(api): State<Arc<Api>>,
        uri: Uri,
        Json(body): Json<Value>,
    ) -> (StatusCode, Json<Value>) {
        let method = uri.path().rsplit('/').next().unwrap_or("").to_lowercase();
        api.log.lock().unwrap().push((method.clone(), body.clone()));
        let failure = {
            let mut failures = api.failures.lock().unwrap();
            match failures.iter_mut().position(|(m, _, _, _)| *m == method) {
                Some(i) if failures[i].1 > 0 => {
                    failures[i].1 -= 1;
                    None
                }
                Some(i) => failures.remove(i),
                None => None,
            }
        };
        if let Some((_, _, status, answer)) = failure {
            return (StatusCode::from_u16(status).unwrap(), Json(answer));
        }
        let ok = |result: Value| (StatusCode::OK, Json(json!({"ok": true, "result": result})));
        let text = body["text"].as_str().unwrap_or("").to_string();
        let message = |id: i64| {
            json!({"message_id": id, "date": 1700000000, "text": text,
                       "chat": {"id": body["chat_id"], "type": "supergroup", "title": "t"}})
        };
        match method.as_str() {
            "sendmessage" => {
                let id = {
                    let mut next = api.next_id.lock().unwrap();
                    *next += 1;
                    999 + *next
                };
                api.texts.lock().unwrap().insert(id, text.clone());
                ok(message(id))
            }
            "editmessagetext" => {
                api.edit_times
                    .lock()
                    .unwrap()
                    .push(std::time::Instant::now());
                let id = body["message_id"].as_i64().unwrap_or(0);
                let mut texts = api.texts.lock().unwrap();
                if texts.get(&id) == Some(&text) {
                    return (
                        StatusCode::BAD_REQUEST,
                        Json(json!({"ok": false, "error_code": 400,
                                "description": "Bad Request: message is not modified"})),
                    );
                }
                texts.insert(id, text.clone());
                ok(message(id))
            }
            "sendmessagedraft" if api.refuse_drafts.load(Ordering::SeqCst) => (
                StatusCode::NOT_FOUND,
                Json(json!({"ok": false, "error_code": 404,
                        "description": "Not Found: method not found"})),
            ),
            "deletemessage" => {
                let id = body["message_id"].as_i64().unwrap_or(0);
                api.texts.lock().unwrap().remove(&id);
                ok(json!(true))
            }
            _ => ok(json!(true)),
        }
    }

    /// Records handles into the same log as the calls, so their order can be checked.
    struct Log(Arc<Api>);

    #[async_trait]
    impl DraftLog for Log {
        async fn record(&self, handle: &DraftHandle) -> Result<(), ChannelError> {
            let mut log = self.0.log.lock().unwrap();
            log.push(("record".into(), handle.0.clone()));
            Ok(())
        }
    }

    async fn start(mode: StreamMode) -> (Arc<Api>, TelegramChannel) {
        let api = Arc::new(Api::default());
        let app = axum::Router::new()
            .fallback(serve)
            .with_state(Arc::clone(&api));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        let chan = TelegramChannel::new(TelegramConfig {
            token: "123:T".into(),
            api_url: format!("http://{addr}"),
            poll_timeout_secs: 1,
            webhook_url: None,
            webhook_secret: String::new(),
            streaming: mode,
            stream_interval: Duration::from_millis(800),
        })
        .unwrap();
        (api, chan)
    }

    fn target(kind: ChatKind, resume: Option<DraftHandle>) -> DraftTarget {
        let id = match kind {
            ChatKind::Group => GROUP,
            ChatKind::Direct => USER,
        };
        DraftTarget {
            chat: ChatRef {
                id: id.to_string(),
                kind,
                thread: None,
            },
            reply_to: Some("77".into()),
            idempotency_key: Some("reply:telegram:9001".into()),
            resume,
        }
    }

    fn view(text: &str) -> DraftView {
        DraftView {
            tools: Vec::new(),
            text: text.into(),
        }
    }

    fn open(
        chan: &TelegramChannel,
        api: &Arc<Api>,
        kind: ChatKind,
        resume: Option<DraftHandle>,
    ) -> Box<dyn Draft> {
        chan.open_draft(target(kind, resume), Arc::new(Log(Arc::clone(api))))
            .expect("a draft")
    }

    #[tokio::test]
    async fn off_opens_no_draft() {
        let (api, chan) = start(StreamMode::Off).await;
        let log = Arc::new(Log(Arc::clone(&api)));
        assert!(chan
            .open_draft(target(ChatKind::Direct, None), log.clone())
            .is_none());
        assert!(chan
            .open_draft(target(ChatKind::Group, None), log.clone())
            .is_none());
        // A reply that started in a message before the mode changed is finished there.
        let resume = Some(handle_for(&[1001]));
        assert!(chan
            .open_draft(target(ChatKind::Group, resume), log)
            .is_some());
    }

    #[tokio::test]
    async fn a_group_reply_is_sent_recorded_then_edited_and_finished_once() {
        let (api, chan) = start(StreamMode::Auto).await;
        let mut draft = open(&chan, &api, ChatKind::Group, None);
        assert_eq!(draft.interval(), GROUP_MIN_INTERVAL);
        draft.update(&view("Hello")).await.unwrap();
        draft.update(&view("Hello")).await.unwrap();
        draft.update(&view("Hello world")).await.unwrap();
        assert_eq!(
            api.methods(),
            ["sendmessage", "record", "editmessagetext"],
            "an unchanged view is not sent again; the id is recorded before the edit"
        );
        let first = &api.calls("sendmessage")[0];
        assert_eq!(first["reply_parameters"]["message_id"], json!(77));
        assert_eq!(first["parse_mode"], "HTML");
        assert_eq!(api.calls("record")[0], json!({"message_ids": [1000]}));

        let sent = draft.finish("Hello **world**", &[]).await.unwrap();
        assert_eq!(sent.message_ids, ["1000"]);
        assert_eq!(api.texts.lock().unwrap()[&1000], "Hello <b>world</b>");
        // The final edit too waits for the group interval.
        let times = api.edit_times.lock().unwrap().clone();
        assert_eq!(times.len(), 2);
        assert!(times[1] - times[0] >= GROUP_MIN_INTERVAL, "{times:?}");
        // A retry shows nothing twice.
        let again = draft.finish("Hello **world**", &[]).await.unwrap();
        assert_eq!(again, sent);
        assert_eq!(api.calls("sendmessage").len(), 1);
    }

    #[tokio::test]
    async fn a_long_view_continues_in_new_messages_and_finish_deletes_the_rest() {
        let (api, chan) = start(StreamMode::Edit).await;
        let mut draft = open(&chan, &api, ChatKind::Direct, None);
        let long = long_view().text;
        draft.update(&view(&long)).await.unwrap();
        let sends = api.calls("sendmessage");
        assert!(sends.len() >= 3, "{} messages", sends.len());
        // Each new message id is recorded before anything else happens.
        let methods = api.methods();
        for (i, pair) in methods.chunks(2).enumerate() {
            assert_eq!(pair, ["sendmessage", "record"], "step {i}: {methods:?}");
        }
        let records = api.calls("record");
        let all: Vec<i64> = (0..sends.len() as i64).map(|i| 1000 + i).collect();
        assert_eq!(records.last().unwrap(), &json!({"message_ids": all}));
        // Only the first message answers the user (private chat: none does).
        assert!(sends.iter().all(|s| s.get("reply_parameters").is_none()));

        let sent = draft.finish("Short *answer*.", &[]).await.unwrap();
        assert_eq!(sent.message_ids, ["1000"]);
        assert_eq!(api.texts.lock().unwrap()[&1000], "Short <i>answer</i>.");
        let deleted: Vec<Value> = api
            .calls("deletemessage")
            .iter()
            .map(|b| b["message_id"].clone())
            .collect();
        let rest: Vec<Value> = all[1..].iter().map(|i| json!(i)).collect();
        assert_eq!(deleted, rest);
    }

    #[tokio::test]
    async fn messages_already_showing_their_final_part_are_not_edited_again() {
        let (api, chan) = start(StreamMode::Edit).await;
        let mut draft = open(&chan, &api, ChatKind::Direct, None);
        let long = long_view().text;
        let parts = message_parts(&long);
        assert!(parts.len() >= 3);
        // Streamed whole: every message shows its final part already.
        draft.update(&view(&long)).await.unwrap();
        let before = api.calls("editmessagetext").len();
        let sent = draft.finish(&long, &[]).await.unwrap();
        assert_eq!(sent.message_ids.len(), parts.len());
        assert_eq!(
            api.calls("editmessagetext").len(),
            before,
            "{:?}",
            api.methods()
        );
        // A longer final answer edits only the message whose part changed.
        let longer = format!("{long} And one more sentence.");
        let mut draft = open(&chan, &api, ChatKind::Direct, None);
        draft.update(&view(&long)).await.unwrap();
        let before = api.calls("editmessagetext").len();
        draft.finish(&longer, &[]).await.unwrap();
        assert_eq!(api.calls("editmessagetext").len(), before + 1);
    }

    #[tokio::test]
    async fn a_resumed_reply_is_finished_in_its_recorded_message() {
        let (api, chan) = start(StreamMode::Auto).await;
        api.texts.lock().unwrap().insert(1005, "Half an ans".into());
        let resume = Some(handle_for(&[1005]));
        let mut draft = open(&chan, &api, ChatKind::Direct, resume.clone());
        let sent = draft.finish("Half an answer, whole.", &[]).await.unwrap();
        assert_eq!(sent.message_ids, ["1005"]);
        assert_eq!(api.methods(), ["editmessagetext"]);
        // After another crash, the same again: "not modified" is success.
        let mut draft = open(&chan, &api, ChatKind::Direct, resume);
        draft.finish("Half an answer, whole.", &[]).await.unwrap();
        assert!(api.calls("sendmessage").is_empty());
    }

    #[tokio::test]
    async fn a_private_reply_is_drafted_then_sent_once() {
        let (api, chan) = start(StreamMode::Auto).await;
        let mut draft = open(&chan, &api, ChatKind::Direct, None);
        assert_eq!(draft.interval(), Duration::from_millis(800));
        draft.update(&view("The answer")).await.unwrap();
        draft.update(&view("The answer **grows**")).await.unwrap();
        let drafts = api.calls("sendmessagedraft");
        assert_eq!(drafts.len(), 2);
        let id = json!(draft_id("reply:telegram:9001"));
        assert!(drafts.iter().all(|d| d["draft_id"] == id));
        assert_eq!(drafts[1]["text"], "The answer <b>grows</b>");
        assert_eq!(drafts[1]["parse_mode"], "HTML");
        assert_eq!(drafts[1]["chat_id"], json!(USER));

        let sent = draft.finish("The answer **grows**.", &[]).await.unwrap();
        assert_eq!(sent.message_ids, ["1000"]);
        let again = draft.finish("The answer **grows**.", &[]).await.unwrap();
        assert_eq!(again, sent);
        let sends = api.calls("sendmessage");
        assert_eq!(sends.len(), 1);
        assert_eq!(sends[0]["text"], "The answer <b>grows</b>.");
        assert!(api.calls("editmessagetext").is_empty());
        assert!(api.calls("record").is_empty());
    }

    #[tokio::test]
    async fn a_final_reply_cut_by_a_failure_continues_at_the_failed_part() {
        let (api, chan) = start(StreamMode::Auto).await;
        let mut draft = open(&chan, &api, ChatKind::Direct, None);
        let long = long_view().text;
        let parts = message_parts(&long);
        assert!(parts.len() >= 3);
        api.fail_after(
            "sendmessage",
            1,
            400,
            json!({"ok": false, "error_code": 400, "description": "Bad Request: boom"}),
        );
        match draft.finish(&long, &[]).await {
            Err(ChannelError::Partial {
                delivered, total, ..
            }) => assert_eq!((delivered, total), (1, parts.len())),
            other => panic!("expected a partial delivery, got {other:?}"),
        }
        let sent = draft.finish(&long, &[]).await.unwrap();
        assert_eq!(sent.message_ids.len(), parts.len());
        let texts: Vec<String> = api
            .calls("sendmessage")
            .iter()
            .map(|b| b["text"].as_str().unwrap().to_string())
            .collect();
        // Part 1 was tried twice; nothing was shown twice.
        let mut expected = parts.clone();
        expected.insert(1, parts[1].clone());
        assert_eq!(texts, expected);
    }

    #[tokio::test]
    async fn refused_drafts_fall_back_to_edits_for_the_process() {
        let (api, chan) = start(StreamMode::Auto).await;
        api.refuse_drafts.store(true, Ordering::SeqCst);
        let mut draft = open(&chan, &api, ChatKind::Direct, None);
        draft.update(&view("First")).await.unwrap();
        assert_eq!(api.methods(), ["sendmessagedraft", "sendmessage", "record"]);
        let sent = draft.finish("First and last", &[]).await.unwrap();
        assert_eq!(sent.message_ids, ["1000"]);
        assert_eq!(api.calls("sendmessage").len(), 1);
        assert_eq!(api.texts.lock().unwrap()[&1000], "First and last");
        // The next reply does not try drafts again.
        let mut next = open(&chan, &api, ChatKind::Direct, None);
        next.update(&view("Second")).await.unwrap();
        assert_eq!(api.calls("sendmessagedraft").len(), 1);
    }

    #[tokio::test]
    async fn a_429_skips_updates_until_retry_after() {
        let (api, chan) = start(StreamMode::Auto).await;
        let mut draft = open(&chan, &api, ChatKind::Group, None);
        draft.update(&view("One")).await.unwrap();
        api.fail(
                "editmessagetext",
                429,
                json!({"ok": false, "error_code": 429, "description": "Too Many Requests: retry after 30",
                       "parameters": {"retry_after": 30}}),
            );
        let started = std::time::Instant::now();
        draft.update(&view("One two")).await.unwrap();
        draft.update(&view("One two three")).await.unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "update slept");
        assert_eq!(api.calls("editmessagetext").len(), 1, "{:?}", api.methods());
    }
}
