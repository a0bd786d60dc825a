//! The shapes real OpenAI-compatible servers answer in, through `ethan chat -m` and through
//! Telegram (`ethan run`) against the scripted model, each answer streamed and whole: an
//! integer call id with `arguments` as an object, the legacy `function_call` field, a tool call
//! written as `<tool_call>` text or as a fenced JSON block, a repeated id; and a follow-up
//! request whose assistant message carries `content: null` is refused with HTTP 500, as
//! llama-cpp-python's server does. Every turn must end with the tool run and a real answer,
//! and no call written as text may reach the person: not on the terminal, not in a Telegram
//! draft, edit or message. A 400 is tried once; a 408 is tried again.

use crate::support::model::{completion, text_completion};
use crate::support::{run_cli, wait_until, Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

fn model_config(home: &TestHome, model: &ScriptedModel) {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-shapes\n  name: test-model\n",
        model.base_url()
    ));
}

/// The second answer: refuses (500) a request whose assistant message has `content: null`
/// beside its tool calls, else answers with every tool result it was given.
fn strict_follow_up() -> Step {
    Step::custom(|req: &Value| {
        let messages = req["messages"].as_array().cloned().unwrap_or_default();
        let null_beside_calls = messages.iter().any(|m| {
            m["role"] == "assistant" && m.get("tool_calls").is_some() && m["content"].is_null()
        });
        if null_beside_calls {
            return (
                500,
                json!({"error": {"message": "Internal Server Error: content must be a string"}}),
            );
        }
        let results: Vec<String> = messages
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap_or("").to_string())
            .collect();
        (
            200,
            text_completion(req, &format!("tools said: {}", results.join(" | "))),
        )
    })
}

/// Run one `ethan chat -m` turn whose first answer is `message`, streamed when `streamed`
/// (else a whole completion: the fake refuses `stream`); the turn's stdout and the model.
/// Neither stdout nor stderr may show a call written as text.
async fn turn_with(
    message: Value,
    finish_reason: &'static str,
    streamed: bool,
) -> (String, ScriptedModel) {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::custom(move |req| (200, completion(req, message.clone(), finish_reason))),
        strict_follow_up(),
    ])
    .await;
    model.set_refuse_stream(!streamed);
    model_config(&home, &model);
    let out = tokio::task::spawn_blocking(move || run_cli(&home, &["chat", "-m", "go"], None))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    for shown in [&stdout, &stderr] {
        assert!(
            !shown.contains("<tool_call>") && !shown.contains("\"arguments\""),
            "a call written as text was shown (streamed: {streamed}): {shown}"
        );
    }
    (stdout, model)
}

/// Every shape, each with the text its tool call echoes.
fn shapes() -> Vec<(&'static str, Value, &'static str)> {
    let shell = |cmd: &str| json!({"command": cmd});
    vec![
        (
            "shape-int-id",
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": 7, "type": "function",
                 "function": {"name": "shell", "arguments": shell("echo shape-int-id")}}]}),
            "tool_calls",
        ),
        (
            "shape-legacy",
            json!({"role": "assistant", "content": null, "function_call":
                {"name": "shell", "arguments": shell("echo shape-legacy").to_string()}}),
            "function_call",
        ),
        (
            "shape-text",
            json!({"role": "assistant", "content": format!(
                "<tool_call>\n{}\n</tool_call>",
                json!({"name": "shell", "arguments": shell("echo shape-text")}))}),
            "stop",
        ),
        (
            "shape-fenced",
            json!({"role": "assistant", "content": format!(
                "```json\n{}\n```\n",
                json!({"name": "shell", "arguments": shell("echo shape-fenced")}))}),
            "stop",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn every_shape_runs_its_tool_streamed_and_whole_on_the_terminal() {
    for streamed in [true, false] {
        for (marker, message, finish) in shapes() {
            let (stdout, model) = turn_with(message, finish, streamed).await;
            assert!(
                stdout.contains("tools said:") && stdout.contains(marker),
                "{marker} (streamed: {streamed}): {stdout}"
            );
            let follow = model.requests().last().cloned().unwrap();
            assert_eq!(
                follow["stream"].as_bool().unwrap_or(false),
                streamed,
                "{marker}"
            );
            if marker == "shape-int-id" {
                // The follow-up names the call by its id as text, with `content: ""`.
                let assistant = follow["messages"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|m| m["role"] == "assistant")
                    .cloned()
                    .unwrap();
                assert_eq!(assistant["content"], json!(""));
                assert_eq!(assistant["tool_calls"][0]["id"], json!("7"));
                assert_eq!(
                    assistant["tool_calls"][0]["function"]["arguments"],
                    json!(r#"{"command":"echo shape-int-id"}"#)
                );
            }
            model.assert_protocol_ok();
        }
    }
}

/// Whether `chat` was shown the follow-up answer naming `marker` (a message, or an edit of one).
fn answered(tg: &FakeTelegram, chat: i64, marker: &str) -> bool {
    ["sendMessage", "editMessageText"].iter().any(|m| {
        tg.calls(m).iter().any(|c| {
            let text = c["text"].as_str().unwrap_or_default();
            c["chat_id"] == json!(chat) && text.contains("tools said:") && text.contains(marker)
        })
    })
}

/// Every shape through Telegram: a DM from the owner per shape (the answer streams as a draft),
/// and the shapes written as text once more in a group (the answer streams as edits of one
/// message), each answered with the tool's output; no draft, edit or message shows a call
/// written as text.
#[tokio::test(flavor = "multi_thread")]
async fn every_shape_runs_its_tool_streamed_and_whole_on_telegram() {
    const OWNER: i64 = 5150;
    const GROUP: i64 = -100515;
    const BOT: &str = "@ethan_test_bot";
    for streamed in [true, false] {
        let home = TestHome::new();
        let tg = FakeTelegram::start().await;
        // (chat, marker, message, finish reason): every shape in the DM, the text ones in the group.
        let mut turns = Vec::new();
        for (marker, message, finish) in shapes() {
            turns.push((OWNER, marker, message, finish));
        }
        for (marker, message, finish) in shapes() {
            if finish == "stop" {
                turns.push((GROUP, marker, message, finish));
            }
        }
        let mut steps = Vec::new();
        for (_, _, message, finish) in turns.clone() {
            steps.push(Step::custom(move |req| {
                (200, completion(req, message.clone(), finish))
            }));
            steps.push(strict_follow_up());
        }
        let model = ScriptedModel::start(steps).await;
        model.set_refuse_stream(!streamed);
        // Slow enough for drafts and edits to show the answer while it streams.
        model.set_chunk_gap(Duration::from_millis(150));
        home.write_config(&format!(
            "model:\n  base_url: {}\n  api_key: sk-shapes\n  name: test-model\n\
             channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n\
             owners: [\"telegram:{OWNER}\"]\n",
            model.base_url(),
            tg.token(),
            tg.base_url()
        ));
        let mut daemon = Daemon::start(&home);
        for (i, (chat, marker, _, _)) in turns.iter().enumerate() {
            if *chat == OWNER {
                tg.push_text(OWNER, OWNER, &format!("go {i}"));
            } else {
                let id = tg.next_update_id();
                let text = format!("{BOT} go {i}");
                tg.push_update(json!({"update_id": id, "message": {
                    "message_id": id, "date": crate::support::unix_now(),
                    "chat": {"id": GROUP, "type": "supergroup", "title": "team"},
                    "from": {"id": OWNER, "is_bot": false, "first_name": "O"},
                    "text": text,
                    "entities": [{"type": "mention", "offset": 0, "length": BOT.len()}]}}));
            }
            wait_until(
                &format!("the answer of {marker} in {chat} (streamed: {streamed})"),
                Duration::from_secs(30),
                || answered(&tg, *chat, marker),
            )
            .await;
        }
        for method in ["sendMessage", "sendMessageDraft", "editMessageText"] {
            for call in tg.calls(method) {
                let text = call["text"].as_str().unwrap_or_default();
                assert!(
                    !text.contains("tool_call") && !text.contains("\"arguments\""),
                    "{method} showed a call written as text (streamed: {streamed}): {text}"
                );
            }
        }
        if streamed {
            for method in ["sendMessageDraft", "editMessageText"] {
                assert!(
                    !tg.calls(method).is_empty(),
                    "{method}: {}",
                    tg.describe_calls()
                );
            }
        }
        model.assert_protocol_ok();
        daemon.stop();
        home.assert_no_panic();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn repeated_ids_are_made_unique() {
    let call = |cmd: &str| {
        json!({"id": "0", "type": "function",
               "function": {"name": "shell", "arguments": json!({"command": cmd}).to_string()}})
    };
    let (stdout, model) = turn_with(
        json!({"role": "assistant", "content": null,
               "tool_calls": [call("echo first-call"), call("echo second-call")]}),
        "tool_calls",
        true,
    )
    .await;
    assert!(
        stdout.contains("first-call") && stdout.contains("second-call"),
        "{stdout}"
    );
    model.assert_protocol_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_400_is_tried_once_and_a_408_again() {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![Step::status(
        400,
        json!({"error": {"message": "messages[1]: invalid role", "type": "invalid_request_error"}}),
    )])
    .await;
    model_config(&home, &model);
    let out = tokio::task::spawn_blocking(move || run_cli(&home, &["chat", "-m", "go"], None))
        .await
        .unwrap();
    assert!(!out.status.success());
    assert_eq!(model.requests().len(), 1, "{}", model.describe());

    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::status(408, json!({"error": {"message": "request timeout"}})),
        Step::text("after the timeout"),
    ])
    .await;
    model_config(&home, &model);
    let out = tokio::task::spawn_blocking(move || run_cli(&home, &["chat", "-m", "go"], None))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("after the timeout"),
        "{stdout}"
    );
    assert_eq!(model.requests().len(), 2);
}
