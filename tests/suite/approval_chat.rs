//! An approval counts only in the chat where it was asked, through the real daemon and the fake
//! Bot API: a `callback_query` carrying the right request id from another chat is refused with a
//! toast and leaves the request waiting.

use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::json;
use std::time::Duration;

const OWNER: i64 = 218485655;
const GROUP: i64 = -100777;
const OTHER_GROUP: i64 = -100888;
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn a_button_press_from_another_chat_is_refused() {
    let home = TestHome::new();
    let marker = home.path().join("workspace").join("asked-in-group.txt");
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "w1",
            "file_write",
            r#"{"path": "asked-in-group.txt", "content": "x"}"#,
        ),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    // Replies arrive as whole messages (what this test reads); streaming is tested in
    // tests/suite/streaming_telegram.rs.
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    let text = "@ethan_test_bot write the file";
    tg.push_update(json!({
        "update_id": 1,
        "message": {
            "message_id": 1,
            "date": 1700000000,
            "chat": {"id": GROUP, "type": "supergroup", "title": "team"},
            "from": {"id": OWNER, "is_bot": false, "first_name": "O"},
            "text": text,
            "entities": [{"type": "mention", "offset": 0, "length": 15}],
        }
    }));
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut daemon = Daemon::start_with_env(&home, &[("TMPDIR", tmp.to_str().unwrap())]);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["chat_id"], json!(GROUP));
    let approve = sent[0]["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .expect("an approve button")
        .to_string();
    assert!(approve.starts_with("ap:o:"), "{approve}");

    // The owner's press, forged to come from the owner's DM and from another group: refused
    // with a toast, and the request keeps waiting.
    for (n, chat) in [OWNER, OTHER_GROUP].into_iter().enumerate() {
        tg.push_update(FakeTelegram::callback_update(
            100 + n as i64,
            OWNER,
            chat,
            &approve,
        ));
        let answers = tg.wait_for_calls("answerCallbackQuery", n + 1, WAIT).await;
        let toast = answers[n]["text"].as_str().unwrap_or_default();
        assert!(toast.contains("chat where it was asked"), "{answers:?}");
        assert_eq!(answers[n]["show_alert"], json!(true), "{answers:?}");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(
        !marker.exists(),
        "a press from another chat approved the call"
    );
    assert!(tg.calls("editMessageText").is_empty());
    assert_eq!(model.requests().len(), 1);

    // The same press in the group counts.
    tg.push_update(FakeTelegram::callback_update(200, OWNER, GROUP, &approve));
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert!(marker.exists(), "the approved call did not run");
    assert_eq!(sent[1]["chat_id"], json!(GROUP));
    daemon.stop();
}
