//! `/new` and `/stop` in a Telegram group through the real daemon and the fake Bot API: `/new`
//! (which wipes the group's history and session grants) is for the bot's owner only, `/stop` for
//! the owner or the sender of the running turn; anyone else is told so and nothing changes.

use crate::support::{wait_until, Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const OWNER: i64 = 218485655;
const MEMBER: i64 = 4242;
const GROUP: i64 = -100777;
const BOT: &str = "@ethan_test_bot";
const WAIT: Duration = Duration::from_secs(30);

fn config(home: &TestHome, tg: &FakeTelegram, model: &ScriptedModel) {
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
}

/// Start the daemon with its own temp directory, so the workspace is not inside the system temp
/// directory (where file writes need no consent).
fn start(home: &TestHome) -> Daemon {
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    Daemon::start_with_env(home, &[("TMPDIR", tmp.to_str().unwrap())])
}

/// A group message from `user` addressed to the bot: `/cmd` becomes `/cmd@ethan_test_bot` (a
/// `bot_command` entity), anything else is prefixed with a mention.
fn say(tg: &FakeTelegram, user: i64, text: &str) {
    let (text, entity) = match text.strip_prefix('/') {
        Some(cmd) => {
            let t = format!("/{cmd}{BOT}");
            let len = t.encode_utf16().count();
            (
                t,
                json!({"type": "bot_command", "offset": 0, "length": len}),
            )
        }
        None => (
            format!("{BOT} {text}"),
            json!({"type": "mention", "offset": 0, "length": 15}),
        ),
    };
    let id = tg.next_update_id();
    tg.push_update(json!({
        "update_id": id,
        "message": {
            "message_id": id,
            "date": 1700000000,
            "chat": {"id": GROUP, "type": "supergroup", "title": "team"},
            "from": {"id": user, "is_bot": false, "first_name": "U"},
            "text": text,
            "entities": [entity],
        }
    }));
}

/// Wait until a message containing `needle` was sent to the group; how many such messages.
async fn wait_for_text(tg: &FakeTelegram, needle: &str) -> usize {
    let count = || {
        tg.sent_messages()
            .iter()
            .filter(|m| m["chat_id"] == json!(GROUP))
            .filter(|m| m["text"].as_str().is_some_and(|t| t.contains(needle)))
            .count()
    };
    wait_until(&format!("{needle:?} is sent"), WAIT, || count() > 0).await;
    count()
}

fn approval_keyboards(tg: &FakeTelegram) -> Vec<Vec<String>> {
    tg.sent_messages()
        .iter()
        .filter_map(|m| m["reply_markup"]["inline_keyboard"][0].as_array().cloned())
        .map(|row| {
            row.iter()
                .map(|b| b["callback_data"].as_str().unwrap().to_string())
                .collect()
        })
        .collect()
}

fn history_has(req: &Value, needle: &str) -> bool {
    req["messages"].to_string().contains(needle)
}

#[tokio::test(flavor = "multi_thread")]
async fn group_new_and_stop_are_for_the_owner_or_the_turns_sender() {
    let home = TestHome::new();
    let workspace = home.path().join("workspace");
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        // The owner's turn: a write approved for the session, then a slow answer.
        Step::tool_call(
            "w1",
            "file_write",
            r#"{"path": "a.txt", "content": "pineapple"}"#,
        ),
        Step::delay(Duration::from_secs(4), Step::text("wrote a.txt")),
        // The owner's next turn: a write in the same directory, under the session grant.
        Step::tool_call(
            "w2",
            "file_write",
            r#"{"path": "b.txt", "content": "banana"}"#,
        ),
        Step::text("wrote b.txt"),
        // A member's slow turn, stopped by the member; another, stopped by the owner.
        Step::delay(Duration::from_secs(20), Step::text("first too late")),
        Step::delay(Duration::from_secs(20), Step::text("second too late")),
    ])
    .await;
    config(&home, &tg, &model);
    say(&tg, OWNER, "write pineapple to a.txt");
    let mut daemon = start(&home);

    // The owner approves the write for the session.
    wait_until("the approval request is sent", WAIT, || {
        !approval_keyboards(&tg).is_empty()
    })
    .await;
    let session = approval_keyboards(&tg)[0]
        .iter()
        .find(|d| d.starts_with("ap:s:"))
        .cloned()
        .expect("an approve-for-session button");
    tg.push_update(FakeTelegram::callback_update(
        tg.next_update_id(),
        OWNER,
        GROUP,
        &session,
    ));
    model.wait_for_requests(2, WAIT).await;

    // While the owner's answer is being written, a member tries /stop: refused, and the
    // owner's turn finishes.
    say(&tg, MEMBER, "/stop");
    assert_eq!(
        wait_for_text(&tg, "Only the bot's owner or the person who asked").await,
        1
    );
    wait_for_text(&tg, "wrote a.txt").await;
    assert!(workspace.join("a.txt").exists());

    // A member's /new is refused: the history and the session grant stay.
    say(&tg, MEMBER, "/new");
    wait_for_text(&tg, "Only the bot's owner can start a fresh conversation").await;
    say(&tg, OWNER, "now write banana to b.txt");
    wait_for_text(&tg, "wrote b.txt").await;
    let reqs = model.requests();
    assert!(
        history_has(&reqs[2], "write pineapple to a.txt"),
        "the group's history was wiped: {}",
        reqs[2]["messages"]
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("b.txt")).unwrap(),
        "banana"
    );
    assert_eq!(
        approval_keyboards(&tg).len(),
        1,
        "the session grant was dropped: {}",
        tg.describe_calls()
    );

    // A member may stop their own turn.
    say(&tg, MEMBER, "think about it for a long time");
    model.wait_for_requests(5, WAIT).await;
    say(&tg, MEMBER, "/stop");
    assert_eq!(wait_for_text(&tg, "Stopped.").await, 1);

    // The owner may stop anyone's turn.
    say(&tg, MEMBER, "think again");
    model.wait_for_requests(6, WAIT).await;
    say(&tg, OWNER, "/stop");
    wait_until("the second turn is stopped", WAIT, || {
        tg.sent_texts().iter().filter(|t| *t == "Stopped.").count() == 2
    })
    .await;

    // The owner's /new works.
    say(&tg, OWNER, "/new");
    wait_for_text(&tg, "Started a fresh conversation.").await;
    let texts = tg.sent_texts();
    assert!(
        !texts.iter().any(|t| t.contains("too late")),
        "a stopped turn answered: {texts:?}"
    );
    daemon.stop();
}
