//! Replicas on one PostgreSQL, what they must share beyond the events (`replicas.rs`): a
//! `/approve` without an id taken in by a replica other than the one waiting, and a turn whose
//! replica lost its lease (paused with SIGSTOP past it) that must send nothing once it resumes,
//! nor ask for approval when it lost the lease while the model answered.
//!
//! These run on the throwaway cluster of `ethan::store::pg::cluster` whatever
//! `ETHAN_TEST_STORE` says, and fail (never skip) when PostgreSQL cannot be started.

use super::replicas::{homes, start_lark};
use crate::support::daemon::fresh_pg_database;
use crate::support::lark::{self, FakeLark};
use crate::support::telegram::FakeTelegram;
use crate::support::{wait_until, Daemon, ScriptedModel, Step, TestHome};
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

/// Send `sig` to the replica's process.
fn signal(daemon: &Daemon, sig: libc::c_int) {
    // SAFETY: kill has no memory preconditions; the pid is our own child's.
    let r = unsafe { libc::kill(daemon.pid() as libc::pid_t, sig) };
    assert_eq!(r, 0, "kill({}, {sig})", daemon.pid());
}

/// On Telegram, which has no idempotent send: a second answer from the paused replica would
/// show as a second message (on Lark the shared idempotency key would hide it).
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_paused_past_its_lease_sends_nothing_for_the_turn_the_other_answers_once() {
    const LEASE: u64 = 5;
    const CHAT: i64 = 5151;
    let url = fresh_pg_database();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        // The paused replica's request: answered while it is stopped, so the answer is waiting
        // in its socket when it resumes.
        Step::delay(
            Duration::from_secs(4),
            Step::text("from the paused replica"),
        ),
        Step::text("from the replica that took over"),
    ])
    .await;
    let homes = homes(2, &url, |url| {
        format!(
            "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
             channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
             owners: [\"telegram:{CHAT}\"]\ngateway:\n  listen: 127.0.0.1:0\n\
             store:\n  url: \"{url}\"\n  lease_secs: {LEASE}\n",
            model.base_url(),
            tg.token(),
            tg.base_url()
        )
    });
    let mut daemons: Vec<Daemon> = homes.iter().map(Daemon::start).collect();
    let polling = |h: &TestHome| h.log().contains("polls Telegram now");
    wait_until("a replica polls", WAIT, || homes.iter().any(polling)).await;

    tg.push_text(CHAT, CHAT, "a question that waits on the model");
    wait_until("the model got the turn", WAIT, || {
        model.requests().len() == 1
    })
    .await;
    let paused = homes
        .iter()
        .position(|h| h.log().contains("runs telegram event"))
        .expect("a replica logs the turn it runs");
    let other = 1 - paused;
    signal(&daemons[paused], libc::SIGSTOP);
    // Past the lease the other replica takes the session over and answers.
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(
        sent[0]["text"], "from the replica that took over",
        "{sent:?}"
    );
    assert!(
        homes[other]
            .log()
            .contains("taking over unfinished telegram event"),
        "{}",
        homes[other].log()
    );
    let typing_before = tg.calls("sendChatAction").len();
    signal(&daemons[paused], libc::SIGCONT);
    // The model's answer to the paused replica is already in its socket, and its typing
    // indicator is due. Time for anything it would still send:
    tokio::time::sleep(Duration::from_secs(6)).await;
    assert_eq!(
        tg.sent_texts(),
        vec!["from the replica that took over".to_string()],
        "answered once, by the replica holding the session"
    );
    assert_eq!(
        tg.calls("sendChatAction").len(),
        typing_before,
        "no typing indicator from the resumed replica"
    );
    assert!(
        homes[paused].log().contains("nothing of it is sent"),
        "the resumed replica ended the turn without sending:\n{}",
        homes[paused].log()
    );
    assert_eq!(model.requests().len(), 2, "no third model call");
    assert!(daemons[paused].is_running(), "the paused replica lives on");
    for d in &mut daemons {
        d.stop();
    }
}

/// A turn whose replica lost the session's lease (taken by another holder: a partition) while
/// the model's answer — a call that needs approval — is on its way: the replica asks nobody,
/// and the session's event is answered once, after the lease, by a replica that holds it.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_that_lost_the_session_posts_no_approval_card() {
    const CHAT: i64 = 5252;
    let url = fresh_pg_database();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        Step::delay(
            Duration::from_secs(2),
            Step::tool_call(
                "call_1",
                "shell",
                r#"{"command":"touch asked-without-the-lease.txt"}"#,
            ),
        ),
        Step::text("from the replica that holds the session"),
    ])
    .await;
    // A long lease: no renewal finds the loss before the answer arrives; only a fence check
    // can.
    let homes = homes(2, &url, |url| {
        format!(
            "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
             channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
             owners: [\"telegram:{CHAT}\"]\ngateway:\n  listen: 127.0.0.1:0\n\
             store:\n  url: \"{url}\"\n  lease_secs: 30\n",
            model.base_url(),
            tg.token(),
            tg.base_url()
        )
    });
    let mut daemons: Vec<Daemon> = homes.iter().map(Daemon::start).collect();
    let polling = |h: &TestHome| h.log().contains("polls Telegram now");
    wait_until("a replica polls", WAIT, || homes.iter().any(polling)).await;
    let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to the replicas' database: {e}"));
    tokio::spawn(conn);

    tg.push_text(CHAT, CHAT, "please make the file");
    wait_until("the model got the turn", WAIT, || {
        model.requests().len() == 1
    })
    .await;
    let first = homes
        .iter()
        .position(|h| h.log().contains("runs telegram event"))
        .expect("a replica logs the turn it runs");
    // Another holder (gone in 3 s) has the session now.
    let moved = db
        .execute(
            "UPDATE leases SET holder = 'elsewhere:1:0', expires_at = now() + interval '3 s' \
             WHERE name = $1",
            &[&format!("session:telegram:{CHAT}")],
        )
        .await
        .unwrap();
    assert_eq!(moved, 1, "the session's lease was held");
    let sent = tg.wait_for_sent(1, WAIT).await;
    assert_eq!(
        sent[0]["text"], "from the replica that holds the session",
        "{sent:?}"
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sent = tg.sent_messages();
    assert_eq!(sent.len(), 1, "no approval card: {sent:?}");
    // The fence found the lease lost before anyone was asked; the call is audited as not run.
    assert!(
        homes[first].log().contains(&format!(
            "this replica lost the lease session:telegram:{CHAT}"
        )),
        "{}",
        homes[first].log()
    );
    let audited = db
        .query("SELECT ok FROM audit WHERE tool = 'shell'", &[])
        .await
        .unwrap();
    assert_eq!(audited.len(), 1, "one shell call proposed");
    assert!(!audited[0].get::<_, bool>(0), "and it did not run");
    for h in &homes {
        assert!(!h
            .path()
            .join("workspace")
            .join("asked-without-the-lease.txt")
            .exists());
    }
    assert_eq!(model.requests().len(), 2, "{}", model.describe());
    for d in &mut daemons {
        d.stop();
    }
}
