//! What a turn leaves in the conversation when it does not end with an answer, through the real
//! daemon and the fake Bot API: the calls that ran keep their real results (their effects
//! happened), whether the owner stopped the turn while a later call was running or the model
//! endpoint failed after the calls.

use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const OWNER: i64 = 218485655;
const WAIT: Duration = Duration::from_secs(30);

fn config(home: &TestHome, tg: &FakeTelegram, model: &ScriptedModel) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
}

/// Start with the daemon's own temp directory, so the workspace is not inside the system temp
/// directory (where file writes need no consent).
fn start(home: &TestHome) -> Daemon {
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    Daemon::start_with_env(home, &[("TMPDIR", tmp.to_str().unwrap())])
}

/// The approve-once callback data of approval keyboard number `n` (1-based) sent so far.
async fn approval(tg: &FakeTelegram, n: usize) -> String {
    let deadline = Instant::now() + WAIT;
    loop {
        let keyboards: Vec<String> = tg
            .sent_messages()
            .iter()
            .filter_map(|m| m["reply_markup"]["inline_keyboard"][0][0]["callback_data"].as_str())
            .map(str::to_string)
            .collect();
        if let Some(k) = keyboards.get(n - 1) {
            return k.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no approval #{n}:\n{}",
            tg.describe_calls()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The content of the tool message answering `id` in a model request.
fn tool_result(req: &Value, id: &str) -> String {
    req["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no result for {id} in {req}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_turn_stopped_after_a_file_write_ran_keeps_its_result_in_the_history() {
    let home = TestHome::new();
    let written = home.path().join("workspace").join("written.txt");
    let late = home.path().join("workspace").join("late.txt");
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_calls(&[
            (
                "c1",
                "file_write",
                &json!({"path": "written.txt", "content": "done"}).to_string(),
            ),
            (
                "c2",
                "shell",
                &json!({"command": "sleep 20 && touch late.txt"}).to_string(),
            ),
        ]),
        Step::text("noted"),
    ])
    .await;
    config(&home, &tg, &model);
    tg.push_text(OWNER, OWNER, "write the file, then wait");
    let mut daemon = start(&home);
    // The owner approves the write, then the command; the command starts its 20 s sleep.
    let first = approval(&tg, 1).await;
    tg.push_update(FakeTelegram::callback_update(900, OWNER, OWNER, &first));
    let second = approval(&tg, 2).await;
    assert!(
        written.exists(),
        "the approved write ran before the command was asked for"
    );
    tg.push_update(FakeTelegram::callback_update(901, OWNER, OWNER, &second));
    tg.wait_for_calls("answerCallbackQuery", 2, WAIT).await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    tg.push_text(OWNER, OWNER, "/stop");
    let deadline = Instant::now() + WAIT;
    while !tg.sent_texts().iter().any(|t| t == "Stopped.") {
        assert!(Instant::now() < deadline, "{}", tg.describe_calls());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // The next turn's request tells the model what really happened.
    tg.push_text(OWNER, OWNER, "did the file get written?");
    model.wait_for_requests(2, WAIT).await;
    let req = model.requests()[1].clone();
    let wrote = tool_result(&req, "c1");
    assert!(
        !wrote.starts_with("Error") && wrote.contains("written.txt"),
        "the write ran, but the history says: {wrote}"
    );
    let stopped = tool_result(&req, "c2");
    assert!(stopped.starts_with("Error (stopped)"), "{stopped}");
    model.assert_protocol_ok();
    // The stopped command was aborted with its turn, and the audit log has a row for it.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!late.exists());
    let kinds: Vec<(String, Option<String>)> =
        crate::support::store::rows(&home, "SELECT tool, error_kind FROM audit ORDER BY id", &[])
            .into_iter()
            .map(|r| (r[0].clone().unwrap_or_default(), r[1].clone()))
            .collect();
    assert!(
        kinds.contains(&("file_write".into(), None))
            && kinds.contains(&("shell".into(), Some("stopped".into()))),
        "{kinds:?}"
    );
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_turn_keeps_the_calls_that_ran() {
    let home = TestHome::new();
    let written = home.path().join("workspace").join("kept.txt");
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "c1",
            "file_write",
            &json!({"path": "kept.txt", "content": "done"}).to_string(),
        ),
        // The endpoint then fails, retries included.
        Step::server_error(),
        Step::server_error(),
        Step::server_error(),
        Step::server_error(),
        Step::text("it is there"),
    ])
    .await;
    config(&home, &tg, &model);
    tg.push_text(OWNER, OWNER, "write kept.txt");
    let mut daemon = start(&home);
    let first = approval(&tg, 1).await;
    tg.push_update(FakeTelegram::callback_update(900, OWNER, OWNER, &first));
    model.wait_for_requests(5, WAIT).await;
    assert!(written.exists());
    // The failure was told to the owner.
    tg.wait_for_sent(2, WAIT).await;

    tg.push_text(OWNER, OWNER, "so, is it written?");
    model.wait_for_requests(6, WAIT).await;
    let req = model.requests()[5].clone();
    let wrote = tool_result(&req, "c1");
    assert!(
        !wrote.starts_with("Error") && wrote.contains("kept.txt"),
        "{wrote}"
    );
    model.assert_protocol_ok();
    daemon.stop();
}
