//! Consent and the ChannelGuard through the real daemon and the fake Bot API: non-owners cannot
//! cause side effects, the owner approves with an inline keyboard (only the owner's press counts),
//! an unanswered request times out, group messages need a mention, and `/claim` makes an owner.
//! A denied call may be proposed again and is asked again; `/stop` cancels a waiting approval.

use crate::support::{run_cli, wait_until, Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const OWNER: i64 = 218485655;
const STRANGER: i64 = 4242;
const GROUP: i64 = -100777;
const WAIT: Duration = Duration::from_secs(30);

fn config(home: &TestHome, tg: &FakeTelegram, model: &ScriptedModel, extra: &str) {
    // Replies arrive as whole messages (what this test reads); streaming is tested in
    // tests/suite/streaming_telegram.rs.
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n{extra}",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
}

/// Start the daemon with its own temp directory, so the workspace (under the test's temp home) is
/// not inside the system temp directory, where file writes need no consent.
fn start(home: &TestHome) -> Daemon {
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    Daemon::start_with_env(home, &[("TMPDIR", tmp.to_str().unwrap())])
}

fn group_update(update_id: i64, user: i64, text: &str, entities: Value) -> Value {
    json!({
        "update_id": update_id,
        "message": {
            "message_id": update_id,
            "date": 1700000000,
            "chat": {"id": GROUP, "type": "supergroup", "title": "team"},
            "from": {"id": user, "is_bot": false, "first_name": "U"},
            "text": text,
            "entities": entities,
        }
    })
}

fn mention(text: &str) -> Value {
    // UTF-16 offset of "@ethan_test_bot" in `text`.
    let byte = text.find("@ethan_test_bot").unwrap();
    let offset: usize = text[..byte].encode_utf16().count();
    json!([{"type": "mention", "offset": offset, "length": 15}])
}

/// The approve/deny callback data of the newest approval keyboard sent.
fn approval_buttons(tg: &FakeTelegram) -> Vec<String> {
    tg.sent_messages()
        .iter()
        .rev()
        .find_map(|m| m["reply_markup"]["inline_keyboard"][0].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .map(|b| b["callback_data"].as_str().unwrap().to_string())
        .collect()
}

fn last_tool_result(req: &Value) -> String {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn non_owner_in_a_group_cannot_run_a_command() {
    let home = TestHome::new();
    let marker = home.path().join("workspace").join("marker");
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "c1",
            "shell",
            &json!({"command": format!("touch {}", marker.display())}).to_string(),
        ),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    config(&home, &tg, &model, "");
    let text = "@ethan_test_bot please run touch marker";
    tg.push_update(group_update(50, STRANGER, text, mention(text)));
    // A group message that does not address the bot gets nothing.
    tg.push_update(group_update(51, STRANGER, "just chatting", json!([])));
    let mut daemon = start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["chat_id"], json!(GROUP));
    let result = last_tool_result(&model.requests()[1]);
    assert!(
        result.starts_with("Error (denied)") && result.contains("not the owner"),
        "{result}"
    );
    assert!(!marker.exists(), "the command ran for a non-owner");
    // The non-owner was not even offered the shell.
    assert!(!model.requests()[0]["tools"]
        .to_string()
        .contains("\"shell\""));
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(tg.sent_messages().len(), 1, "{}", tg.describe_calls());
    assert_eq!(model.requests().len(), 2);
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn owner_approves_with_the_keyboard_and_only_the_owner_counts() {
    let home = TestHome::new();
    let marker = home.path().join("workspace").join("approved-marker");
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "c1",
            "shell",
            &json!({"command": format!("touch {}", marker.display())}).to_string(),
        ),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "create the marker");
    let mut daemon = start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert!(
        sent[0]["text"]
            .as_str()
            .unwrap()
            .contains("Approval needed"),
        "{sent:?}"
    );
    let buttons = approval_buttons(&tg);
    assert_eq!(buttons.len(), 3, "{buttons:?}");
    assert!(buttons[0].starts_with("ap:o:"));

    // Someone else presses Approve: nothing happens, they are told so.
    tg.push_update(FakeTelegram::callback_update(
        900,
        STRANGER,
        OWNER,
        &buttons[0],
    ));
    let answers = tg.wait_for_calls("answerCallbackQuery", 1, WAIT).await;
    assert!(
        answers[0]["text"].as_str().unwrap().contains("Not allowed"),
        "{answers:?}"
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!marker.exists());

    // The owner presses Approve: the command runs and the prompt shows the outcome.
    tg.push_update(FakeTelegram::callback_update(
        901,
        OWNER,
        OWNER,
        &buttons[0],
    ));
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert!(marker.exists(), "the approved command did not run");
    assert!(
        sent[1]["text"].as_str().unwrap().contains("exit code: 0"),
        "{:?}",
        sent[1]
    );
    let edits = tg.wait_for_calls("editMessageText", 1, WAIT).await;
    assert!(
        edits[0]["text"].as_str().unwrap().contains("Approved once"),
        "{edits:?}"
    );
    model.assert_protocol_ok();
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn unanswered_approval_times_out_with_its_own_text() {
    let home = TestHome::new();
    let marker = home.path().join("workspace").join("never");
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "c1",
            "file_write",
            &json!({"path": marker.display().to_string(), "content": "x"}).to_string(),
        ),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    config(&home, &tg, &model, "consent:\n  timeout_secs: 1\n");
    tg.push_text(OWNER, OWNER, "write it");
    let mut daemon = start(&home);
    let sent = tg.wait_for_sent(2, WAIT).await;
    let result = last_tool_result(&model.requests()[1]);
    assert!(
        result.contains("nobody answered") && result.contains("did not refuse"),
        "{result}"
    );
    assert!(sent[1]["text"]
        .as_str()
        .unwrap()
        .contains("nobody answered"));
    assert!(!marker.exists());
    let edits = tg.wait_for_calls("editMessageText", 1, WAIT).await;
    assert!(
        edits[0]["text"].as_str().unwrap().contains("No answer"),
        "{edits:?}"
    );
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn deny_by_text_command_and_mention_after_emoji() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::text("hello group"),
        Step::tool_call(
            "c1",
            "file_write",
            r#"{"path": "denied.txt", "content": "x"}"#,
        ),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    config(&home, &tg, &model, "");
    // A mention after emoji: UTF-16 and code-point offsets differ.
    let text = "😀🎉😀 @ethan_test_bot hi";
    tg.push_update(group_update(60, STRANGER, text, mention(text)));
    let mut daemon = start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["text"], "hello group");
    assert_eq!(sent[0]["chat_id"], json!(GROUP));

    tg.push_text(OWNER, OWNER, "write denied.txt");
    tg.wait_for_sent(2, WAIT).await;
    let id = approval_buttons(&tg)[0]
        .trim_start_matches("ap:o:")
        .to_string();
    tg.push_text(OWNER, OWNER, &format!("/deny {id}"));
    let sent = tg.wait_for_sent(4, WAIT).await;
    let texts: Vec<&str> = sent.iter().map(|m| m["text"].as_str().unwrap()).collect();
    assert!(texts.contains(&"Denied"), "{texts:?}");
    let result = last_tool_result(&model.requests()[2]);
    assert!(result.contains("the user refused"), "{result}");
    assert!(!home.path().join("workspace/denied.txt").exists());
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn claim_makes_an_owner() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![]).await;
    config(&home, &tg, &model, "");
    let out = run_cli(&home, &["owner", "claim"], None);
    assert!(out.status.success());
    let code = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(code.len(), 8);
    let mut daemon = start(&home);
    tg.push_text(STRANGER, STRANGER, "/claim WRONGCOD");
    tg.wait_for_sent(1, WAIT).await;
    tg.push_text(STRANGER, STRANGER, &format!("/claim {code}"));
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert!(sent[0]["text"].as_str().unwrap().contains("not valid"));
    assert!(sent[1]["text"].as_str().unwrap().contains("now the owner"));
    daemon.stop();
    let list = run_cli(&home, &["owner", "list"], None);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(
        text.contains(&format!("telegram:{STRANGER}  (claim")),
        "{text}"
    );
    assert!(
        text.contains(&format!("telegram:{OWNER}  (config)")),
        "{text}"
    );
}

/// A command padded with spaces shows in full in the approval: the padding folds to one space, so
/// what follows it (`; touch X`) is in the message; denying it runs nothing.
#[tokio::test(flavor = "multi_thread")]
async fn approval_shows_a_padded_command_folded_and_denying_runs_nothing() {
    let home = TestHome::new();
    let marker = home.path().join("workspace").join("X");
    let command = format!("echo hi{}; touch {}", " ".repeat(3000), marker.display());
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("c1", "shell", &json!({ "command": command }).to_string()),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "say hi");
    let mut daemon = start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    let text = sent[0]["text"].as_str().unwrap();
    assert!(text.contains("Approval needed"), "{text}");
    let folded = format!("echo hi ; touch {}", marker.display());
    assert!(text.contains(&folded), "{text}");
    assert!(!text.contains("  "), "whitespace was not folded: {text}");

    let deny = approval_buttons(&tg)
        .into_iter()
        .find(|b| b.starts_with("ap:d:"))
        .unwrap();
    tg.push_update(FakeTelegram::callback_update(902, OWNER, OWNER, &deny));
    tg.wait_for_sent(2, WAIT).await;
    let result = last_tool_result(&model.requests()[1]);
    assert!(result.contains("the user refused"), "{result}");
    assert!(!marker.exists(), "the denied command ran");
    let edits = tg.wait_for_calls("editMessageText", 1, WAIT).await;
    let edited = edits[0]["text"].as_str().unwrap();
    assert!(
        edited.contains("Denied") && edited.contains(&folded),
        "{edited}"
    );
    daemon.stop();
}

/// A command too long to show in one approval is not cut and not asked about: the model is told
/// to split it, and nothing runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_command_too_long_to_show_is_refused_without_asking() {
    let home = TestHome::new();
    let name: String = (0..5000)
        .map(|i| char::from(b'a' + (i * 7 % 26) as u8))
        .collect();
    let command = format!("touch {}/{name}", home.path().join("workspace").display());
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("c1", "shell", &json!({ "command": command }).to_string()),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "make the file");
    let mut daemon = start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    let text = sent[0]["text"].as_str().unwrap();
    assert!(!text.contains("Approval needed"), "{text}");
    assert!(sent[0]["reply_markup"].is_null(), "{:?}", sent[0]);
    let result = last_tool_result(&model.requests()[1]);
    assert!(
        result.starts_with(
            "Error (validation): command too long to show for approval; split it into shorter calls"
        ),
        "{result}"
    );
    assert!(text.contains("split it into shorter calls"), "{text}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(tg.sent_messages().len(), 1, "{}", tg.describe_calls());
    model.assert_protocol_ok();
    daemon.stop();
}

/// A call the owner denied is not a replay: the model proposes the same call again in the same
/// turn, the owner is asked again, approves, and it runs.
#[tokio::test(flavor = "multi_thread")]
async fn a_denied_call_proposed_again_is_asked_again_and_runs_once_approved() {
    let home = TestHome::new();
    let target = home.path().join("workspace").join("again.txt");
    let args = json!({"path": target.display().to_string(), "content": "x"}).to_string();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("c1", "file_write", &args),
        Step::tool_call("c2", "file_write", &args),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "write again.txt");
    let mut daemon = start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert!(
        sent[0]["text"]
            .as_str()
            .unwrap()
            .contains("Approval needed"),
        "{sent:?}"
    );
    let deny = approval_buttons(&tg)
        .into_iter()
        .find(|b| b.starts_with("ap:d:"))
        .unwrap();
    tg.push_update(FakeTelegram::callback_update(910, OWNER, OWNER, &deny));

    // The same call again: asked again, not refused as a replay.
    let sent = tg.wait_for_sent(2, WAIT).await;
    let refused = last_tool_result(&model.requests()[1]);
    assert!(refused.contains("the user refused"), "{refused}");
    assert!(refused.contains("propose it again"), "{refused}");
    assert!(
        sent[1]["text"]
            .as_str()
            .unwrap()
            .contains("Approval needed"),
        "the second proposal was not asked: {:?}",
        sent[1]
    );
    assert!(!target.exists());
    let approve = approval_buttons(&tg)
        .into_iter()
        .find(|b| b.starts_with("ap:o:"))
        .unwrap();
    assert_ne!(approve, deny.replace("ap:d:", "ap:o:"), "a new request");
    tg.push_update(FakeTelegram::callback_update(911, OWNER, OWNER, &approve));
    tg.wait_for_sent(3, WAIT).await;
    let result = last_tool_result(&model.requests()[2]);
    assert!(!result.starts_with("Error"), "{result}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "x");
    model.assert_protocol_ok();
    daemon.stop();
}

/// `/stop` while an approval waits: the request is withdrawn and its message says so; the old
/// button then counts for nothing, `/approve` finds nothing waiting, and nothing runs.
#[tokio::test(flavor = "multi_thread")]
async fn stop_cancels_a_waiting_approval() {
    let home = TestHome::new();
    let target = home.path().join("workspace").join("stopped.txt");
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "c1",
            "file_write",
            &json!({"path": target.display().to_string(), "content": "x"}).to_string(),
        ),
        Step::echo_last_tool_result("result: "),
    ])
    .await;
    config(&home, &tg, &model, "");
    tg.push_text(OWNER, OWNER, "write stopped.txt");
    let mut daemon = start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert!(
        sent[0]["text"]
            .as_str()
            .unwrap()
            .contains("Approval needed"),
        "{sent:?}"
    );
    let approve = approval_buttons(&tg)[0].clone();
    assert!(approve.starts_with("ap:o:"), "{approve}");

    tg.push_text(OWNER, OWNER, "/stop");
    let edits = tg.wait_for_calls("editMessageText", 1, WAIT).await;
    let edited = edits[0]["text"].as_str().unwrap();
    assert!(
        edited.contains("Cancelled") && edited.contains("file_write"),
        "{edited}"
    );

    tg.push_update(FakeTelegram::callback_update(920, OWNER, OWNER, &approve));
    let answers = tg.wait_for_calls("answerCallbackQuery", 1, WAIT).await;
    let toast = answers[0]["text"].as_str().unwrap_or_default();
    assert!(toast.contains("no longer waiting"), "{answers:?}");

    tg.push_text(OWNER, OWNER, "/approve");
    wait_until("/approve is answered", WAIT, || {
        tg.sent_texts()
            .iter()
            .any(|t| t.contains("No approval is waiting"))
    })
    .await;
    assert!(!target.exists(), "the cancelled call ran");
    assert_eq!(model.requests().len(), 1, "the stopped turn went on");
    daemon.stop();
}
