//! The shapes real OpenAI-compatible servers answer in, through `ethan chat -m` against the
//! scripted model: an integer call id with `arguments` as an object, the legacy `function_call`
//! field, a tool call written as `<tool_call>` text, a repeated id; and a follow-up request
//! whose assistant message carries `content: null` is refused with HTTP 500, as
//! llama-cpp-python's server does. Every turn must end with the tool run and a real answer.
//! A 400 is tried once; a 408 is tried again.

use crate::support::model::{completion, text_completion};
use crate::support::{run_cli, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};

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

/// Run one `ethan chat -m` turn whose first answer is `message` (a whole completion, not
/// streamed: the fake refuses `stream`); the turn's stdout and the model.
async fn turn_with(message: Value, finish_reason: &'static str) -> (String, ScriptedModel) {
    let home = TestHome::new();
    let model = ScriptedModel::start(vec![
        Step::custom(move |req| (200, completion(req, message.clone(), finish_reason))),
        strict_follow_up(),
    ])
    .await;
    model.set_refuse_stream(true);
    model_config(&home, &model);
    let out = tokio::task::spawn_blocking(move || run_cli(&home, &["chat", "-m", "go"], None))
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "stdout: {stdout}\nstderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    (stdout, model)
}

#[tokio::test(flavor = "multi_thread")]
async fn an_integer_id_and_object_arguments_run_the_tool() {
    let (stdout, model) = turn_with(
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": 7, "type": "function",
             "function": {"name": "shell", "arguments": {"command": "echo shape-int-id"}}}]}),
        "tool_calls",
    )
    .await;
    assert!(
        stdout.contains("tools said:") && stdout.contains("shape-int-id"),
        "{stdout}"
    );
    // The follow-up names the call by its id as text, and the assistant's content is "".
    let follow = model.requests().last().cloned().unwrap();
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
    model.assert_protocol_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_legacy_function_call_runs_the_tool() {
    let (stdout, model) = turn_with(
        json!({"role": "assistant", "content": null, "function_call":
            {"name": "shell", "arguments": "{\"command\": \"echo shape-legacy\"}"}}),
        "function_call",
    )
    .await;
    assert!(stdout.contains("shape-legacy"), "{stdout}");
    model.assert_protocol_ok();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tool_call_written_as_text_runs_the_tool_and_is_not_shown() {
    let (stdout, model) = turn_with(
        json!({"role": "assistant", "content":
            "<tool_call>\n{\"name\": \"shell\", \"arguments\": {\"command\": \"echo shape-text\"}}\n</tool_call>"}),
        "stop",
    )
    .await;
    assert!(
        stdout.contains("tools said:") && stdout.contains("shape-text"),
        "{stdout}"
    );
    assert!(!stdout.contains("<tool_call>"), "{stdout}");
    model.assert_protocol_ok();
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
