//! Scheduler tests on a controlled clock: which slots are claimed, when, and how often.

use super::job::{self, NewJob, Origin};
use super::runner::{Claim, Clock, Execute, ManualClock, RunReport, Scheduler, SchedulerOptions};
use crate::store::prelude::*;
use crate::store::Store;
use async_trait::async_trait;
use chrono::{DateTime, Duration, Utc};
use chrono_tz::Tz;
use ethan_channels::{ChannelKind, ChatKind, ChatRef};
use ethan_core::store::{Delivery, JobState, RunStatus};
use std::sync::{Arc, Mutex};

fn utc(s: &str) -> DateTime<Utc> {
    s.parse().unwrap()
}

/// The clock's time as a UTC date-time.
fn now(clock: &ManualClock) -> DateTime<Utc> {
    clock.now().into()
}

fn opts() -> SchedulerOptions {
    SchedulerOptions {
        misfire_grace_secs: 300,
        config_timezone: None,
        poll: std::time::Duration::from_millis(20),
        max_concurrent_runs: 2,
    }
}

fn origin() -> Origin {
    Origin {
        channel: ChannelKind::Telegram,
        chat: Some(ChatRef {
            id: "42".into(),
            kind: ChatKind::Direct,
            thread: None,
        }),
        user_id: "42".into(),
        session_key: "telegram:42".into(),
    }
}

async fn create(store: &Store, new: NewJob, now: DateTime<Utc>) -> String {
    let new = NewJob {
        prompt: "report".into(),
        ..new
    };
    job::create(store, &new, &origin(), None, now)
        .await
        .unwrap()
        .id
}

fn scheduler(store: &Store, clock: &Arc<ManualClock>) -> Scheduler {
    Scheduler::new(store.shared(), clock.clone() as Arc<dyn Clock>, opts())
}

/// Tick every `step` from `from` to `to` (inclusive); the claimed slots in `tz`, formatted.
async fn run_clock(
    s: &Scheduler,
    clock: &ManualClock,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    step: Duration,
    tz: &Tz,
) -> Vec<String> {
    let mut out = Vec::new();
    let mut t = from;
    while t <= to {
        clock.set(t);
        for c in s.tick().await {
            assert!(c.scheduled_for <= t, "a slot was claimed early");
            assert!(
                (t - c.scheduled_for) < step + Duration::seconds(1),
                "a slot was claimed late: {} at {t}",
                c.scheduled_for
            );
            s.store()
                .finish_run(c.run_id, RunStatus::Ok, Some("done"), None)
                .await
                .unwrap();
            out.push(
                c.scheduled_for
                    .with_timezone(tz)
                    .format("%m-%d %H:%M %Z")
                    .to_string(),
            );
        }
        t += step;
    }
    out
}

#[tokio::test]
async fn cron_in_new_york_across_both_dst_changes() {
    let store = Store::open_in_memory().unwrap();
    let ny: Tz = "America/New_York".parse().unwrap();
    let clock = Arc::new(ManualClock::new(utc("2025-03-07T12:00:00Z")));
    let spring = create(
        &store,
        NewJob {
            job_id: Some("spring".into()),
            cron: Some("30 2 * * *".into()),
            timezone: Some("America/New_York".into()),
            end_date: Some("2025-03-11".into()),
            ..Default::default()
        },
        now(&clock),
    )
    .await;
    let s = scheduler(&store, &clock);
    let got = run_clock(
        &s,
        &clock,
        now(&clock),
        utc("2025-03-12T12:00:00Z"),
        Duration::minutes(1),
        &ny,
    )
    .await;
    // 2025-03-09 02:30 does not exist: it runs at 03:00 EDT, the first instant after the gap.
    assert_eq!(
        got,
        [
            "03-08 02:30 EST",
            "03-09 03:00 EDT",
            "03-10 02:30 EDT",
            "03-11 02:30 EDT"
        ]
    );
    // end_date honoured: the job is done.
    let j = store.get_job(&spring).await.unwrap().unwrap();
    assert_eq!((j.state, j.next_run), (JobState::Done, None));

    // Fall back (2025-11-02, 01:00–02:00 happens twice): 01:30 runs once, at its first occurrence.
    let clock = Arc::new(ManualClock::new(utc("2025-10-31T12:00:00Z")));
    create(
        &store,
        NewJob {
            job_id: Some("fall".into()),
            cron: Some("30 1 * * *".into()),
            timezone: Some("America/New_York".into()),
            ..Default::default()
        },
        now(&clock),
    )
    .await;
    let s = scheduler(&store, &clock);
    let got = run_clock(
        &s,
        &clock,
        now(&clock),
        utc("2025-11-03T12:00:00Z"),
        Duration::minutes(1),
        &ny,
    )
    .await;
    assert_eq!(
        got,
        ["11-01 01:30 EDT", "11-02 01:30 EDT", "11-03 01:30 EST"]
    );
    let runs = store.job_runs("fall", 10).await.unwrap();
    assert_eq!(runs.len(), 3, "one run per slot");
}

#[tokio::test]
async fn interval_job_fires_every_interval_from_its_creation() {
    let store = Store::open_in_memory().unwrap();
    let start = utc("2025-01-01T10:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    create(
        &store,
        NewJob {
            interval_minutes: Some(90),
            ..Default::default()
        },
        start,
    )
    .await;
    let s = scheduler(&store, &clock);
    let got = run_clock(
        &s,
        &clock,
        start,
        start + Duration::hours(6),
        Duration::seconds(30),
        &Tz::UTC,
    )
    .await;
    assert_eq!(
        got,
        [
            "01-01 11:30 UTC",
            "01-01 13:00 UTC",
            "01-01 14:30 UTC",
            "01-01 16:00 UTC"
        ]
    );
}

#[tokio::test]
async fn one_shot_fires_once_then_is_done() {
    let store = Store::open_in_memory().unwrap();
    let start = utc("2025-01-01T10:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    let id = create(
        &store,
        NewJob {
            at: Some("2025-01-01T19:15".into()),
            timezone: Some("Asia/Shanghai".into()),
            ..Default::default()
        },
        start,
    )
    .await;
    let sh: Tz = "Asia/Shanghai".parse().unwrap();
    let s = scheduler(&store, &clock);
    let got = run_clock(
        &s,
        &clock,
        start,
        start + Duration::hours(3),
        Duration::seconds(20),
        &sh,
    )
    .await;
    assert_eq!(got, ["01-01 19:15 CST"]);
    let j = store.get_job(&id).await.unwrap().unwrap();
    assert_eq!(j.state, JobState::Done);
    assert!(s.tick_at(start + Duration::days(30)).await.is_empty());
}

#[tokio::test]
async fn end_date_stops_an_interval_job() {
    let store = Store::open_in_memory().unwrap();
    let start = utc("2025-01-01T00:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    let id = create(
        &store,
        NewJob {
            interval_minutes: Some(60 * 8),
            end_date: Some("2025-01-02T09:00Z".into()),
            ..Default::default()
        },
        start,
    )
    .await;
    let s = scheduler(&store, &clock);
    let got = run_clock(
        &s,
        &clock,
        start,
        start + Duration::days(3),
        Duration::minutes(5),
        &Tz::UTC,
    )
    .await;
    assert_eq!(
        got,
        [
            "01-01 08:00 UTC",
            "01-01 16:00 UTC",
            "01-02 00:00 UTC",
            "01-02 08:00 UTC"
        ]
    );
    assert_eq!(
        store.get_job(&id).await.unwrap().unwrap().state,
        JobState::Done
    );
}

#[tokio::test]
async fn missed_slots_run_once_within_the_grace_and_are_skipped_beyond_it() {
    let store = Store::open_in_memory().unwrap();
    let start = utc("2025-01-01T00:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    let every_minute = create(
        &store,
        NewJob {
            cron: Some("* * * * *".into()),
            timezone: Some("UTC".into()),
            ..Default::default()
        },
        start,
    )
    .await;
    let s = scheduler(&store, &clock);
    // Down for 4 minutes: only the latest slot runs; the rest are recorded as missed once.
    let claims = s.tick_at(start + Duration::seconds(4 * 60 + 10)).await;
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].scheduled_for, utc("2025-01-01T00:04:00Z"));
    assert!(s
        .tick_at(start + Duration::seconds(4 * 60 + 20))
        .await
        .is_empty());
    let runs = store.job_runs(&every_minute, 10).await.unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[1].status, RunStatus::Missed);
    assert_eq!(runs[1].delivery, Delivery::Skipped);

    // A daily job whose slot passed 10 minutes ago: skipped, next slot tomorrow.
    let daily = create(
        &store,
        NewJob {
            cron: Some("0 9 * * *".into()),
            timezone: Some("UTC".into()),
            ..Default::default()
        },
        start,
    )
    .await;
    assert!(s
        .tick_at(utc("2025-01-01T09:10:00Z"))
        .await
        .iter()
        .all(|c| c.job.id != daily));
    let j = store.get_job(&daily).await.unwrap().unwrap();
    assert_eq!(j.next_run, Some(utc("2025-01-02T09:00:00Z").timestamp()));
    let runs = store.job_runs(&daily, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].status, RunStatus::Missed);
    // ... and 4 minutes late would still have run.
    let claims = s.tick_at(utc("2025-01-02T09:04:00Z")).await;
    assert!(claims.iter().any(|c| c.job.id == daily));
}

#[tokio::test]
async fn a_restart_between_creation_and_the_fire_time_fires_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ethan.db");
    let created = utc("2025-06-01T08:00:00Z");
    let id = {
        let store = Store::open(&path).unwrap();
        create(
            &store,
            NewJob {
                cron: Some("15 10 * * *".into()),
                timezone: Some("Europe/Berlin".into()),
                ..Default::default()
            },
            created,
        )
        .await
    }; // the process that created it is gone
    let fire = utc("2025-06-01T08:15:00Z"); // 10:15 CEST
    let clock = Arc::new(ManualClock::new(created + Duration::minutes(5)));
    let s1 = scheduler(&Store::open(&path).unwrap(), &clock);
    assert!(s1.tick().await.is_empty(), "not yet");
    drop(s1); // and restarted again
    let s2 = scheduler(&Store::open(&path).unwrap(), &clock);
    clock.set(fire + Duration::seconds(1));
    let claims = s2.tick().await;
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].scheduled_for, fire);
    assert!(s2.tick().await.is_empty());
    // A restart right after the claim (mid-run) does not fire the slot again.
    let s3 = scheduler(&Store::open(&path).unwrap(), &clock);
    assert!(s3.tick_at(fire + Duration::seconds(30)).await.is_empty());
    let runs = Store::open(&path).unwrap().job_runs(&id, 10).await.unwrap();
    assert_eq!(runs.len(), 1);
}

#[tokio::test]
async fn two_schedulers_on_one_database_run_each_slot_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ethan.db");
    let start = utc("2025-01-01T00:00:00Z");
    {
        let store = Store::open(&path).unwrap();
        for i in 0..3 {
            create(
                &store,
                NewJob {
                    job_id: Some(format!("j{i}")),
                    cron: Some("*/5 * * * *".into()),
                    timezone: Some("UTC".into()),
                    ..Default::default()
                },
                start,
            )
            .await;
        }
    }
    let barrier = Arc::new(std::sync::Barrier::new(2));
    let handles: Vec<_> = ["a:1", "b:2"]
        .into_iter()
        .map(|who| {
            let (path, barrier) = (path.clone(), barrier.clone());
            std::thread::spawn(move || {
                let clock = Arc::new(ManualClock::new(start));
                let rt = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .unwrap();
                let s = Scheduler::new(
                    Store::open(&path).unwrap().shared(),
                    clock.clone() as Arc<dyn Clock>,
                    opts(),
                )
                .with_identity(who);
                let mut claimed = Vec::new();
                for minute in 0..=60 {
                    clock.set(start + Duration::minutes(minute) + Duration::seconds(1));
                    barrier.wait();
                    for c in rt.block_on(s.tick()) {
                        claimed.push((c.job.id.clone(), c.scheduled_for));
                    }
                }
                claimed
            })
        })
        .collect();
    let mut all: Vec<(String, DateTime<Utc>)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let n = all.len();
    all.sort();
    all.dedup();
    assert_eq!(n, all.len(), "a slot was claimed twice");
    assert_eq!(n, 3 * 12, "every slot of the hour ran");
}

#[tokio::test]
async fn run_now_claims_the_due_slot_or_the_current_second() {
    let store = Store::open_in_memory().unwrap();
    let start = utc("2025-01-01T00:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    let id = create(
        &store,
        NewJob {
            interval_minutes: Some(60),
            ..Default::default()
        },
        start,
    )
    .await;
    let s = scheduler(&store, &clock);
    clock.set(start + Duration::minutes(10));
    let c = s.claim_now(&id).await.unwrap();
    assert_eq!(c.scheduled_for, start + Duration::minutes(10));
    let again = s.claim_now(&id).await.unwrap_err().to_string();
    assert!(again.contains("already claimed"), "{again}");
    // When the slot is due, running by hand takes it, and the scheduler does not run it again.
    clock.set(start + Duration::minutes(61));
    let c = s.claim_now(&id).await.unwrap();
    assert_eq!(c.scheduled_for, start + Duration::minutes(60));
    assert!(s.tick().await.is_empty());
    assert!(s
        .claim_now("nope")
        .await
        .unwrap_err()
        .to_string()
        .contains("no job"));
}

#[tokio::test]
async fn runs_of_dead_processes_are_marked_interrupted() {
    let store = Store::open_in_memory().unwrap();
    let start = utc("2025-01-01T00:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    let id = create(
        &store,
        NewJob {
            interval_minutes: Some(60),
            ..Default::default()
        },
        start,
    )
    .await;
    let s = scheduler(&store, &clock);
    let me = super::runner::process_identity();
    let host = me.rsplit_once(':').unwrap().0;
    // pid_max is at most 2^22 on Linux, so this pid does not exist.
    let dead = store
        .claim_run(&id, 1, "schedule", &format!("{host}:{}", 1 << 23))
        .await
        .unwrap()
        .unwrap();
    let other_host = store
        .claim_run(&id, 2, "schedule", "elsewhere:1")
        .await
        .unwrap()
        .unwrap();
    let mine = store
        .claim_run(&id, 3, "schedule", &me)
        .await
        .unwrap()
        .unwrap();
    // The dead run's slot (second 1 of 1970) is far past the grace: marked, not run again.
    assert!(s.take_over_dead(start).await.is_empty());
    for (run, want) in [
        (dead, RunStatus::Interrupted),
        (other_host, RunStatus::Running),
        (mine, RunStatus::Running),
    ] {
        assert_eq!(store.get_run(run).await.unwrap().unwrap().status, want);
    }
    let why = store.get_run(dead).await.unwrap().unwrap().error.unwrap();
    assert!(why.contains("ended before it finished"), "{why}");
    assert!(why.contains("not run again"), "{why}");
}

#[tokio::test]
async fn a_dead_run_within_the_grace_is_run_again_once() {
    let store = Store::open_in_memory().unwrap();
    let start = utc("2025-01-01T00:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    let id = create(
        &store,
        NewJob {
            interval_minutes: Some(60),
            ..Default::default()
        },
        start,
    )
    .await;
    let s = scheduler(&store, &clock);
    let me = super::runner::process_identity();
    let host = me.rsplit_once(':').unwrap().0;
    let dead_pid = format!("{host}:{}", 1 << 23);
    let slot = start.timestamp() - 60;
    let dead = store
        .claim_run(&id, slot, "schedule", &dead_pid)
        .await
        .unwrap()
        .unwrap();
    // A manual run of a dead process is marked, never run again by the scheduler.
    let manual = store
        .claim_run(&id, slot - 1, "manual", &dead_pid)
        .await
        .unwrap()
        .unwrap();
    let claims = s.take_over_dead(start).await;
    assert_eq!(claims.len(), 1, "{claims:?}");
    let c = &claims[0];
    assert_eq!(c.trigger, super::runner::Trigger::Takeover);
    assert_eq!(
        c.scheduled_for.timestamp(),
        slot,
        "it runs for the original slot"
    );
    let old = store.get_run(dead).await.unwrap().unwrap();
    assert_eq!(old.status, RunStatus::Interrupted);
    assert!(
        old.error.as_deref().unwrap().contains("run again by"),
        "{old:?}"
    );
    let new = store.get_run(c.run_id).await.unwrap().unwrap();
    assert_eq!(
        (new.trigger.as_str(), new.status),
        ("takeover", RunStatus::Running)
    );
    assert_eq!(new.claimed_by, me);
    let manual = store.get_run(manual).await.unwrap().unwrap();
    assert_eq!(manual.status, RunStatus::Interrupted);
    assert!(manual.error.unwrap().contains("`manual` run"));
    // Looked at again: the new run is this live process's; nothing more is run.
    assert!(s.take_over_dead(start).await.is_empty());
    assert_eq!(store.running_runs().await.unwrap().len(), 1);
}

/// Records the claims it is given.
#[derive(Default)]
struct Recorder(Mutex<Vec<Claim>>);

#[async_trait]
impl Execute for Recorder {
    async fn deliver_stored(
        &self,
        _: ethan_core::store::RunRecord,
        _: ethan_core::store::JobRecord,
    ) {
    }

    async fn execute(&self, claim: Claim) -> RunReport {
        self.0.lock().unwrap().push(claim.clone());
        RunReport {
            run_id: claim.run_id,
            status: RunStatus::Ok,
            digest: None,
            delivery: Delivery::Skipped,
            message_id: None,
            error: None,
        }
    }
}

#[tokio::test]
async fn the_loop_runs_claims_when_the_clock_reaches_them() {
    let store = Store::open_in_memory().unwrap();
    let start = utc("2025-01-01T00:00:00Z");
    let clock = Arc::new(ManualClock::new(start));
    create(
        &store,
        NewJob {
            interval_minutes: Some(30),
            ..Default::default()
        },
        start,
    )
    .await;
    let s = Arc::new(scheduler(&store, &clock));
    let rec = Arc::new(Recorder::default());
    let (tx, rx) = tokio::sync::watch::channel(false);
    let task = tokio::spawn(s.clone().run(rec.clone(), rx));
    let wait = |n: usize| {
        let rec = rec.clone();
        async move {
            for _ in 0..200 {
                if rec.0.lock().unwrap().len() >= n {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            panic!("the loop did not run {n} claim(s)");
        }
    };
    tokio::time::sleep(std::time::Duration::from_millis(60)).await;
    assert!(rec.0.lock().unwrap().is_empty());
    clock.advance(Duration::minutes(30).to_std().unwrap());
    wait(1).await;
    clock.advance(Duration::minutes(30).to_std().unwrap());
    wait(2).await;
    tx.send(true).unwrap();
    tokio::time::timeout(std::time::Duration::from_secs(5), task)
        .await
        .unwrap()
        .unwrap();
    let slots: Vec<_> = rec
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|c| c.scheduled_for)
        .collect();
    assert_eq!(
        slots,
        [start + Duration::minutes(30), start + Duration::minutes(60)]
    );
}

#[tokio::test]
async fn a_jobs_lock_is_forgotten_once_no_run_of_it_is_in_progress() {
    use super::runner::JobLocks;
    let locks = Arc::new(JobLocks::default());
    let first = locks.acquire("a").await;
    assert_eq!(locks.len(), 1);
    // A second run of the same job waits for the first; its entry outlives the first run.
    let waiter = {
        let locks = locks.clone();
        tokio::spawn(async move { drop(locks.acquire("a").await) })
    };
    tokio::task::yield_now().await;
    drop(first);
    tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
        .await
        .expect("the second run got the lock")
        .unwrap();
    assert!(locks.is_empty());
    // Many jobs, each run once: nothing is left behind.
    for i in 0..100 {
        drop(locks.acquire(&format!("job-{i}")).await);
    }
    assert!(locks.is_empty());
}
