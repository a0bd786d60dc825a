//! The Anthropic Messages provider through the real daemon (`ethan run` with the HTTP gateway,
//! and `ethan chat` / `ethan doctor`), against the loopback fake of the Messages API, which
//! validates every request (key and version headers, roles alternating, each `tool_use`
//! answered in the next user message, no empty text, at most 4 cache breakpoints, thinking
//! blocks given back unchanged): two tool uses answered in one message, answers streamed in
//! pieces, a thinking block given back on the next request and the next turn, a `max_tokens`
//! stop, a failed tool, a 400 tried once and a 529 retried, the doctor's model line, and the
//! key kept out of the log.

use crate::support::anthropic::{tool_results, AStep, FakeAnthropic};
use crate::support::daemon::gateway_addr;
use crate::support::gateway::{final_text, names, streamed_text, Event};
use crate::support::{run_cli, Daemon, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const TOKEN: &str = "test-gateway-token-0123456789";
const KEY: &str = "sk-ant-api03-test-key-must-not-leak-7f3a9c";
const WAIT: Duration = Duration::from_secs(30);

/// The config: `model.provider: anthropic`, with the fake's URL and the key in the config
/// when `in_config` is true (else they come from `ANTHROPIC_BASE_URL` / `ANTHROPIC_API_KEY`),
/// and the gateway; and a note in the workspace.
fn write_config(home: &TestHome, fake: &FakeAnthropic, in_config: bool) {
    let endpoint = if in_config {
        format!("  base_url: {}\n  api_key: {KEY}\n", fake.base_url())
    } else {
        String::new()
    };
    home.write_config(&format!(
        "model:\n  provider: anthropic\n{endpoint}  name: claude-test\n  max_tokens: 1024\n\
         gateway:\n  token: {TOKEN}\n"
    ));
    std::fs::create_dir_all(home.path().join("workspace")).unwrap();
    home.write_file("workspace/notes.txt", "anthropic notes 42\n");
}

/// The daemon with a temp dir of its own, and `envs`.
fn start(home: &TestHome, envs: &[(&str, &str)]) -> Daemon {
    let tmp = home.path().join("tmpdir");
    std::fs::create_dir_all(&tmp).unwrap();
    let mut all = vec![("TMPDIR", tmp.to_str().unwrap())];
    all.extend_from_slice(envs);
    Daemon::start_with_env(home, &all)
}

/// `POST /api/chat` with this file's token ([`crate::support::gateway::chat`]).
async fn chat(base: &str, session: &str, message: &str) -> Vec<Event> {
    crate::support::gateway::chat(base, TOKEN, session, message, WAIT, |_, _| {}).await
}

/// Runs the daemon for one or more gateway turns: `turns` of `(session, message)`; the events
/// of each, and the daemon log (after the daemon stopped).
async fn run_turns(
    home: &TestHome,
    envs: &[(&str, &str)],
    turns: &[(&str, &str)],
) -> (Vec<Vec<Event>>, String) {
    let mut daemon = start(home, envs);
    let base = format!("http://{}", gateway_addr(home, WAIT).await);
    let mut all = Vec::new();
    for (session, message) in turns {
        all.push(chat(&base, session, message).await);
    }
    daemon.stop();
    (all, home.log())
}

#[tokio::test(flavor = "multi_thread")]
async fn two_tool_uses_are_answered_in_one_message_with_the_key_and_url_from_the_environment() {
    let home = TestHome::new();
    let fake = FakeAnthropic::start(
        KEY,
        vec![
            AStep::tool_uses(
                Some("Let me look at both."),
                &[
                    ("toolu_a", "file_read", r#"{"path": "notes.txt"}"#),
                    ("toolu_b", "file_list", r#"{"path": "."}"#),
                ],
            ),
            AStep::echo_tool_results("results: "),
        ],
    )
    .await;
    write_config(&home, &fake, false);
    // Everything logged, HTTP clients included: the key must still not show.
    let url = fake.base_url();
    let (turns, log) = run_turns(
        &home,
        &[
            ("ANTHROPIC_API_KEY", KEY),
            ("ANTHROPIC_BASE_URL", &url),
            ("RUST_LOG", "trace"),
        ],
        &[("s1", "read my notes and list the folder")],
    )
    .await;
    let events = &turns[0];
    let text = final_text(events);
    assert!(text.starts_with("results: toolu_a="), "{text}");
    assert!(text.contains("anthropic notes 42"), "{text}");
    assert!(
        text.contains("toolu_b=") && text.contains("notes.txt"),
        "{text}"
    );

    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 2, "{bodies:?}");
    assert_eq!(bodies[0]["model"], "claude-test");
    assert_eq!(bodies[0]["max_tokens"], 1024);
    assert!(bodies[0]["system"][0]["text"].as_str().is_some());
    // The assistant's text and both tool uses in one message; both results in the next.
    let msgs = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    let uses: Vec<&Value> = msgs[1]["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|b| b["type"] == "tool_use")
        .collect();
    assert_eq!(uses.len(), 2);
    assert_eq!(uses[0]["input"], json!({"path": "notes.txt"}));
    let results = tool_results(&bodies[1]);
    assert_eq!(
        results.iter().map(|r| r.0.as_str()).collect::<Vec<_>>(),
        ["toolu_a", "toolu_b"]
    );
    assert!(results.iter().all(|r| !r.2), "{results:?}");
    fake.assert_ok();
    assert!(fake
        .requests()
        .iter()
        .all(|s| s.headers["x-api-key"] == KEY));

    // The attacker's side: the key is nowhere in the log, whatever was logged.
    assert!(!log.is_empty());
    assert!(!log.contains(KEY), "the API key is in the daemon log");
    assert!(
        !log.contains(&KEY[12..]),
        "part of the API key is in the daemon log"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn text_and_tool_input_are_streamed_in_pieces() {
    let home = TestHome::new();
    let answer = "The notes say forty-two, and nothing else worth repeating.";
    let fake = FakeAnthropic::start(
        KEY,
        vec![
            AStep::tool_uses(
                None,
                &[("toolu_r", "file_read", r#"{"path": "notes.txt"}"#)],
            ),
            AStep::text(answer),
        ],
    )
    .await;
    fake.set_gap(Duration::from_millis(20));
    write_config(&home, &fake, true);
    let (turns, _) = run_turns(&home, &[], &[("s1", "what do my notes say?")]).await;
    let events = &turns[0];
    assert_eq!(final_text(events), answer);
    assert_eq!(streamed_text(events), answer);
    let deltas = names(events).iter().filter(|n| **n == "delta").count();
    assert!(deltas >= 5, "{:?}", names(events));
    let bodies = fake.bodies();
    assert!(bodies.iter().all(|b| b["stream"] == true));
    // The input came in pieces and was put together before the tool ran.
    let results = tool_results(&bodies[1]);
    assert_eq!(results.len(), 1);
    assert!(results[0].1.contains("anthropic notes 42"), "{results:?}");
    fake.assert_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_thinking_block_is_given_back_unchanged() {
    let home = TestHome::new();
    let thinking = json!({"type": "thinking",
        "thinking": "The person wants the notes; file_read will do.",
        "signature": "EqQBCkYIARgCKkCsignature+/=0123456789"});
    let fake = FakeAnthropic::start(
        KEY,
        vec![
            AStep::with_thinking(
                thinking["thinking"].as_str().unwrap(),
                thinking["signature"].as_str().unwrap(),
                AStep::tool_uses(
                    Some("Reading."),
                    &[("toolu_t", "file_read", r#"{"path": "notes.txt"}"#)],
                ),
            ),
            AStep::echo_tool_results("read: "),
            AStep::text("Still forty-two."),
        ],
    )
    .await;
    write_config(&home, &fake, true);
    let (turns, _) = run_turns(
        &home,
        &[],
        &[("s1", "think, then read"), ("s1", "and now?")],
    )
    .await;
    assert!(final_text(&turns[0]).contains("anthropic notes 42"));
    assert_eq!(final_text(&turns[1]), "Still forty-two.");
    let bodies = fake.bodies();
    assert_eq!(bodies.len(), 3);
    // Sent back at once, and on the next turn from the stored history.
    for body in &bodies[1..] {
        let assistant = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["role"] == "assistant")
            .unwrap();
        assert_eq!(assistant["content"][0], thinking, "{body}");
        assert_eq!(assistant["content"][1]["text"], "Reading.");
        assert_eq!(assistant["content"][2]["id"], "toolu_t");
    }
    fake.assert_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_max_tokens_stop_carries_the_cut_off_note() {
    let home = TestHome::new();
    let fake = FakeAnthropic::start(KEY, vec![AStep::max_tokens("The first half of an ans")]).await;
    write_config(&home, &fake, true);
    let (turns, _) = run_turns(&home, &[], &[("s1", "write a lot")]).await;
    let text = final_text(&turns[0]);
    assert!(text.starts_with("The first half of an ans"), "{text}");
    assert!(
        text.contains("the answer was cut off at the model's length limit"),
        "{text}"
    );
    fake.assert_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_tool_is_an_error_result() {
    let home = TestHome::new();
    let fake = FakeAnthropic::start(
        KEY,
        vec![
            AStep::tool_uses(
                None,
                &[
                    (
                        "toolu_missing",
                        "file_read",
                        r#"{"path": "no-such-file.txt"}"#,
                    ),
                    ("toolu_ok", "file_read", r#"{"path": "notes.txt"}"#),
                ],
            ),
            AStep::echo_tool_results("got: "),
        ],
    )
    .await;
    write_config(&home, &fake, true);
    let (turns, _) = run_turns(&home, &[], &[("s1", "read the missing file")]).await;
    let text = final_text(&turns[0]);
    assert!(text.contains("toolu_missing[error]="), "{text}");
    let results = tool_results(&fake.bodies()[1]);
    assert_eq!(results.len(), 2);
    assert!(results[0].2, "the missing file is an error: {results:?}");
    assert!(!results[1].2, "{results:?}");
    fake.assert_ok();
}

/// `ethan chat -m go` against `fake`: its output.
async fn chat_cli(home: TestHome, fake: &FakeAnthropic) -> (std::process::Output, TestHome) {
    write_config(&home, fake, true);
    tokio::task::spawn_blocking(move || (run_cli(&home, &["chat", "-m", "go"], None), home))
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_400_is_tried_once_and_a_529_again() {
    let fake = FakeAnthropic::start(
        KEY,
        vec![AStep::error(
            400,
            "invalid_request_error",
            "messages.0: something is wrong",
        )],
    )
    .await;
    let (out, _home) = chat_cli(TestHome::new(), &fake).await;
    assert!(!out.status.success());
    assert_eq!(fake.bodies().len(), 1);

    let fake = FakeAnthropic::start(
        KEY,
        vec![AStep::overloaded(), AStep::text("after the overload")],
    )
    .await;
    let (out, _home) = chat_cli(TestHome::new(), &fake).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("after the overload"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(fake.bodies().len(), 2);
    fake.assert_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn doctor_checks_the_model_against_the_messages_api() {
    let home = TestHome::new();
    let fake = FakeAnthropic::start(KEY, vec![]).await;
    write_config(&home, &fake, true);
    let (out, home) =
        tokio::task::spawn_blocking(move || (run_cli(&home, &["doctor"], None), home))
            .await
            .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let line = stdout
        .lines()
        .find(|l| l.contains("model:"))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.starts_with("ok"), "{line}");
    assert!(line.contains("claude-test"), "{line}");
    assert_eq!(fake.models_calls(), 1);
    assert_eq!(fake.bodies().len(), 0, "the check spends no tokens");
    assert!(!stdout.contains(KEY));

    // Another key: the fake refuses it and the doctor says so.
    let other = FakeAnthropic::start("sk-ant-api03-another-key", vec![]).await;
    write_config(&home, &other, true);
    let out = tokio::task::spawn_blocking(move || run_cli(&home, &["doctor"], None))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let line = stdout.lines().find(|l| l.contains("model:")).unwrap();
    assert!(line.starts_with("FAIL") && line.contains("401"), "{line}");
    assert!(!out.status.success());
}

#[tokio::test(flavor = "multi_thread")]
async fn the_fake_reports_requests_the_api_would_refuse() {
    let thinking = json!({"type": "thinking", "thinking": "hm", "signature": "sig-1"});
    let fake = FakeAnthropic::start(
        KEY,
        vec![
            AStep::with_thinking(
                "hm",
                "sig-1",
                AStep::tool_uses(None, &[("toolu_1", "file_read", "{}")]),
            ),
            AStep::text("a"),
            AStep::text("b"),
        ],
    )
    .await;
    let url = format!("{}/v1/messages", fake.base_url());
    let http = reqwest::Client::new();
    let good = json!({"model": "m", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}]});
    // A valid request: the thinking block and the tool use it came with.
    let r = http
        .post(&url)
        .header("x-api-key", KEY)
        .header("anthropic-version", "2023-06-01")
        .json(&good)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    fake.assert_ok();
    // Wrong key, old version; roles out of order, an empty text, a tool use unanswered, a
    // result without its call, a changed thinking block, five breakpoints.
    let mut changed = thinking.clone();
    changed["signature"] = json!("sig-2");
    let cc = json!({"type": "ephemeral"});
    let bad = json!({"model": "m", "max_tokens": 10,
        "system": [{"type": "text", "text": "s", "cache_control": cc}],
        "tools": [{"name": "a", "input_schema": {}, "cache_control": cc},
                  {"name": "b", "input_schema": {}, "cache_control": cc}],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "", "cache_control": cc}]},
            {"role": "assistant", "content": [changed,
                {"type": "tool_use", "id": "toolu_1", "name": "file_read", "input": {}}]},
            {"role": "user", "content": [{"type": "text", "text": "x", "cache_control": cc}]},
            {"role": "user", "content": [
                {"type": "tool_result", "tool_use_id": "ghost", "content": "x"}]}]});
    http.post(&url)
        .header("x-api-key", "sk-wrong")
        .header("anthropic-version", "2023-01-01")
        .json(&bad)
        .send()
        .await
        .unwrap();
    let v = fake.violations().join("\n");
    for expected in [
        "not the configured one",
        "before 2023-06-01",
        "empty text block",
        "expected assistant",
        "no tool_result for tool_use \"toolu_1\"",
        "tool_result \"ghost\" without its tool_use",
        "never sent",
        "5 cache_control breakpoints",
    ] {
        assert!(v.contains(expected), "{expected:?} not reported in:\n{v}");
    }
}
