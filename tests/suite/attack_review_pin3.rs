//! Attacks on the pin of an approval to the file the owner saw (`CallPlan::identity`, checked
//! again right before an approved call runs), through the real daemon, the fake Bot API and the
//! scripted model: something beside the turn flips a link in the window between that check and
//! the moment the call opens the file.

use super::attack_approval_swap::{repoint, setup, start, wait_sent, OWNER, SSH_KEY};
use crate::support::{FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The model calls `tool` with `args(i)` (each different, so none is refused as a replay; naming `~/notes/link`, which leads to `~/.ssh/config`
/// while each question is asked) `calls` times; the owner says yes to each question that does
/// not name the key, and while the approved call goes on a thread flips the link between the
/// key and the config. Returns every tool result the model was given.
async fn flipped_after_the_yes(
    tool: &str,
    args: impl Fn(usize) -> serde_json::Value,
    calls: usize,
) -> Vec<String> {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let mut steps: Vec<Step> = (0..calls)
        .map(|i| Step::tool_call(&format!("r{i}"), tool, &args(i).to_string()))
        .collect();
    steps.push(Step::text("done: flipped"));
    let model = ScriptedModel::start(steps).await;
    let user_home = setup(&home, &tg, &model);
    let mut daemon = start(&home, &user_home);
    let link = user_home.join("notes/link");
    let (config, key) = (user_home.join(".ssh/config"), user_home.join(".ssh/id_rsa"));
    let mut answered: Vec<String> = Vec::new();
    tg.push_text(OWNER, OWNER, "read my notes link, again and again");
    for i in 0..calls {
        let deadline = Instant::now() + Duration::from_secs(60);
        let (once, text) = loop {
            let fresh = tg.sent_messages().iter().find_map(|m| {
                let data = m["reply_markup"]["inline_keyboard"][0]
                    .as_array()?
                    .iter()
                    .filter_map(|b| b["callback_data"].as_str())
                    .find(|d| d.starts_with("ap:o:") && !answered.iter().any(|a| a == d))?
                    .to_string();
                Some((data, m["text"].as_str().unwrap_or_default().to_string()))
            });
            if let Some(found) = fresh {
                break found;
            }
            assert!(Instant::now() < deadline, "no question {i}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        answered.push(once.clone());
        let asked = model.requests().len();
        if text.contains("id_rsa") {
            // The question named the key: the owner says no.
            let id = tg.next_update_id();
            let no = once.replacen("ap:o:", "ap:d:", 1);
            tg.push_update(FakeTelegram::callback_update(id, OWNER, OWNER, &no));
        } else {
            let stop = Arc::new(AtomicBool::new(false));
            let flipper = {
                let (stop, link) = (stop.clone(), link.clone());
                let (config, key) = (config.clone(), key.clone());
                std::thread::spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        repoint(&link, &key);
                        repoint(&link, &config);
                    }
                })
            };
            let id = tg.next_update_id();
            tg.push_update(FakeTelegram::callback_update(id, OWNER, OWNER, &once));
            let deadline = Instant::now() + Duration::from_secs(60);
            while model.requests().len() == asked && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
            stop.store(true, Ordering::Relaxed);
            flipper.join().unwrap();
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        while model.requests().len() == asked && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        repoint(&link, &config);
        assert!(model.requests().len() > asked, "no answer to {i}");
    }
    wait_sent(&tg, "done: flipped").await;
    let mut results = std::collections::BTreeMap::new();
    for req in model.requests() {
        for m in req["messages"].as_array().into_iter().flatten() {
            if m["role"] == "tool" {
                let id = m["tool_call_id"].as_str().unwrap_or_default().to_string();
                results.insert(id, m["content"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    daemon.stop();
    home.assert_no_panic();
    results.into_values().collect()
}

/// An approved shell command naming a protected link (`cat ~/notes/link`, the question says it
/// leads to `~/.ssh/config`): the check right before the run pins the link's inode, but the
/// command opens the name itself when it runs, some milliseconds later. A link flipped to the
/// key in that window hands the key to the model.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "hole: an approved shell command opens the names it was approved for by name after \
            the re-check; a link flipped in between reads ~/.ssh/id_rsa into the model"]
async fn a_link_flipped_after_the_recheck_never_hands_the_key_to_a_shell_command() {
    let results = flipped_after_the_yes(
        "shell",
        |i| json!({"command": format!("cat ~/notes/link; echo {i}")}),
        12,
    )
    .await;
    let leaked = results.iter().filter(|r| r.contains(SSH_KEY)).count();
    assert_eq!(
        leaked,
        0,
        "the key reached the model in {leaked} of {} approved commands, e.g. {:?}",
        results.len(),
        results.iter().find(|r| r.contains(SSH_KEY))
    );
}
