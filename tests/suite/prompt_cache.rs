//! The prompt cache across turns, through the real daemon and its HTTP gateway: a conversation's
//! requests start with the bytes of the one before (nothing that changes per turn comes before
//! the newest messages: the time is in each person's message, not in the system prompt; the
//! tools keep their order; the `messages` are written last), every request of a conversation
//! names it with one `prompt_cache_key`, and with Anthropic every request carries the same
//! three breakpoints and the cache reads the provider reports show in `ethan usage`.

use crate::support::anthropic::{AStep, FakeAnthropic};
use crate::support::daemon::gateway_addr;
use crate::support::gateway::{chat, final_text};
use crate::support::prompt_cache::PromptCache;
use crate::support::{run_cli, Daemon, ScriptedModel, Step, TestHome};
use serde_json::Value;
use std::time::Duration;

const TOKEN: &str = "test-gateway-token-0123456789";
const WAIT: Duration = Duration::from_secs(30);
const TURNS: usize = 20;

/// The daemon with a temp dir of its own.
fn start(home: &TestHome) -> Daemon {
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    Daemon::start_with_env(home, &[("TMPDIR", tmp.to_str().unwrap())])
}

/// The length of the longest common prefix of `a` and `b`.
fn shared_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// `turns` messages in one gateway session; the final text of each.
async fn converse(home: &TestHome, turns: usize) -> Vec<String> {
    let mut daemon = start(home);
    let base = format!("http://{}", gateway_addr(home, WAIT).await);
    let mut answers = Vec::new();
    for i in 0..turns {
        let events = chat(
            &base,
            TOKEN,
            "cache",
            &format!("message {i}"),
            WAIT,
            |_, _| {},
        )
        .await;
        answers.push(final_text(&events));
    }
    daemon.stop();
    answers
}

#[tokio::test(flavor = "multi_thread")]
async fn each_request_of_a_conversation_starts_with_the_bytes_of_the_one_before() {
    let home = TestHome::new();
    std::fs::create_dir_all(home.path().join("workspace")).unwrap();
    home.write_file("workspace/notes.txt", "the notes\n");
    // Every fifth turn reads a file first: two requests in that turn.
    let mut steps = Vec::new();
    for i in 0..TURNS {
        if i % 5 == 4 {
            steps.push(Step::tool_call(
                &format!("c{i}"),
                "file_read",
                r#"{"path": "notes.txt"}"#,
            ));
        }
        steps.push(Step::text(format!("answer {i}")));
    }
    let model = ScriptedModel::start(steps).await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: m\n  prompt_cache_key: always\n\
         timezone: Asia/Shanghai\ngateway:\n  token: {TOKEN}\n",
        model.base_url()
    ));
    let answers = converse(&home, TURNS).await;
    assert_eq!(
        answers.last().map(String::as_str),
        Some("answer 19"),
        "{answers:?}"
    );
    model.assert_protocol_ok();

    let raw = model.raw_requests();
    assert_eq!(
        raw.len(),
        TURNS + TURNS / 5,
        "one request per turn, two with a tool call"
    );
    for (i, pair) in raw.windows(2).enumerate() {
        let (prev, next) = (&pair[0], &pair[1]);
        let n = shared_prefix(prev, next);
        assert!(
            n * 10 >= prev.len() * 9,
            "request #{} shares {n} of the {} bytes of the one before:\nbefore: {}\nafter:  {}",
            i + 1,
            prev.len(),
            String::from_utf8_lossy(&prev[n.saturating_sub(80)..(n + 80).min(prev.len())]),
            String::from_utf8_lossy(&next[n.saturating_sub(80)..(n + 80).min(next.len())]),
        );
    }
    let bodies = model.requests();
    let keys: Vec<&Value> = bodies.iter().map(|b| &b["prompt_cache_key"]).collect();
    assert!(
        keys[0].as_str().is_some_and(|k| k.starts_with("ethan-")),
        "{:?}",
        keys[0]
    );
    assert!(
        keys.iter().all(|k| *k == keys[0]),
        "one key per conversation: {keys:?}"
    );
    // The time is in each person's message (in the configured zone), not in the system prompt.
    let last = bodies.last().unwrap()["messages"].as_array().unwrap();
    let users: Vec<&str> = last
        .iter()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect();
    assert_eq!(users.len(), TURNS);
    for (i, u) in users.iter().enumerate() {
        assert!(
            u.starts_with('[') && u.ends_with(&format!("CST] message {i}")),
            "{u}"
        );
    }
    let system = last[0]["content"].as_str().unwrap();
    assert!(
        !system.contains("CST") && !system.contains("UTC"),
        "{system}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_conversation_with_anthropic_reads_its_prefix_from_the_cache_every_turn() {
    let key = "sk-ant-api03-test-key-0123456789";
    let turns = 6;
    let fake = FakeAnthropic::start(
        key,
        (0..turns)
            .map(|i| AStep::text(format!("answer {i}")))
            .collect(),
    )
    .await;
    fake.simulate_prompt_cache();
    let home = TestHome::new();
    home.write_config(&format!(
        "model:\n  provider: anthropic\n  base_url: {}\n  api_key: {key}\n  name: claude-test\n  \
         max_tokens: 1024\ngateway:\n  token: {TOKEN}\n",
        fake.base_url()
    ));
    let answers = converse(&home, turns).await;
    assert_eq!(
        answers.last().map(String::as_str),
        Some("answer 5"),
        "{answers:?}"
    );
    fake.assert_ok();

    let bodies = fake.bodies();
    assert_eq!(bodies.len(), turns);
    for (i, b) in bodies.iter().enumerate() {
        assert_eq!(
            breakpoints(b),
            ["last tool", "system", "last message"],
            "request #{i}"
        );
    }
    // What the provider reported reading, replayed on the same requests.
    let mut cache = PromptCache::default();
    let usage: Vec<_> = bodies.iter().map(|b| cache.account(b)).collect();
    assert_eq!(usage[0].read, 0);
    assert!(
        usage[1..].iter().all(|u| u.read > 0 && u.input < u.read),
        "{usage:?}"
    );
    let read: u64 = usage.iter().map(|u| u.read).sum();
    let input: u64 = usage.iter().map(|u| u.input + u.read + u.write).sum();

    let out = tokio::task::block_in_place(|| run_cli(&home, &["usage", "--by", "model"], None));
    let table = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{table}");
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap()
        .split("  ")
        .filter(|c| !c.is_empty())
        .collect();
    let row: Vec<String> = table
        .lines()
        .find(|l| l.starts_with("claude-test"))
        .unwrap_or_else(|| panic!("no row for the model:\n{table}"))
        .split_whitespace()
        .map(|c| c.replace(',', ""))
        .collect();
    let cell = |name: &str| {
        let i = header.iter().position(|h| h.trim() == name).unwrap();
        row[i].clone()
    };
    assert_eq!(cell("CACHE READ"), read.to_string(), "{table}");
    assert_eq!(cell("INPUT"), input.to_string(), "{table}");
    let hit = ((read as f64) * 100.0 / input as f64).round();
    assert_eq!(cell("CACHE HIT"), format!("{hit}%"), "{table}");
}

/// Where `body`'s `cache_control` breakpoints are: on its last tool, a system block, the last
/// message's last block, or elsewhere.
fn breakpoints(body: &Value) -> Vec<&'static str> {
    let marked = |b: &Value| b.get("cache_control").is_some();
    let mut out = Vec::new();
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    for (i, t) in tools.iter().enumerate() {
        if marked(t) {
            out.push(if i + 1 == tools.len() {
                "last tool"
            } else {
                "another tool"
            });
        }
    }
    for b in body["system"].as_array().into_iter().flatten() {
        if marked(b) {
            out.push("system");
        }
    }
    let messages = body["messages"].as_array().cloned().unwrap_or_default();
    for (i, m) in messages.iter().enumerate() {
        let blocks = m["content"].as_array().cloned().unwrap_or_default();
        for (j, b) in blocks.iter().enumerate() {
            if marked(b) {
                let last = i + 1 == messages.len() && j + 1 == blocks.len();
                out.push(if last {
                    "last message"
                } else {
                    "another message"
                });
            }
        }
    }
    out
}
