//! The HTTP gateway from a client's side: `POST /api/chat` read as its SSE event stream, and
//! what tests look for in it (the final `text`, the streamed `delta` pieces).

use serde_json::{json, Value};
use std::time::Duration;
use tokio::time::Instant;

/// One SSE event of the gateway: name, data, and when it was read.
pub type Event = (String, Value, Instant);

/// `POST /api/chat` (bearer `token`) and the SSE events until `done` or `error`, within
/// `wait`; `on_event` sees each one.
pub async fn chat(
    base: &str,
    token: &str,
    session: &str,
    message: &str,
    wait: Duration,
    mut on_event: impl FnMut(&str, &Value),
) -> Vec<Event> {
    let resp = reqwest::Client::new()
        .post(format!("{base}/api/chat"))
        .bearer_auth(token)
        .json(&json!({"session": session, "message": message}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut resp = resp;
    let mut buf = String::new();
    let mut events = Vec::new();
    let deadline = Instant::now() + wait;
    loop {
        let chunk = tokio::time::timeout_at(deadline, resp.chunk())
            .await
            .expect("SSE stream timed out")
            .expect("SSE read");
        let Some(chunk) = chunk else { return events };
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let mut name = String::new();
            let mut data = String::new();
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim());
                }
            }
            if name.is_empty() {
                continue; // keep-alive comment
            }
            let value: Value = serde_json::from_str(&data).unwrap_or(Value::Null);
            on_event(&name, &value);
            let last = name == "done" || name == "error";
            events.push((name, value, Instant::now()));
            if last {
                return events;
            }
        }
    }
}

pub fn names(events: &[Event]) -> Vec<&str> {
    events.iter().map(|(n, _, _)| n.as_str()).collect()
}

/// The text of the `text` event (panics without exactly one).
pub fn final_text(events: &[Event]) -> String {
    let texts: Vec<&Value> = events
        .iter()
        .filter(|(n, _, _)| n == "text")
        .map(|(_, d, _)| d)
        .collect();
    assert_eq!(texts.len(), 1, "{:?}", names(events));
    texts[0]["text"].as_str().unwrap().to_string()
}

/// The `delta` pieces after the last `delta_reset`, concatenated.
pub fn streamed_text(events: &[Event]) -> String {
    let mut text = String::new();
    for (name, data, _) in events {
        match name.as_str() {
            "delta" => text.push_str(data["text"].as_str().unwrap()),
            "delta_reset" => text.clear(),
            _ => {}
        }
    }
    text
}
