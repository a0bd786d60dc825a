//! An attack on lease fencing that got through once, kept with its fix: the streamed draft of a
//! turn whose replica was paused past its lease. The paused replica's model answer arrives while
//! it is stopped; after SIGCONT its presenter edited the draft the other replica had answered in,
//! putting the stale words back. Now each draft update first asks the turn's fence, so it sends
//! nothing once the lease is lost. Both Telegram streaming modes (an edited message, a draft).

use super::replicas::homes;
use crate::support::daemon::fresh_pg_database;
use crate::support::telegram::FakeTelegram;
use crate::support::{wait_until, Daemon, ScriptedModel, Step, TestHome};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);

fn signal(daemon: &Daemon, sig: libc::c_int) {
    // SAFETY: kill has no memory preconditions; the pid is our own child's.
    let r = unsafe { libc::kill(daemon.pid() as libc::pid_t, sig) };
    assert_eq!(r, 0);
}

fn stream_calls(tg: &FakeTelegram) -> usize {
    [
        "sendMessage",
        "editMessageText",
        "sendMessageDraft",
        "deleteMessage",
    ]
    .iter()
    .map(|m| tg.calls(m).len())
    .sum()
}

async fn paused_replica_streams(mode: &str) {
    const LEASE: u64 = 5;
    const CHAT: i64 = 6262;
    let url = fresh_pg_database();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![
        // First words at once (the draft is shown), the rest 4 s later: in the paused
        // replica's socket when it resumes.
        Step::stall(
            2,
            Duration::from_secs(4),
            Step::text("STALE words streamed by the paused replica after it lost its lease"),
        ),
        Step::text("from the replica that took over"),
    ])
    .await;
    let homes = homes(2, &url, |url| {
        format!(
            "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
             channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: {mode}\n\
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

    tg.push_text(CHAT, CHAT, "a question answered slowly");
    wait_until("the draft is shown", WAIT, || stream_calls(&tg) >= 1).await;
    let paused = homes
        .iter()
        .position(|h| h.log().contains("runs telegram event"))
        .expect("a replica logs the turn it runs");
    let other = 1 - paused;
    signal(&daemons[paused], libc::SIGSTOP);
    wait_until("the other replica answered", WAIT, || {
        model.requests().len() == 2
            && tg.all_calls().iter().any(|c| {
                c.body
                    .to_string()
                    .contains("from the replica that took over")
            })
    })
    .await;
    // Let the answering replica finish its sends.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let before = tg.all_calls().len();
    let log_other = homes[other].log();
    assert!(log_other.contains("taking over unfinished"), "{log_other}");
    signal(&daemons[paused], libc::SIGCONT);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after: Vec<String> = tg.all_calls()[before..]
        .iter()
        .filter(|c| !c.is("getUpdates"))
        .map(|c| format!("{:?}", c))
        .collect();
    let stale: Vec<&String> = after.iter().filter(|c| c.contains("STALE")).collect();
    // What the chat shows in the end: every message the fake still holds.
    let shown: Vec<(i64, Option<String>)> = (1000..1010)
        .map(|id| (id, tg.message_text(id)))
        .filter(|(_, t)| t.is_some())
        .collect();
    for d in &mut daemons {
        d.stop();
    }
    eprintln!("messages the chat shows at the end: {shown:?}");
    assert!(
        stale.is_empty(),
        "the replica that lost its lease still streamed its stale answer after SIGCONT \
         (streaming: {mode}):\n{stale:#?}\nthe chat shows at the end: {shown:?}\npaused replica's log:\n{}",
        homes[paused].log()
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_replica_edits_no_draft_after_losing_its_lease_edit_mode() {
    paused_replica_streams("edit").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_paused_replica_sends_no_draft_after_losing_its_lease_draft_mode() {
    paused_replica_streams("draft").await;
}
