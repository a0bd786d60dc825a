//! Run the calls: the model's tool calls of one step, each announced to the watcher
//! ([`TurnEvent::ToolStart`] with a one-line summary, secrets redacted) and then run by the
//! tool engine ([`crate::tools::executor::Executor::execute_until`]: policy, schema, replay,
//! consent, sandbox, audit) until they end or the turn is stopped.

use super::sink::Sink;
use crate::agent::Agent;
use crate::tools::executor::{CallOutcome, Progress};
use crate::tools::redact::Redactor;
use crate::tools::ToolContext;
use ethan_core::event::TurnEvent;
use ethan_core::message::ToolCall;
use std::collections::BTreeSet;
use tokio_util::sync::CancellationToken;

/// Run `calls` with the turn's tools `allowed` from the context `ctx`: every outcome, or
/// (stopped) how far each call got.
pub(super) async fn run(
    agent: &Agent,
    calls: &[ToolCall],
    allowed: &BTreeSet<String>,
    ctx: &ToolContext,
    sink: &Sink<'_>,
    cancel: &CancellationToken,
) -> Result<Vec<CallOutcome>, Vec<Progress>> {
    for c in calls {
        sink.emit(TurnEvent::ToolStart {
            id: c.id.clone(),
            name: c.name.clone(),
            summary: summary(&c.arguments, agent.executor.redactor()),
        });
    }
    agent
        .executor
        .execute_until(calls, allowed, ctx, cancel)
        .await
}

/// What a tool call does, in one line for progress views ([`TurnEvent::ToolStart`]): the first
/// of its string arguments that says the most (`command`, `path`, `query`, `url`, …, else the
/// first string), secrets redacted, at most 80 characters.
fn summary(arguments: &str, redactor: &Redactor) -> String {
    const KEYS: [&str; 8] = [
        "command", "cmd", "path", "query", "url", "pattern", "action", "name",
    ];
    let Ok(serde_json::Value::Object(args)) = serde_json::from_str(arguments) else {
        return String::new();
    };
    let text = KEYS
        .iter()
        .find_map(|k| args.get(*k).and_then(|v| v.as_str()))
        .or_else(|| args.values().find_map(|v| v.as_str()))
        .unwrap_or_default();
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let redacted = redactor.text(&one_line);
    let mut out: String = redacted.chars().take(80).collect();
    if out.chars().count() < redacted.chars().count() {
        out.pop();
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_is_the_telling_argument_on_one_line_redacted_and_short() {
        let r = Redactor::new(vec!["hunter2-secret".into()]);
        let s = summary(r#"{"timeout": 5, "command": "ls\n  -la"}"#, &r);
        assert_eq!(s, "ls -la");
        // No telling key: the first string.
        assert_eq!(summary(r#"{"n": 1, "text": "hi"}"#, &r), "hi");
        assert!(!summary(r#"{"url": "https://x/?k=hunter2-secret"}"#, &r).contains("hunter2"));
        let long = summary(
            &serde_json::json!({ "query": "a".repeat(200) }).to_string(),
            &r,
        );
        assert_eq!(long.chars().count(), 80);
        assert!(long.ends_with('…'));
        assert_eq!(summary("not json", &r), "");
    }
}
