//! The fallback chain through the real daemon and its HTTP gateway, with two scripted model
//! servers: a primary answering 500 hands the turn to the fallback entry after one attempt
//! (the fallback proposes the tool call the audit attributes to it, and gets its result back),
//! after three failed requests the breaker skips the primary without a request, and after
//! `model.fallback_cooldown_secs` one turn probes it; a refused request
//! (400) is not moved; a streamed answer that broke off after text was shown is not replayed on
//! the fallback, and the person keeps the text with a note.

use crate::support::daemon::gateway_addr;
use crate::support::gateway::{final_text, names, streamed_text, Event};
use crate::support::{run_cli, Daemon, ScriptedModel, Step, TestHome};
use std::time::Duration;

const TOKEN: &str = "test-gateway-token-fallback-0123";
const WAIT: Duration = Duration::from_secs(60);

/// Config with `primary` as `model` and `backup` as its only fallback entry; `extra` goes under
/// `model:`.
fn start(home: &TestHome, primary: &ScriptedModel, backup: &ScriptedModel, extra: &str) -> Daemon {
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: primary-key\n  name: primary-model\n  \
         fallback_cooldown_secs: 3\n{extra}  fallback:\n    - {{ base_url: \"{}\", api_key: \
         backup-key, name: backup-model }}\ngateway:\n  token: {TOKEN}\n",
        primary.base_url(),
        backup.base_url()
    ));
    Daemon::start(home)
}

async fn chat(base: &str, session: &str, message: &str) -> Vec<Event> {
    crate::support::gateway::chat(base, TOKEN, session, message, WAIT, |_, _| {}).await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_primary_hands_the_turn_to_the_fallback_which_is_skipped_then_probed() {
    let primary = ScriptedModel::start((0..3).map(|_| Step::server_error()).collect()).await;
    let backup = ScriptedModel::start(vec![
        Step::tool_call("c1", "find_tools", r#"{"query":"time"}"#),
        Step::text("backup answer 1"),
        Step::text("backup answer 2"),
        Step::text("backup answer 3"),
        Step::text("backup answer 4"),
    ])
    .await;
    let home = TestHome::new();
    let mut daemon = start(&home, &primary, &backup, "");
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);

    let events = chat(&base, "s1", "what tools tell the time?").await;
    assert_eq!(
        final_text(&events),
        "backup answer 1",
        "{:?}",
        names(&events)
    );
    // One attempt on the primary (the fallback is the retry); the tool call's follow-up went
    // straight to the model that proposed it.
    assert_eq!(primary.requests().len(), 1);
    assert_eq!(backup.requests().len(), 2);
    assert_eq!(backup.requests()[0]["model"], "backup-model");
    assert!(backup
        .authorizations()
        .iter()
        .all(|a| a.as_deref() == Some("Bearer backup-key")));

    // Two more failed requests open the primary's breaker...
    for n in 2..=3 {
        let events = chat(&base, "s1", "again").await;
        assert_eq!(final_text(&events), format!("backup answer {n}"));
    }
    assert_eq!(primary.requests().len(), 3);
    // ...and the next turn goes straight to the fallback.
    let events = chat(&base, "s1", "and again").await;
    assert_eq!(final_text(&events), "backup answer 4");
    assert_eq!(primary.requests().len(), 3, "skipped while open");

    // After the cool-down one turn probes the primary, which answers now.
    tokio::time::sleep(Duration::from_millis(3_300)).await;
    primary.push_step(Step::text("primary is back"));
    let events = chat(&base, "s1", "and now?").await;
    assert_eq!(final_text(&events), "primary is back");
    assert_eq!(primary.requests().len(), 4);
    assert_eq!(backup.requests().len(), 5);
    primary.assert_protocol_ok();
    backup.assert_protocol_ok();

    let log = home.log();
    assert!(
        log.contains("answered by fallback model backup-model"),
        "{log}"
    );
    assert!(log.contains("skipping it for 3 s"), "{log}");
    assert!(log.contains("probing model primary-model"), "{log}");
    daemon.stop();

    // The audit names the model that proposed the call.
    let out = run_cli(&home, &["audit"], None);
    let audit = String::from_utf8_lossy(&out.stdout);
    assert!(audit.contains("find_tools"), "{audit}");
    assert!(audit.contains("proposed by model: backup-model"), "{audit}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_request_refused_as_invalid_is_not_moved_to_the_fallback() {
    let primary = ScriptedModel::start(vec![Step::status(
        400,
        serde_json::json!({"error": {"message": "Invalid value for 'tools'"}}),
    )])
    .await;
    let backup = ScriptedModel::start(vec![Step::text("never")]).await;
    let home = TestHome::new();
    let mut daemon = start(&home, &primary, &backup, "");
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);
    let events = chat(&base, "s1", "hi").await;
    let (name, data, _) = events.last().expect("events");
    assert_eq!(name, "error", "{:?}", names(&events));
    let message = data["message"].as_str().unwrap_or_default();
    assert!(message.contains("HTTP 400"), "{message}");
    assert_eq!(primary.requests().len(), 1, "a 400 is tried once");
    assert!(backup.requests().is_empty());
    daemon.stop();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stream_that_broke_after_text_was_shown_is_not_replayed_on_the_fallback() {
    // The answer shows two pieces, then goes silent past the idle timeout.
    let answer = "The first part arrives and then the server goes quiet";
    let primary = ScriptedModel::start(vec![Step::stall(
        3,
        Duration::from_secs(5),
        Step::text(answer),
    )])
    .await;
    let backup = ScriptedModel::start(vec![Step::text("a different answer")]).await;
    let home = TestHome::new();
    let mut daemon = start(&home, &primary, &backup, "  idle_timeout_secs: 1\n");
    let base = format!("http://{}", gateway_addr(&home, WAIT).await);
    let events = chat(&base, "s1", "tell me").await;
    let shown = streamed_text(&events);
    assert!(
        !shown.is_empty() && answer.starts_with(&shown),
        "{shown:?} {:?}",
        names(&events)
    );
    let text = final_text(&events);
    assert!(text.starts_with(shown.trim_end()), "{text}");
    assert!(text.contains("The answer broke off here"), "{text}");
    assert_eq!(
        primary.requests().len(),
        1,
        "one attempt while a fallback exists"
    );
    assert!(
        backup.requests().is_empty(),
        "text was shown: never replayed elsewhere"
    );
    daemon.stop();
}
