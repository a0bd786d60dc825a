//! A tool that panics costs its call only: in a Telegram DM, the model calls `test_panic` (a
//! tool compiled only with the `test-tools` feature, which the test build turns on), gets an
//! `Error (internal)` result for that call, answers, and the answer reaches the chat; the call is
//! audited, the daemon keeps running, and the "typing…" indicator stops with the turn.

use crate::support::{Daemon, FakeTelegram, ScriptedModel, Step, TestHome};
use serde_json::{json, Value};
use std::time::Duration;

const OWNER: i64 = 218485655;
const WAIT: Duration = Duration::from_secs(30);

fn is(method: &str, name: &str) -> bool {
    method.eq_ignore_ascii_case(name)
}

#[tokio::test(flavor = "multi_thread")]
async fn a_panicking_tool_gives_an_internal_result_and_the_reply_still_arrives() {
    let home = TestHome::new();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("call_boom", "test_panic", "{}"),
        // Long enough for the typing indicator to be refreshed while the turn runs.
        Step::delay(
            Duration::from_millis(4500),
            Step::echo_last_tool_result("The tool broke: "),
        ),
    ])
    .await;
    home.write_config(&tg.owner_config(&model.base_url(), OWNER, ""));
    tg.push_text(OWNER, OWNER, "please run the panic tool");
    let mut daemon = Daemon::start(&home);

    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(sent[0]["chat_id"], json!(OWNER), "{sent:?}");
    let text = sent[0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("the tool failed unexpectedly (internal error)"),
        "{text}"
    );

    // The model's second request carries the internal error for exactly that call.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 2, "{}", model.describe());
    let tools: Vec<Value> = reqs[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .cloned()
        .collect();
    assert_eq!(tools.len(), 1, "{tools:?}");
    assert_eq!(tools[0]["tool_call_id"], "call_boom");
    let content = tools[0]["content"].as_str().unwrap_or_default();
    assert!(
        content.starts_with("Error (internal): the tool failed unexpectedly (internal error);"),
        "{content}"
    );
    model.assert_protocol_ok();

    // The indicator was shown while the turn ran, and nothing after the answer: wait longer
    // than one refresh period, then look at the order of the calls.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let calls = tg.all_calls();
    let typing: Vec<usize> = calls
        .iter()
        .enumerate()
        .filter(|(_, c)| is(&c.method, "sendChatAction"))
        .map(|(i, _)| i)
        .collect();
    let answer = calls
        .iter()
        .position(|c| is(&c.method, "sendMessage"))
        .expect("the answer was sent");
    assert!(typing.len() >= 2, "{}", tg.describe_calls());
    assert!(
        typing.iter().all(|&i| i < answer),
        "typing after the answer:\n{}",
        tg.describe_calls()
    );

    // Audited as a failed call; the daemon is still up and answers the next message.
    let audit = crate::support::store::row(
        &home,
        "SELECT ok, error_kind FROM audit WHERE tool = 'test_panic'",
        &[],
    )
    .expect("an audit row of test_panic");
    let (ok, kind) = (audit[0].as_deref() == Some("1"), audit[1].clone());
    assert!(!ok);
    assert_eq!(kind.as_deref(), Some("internal"));
    assert!(daemon.is_running());
    model.push_step(Step::text("still here"));
    tg.push_text(OWNER, OWNER, "are you alive?");
    let sent = tg.wait_for_sent(2, WAIT).await;
    assert_eq!(sent[1]["text"], "still here", "{sent:?}");
    daemon.stop();
}
