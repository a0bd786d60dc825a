//! Attacks on replicas sharing one PostgreSQL that got through once, kept with their fixes, and
//! one that held:
//! - a replica paused while it waited to retry its answer posted it after it had lost the
//!   session's lease, after the newer answer of the replica that took the session over. Now every
//!   retry of a send first confirms the lease (`send_with_retry_fenced`), and so does every
//!   retry of a streamed answer's final message (`Router::answer_in_draft`);
//! - a replica killed while it retried its job's digest left the digest unposted: the run was
//!   recorded `ok` before the post, and the takeover looked only at `running` runs. Now the
//!   takeover also posts the stored digest of a run whose delivery is pending and whose lease
//!   nobody holds;
//! - Telegram updates offered again after the poller replica died are each answered once (held).

use super::replicas::homes;
use crate::support::daemon::{fresh_pg_database, wait_for_log};
use crate::support::model::echo_user;
use crate::support::telegram::FakeTelegram;
use crate::support::{wait_until, Daemon, ScriptedModel, TestHome};
use std::time::Duration;

const WAIT: Duration = Duration::from_secs(60);
const OWNER: i64 = 4646;

/// The attack (held): the poller replica is killed (kill -9) within the 10 s its stored offset
/// may lag, and the Bot API then offers every update ever pushed again (worse than real
/// Telegram, which never resends an update a later `offset` confirmed). The poller replica is
/// killed (kill -9) right after it answered; the Bot API then offers every
/// update ever pushed again (the worst case of the lagging stored offset). The other replica
/// becomes the poller: every redelivered update — answered messages, a `/stop` with nothing
/// running, messages of two chats — must be recognised; nothing is answered twice, and the new
/// messages are answered once.
#[tokio::test(flavor = "multi_thread")]
async fn updates_redelivered_after_the_poller_dies_are_each_answered_once() {
    const LEASE: u64 = 5;
    let url = fresh_pg_database();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(echo_user(40)).await;
    let homes = homes(2, &url, |url| {
        format!(
            "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
             channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: off\n\
             owners: [\"telegram:{OWNER}\"]\ngateway:\n  listen: 127.0.0.1:0\n\
             store:\n  url: \"{url}\"\n  lease_secs: {LEASE}\n",
            model.base_url(),
            tg.token(),
            tg.base_url()
        )
    });
    let mut daemons: Vec<Daemon> = homes.iter().map(Daemon::start).collect();
    let poller = |homes: &[TestHome]| {
        homes
            .iter()
            .position(|h| h.log().contains("polls Telegram now"))
    };
    wait_until("a replica polls", WAIT, || poller(&homes).is_some()).await;
    let first = poller(&homes).unwrap();

    for i in 0..3 {
        tg.push_text(OWNER, OWNER, &format!("one {i}"));
    }
    tg.wait_for_sent(3, WAIT).await;
    tg.push_text(OWNER, OWNER, "/stop");
    // The /stop (nothing running: no reply) is taken in too.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = tg.sent_texts();
    // Killed within the offset's 10 s: its stored offset lags.
    daemons[first].kill();
    tg.set_redeliver_all(true);
    for i in 0..2 {
        tg.push_text(OWNER, OWNER, &format!("two {i}"));
    }
    let other = 1 - first;
    wait_for_log(&homes[other], "polls Telegram now", WAIT).await;
    tg.wait_for_sent(before.len() + 2, WAIT).await;
    // Several more polls, each offered every update again.
    let polls = tg.getupdates_count();
    wait_until("more polls", WAIT, || tg.getupdates_count() >= polls + 3).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let texts = tg.sent_texts();
    daemons[other].stop();
    let answers: Vec<&String> = texts
        .iter()
        .filter(|t| t.starts_with("answer to:"))
        .collect();
    let mut sorted: Vec<String> = answers.iter().map(|s| s.to_string()).collect();
    sorted.sort();
    let mut expected: Vec<String> = (0..3)
        .map(|i| format!("answer to: one {i}"))
        .chain((0..2).map(|i| format!("answer to: two {i}")))
        .collect();
    expected.sort();
    assert_eq!(
        sorted,
        expected,
        "every message answered once\nbefore the kill: {before:?}\nall sent: {texts:?}\n{}",
        homes[other].log()
    );
    assert_eq!(
        texts.len(),
        before.len() + 2,
        "nothing but the two new answers after the kill: {texts:?}"
    );
}

mod digest_after_finish {
    //! The attack (got through once): a replica dies after its run's result was recorded
    //! (`finish_run`: status `ok`) but before the digest reached the chat. The takeover only
    //! looked at `running` runs, so the slot's digest was never posted by anyone; now the
    //! replica that takes the dead run's lease posts its stored digest.
    use super::super::replicas::homes;
    use crate::support::daemon::fresh_pg_database;
    use crate::support::telegram::FakeTelegram;
    use crate::support::{wait_until, Daemon, ScriptedModel, Step, TestHome};
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    const CHAT: i64 = 6464;
    const LEASE: u64 = 5;
    const WAIT: Duration = Duration::from_secs(60);
    const DIGEST: &str = "The digest of the day.";

    async fn connect(url: &str) -> tokio_postgres::Client {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap_or_else(|e| panic!("connect: {e}"));
        tokio::spawn(conn);
        client
    }

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

    async fn runs(db: &tokio_postgres::Client) -> Vec<(i64, String, String, String, String)> {
        db.query(
            "SELECT id, trigger_kind, status, claimed_by, delivery FROM job_runs \
             WHERE job_id = 'nightly' ORDER BY id",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
        .collect()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_replica_killed_while_posting_its_digest_leaves_the_digest_to_another() {
        let url = fresh_pg_database();
        let tg = FakeTelegram::start().await;
        let model = ScriptedModel::start(vec![Step::text(DIGEST), Step::text(DIGEST)]).await;
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
        let db = connect(&url).await;
        // The digest's first try is refused (a transient 500): the claimant waits to retry it,
        // its result already recorded.
        for _ in 0..3 {
            tg.fail_next(
                "sendMessage",
                500,
                serde_json::json!({"ok": false, "error_code": 500, "description": "Internal Server Error"}),
            );
        }
        add_job(&db, 2).await;
        wait_until("the digest's first try was refused", WAIT, || {
            !tg.calls_of("sendMessage").is_empty()
        })
        .await;
        let first = runs(&db).await;
        let by = first.first().expect("a run").3.clone();
        let pid: u32 = by.rsplit(':').next().unwrap().parse().unwrap();
        let dead = daemons
            .iter()
            .position(|d| d.pid() == pid)
            .expect("claimant");
        daemons[dead].kill();
        let at_kill = runs(&db).await;
        let other = 1 - dead;
        // Lease + takeover period + the retries: ample.
        let posted = wait_until_or("a digest is posted", Duration::from_secs(40), || {
            tg.sent_texts().iter().any(|t| t.contains(DIGEST))
        })
        .await;
        let after = runs(&db).await;
        daemons[other].stop();
        assert!(
            posted,
            "the slot's digest was never posted after its claimant died while delivering it\n\
             runs at the kill: {at_kill:?}\nruns 40 s later: {after:?}\nsendMessage calls: {:?}\n\
             other replica's log:\n{}",
            tg.calls_of("sendMessage"),
            homes[other].log()
        );
    }

    async fn wait_until_or(_what: &str, limit: Duration, f: impl Fn() -> bool) -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < limit {
            if f() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        f()
    }
}

/// Send `sig` to the replica's process.
fn signal(daemon: &Daemon, sig: libc::c_int) {
    // SAFETY: kill has no memory preconditions; the pid is our own child's.
    let r = unsafe { libc::kill(daemon.pid() as libc::pid_t, sig) };
    assert_eq!(r, 0, "kill({}, {sig})", daemon.pid());
}

/// The attack (got through once: the retry went out after the newer answer): the answer's first
/// try fails (a transient 500) and the replica waits to retry it; it is
/// paused (SIGSTOP) in that wait past its lease. The other replica takes the session over
/// (the answer is `sending`: Telegram has no idempotent send, so it is marked unconfirmed) and
/// answers the next message. After SIGCONT, the replica that lost the lease must post nothing:
/// its retry would put the old answer after the newer one.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_paused_while_retrying_its_answer_posts_nothing_after_losing_its_lease() {
    paused_while_retrying_the_answer("off").await;
}

/// The same with the answer streamed as a Telegram draft: the draft's final `sendMessage`
/// (`Draft::finish`, retried by the router's own loop) fails once and the replica is paused in
/// the wait; after SIGCONT it must post nothing.
#[tokio::test(flavor = "multi_thread")]
async fn a_replica_paused_while_retrying_its_streamed_answer_posts_nothing_after_losing_its_lease()
{
    paused_while_retrying_the_answer("draft").await;
}

async fn paused_while_retrying_the_answer(streaming: &str) {
    const LEASE: u64 = 5;
    let url = fresh_pg_database();
    let tg = FakeTelegram::start().await;
    let model = ScriptedModel::start(echo_user(10)).await;
    let homes = homes(2, &url, |url| {
        format!(
            "model:\n  base_url: {}\n  api_key: sk-test\n  name: test-model\n\
             channels:\n  telegram:\n    token: \"{}\"\n    api_url: {}\n    streaming: {streaming}\n\
             owners: [\"telegram:{OWNER}\"]\ngateway:\n  listen: 127.0.0.1:0\n\
             store:\n  url: \"{url}\"\n  lease_secs: {LEASE}\n",
            model.base_url(),
            tg.token(),
            tg.base_url()
        )
    });
    let mut daemons: Vec<Daemon> = homes.iter().map(Daemon::start).collect();
    let polling = |h: &TestHome| h.log().contains("polls Telegram now");
    wait_until("a replica polls", WAIT, || homes.iter().any(polling)).await;
    tg.fail_next(
        "sendMessage",
        500,
        serde_json::json!({"ok": false, "error_code": 500, "description": "Internal Server Error"}),
    );
    tg.push_text(OWNER, OWNER, "first question");
    // Stop the runner as soon as its first try was refused (it retries after 1 s).
    let started = std::time::Instant::now();
    while tg.calls_of("sendMessage").is_empty() {
        assert!(started.elapsed() < WAIT, "no answer was tried");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let runner = homes
        .iter()
        .position(|h| h.log().contains("runs telegram event"))
        .expect("a replica logs the turn it runs");
    signal(&daemons[runner], libc::SIGSTOP);
    let other = 1 - runner;
    // Past the lease: the other replica takes the session (and the poller) over.
    tokio::time::sleep(Duration::from_secs(LEASE + 2)).await;
    tg.push_text(OWNER, OWNER, "second question");
    wait_until("the other replica answered the second", WAIT, || {
        tg.sent_texts()
            .iter()
            .any(|t| t == "answer to: second question")
    })
    .await;
    let before = tg.sent_texts();
    signal(&daemons[runner], libc::SIGCONT);
    tokio::time::sleep(Duration::from_secs(6)).await;
    let after = tg.sent_texts();
    for d in &mut daemons {
        d.stop();
    }
    assert_eq!(
        after,
        before,
        "the replica that lost the session's lease still posted after SIGCONT \
         (in the chat, in order: {after:?})\nsendMessage calls: {:#?}\npaused replica's log:\n{}\n\
         other replica's log:\n{}",
        tg.calls_of("sendMessage"),
        homes[runner].log(),
        homes[other].log()
    );
}
