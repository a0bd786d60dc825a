//! Scheduled jobs end to end: the scripted model creates a job from a chat (the owner approves
//! the creation), `ethan jobs run <id>` runs it in its own process after the daemon has stopped,
//! and the digest reaches that chat through the fake platform — Telegram and Lark.

use crate::support::lark::{self, FakeLark};
use crate::support::{run_cli, Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const OWNER: i64 = 218485655;
const LARK_OWNER: &str = "ou_84aad35d084aa403a838cf73ee18467";
const LARK_GROUP: &str = "oc_5ce6d572455d361153b7xx51da133945";
const WAIT: Duration = Duration::from_secs(30);

/// (status, delivery, delivered message id) of the job's newest run.
fn last_run(home: &TestHome, job: &str) -> (String, String, Option<String>) {
    let r = crate::support::store::row(
        home,
        "SELECT status, delivery, delivered_message_id FROM job_runs WHERE job_id = ?1 \
         ORDER BY id DESC LIMIT 1",
        &[job],
    )
    .expect("a run was recorded");
    (
        r[0].clone().unwrap_or_default(),
        r[1].clone().unwrap_or_default(),
        r[2].clone(),
    )
}

/// The state of job `id` ("" when there is none).
fn job_state(home: &TestHome, id: &str) -> String {
    crate::support::store::value(home, "SELECT state FROM jobs WHERE id = ?1", &[id])
        .unwrap_or_default()
}

fn create_args() -> String {
    json!({
        "job_id": "morning",
        "prompt": "Summarise what happened today",
        "cron": "0 9 * * 1-5",
        "timezone": "Asia/Shanghai",
        "title": "Morning digest",
        "allowed_tools": ["file_write"],
    })
    .to_string()
}

/// The model: create the job, confirm; then, for the run, look at the job list (tool noise
/// that must not be posted) and answer.
fn script() -> Vec<Step> {
    vec![
        Step::tool_call("c1", "schedule_create", &create_args()),
        Step::echo_last_tool_result("done: "),
        Step::tool_call("r1", "schedule_list", "{}"),
        Step::text("Three things happened today."),
    ]
}

/// Checks on the model request of the unattended run.
fn assert_unattended_request(model: &ScriptedModel) {
    let reqs = model.requests();
    assert_eq!(reqs.len(), 4, "{}", model.describe());
    let run = &reqs[2];
    let user = run["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    assert!(
        user.contains("scheduled job `morning`") && user.contains("posted for you"),
        "{user}"
    );
    assert!(user.ends_with("Summarise what happened today"), "{user}");
    let tools = run["tools"].to_string();
    assert!(
        !tools.contains("\"shell\""),
        "an unattended run was offered the shell: {tools}"
    );
    model.assert_protocol_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_created_in_a_telegram_dm_posts_its_digest_there() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(script()).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n\
         owners: [\"telegram:{OWNER}\"]\ntimezone: Europe/Berlin\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    tg.push_text(
        OWNER,
        OWNER,
        "every weekday at 9 send me a summary of the day",
    );
    let mut daemon = Daemon::start(&home);

    // The owner is asked, and the request shows what the job may do when it runs.
    let sent = tg.wait_for_sent(1, WAIT).await;
    let ask = sent[0]["text"].as_str().unwrap();
    assert!(ask.contains("Approval needed"), "{ask}");
    assert!(ask.contains("file_write"), "allowed tools not shown: {ask}");
    assert!(ask.contains(&format!("telegram:{OWNER}")), "{ask}");
    let approve = sent[0]["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(approve.starts_with("ap:o:"), "{approve}");
    tg.push_update(FakeTelegram::callback_update(900, OWNER, OWNER, &approve));
    let sent = tg.wait_for_sent(2, WAIT).await;
    let confirm = sent[1]["text"].as_str().unwrap();
    assert!(
        confirm.contains("Created job") && confirm.contains("morning"),
        "{confirm}"
    );

    let list = run_cli(&home, &["jobs", "list"], None);
    let text = String::from_utf8_lossy(&list.stdout);
    assert!(list.status.success(), "{list:?}");
    assert!(
        text.contains("morning")
            && text.contains("0 9 * * 1-5")
            && text.contains("Asia/Shanghai")
            && text.contains("never ran")
            && text.contains(&format!("telegram:{OWNER}")),
        "{text}"
    );

    // Delivery does not need the daemon.
    daemon.stop();
    let before = tg.sent_messages().len();
    let out = run_cli(&home, &["jobs", "run", "morning"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("delivered to"), "{stderr}");
    let sent = tg.wait_for_sent(before + 1, WAIT).await;
    assert_eq!(sent.len(), before + 1, "only the digest is posted");
    let digest = &sent[before];
    assert_eq!(digest["chat_id"], json!(OWNER));
    let html = digest["text"].as_str().unwrap();
    assert!(
        html.contains("<b>Morning digest</b>") && html.contains("Three things happened today."),
        "{html}"
    );
    assert!(
        !html.contains("scheduled job(s)"),
        "tool output leaked: {html}"
    );
    assert_unattended_request(&model);
    let (status, delivery, message_id) = last_run(&home, "morning");
    assert_eq!((status.as_str(), delivery.as_str()), ("ok", "delivered"));
    assert!(message_id.is_some());

    let list = run_cli(&home, &["jobs", "list"], None);
    assert!(String::from_utf8_lossy(&list.stdout).contains("ok, delivered"));
    let out = run_cli(&home, &["jobs", "remove", "morning"], None);
    assert!(out.status.success());
    let out = run_cli(&home, &["jobs", "run", "morning"], None);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no job"));
}

/// The request id in the newest approval card the fake received.
fn approval_id(fake: &FakeLark) -> Option<String> {
    fn find(v: &Value) -> Option<String> {
        match v {
            Value::Object(m) => m
                .get("ethan_approval")
                .and_then(Value::as_str)
                .map(str::to_string)
                .or_else(|| m.values().find_map(find)),
            Value::Array(a) => a.iter().find_map(find),
            _ => None,
        }
    }
    fake.messages().iter().rev().find_map(|m| find(&m.content))
}

#[tokio::test(flavor = "multi_thread")]
async fn a_job_created_in_a_lark_group_posts_its_digest_there() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(script()).await;
    // The approval card and the answer as separate messages, without a streaming card.
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n{}owners: [\"lark:{LARK_OWNER}\"]\n",
        model.base_url(),
        fake.channel_yaml("    streaming: off\n"),
    ));
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    fake.push_event(&lark::group_mention(
        LARK_GROUP,
        LARK_OWNER,
        "every weekday at 9 post a summary of the day here",
    ));

    let sent = fake.wait_for_messages(1, WAIT).await;
    assert!(
        sent[0].content.to_string().contains("file_write"),
        "allowed tools not shown: {}",
        sent[0].content
    );
    let id = approval_id(&fake).expect("an approval card");
    let seq = fake.push_card_action(
        json!({"ethan_approval": id, "choice": "o"}),
        LARK_OWNER,
        LARK_GROUP,
    );
    fake.wait_ack(seq, WAIT).await;
    let sent = fake.wait_for_messages(2, WAIT).await;
    assert!(
        sent[1].card_markdown().contains("Created job"),
        "{}",
        fake.describe()
    );
    daemon.stop();

    let before = fake.messages().len();
    let out = run_cli(&home, &["jobs", "run", "morning"], None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let sent = fake.wait_for_messages(before + 1, WAIT).await;
    assert_eq!(sent.len(), before + 1, "only the digest is posted");
    let digest = &sent[before];
    assert_eq!(digest.kind, "create");
    assert_eq!(digest.receive_id.as_deref(), Some(LARK_GROUP));
    assert_eq!(digest.msg_type, "interactive");
    let md = digest.card_markdown();
    assert!(
        md.contains("Morning digest") && md.contains("Three things happened today."),
        "{md}"
    );
    assert_unattended_request(&model);
    let (status, delivery, message_id) = last_run(&home, "morning");
    assert_eq!((status.as_str(), delivery.as_str()), ("ok", "delivered"));
    assert_eq!(message_id.as_deref(), Some(digest.message_id.as_str()));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_daemon_fires_a_one_shot_job_at_its_time() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    // Far enough ahead for the approval round trip; the daemon fires it within a second of it.
    let at = (chrono::Utc::now() + chrono::Duration::seconds(6))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "c1",
            "schedule_create",
            &json!({"job_id": "soon", "prompt": "Say hello", "at": at, "title": "Hello"})
                .to_string(),
        ),
        Step::echo_last_tool_result("done: "),
        Step::text("Hello from the scheduler."),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n\
         owners: [\"telegram:{OWNER}\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    tg.push_text(OWNER, OWNER, "in a few seconds, say hello");
    let mut daemon = Daemon::start(&home);
    let sent = tg.wait_for_sent(1, WAIT).await;
    let approve = sent[0]["reply_markup"]["inline_keyboard"][0][0]["callback_data"]
        .as_str()
        .unwrap()
        .to_string();
    tg.push_update(FakeTelegram::callback_update(900, OWNER, OWNER, &approve));
    tg.wait_for_sent(2, WAIT).await;
    let sent = tg.wait_for_sent(3, WAIT).await;
    let html = sent[2]["text"].as_str().unwrap();
    assert!(
        html.contains("<b>Hello</b>") && html.contains("Hello from the scheduler."),
        "{html}"
    );
    assert_eq!(sent[2]["chat_id"], json!(OWNER));
    // The run is recorded right after the send returns.
    crate::support::wait_until(
        "the run is recorded as delivered and the job done",
        WAIT,
        || {
            let (status, delivery, _) = last_run(&home, "soon");
            let state = job_state(&home, "soon");
            (status.as_str(), delivery.as_str(), state.as_str()) == ("ok", "delivered", "done")
        },
    )
    .await;
    let state = job_state(&home, "soon");
    assert_eq!(state, "done", "a one-shot job is done after it fired");
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(tg.sent_messages().len(), 3, "it fired once");
    model.assert_protocol_ok();
    daemon.stop();
}
