//! TEMPORARY experiment (not to be kept): the owner approves a shell call by button.
mod support;
use serde_json::json;
use std::time::Duration;
use support::lark::{self, FakeLark};
use support::{Daemon, ScriptedModel, Step, TestHome};
const OWNER: &str = "ou_84aad35d084aa403a838cf73ee18467";
const WAIT: Duration = Duration::from_secs(30);

#[tokio::test(flavor = "multi_thread")]
async fn probe() {
    let home = TestHome::new();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call("call_1", "shell", r#"{"command":"echo approved-run-42"}"#),
        Step::echo_last_tool_result("Result: "),
    ])
    .await;
    home.write_config(&format!(
        "model:\n  base_url: {}\n  api_key: sk-x\n  name: m\nchannels:\n{}owners: [\"lark:{OWNER}\"]\n",
        model.base_url(), fake.channel_yaml("")));
    let mut daemon = Daemon::start(&home);
    fake.wait_connections(1, WAIT).await;
    let ev = lark::p2p_text(OWNER, "please run echo");
    fake.push_event(&ev);
    let sent = fake.wait_for_messages(1, WAIT).await;
    println!("card: {}", sent[0].content);
    let rid = sent[0]
        .content
        .pointer("/body/elements/1/columns/0/elements/0/behaviors/0/value/ethan_approval")
        .and_then(|v| v.as_str())
        .unwrap()
        .to_string();
    let s = fake.push_card_action(
        json!({"ethan_approval": rid, "choice": "o"}),
        "ou_stranger",
        "oc_p2p",
    );
    println!("stranger ack: {:?}", fake.wait_ack(s, WAIT).await.data);
    let s = fake.push_card_action(
        json!({"ethan_approval": rid, "choice": "o"}),
        OWNER,
        "oc_p2p",
    );
    println!("owner ack: {:?}", fake.wait_ack(s, WAIT).await.data);
    let sent = fake.wait_for_messages(2, WAIT).await;
    println!("reply: {}", sent[1].card_markdown());
    daemon.stop();
    println!("{}", home.log());
}
