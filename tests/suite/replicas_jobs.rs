//! Scheduled jobs on replicas sharing one PostgreSQL: a run holds a lease while it executes, so
//! a replica that dies (kill -9) or is paused (SIGSTOP) past the lease during a run has it marked
//! `interrupted` by another replica, which runs the slot again once; the digest is posted once,
//! and a paused replica that resumes posts nothing for the run it lost.
//!
//! These run on the throwaway cluster of `ethan::store::pg::cluster` whatever
//! `ETHAN_TEST_STORE` says, and fail (never skip) when PostgreSQL cannot be started.

use super::replicas::homes;
use crate::support::daemon::fresh_pg_database;
use crate::support::telegram::FakeTelegram;
use crate::support::{wait_until, Daemon, ScriptedModel, Step, TestHome};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const CHAT: i64 = 6161;
const LEASE: u64 = 5;
const WAIT: Duration = Duration::from_secs(60);
const DIGEST: &str = "Digest after the takeover.";

fn config(model: &ScriptedModel, tg: &FakeTelegram, url: &str) -> String {
    format!(
        "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
         channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
         owners: [\"telegram:{CHAT}\"]\ngateway:\n  listen: 127.0.0.1:0\n\
         store:\n  url: \"{url}\"\n  lease_secs: {LEASE}\n",
        model.base_url(),
        tg.token(),
        tg.base_url()
    )
}

/// The test's own connection to the replicas' database.
async fn connect(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("connect to the replicas' database: {e}"));
    tokio::spawn(conn);
    client
}

/// A one-shot job posting to the owner's Telegram chat, due `in_secs` from now.
async fn add_job(db: &tokio_postgres::Client, in_secs: i64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let due = now + in_secs;
    let at = chrono::DateTime::from_timestamp(due, 0)
        .unwrap()
        .to_rfc3339();
    let who = format!("telegram:{CHAT}");
    db.execute(
        "INSERT INTO jobs (id, title, prompt, kind, spec, anchor, channel, chat_id, chat_kind, \
         creator, created_in, next_run, created_at, updated_at) \
         VALUES ('nightly', 'Nightly', 'Summarise the day', 'at', $1, $2, 'telegram', $3, \
         'direct', $4, $4, $5, $2, $2)",
        &[&at, &now, &CHAT.to_string(), &who, &due],
    )
    .await
    .unwrap_or_else(|e| panic!("insert the job: {e}"));
}

/// `(trigger, status, claimed_by, error, delivery)` of the job's runs, oldest first.
async fn runs(db: &tokio_postgres::Client) -> Vec<(String, String, String, String, String)> {
    db.query(
        "SELECT trigger_kind, status, claimed_by, COALESCE(error, ''), delivery FROM job_runs \
         WHERE job_id = 'nightly' ORDER BY id",
        &[],
    )
    .await
    .unwrap_or_else(|e| panic!("read the runs: {e}"))
    .iter()
    .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
    .collect()
}

/// The replica (index into `daemons`) whose process claimed the first run.
async fn claimant(db: &tokio_postgres::Client, daemons: &[Daemon]) -> usize {
    let by = runs(db).await.first().expect("a run was claimed").2.clone();
    let pid: u32 = by.rsplit(':').next().unwrap().parse().unwrap();
    daemons
        .iter()
        .position(|d| d.pid() == pid)
        .unwrap_or_else(|| panic!("no replica has pid {pid} ({by})"))
}

/// The digests posted so far.
fn digests(tg: &FakeTelegram) -> Vec<String> {
    tg.sent_texts()
        .into_iter()
        .filter(|t| t.contains("Nightly"))
        .collect()
}

/// Two replicas, one job due in 2 s whose first model call is answered by `first`.
async fn start(
    first: Step,
) -> (
    FakeTelegram,
    ScriptedModel,
    Vec<TestHome>,
    Vec<Daemon>,
    tokio_postgres::Client,
) {
    let url = fresh_pg_database();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(vec![first, Step::text(DIGEST)]).await;
    let homes = homes(2, &url, |url| config(&model, &tg, url));
    let daemons: Vec<Daemon> = homes.iter().map(Daemon::start).collect();
    let polling = |h: &TestHome| h.log().contains("polls Telegram now");
    wait_until("a replica polls", WAIT, || homes.iter().any(polling)).await;
    let db = connect(&url).await;
    add_job(&db, 2).await;
    wait_until("the run asked the model", WAIT, || {
        model.requests().len() == 1
    })
    .await;
    (tg, model, homes, daemons, db)
}

/// The first run is interrupted, naming its claimant; the takeover run delivered the digest.
async fn assert_taken_over(db: &tokio_postgres::Client, dead: u32) {
    let runs = runs(db).await;
    assert_eq!(runs.len(), 2, "{runs:?}");
    let (trigger, status, by, error, _) = &runs[0];
    assert_eq!(
        (trigger.as_str(), status.as_str()),
        ("schedule", "interrupted")
    );
    assert!(by.ends_with(&format!(":{dead}")), "{runs:?}");
    assert!(
        error.contains(by.as_str())
            && error.contains("stopped renewing its lease")
            && error.contains("run again by"),
        "{error}"
    );
    let (trigger, status, by, _, delivery) = &runs[1];
    assert_eq!(
        (trigger.as_str(), status.as_str(), delivery.as_str()),
        ("takeover", "ok", "delivered"),
        "{runs:?}"
    );
    assert!(!by.ends_with(&format!(":{dead}")), "{runs:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_killed_replicas_job_run_is_marked_interrupted_and_run_again_once() {
    let (tg, model, homes, mut daemons, db) = start(Step::delay(
        Duration::from_secs(60),
        Step::text("never delivered"),
    ))
    .await;
    let dead = claimant(&db, &daemons).await;
    let dead_pid = daemons[dead].pid();
    let killed_at = Instant::now();
    daemons[dead].kill();

    wait_until("the digest is posted", WAIT, || !digests(&tg).is_empty()).await;
    let took = killed_at.elapsed();
    assert!(
        took < Duration::from_secs(LEASE + 10),
        "run again {took:?} after the kill (lease {LEASE} s)"
    );
    let other = 1 - dead;
    assert!(
        homes[other].log().contains("run again by"),
        "{}",
        homes[other].log()
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let posted = digests(&tg);
    assert_eq!(posted.len(), 1, "posted once: {posted:?}");
    assert!(posted[0].contains(DIGEST), "{posted:?}");
    assert_eq!(model.requests().len(), 2, "{}", model.describe());
    assert_taken_over(&db, dead_pid).await;
    daemons[other].stop();
}

/// Send `sig` to the replica's process.
fn signal(daemon: &Daemon, sig: libc::c_int) {
    // SAFETY: kill has no memory preconditions; the pid is our own child's.
    let r = unsafe { libc::kill(daemon.pid() as libc::pid_t, sig) };
    assert_eq!(r, 0, "kill({}, {sig})", daemon.pid());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_replica_paused_during_a_job_run_posts_nothing_for_it_after_it_resumes() {
    // The paused replica's model call is answered while it is stopped: the answer waits in its
    // socket when it resumes.
    let (tg, model, homes, mut daemons, db) = start(Step::delay(
        Duration::from_secs(4),
        Step::text("from the paused replica"),
    ))
    .await;
    let paused = claimant(&db, &daemons).await;
    let paused_pid = daemons[paused].pid();
    signal(&daemons[paused], libc::SIGSTOP);
    wait_until("the digest is posted", WAIT, || !digests(&tg).is_empty()).await;
    signal(&daemons[paused], libc::SIGCONT);
    // Time for anything the resumed replica would still post or record.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let posted = digests(&tg);
    assert_eq!(posted.len(), 1, "posted once: {posted:?}");
    assert!(posted[0].contains(DIGEST), "{posted:?}");
    assert!(
        homes[paused].log().contains("lost its lease"),
        "{}",
        homes[paused].log()
    );
    assert_eq!(model.requests().len(), 2, "{}", model.describe());
    // The resumed replica did not record its result over the interruption.
    assert_taken_over(&db, paused_pid).await;
    assert!(daemons[paused].is_running(), "the paused replica lives on");
    for d in &mut daemons {
        d.stop();
    }
}
