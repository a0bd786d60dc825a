//! Replicas on one PostgreSQL, what they must share beyond the events (`replicas.rs`): a
//! `/approve` without an id taken in by a replica other than the one waiting, and a turn whose
//! replica lost its lease (paused with SIGSTOP past it) that must send nothing once it resumes.
//!
//! These run on the throwaway cluster of `ethan::store::pg::cluster` whatever
//! `ETHAN_TEST_STORE` says, and fail (never skip) when PostgreSQL cannot be started.

use super::replicas::{homes, start_lark};
use crate::support::daemon::fresh_pg_database;
use crate::support::lark::{self, FakeLark};
use crate::support::{ScriptedModel, Step, TestHome};
use std::time::Duration;

const OWNER: &str = "ou_5f1c2a9e7b3d4c8a9e0f1a2b3c4d5e6f";
const WAIT: Duration = Duration::from_secs(60);

fn lark_config(fake: &FakeLark, model: &ScriptedModel, url: &str, lease: u64) -> String {
    format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n{}\
         owners: [\"lark:{OWNER}\"]\ngateway:\n  listen: 127.0.0.1:0\n\
         store:\n  url: \"{url}\"\n  lease_secs: {lease}\n",
        model.base_url(),
        fake.channel_yaml("    streaming: off\n"),
    )
}

/// The replica (index into `homes`) that logs running Lark event `id`.
fn runner(homes: &[TestHome], id: &str) -> usize {
    homes
        .iter()
        .position(|h| h.log().contains(&format!("runs lark event {id}")))
        .expect("a replica logs the turn it runs")
}

#[tokio::test(flavor = "multi_thread")]
async fn approve_without_an_id_on_the_other_replica_runs_the_call() {
    let url = fresh_pg_database();
    let fake = FakeLark::start().await;
    let model = ScriptedModel::start(vec![
        Step::tool_call(
            "call_1",
            "shell",
            r#"{"command":"touch approved-by-command.txt && echo ran-where-it-was-asked"}"#,
        ),
        Step::echo_last_tool_result("Result: "),
    ])
    .await;
    let homes = homes(2, &url, |url| lark_config(&fake, &model, url, 30));
    let (mut daemons, conns) = start_lark(&homes, &fake).await;

    let event = lark::p2p_text(OWNER, "please create the marker file");
    let id = lark::message_id(&event);
    fake.push_event_to(conns[0], &event).unwrap();
    let sent = fake.wait_for_messages(1, WAIT).await;
    assert_eq!(
        sent[0].content["header"]["title"]["content"],
        "Approval needed"
    );
    let asking = runner(&homes, &id);
    let other = 1 - asking;
    // `/approve` with no id, through the connection of the replica that is not waiting.
    fake.push_event_to(conns[other], &lark::p2p_text(OWNER, "/approve"))
        .unwrap();
    let marker = |h: &TestHome| h.path().join("workspace").join("approved-by-command.txt");
    let answered = fake.wait_for_messages(3, WAIT).await;
    let texts: Vec<String> = answered.iter().map(|m| m.card_markdown()).collect();
    assert!(
        texts.iter().any(|t| t.contains("ran-where-it-was-asked")),
        "the call ran and its result was answered: {texts:?}"
    );
    assert!(
        !texts
            .iter()
            .any(|t| t.contains("No approval is waiting here")),
        "{texts:?}"
    );
    assert!(
        homes[other]
            .log()
            .contains("answered here for the replica that asked"),
        "the command was taken in by the replica that was not waiting:\n{}",
        homes[other].log()
    );
    assert!(
        marker(&homes[asking]).exists(),
        "the call ran on the asking replica"
    );
    assert!(!marker(&homes[other]).exists(), "and only there");
    model.assert_protocol_ok();
    for d in &mut daemons {
        d.stop();
    }
}
