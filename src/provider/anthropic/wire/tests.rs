//! The wire mapping: merging, alternation, tool results paired, cache breakpoints, thinking
//! blocks given back unchanged, stop reasons, usage and errors.

use super::*;
use ethan_core::provider::owned;

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall::new(id, name, args)
}

fn with_calls(text: Option<&str>, calls: Vec<ToolCall>) -> ChatMessage {
    ChatMessage {
        content: text.map(str::to_string),
        tool_calls: calls,
        ..ChatMessage::assistant("")
    }
}

fn body(messages: &[ChatMessage]) -> Value {
    request_body("claude-test", 1024, &owned(messages.to_vec()), &[], false)
}

fn roles(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["role"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn pictures_are_base64_image_blocks_before_the_text() {
    let img = ethan_core::message::ImagePart {
        mime: "image/jpeg".into(),
        data: std::sync::Arc::from(&b"\xFF\xD8\xFF"[..]),
        path: "/w/inbox/p.jpg".into(),
    };
    let b = body(&[ChatMessage::user_with_images("what is it?", vec![img])]);
    let blocks = &b["messages"][0]["content"];
    assert_eq!(
        blocks[0],
        json!({"type": "image", "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"}})
    );
    assert_eq!(blocks[1]["type"], "text");
    assert_eq!(blocks[1]["text"], "what is it?");
}

#[test]
fn system_messages_become_blocks_and_tools_input_schemas() {
    let tools = [ToolSpec {
        name: "file_read".into(),
        description: "Read a file".into(),
        parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
    }];
    let b = request_body(
        "claude-test",
        2048,
        &owned([
            ChatMessage::system("You are Ethan."),
            ChatMessage::system(""),
            ChatMessage::system("Today is Monday."),
            ChatMessage::user("hi"),
        ]),
        &tools,
        true,
    );
    assert_eq!(b["model"], "claude-test");
    assert_eq!(b["max_tokens"], 2048);
    assert_eq!(b["stream"], true);
    assert_eq!(b["system"][0]["text"], "You are Ethan.");
    assert_eq!(b["system"][1]["text"], "Today is Monday.");
    assert!(b["system"][0].get("cache_control").is_none());
    assert_eq!(b["system"][1]["cache_control"]["type"], "ephemeral");
    assert_eq!(b["tools"][0]["name"], "file_read");
    assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
    assert_eq!(b["tools"][0]["cache_control"]["type"], "ephemeral");
    assert_eq!(
        b["messages"],
        json!([{"role": "user", "content": [
            {"type": "text", "text": "hi", "cache_control": {"type": "ephemeral"}}]}])
    );
    assert_eq!(cache_breakpoints(&b), 3);
    assert!(body(&[ChatMessage::user("x")]).get("stream").is_none());
}

#[test]
fn tool_uses_and_their_results_are_paired_in_alternating_turns() {
    let b = body(&[
        ChatMessage::system("sys"),
        ChatMessage::user("read both"),
        with_calls(
            Some("Reading."),
            vec![
                call("t1", "file_read", r#"{"path": "a"}"#),
                call("t2", "list_dir", "{not json"),
            ],
        ),
        ChatMessage::tool("t1", "contents of a"),
        ChatMessage::tool_error("t2", "Error (validation): bad JSON"),
        ChatMessage::user("and then?"),
        ChatMessage::assistant("Done."),
        ChatMessage::user("thanks"),
        ChatMessage::user("again"),
    ]);
    assert_eq!(
        roles(&b),
        ["user", "assistant", "user", "assistant", "user"]
    );
    let m = b["messages"].as_array().unwrap();
    assert_eq!(
        m[1]["content"],
        json!([
            {"type": "text", "text": "Reading."},
            {"type": "tool_use", "id": "t1", "name": "file_read", "input": {"path": "a"}},
            {"type": "tool_use", "id": "t2", "name": "list_dir", "input": {}},
        ])
    );
    // Both results in one user message, the results first, then the person's text.
    assert_eq!(
        m[2]["content"],
        json!([
            {"type": "tool_result", "tool_use_id": "t1", "content": "contents of a"},
            {"type": "tool_result", "tool_use_id": "t2",
             "content": "Error (validation): bad JSON", "is_error": true},
            {"type": "text", "text": "and then?"},
        ])
    );
    assert_eq!(m[4]["content"][0]["text"], "thanks");
    assert_eq!(m[4]["content"][1]["text"], "again");
    assert_eq!(m[4]["content"][1]["cache_control"]["type"], "ephemeral");
    assert_eq!(cache_breakpoints(&b), 2);
}

#[test]
fn the_history_is_repaired_into_what_the_api_accepts() {
    let b = body(&[
        // Starts with the assistant; an empty user message; a result without its call;
        // a call without its result.
        ChatMessage::assistant("Earlier answer"),
        ChatMessage::user(""),
        ChatMessage::tool("ghost", "orphan result"),
        with_calls(None, vec![call("t9", "file_read", "")]),
        ChatMessage::assistant(""),
        ChatMessage::user("next"),
    ]);
    assert_eq!(
        roles(&b),
        ["user", "assistant", "user", "assistant", "user"]
    );
    let m = b["messages"].as_array().unwrap();
    assert_eq!(m[0]["content"][0]["text"], LEADING_USER_TEXT);
    assert_eq!(m[2]["content"][0]["type"], "text");
    assert_eq!(m[2]["content"][0]["text"], "(tool result) orphan result");
    assert_eq!(
        m[3]["content"],
        json!([{"type": "tool_use", "id": "t9", "name": "file_read", "input": {}}])
    );
    assert_eq!(m[4]["content"][0]["type"], "tool_result");
    assert_eq!(m[4]["content"][0]["tool_use_id"], "t9");
    assert_eq!(m[4]["content"][0]["is_error"], true);
    assert_eq!(m[4]["content"][1]["text"], "next");
    // No empty text block anywhere.
    for msg in m {
        for block in msg["content"].as_array().unwrap() {
            if block["type"] == "text" {
                assert!(!block["text"].as_str().unwrap().is_empty(), "{b}");
            }
        }
    }
    // A history whose last message asks for tools gets its results added.
    let b = body(&[
        ChatMessage::user("go"),
        with_calls(None, vec![call("t1", "x", "{}")]),
    ]);
    assert_eq!(roles(&b), ["user", "assistant", "user"]);
    assert_eq!(body(&[]).pointer("/messages/0/role").unwrap(), "user");
}

#[test]
fn thinking_blocks_round_trip_unchanged_and_first() {
    let answer = json!({"id": "msg_1", "type": "message", "role": "assistant",
        "content": [
            {"type": "thinking", "thinking": "The user wants a file.", "signature": "EqQBCgIYAh=="},
            {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va=="},
            {"type": "text", "text": "Let me read it."},
            {"type": "tool_use", "id": "toolu_1", "name": "file_read", "input": {"path": "a"}}
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 5, "output_tokens": 7}});
    let c = parse_message(&answer).unwrap();
    assert_eq!(c.message.content.as_deref(), Some("Let me read it."));
    assert_eq!(c.message.tool_calls[0].arguments, r#"{"path":"a"}"#);
    let opaque = c.message.opaque.clone().unwrap();
    assert_eq!(opaque[OPAQUE_KEY]["content"], answer["content"]);
    // Through the store (JSON text) and back to the wire.
    let stored: ChatMessage =
        serde_json::from_str(&serde_json::to_string(&c.message).unwrap()).unwrap();
    let b = body(&[
        ChatMessage::user("read a"),
        stored.clone(),
        ChatMessage::tool("toolu_1", "A"),
    ]);
    assert_eq!(b["messages"][1]["content"], answer["content"]);
    // A message changed since (here: its text) keeps the thinking blocks first.
    let mut changed = stored;
    changed.content = Some("Something else".into());
    let b = body(&[
        ChatMessage::user("read a"),
        changed,
        ChatMessage::tool("toolu_1", "A"),
    ]);
    let blocks = &b["messages"][1]["content"];
    assert_eq!(blocks[0], answer["content"][0]);
    assert_eq!(blocks[1], answer["content"][1]);
    assert_eq!(blocks[2]["text"], "Something else");
    assert_eq!(blocks[3]["id"], "toolu_1");
    // Another provider's opaque data is not used.
    let mut foreign = ChatMessage::assistant("plain");
    foreign.opaque = Some(json!({"other": {"content": [{"type": "text", "text": "no"}]}}));
    let b = body(&[ChatMessage::user("q"), foreign, ChatMessage::user("r")]);
    assert_eq!(
        b["messages"][1]["content"],
        json!([{"type": "text", "text": "plain"}])
    );
    // An answer without thinking keeps no opaque data.
    let plain = json!({"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"});
    assert!(parse_message(&plain).unwrap().message.opaque.is_none());
}

#[test]
fn never_more_than_four_breakpoints() {
    let tools: Vec<ToolSpec> = (0..5)
        .map(|i| ToolSpec {
            name: format!("t{i}"),
            description: String::new(),
            parameters: Value::Null,
        })
        .collect();
    // An assistant message whose received blocks carry breakpoints of their own.
    let mut old = ChatMessage::assistant("a");
    old.opaque = Some(json!({OPAQUE_KEY: {"content": [
        {"type": "thinking", "thinking": "t", "signature": "s"},
        {"type": "text", "text": "a", "cache_control": {"type": "ephemeral"}}]}}));
    let mut messages = vec![ChatMessage::system("s1"), ChatMessage::system("s2")];
    for i in 0..6 {
        messages.push(ChatMessage::user(format!("q{i}")));
        messages.push(old.clone());
    }
    messages.push(ChatMessage::user("last"));
    let b = request_body("m", 10, &owned(messages), &tools, false);
    assert_eq!(cache_breakpoints(&b), 3, "{b}");
    assert_eq!(b["tools"][0]["input_schema"]["type"], "object");
    assert!(b["tools"][4].get("cache_control").is_some());
}

#[test]
fn stop_reasons_and_usage() {
    assert_eq!(finish_reason("end_turn"), FinishReason::Stop);
    assert_eq!(finish_reason("stop_sequence"), FinishReason::Stop);
    assert_eq!(finish_reason("tool_use"), FinishReason::ToolCalls);
    assert_eq!(finish_reason("max_tokens"), FinishReason::Length);
    assert_eq!(finish_reason("refusal"), FinishReason::ContentFilter);
    assert_eq!(
        finish_reason("pause_turn"),
        FinishReason::Other("pause_turn".into())
    );
    let u = usage_of(&json!({"input_tokens": 10, "output_tokens": 20,
        "cache_read_input_tokens": 300, "cache_creation_input_tokens": 40}))
    .unwrap();
    assert_eq!(
        u,
        Usage {
            input_tokens: 350,
            output_tokens: 20,
            cache_read_tokens: 300,
            cache_write_tokens: 40
        }
    );
    assert_eq!(usage_of(&json!({})), None);
    let c = parse_message(&json!({"content": [{"type": "text", "text": "Half"}],
        "stop_reason": "max_tokens", "usage": {"input_tokens": 1, "output_tokens": 2}}))
    .unwrap();
    assert!(c.truncated());
    assert_eq!(c.usage.unwrap().total(), 3);
    assert!(matches!(
        parse_message(&json!({"content": "text"})),
        Err(ProviderError::BadResponse(_))
    ));
}

#[test]
fn errors_are_classified() {
    let err = |kind: &str, msg: &str| {
        json!({"type": "error", "error": {"type": kind, "message": msg}}).to_string()
    };
    assert!(matches!(
        classify_error(401, &err("authentication_error", "invalid x-api-key")),
        ProviderError::Auth { status: 401, .. }
    ));
    assert!(matches!(
        classify_error(403, &err("permission_error", "no")),
        ProviderError::Auth { status: 403, .. }
    ));
    assert!(matches!(
        classify_error(
            400,
            &err(
                "invalid_request_error",
                "prompt is too long: 210000 tokens > 200000 maximum"
            )
        ),
        ProviderError::ContextLength(_)
    ));
    let overloaded = classify_error(529, &err("overloaded_error", "Overloaded"));
    assert!(overloaded.is_transient());
    assert_eq!(
        overloaded.to_string(),
        "the model endpoint answered HTTP 529: overloaded_error: Overloaded"
    );
    assert!(classify_error(429, &err("rate_limit_error", "slow down")).is_transient());
    assert!(classify_error(500, "<html>").is_transient());
    let bad = classify_error(
        400,
        &err("invalid_request_error", "messages: roles must alternate"),
    );
    assert!(!bad.is_transient() && matches!(bad, ProviderError::Http { status: 400, .. }));
    assert!(!classify_error(404, &err("not_found_error", "model")).is_transient());
}
