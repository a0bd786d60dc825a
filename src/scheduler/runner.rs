//! The scheduler loop and the execution of one run.
//!
//! [`Scheduler::tick_at`] is the whole decision, given the time: for each active, unpaused job
//! whose next slot has come, find the latest slot that is not older than
//! `scheduler.misfire_grace_secs`, **claim** it in SQLite (`UNIQUE(job_id, scheduled_for)`, so
//! one claimant per slot across connections, processes and restarts), then move the job's next
//! slot past now (or mark it done: a one-shot that fired, a job past its `end_date`). Slots
//! older than the grace (the daemon was down) are not run; the first of them is recorded as
//! `missed` and logged. Claiming comes before advancing, so a crash in between leaves a slot
//! that is re-found and recognised as claimed.
//!
//! [`Scheduler::run`] calls it on a [`Clock`] (injectable: tests drive a [`ManualClock`]),
//! sleeping until the next slot (at most `poll`), and hands each claim to an [`Execute`]. The
//! real one, [`JobExecutor`], runs the agent unattended in the session `schedule:<job_id>` —
//! read-only tools plus the job's `allowed_tools`, never a `consent_always` call — with a note
//! telling the model its final answer is delivered for it, records the result, and posts the
//! digest ([`super::delivery`]). Runs of one job are serialised within a process.
//!
//! Runs whose claimant is gone (a replica that died or lost the run's lease; on SQLite a dead
//! process of this host) are marked `interrupted` and run again once ([`super::takeover`]),
//! at start and every [`TAKEOVER_EVERY`] at most. On a shared store a run holds a lease while it
//! executes ([`super::lease`]); a run that lost it records and posts nothing.

use super::delivery::{self, RetryPolicy};
use super::job::{next_slot, schedule_of, target_label, zone_of, Target};
use super::lease::{RunFence, RunLeases};
use crate::agent::{Agent, TurnInput, TurnOutcome};
use crate::config::Config;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use ethan_channels::{Channel, ChannelKind, OutboundBody, OutboundMessage};
use ethan_core::store::{
    Delivery, JobRecord, JobState, RunRecord, RunStatus, StorageRef, StoreError,
};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Semaphore};
use tokio_util::sync::CancellationToken;

pub use ethan_core::clock::{Clock, ManualClock, SystemClock};

/// The clock's time as a UTC date-time (whole milliseconds).
fn now_of(clock: &dyn Clock) -> DateTime<Utc> {
    DateTime::from_timestamp_millis(clock.unix_millis()).unwrap_or_default()
}

/// Scheduler settings.
#[derive(Debug, Clone)]
pub struct SchedulerOptions {
    /// A slot this late or less still runs (`scheduler.misfire_grace_secs`).
    pub misfire_grace_secs: u64,
    /// `timezone` from the config.
    pub config_timezone: Option<String>,
    /// The longest sleep between looks at the database (new jobs are noticed within it).
    pub poll: Duration,
    /// Runs executing at once.
    pub max_concurrent_runs: usize,
}

impl SchedulerOptions {
    pub fn from_config(c: &Config) -> Self {
        Self {
            misfire_grace_secs: c.scheduler.misfire_grace_secs,
            config_timezone: c.timezone.clone().filter(|t| !t.trim().is_empty()),
            poll: Duration::from_secs(1),
            max_concurrent_runs: 4,
        }
    }
}

/// What started a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trigger {
    /// The scheduler, at the slot's time.
    Schedule,
    /// `ethan jobs run`.
    Manual,
    /// A run of a slot whose first run's claimant is gone ([`super::takeover`]).
    Takeover,
}

impl Trigger {
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Schedule => "schedule",
            Trigger::Manual => "manual",
            Trigger::Takeover => "takeover",
        }
    }
}

/// A claimed slot, ready to run.
#[derive(Debug, Clone)]
pub struct Claim {
    pub run_id: i64,
    pub job: JobRecord,
    pub scheduled_for: DateTime<Utc>,
    pub trigger: Trigger,
}

/// Why `ethan jobs run` could not claim a run.
#[derive(Debug, thiserror::Error)]
pub enum RunNowError {
    #[error("there is no job {0:?} (`ethan jobs list` shows the ids)")]
    NotFound(String),
    #[error("the run of job {job} for {slot} is already claimed (by the daemon or another `ethan jobs run`)")]
    AlreadyClaimed { job: String, slot: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// `<host>:<pid>`: who claimed a run.
pub fn process_identity() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| std::fs::read_to_string("/etc/hostname"))
        .map(|h| h.trim().to_string())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".into());
    format!("{host}:{}", std::process::id())
}

/// The user id of a job's creator (`telegram:4242` → `4242`).
fn creator_user(creator: &str) -> String {
    creator
        .split_once(':')
        .map_or(creator, |(_, u)| u)
        .to_string()
}

/// How often at most the scheduler looks for runs whose claimant is gone.
pub const TAKEOVER_EVERY: Duration = Duration::from_secs(5);

/// Why a run claimed by `claimed_by` (`host:pid`) is known dead: a process of this host (the
/// host of `me`) other than this one that no longer exists; `None` otherwise.
pub fn gone_locally(claimed_by: &str, me: &str) -> Option<String> {
    let (host, _) = me.rsplit_once(':').unwrap_or((me, ""));
    let (h, pid) = claimed_by.rsplit_once(':')?;
    let pid: i32 = pid.parse().unwrap_or(0);
    (h == host && pid as u32 != std::process::id() && process_gone(pid))
        .then(|| format!("the process running it ({claimed_by}) ended before it finished"))
}

/// Whether process `pid` is gone (this host only).
fn process_gone(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: kill with signal 0 only checks whether the process exists; it sends nothing.
    let r = unsafe { libc::kill(pid, 0) };
    r != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::ESRCH)
}

fn at(ts: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(ts, 0).unwrap_or_default()
}

/// The scheduler: decides which slots run, claims them, and (in [`Scheduler::run`]) starts them.
pub struct Scheduler {
    store: StorageRef,
    clock: Arc<dyn Clock>,
    opts: SchedulerOptions,
    identity: String,
    leases: Option<Arc<RunLeases>>,
    /// Where runs are counted (`ethan_scheduler_runs_total`).
    metrics: Arc<crate::metrics::Metrics>,
}

impl Scheduler {
    pub fn new(store: StorageRef, clock: Arc<dyn Clock>, opts: SchedulerOptions) -> Self {
        Self {
            store,
            clock,
            opts,
            identity: process_identity(),
            leases: None,
            metrics: Default::default(),
        }
    }

    /// Count missed runs in `metrics` (the daemon's registry) instead of a registry of its own.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Hold a lease on each run claimed (a shared store); the claimant becomes the leases'
    /// holder.
    pub fn with_leases(mut self, leases: Option<Arc<RunLeases>>) -> Self {
        if let Some(l) = &leases {
            self.identity = l.holder().to_string();
        }
        self.leases = leases;
        self
    }

    pub fn leases(&self) -> Option<&Arc<RunLeases>> {
        self.leases.as_ref()
    }

    /// Who claims runs (`claimed_by`).
    pub fn identity(&self) -> &str {
        &self.identity
    }

    pub fn options(&self) -> &SchedulerOptions {
        &self.opts
    }

    /// Take the new run's lease (a shared store). Not taken (a store error), the run's own
    /// renewal finds it missing and cancels it, and another replica runs the slot again.
    async fn lease_new(&self, run_id: i64) {
        if let Some(l) = &self.leases {
            l.take(run_id).await;
        }
    }

    /// Use another claimant name (tests that play two schedulers in one process).
    pub fn with_identity(mut self, identity: impl Into<String>) -> Self {
        self.identity = identity.into();
        self
    }

    pub fn store(&self) -> &StorageRef {
        &self.store
    }

    /// [`Scheduler::tick_at`] the clock's time.
    pub async fn tick(&self) -> Vec<Claim> {
        self.tick_at(now_of(&*self.clock)).await
    }

    /// Claim every slot due at `now`; see the module docs. Database errors are logged and the
    /// job is tried again at the next tick.
    pub async fn tick_at(&self, now: DateTime<Utc>) -> Vec<Claim> {
        let jobs = match self.store.due_jobs(now.timestamp()).await {
            Ok(j) => j,
            Err(e) => {
                tracing::error!("scheduler: cannot read due jobs: {e}");
                return Vec::new();
            }
        };
        let mut claims = Vec::new();
        for job in jobs {
            match self.claim_due(&job, now, Trigger::Schedule).await {
                Ok(Some(c)) => claims.push(c),
                Ok(None) => {}
                Err(e) => tracing::error!("scheduler: job {}: {e}", job.id),
            }
        }
        claims
    }

    /// For a job whose next slot is at or before `now`: claim the latest slot within the grace
    /// (if any), record missed ones, and advance the job.
    async fn claim_due(
        &self,
        job: &JobRecord,
        now: DateTime<Utc>,
        trigger: Trigger,
    ) -> Result<Option<Claim>, StoreError> {
        let Some(next) = job.next_run else {
            return Ok(None);
        };
        let schedule = match schedule_of(job) {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(
                    "scheduler: job {} has an unreadable schedule ({e}); it will not run again",
                    job.id
                );
                self.store.advance_job(&job.id, Some(next), None).await?;
                return Ok(None);
            }
        };
        let zone = zone_of(job, self.opts.config_timezone.as_deref());
        let now_s = now.timestamp();
        let window_start = now_s.saturating_sub(self.opts.misfire_grace_secs as i64);
        // The slots in [max(next, window_start), now]: run the latest of them.
        let mut cursor = if next >= window_start {
            Some(next)
        } else {
            next_slot(job, &schedule, &zone, at(window_start - 1)).map(|t| t.timestamp())
        };
        let mut slot = None;
        while let Some(t) = cursor {
            if t > now_s {
                break;
            }
            slot = Some(t);
            cursor = next_slot(job, &schedule, &zone, at(t)).map(|t| t.timestamp());
        }
        if slot != Some(next) {
            let note = match slot {
                Some(s) => format!(
                    "slots from {} to before {} passed while no scheduler ran; only the latest runs",
                    at(next),
                    at(s)
                ),
                None => format!(
                    "slots from {} on passed more than {} s ago while no scheduler ran; skipped \
                     (scheduler.misfire_grace_secs)",
                    at(next),
                    self.opts.misfire_grace_secs
                ),
            };
            if self
                .store
                .record_missed_run(&job.id, next, &self.identity, &note)
                .await?
                .is_some()
            {
                tracing::warn!("scheduler: job {}: {note}", job.id);
                self.metrics
                    .scheduler_runs
                    .with_label_values(&[RunStatus::Missed.as_str()])
                    .inc();
            }
        }
        let claim = match slot {
            Some(s) => match self
                .store
                .claim_run(&job.id, s, trigger.as_str(), &self.identity)
                .await?
            {
                Some(run_id) => {
                    self.lease_new(run_id).await;
                    Some(Claim {
                        run_id,
                        job: job.clone(),
                        scheduled_for: at(s),
                        trigger,
                    })
                }
                None => {
                    tracing::debug!("scheduler: job {} slot {} claimed elsewhere", job.id, at(s));
                    None
                }
            },
            None => None,
        };
        let new_next = cursor;
        if self
            .store
            .advance_job(&job.id, Some(next), new_next)
            .await?
        {
            match new_next {
                Some(n) => tracing::debug!("scheduler: job {} next at {}", job.id, at(n)),
                None => tracing::info!("scheduler: job {} is done (no slots left)", job.id),
            }
        }
        Ok(claim)
    }

    /// Claim a run of `job_id` now (`ethan jobs run`): its due slot if it has one within the
    /// grace (so the scheduler does not run that slot too), else the current second.
    pub async fn claim_now(&self, job_id: &str) -> Result<Claim, RunNowError> {
        let job = self
            .store
            .get_job(job_id)
            .await?
            .ok_or_else(|| RunNowError::NotFound(job_id.to_string()))?;
        let now = at(now_of(&*self.clock).timestamp());
        let due = job.state == JobState::Active
            && !job.paused
            && job.next_run.is_some_and(|n| n <= now.timestamp());
        if due {
            if let Some(c) = self.claim_due(&job, now, Trigger::Manual).await? {
                return Ok(c);
            }
        }
        match self
            .store
            .claim_run(
                &job.id,
                now.timestamp(),
                Trigger::Manual.as_str(),
                &self.identity,
            )
            .await?
        {
            Some(run_id) => {
                self.lease_new(run_id).await;
                Ok(Claim {
                    run_id,
                    job,
                    scheduled_for: now,
                    trigger: Trigger::Manual,
                })
            }
            None => Err(RunNowError::AlreadyClaimed {
                job: job.id,
                slot: now.to_rfc3339(),
            }),
        }
    }

    /// How often to look for runs whose claimant is gone: [`TAKEOVER_EVERY`], or half the
    /// lease when that is shorter.
    fn takeover_every(&self) -> Duration {
        self.leases.as_ref().map_or(TAKEOVER_EVERY, |l| {
            TAKEOVER_EVERY.min(Duration::from_millis(l.secs * 500))
        })
    }

    /// How long to sleep: until the next slot, at most `poll`.
    async fn sleep_for(&self) -> Duration {
        let now = now_of(&*self.clock).timestamp_millis();
        match self.store.next_due_at().await {
            Ok(Some(next)) => {
                let ms = (next * 1000).saturating_sub(now).max(0) as u64;
                Duration::from_millis(ms).clamp(Duration::from_millis(10), self.opts.poll)
            }
            _ => self.opts.poll,
        }
    }

    /// Run until `shutdown` turns true: claim due slots and hand each to `exec` (at most
    /// `max_concurrent_runs` at once).
    pub async fn run(self: Arc<Self>, exec: Arc<dyn Execute>, mut shutdown: watch::Receiver<bool>) {
        match self.store.list_jobs().await {
            Ok(jobs) => {
                let active = jobs
                    .iter()
                    .filter(|j| j.state == JobState::Active && !j.paused)
                    .count();
                tracing::info!("scheduler: {active} active job(s) of {}", jobs.len());
            }
            Err(e) => tracing::error!("scheduler: cannot list jobs: {e}"),
        }
        let slots = Arc::new(Semaphore::new(self.opts.max_concurrent_runs.max(1)));
        let mut looked: Option<std::time::Instant> = None;
        loop {
            if *shutdown.borrow() {
                break;
            }
            let mut claims = Vec::new();
            if looked.is_none_or(|t| t.elapsed() >= self.takeover_every()) {
                looked = Some(std::time::Instant::now());
                claims = self.take_over_dead(now_of(&*self.clock)).await;
                for (run, job) in self.take_over_undelivered(now_of(&*self.clock)).await {
                    let exec = exec.clone();
                    ethan_core::task::spawn(async move { exec.deliver_stored(run, job).await });
                }
            }
            claims.extend(self.tick().await);
            for claim in claims {
                tracing::info!(
                    "scheduler: running job {} (slot {}, run {})",
                    claim.job.id,
                    claim.scheduled_for,
                    claim.run_id
                );
                let (exec, slots) = (exec.clone(), slots.clone());
                ethan_core::task::spawn(async move {
                    let Ok(_permit) = slots.acquire_owned().await else {
                        return;
                    };
                    exec.execute(claim).await;
                });
            }
            let wait = self.sleep_for().await;
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                r = shutdown.changed() => if r.is_err() { break },
            }
        }
        tracing::debug!("scheduler stopped");
    }
}

/// How a run went, as recorded.
#[derive(Debug, Clone)]
pub struct RunReport {
    pub run_id: i64,
    pub status: RunStatus,
    /// The digest posted (or that would have been).
    pub digest: Option<String>,
    pub delivery: Delivery,
    pub message_id: Option<String>,
    pub error: Option<String>,
}

impl RunReport {
    /// A run that lost its lease: nothing of it was recorded or posted here.
    fn lost(run_id: i64) -> Self {
        Self {
            run_id,
            status: RunStatus::Interrupted,
            digest: None,
            delivery: Delivery::Skipped,
            message_id: None,
            error: Some("this process lost the run's lease; another replica runs it".into()),
        }
    }
}

/// Executes claimed runs.
#[async_trait]
pub trait Execute: Send + Sync {
    async fn execute(&self, claim: Claim) -> RunReport;
    /// Post the stored digest of a run whose claimant died after recording its result but
    /// before recording its delivery ([`Scheduler::take_over_undelivered`]).
    async fn deliver_stored(&self, run: RunRecord, job: JobRecord);
}

/// The real executor: the agent, unattended, and the chat adapters to post with.
pub struct JobExecutor {
    agent: Arc<Agent>,
    channels: HashMap<ChannelKind, Arc<dyn Channel>>,
    store: StorageRef,
    retry: RetryPolicy,
    config_timezone: Option<String>,
    locks: JobLocks,
    leases: Option<Arc<RunLeases>>,
    /// Where runs are counted (`ethan_scheduler_runs_total`).
    metrics: Arc<crate::metrics::Metrics>,
}

/// One lock per job with a run in progress, so runs of a job are serialised within a process.
/// A job's entry exists only while a run of it holds or waits for the lock, so the map stays as
/// small as the number of runs in progress (deleted jobs leave nothing behind).
#[derive(Default)]
pub struct JobLocks {
    map: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
}

/// Held while a run of one job executes; dropping it releases the lock and forgets the job's
/// entry when no other run of it is waiting.
pub struct JobSerial {
    map: Arc<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>>,
    id: String,
    guard: Option<tokio::sync::OwnedMutexGuard<()>>,
}

impl JobLocks {
    /// Wait until no other run of job `id` is in progress in this process, then hold its lock.
    pub async fn acquire(&self, id: &str) -> JobSerial {
        // The clone is taken under the map's lock, so `JobSerial::drop` sees every waiter.
        let lock = self
            .map
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(id.to_string())
            .or_default()
            .clone();
        let guard = lock.lock_owned().await;
        JobSerial {
            map: self.map.clone(),
            id: id.to_string(),
            guard: Some(guard),
        }
    }

    /// The number of jobs with a run holding or waiting for its lock.
    pub fn len(&self) -> usize {
        self.map.lock().unwrap_or_else(|p| p.into_inner()).len()
    }

    /// Whether no run holds or waits for a lock.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Drop for JobSerial {
    fn drop(&mut self) {
        drop(self.guard.take());
        let mut map = self.map.lock().unwrap_or_else(|p| p.into_inner());
        // Only the map holds it: no run of this job holds or waits for the lock.
        if map.get(&self.id).is_some_and(|l| Arc::strong_count(l) == 1) {
            map.remove(&self.id);
        }
    }
}

/// The session of a job's runs.
pub fn session_key(job_id: &str) -> String {
    format!("schedule:{job_id}")
}

/// The turn's text: a note on how the run works, then the job's prompt.
pub fn run_text(job: &JobRecord, slot: DateTime<Utc>, zone: &chrono_tz::Tz) -> String {
    let tools = if job.allowed_tools.is_empty() {
        "read-only tools only".to_string()
    } else {
        format!("read-only tools plus {}", job.allowed_tools.join(", "))
    };
    format!(
        "[System note: this is a run of the scheduled job `{id}` (\"{title}\") for {when}. Nobody is \
         watching and nothing can be approved; you may use {tools}. Your final answer is posted \
         for you to {target} as the digest titled \"{title}\": write it for the people in that \
         chat, do not send it yourself with a messaging tool, and leave out raw tool output, JSON \
         and message ids. If there is nothing to report, say so in one line.]\n\n{prompt}",
        id = job.id,
        title = job.title,
        when = super::tz::display(zone, slot),
        target = target_label(job),
        prompt = job.prompt,
    )
}

fn trace_id(job_id: &str, slot: DateTime<Utc>) -> String {
    let d = Sha256::digest(format!("schedule:{job_id}:{}", slot.timestamp()).as_bytes());
    hex::encode(&d[..12])
}

impl JobExecutor {
    pub fn new(
        agent: Arc<Agent>,
        channels: HashMap<ChannelKind, Arc<dyn Channel>>,
        store: StorageRef,
        retry: RetryPolicy,
    ) -> Self {
        let config_timezone = agent
            .config
            .config
            .timezone
            .clone()
            .filter(|t| !t.trim().is_empty());
        Self {
            agent,
            channels,
            store,
            retry,
            config_timezone,
            locks: JobLocks::default(),
            leases: None,
            metrics: Default::default(),
        }
    }

    /// Count runs in `metrics` (the daemon's registry) instead of a registry of its own.
    pub fn with_metrics(mut self, metrics: Arc<crate::metrics::Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// Hold each run's lease while it executes, and fence its turn, its record and its digest
    /// on it (a shared store; see [`super::lease`]).
    pub fn with_leases(mut self, leases: Option<Arc<RunLeases>>) -> Self {
        self.leases = leases;
        self
    }

    /// The turn of a run: the job's prompt in its session, unattended, fenced by `fence`.
    fn turn_input(&self, claim: &Claim, fence: Option<&RunFence>) -> TurnInput {
        let job = &claim.job;
        let zone = zone_of(job, self.config_timezone.as_deref());
        let target = Target::of(job);
        TurnInput {
            session_key: session_key(&job.id),
            channel: target.as_ref().map_or(ChannelKind::Terminal, |t| t.channel),
            chat_id: job.chat_id.clone(),
            user_id: creator_user(&job.creator),
            // Only the owner can create a job (a consented side effect).
            is_owner: true,
            text: run_text(job, claim.scheduled_for, &zone),
            trace_id: trace_id(&job.id, claim.scheduled_for),
            // The chat it posts to: a group's job sees the group's memory, never the owner's.
            chat: target.as_ref().map(|t| t.chat.clone()),
            unattended: true,
            allowed_tools: Some(job.allowed_tools.clone()),
            events: None,
            model: job.model.clone(),
            job_id: Some(job.id.clone()),
            images: Vec::new(),
            private_input: None,
            outside_input: None,
            child: None,
            fence: fence.map(|f| Arc::new(f.clone()) as Arc<dyn ethan_core::tool::Fence>),
        }
    }

    /// Whether the run still holds its lease (always, without leases). A run that lost it is
    /// reported as interrupted, and neither its result nor its digest is recorded or posted.
    async fn still_holds(&self, fence: Option<&RunFence>, claim: &Claim, what: &str) -> bool {
        let Some(f) = fence else {
            return true;
        };
        if f.holds().await {
            return true;
        }
        tracing::warn!(
            "scheduler: run {} of job {} lost its lease before {what}: another replica runs the \
             slot again, so this one records and posts nothing",
            claim.run_id,
            claim.job.id
        );
        false
    }

    /// Post `body` to `target`, retried by the executor's policy; every retry first confirms
    /// the run's lease when `fence` is given (a refused retry: the error's `fenced`).
    async fn post(
        &self,
        target: &Target,
        body: OutboundBody,
        fence: Option<&RunFence>,
    ) -> Result<(u32, Option<String>), delivery::DeliveryError> {
        let Some(ch) = self.channels.get(&target.channel) else {
            return Err(delivery::DeliveryError {
                attempts: 0,
                error: format!(
                    "no {} channel is configured to post to {}",
                    target.channel,
                    target.label()
                ),
                fenced: false,
            });
        };
        let msg = OutboundMessage {
            chat: target.chat.clone(),
            reply_to: None,
            body,
            idempotency_key: None,
        };
        let fence = fence.map(|f| f as &dyn ethan_core::tool::Fence);
        delivery::send_with_retry_fenced(ch.as_ref(), &msg, &self.retry, fence)
            .await
            .map(|(tries, sent)| (tries, sent.message_ids.first().cloned()))
    }

    /// Post run `run_id`'s cards and `digest` to `target` and record the delivery: the
    /// delivery, the message id and the error recorded, or `None` when the run's lease refused
    /// a retry (nothing recorded: the replica that takes the run over posts it).
    async fn deliver(
        &self,
        run_id: i64,
        job: &JobRecord,
        target: Option<&Target>,
        digest: Option<String>,
        cards: Vec<ethan_cards::Ui>,
        fence: Option<&RunFence>,
    ) -> Option<(Delivery, Option<String>, Option<String>)> {
        let (result, attempts) = match (target, &digest) {
            (_, None) => {
                tracing::info!(
                    "scheduler: job {} run {run_id} produced nothing to post",
                    job.id
                );
                (Ok(None), 0)
            }
            (None, Some(_)) => (
                Err(format!(
                    "the job's target {} is not a chat",
                    target_label(job)
                )),
                0,
            ),
            (Some(t), Some(digest)) => {
                for ui in cards {
                    if let Err(e) = self.post(t, OutboundBody::Ui(ui), fence).await {
                        if e.fenced {
                            return None;
                        }
                        tracing::warn!(
                            "scheduler: a card of job {} was not posted: {}",
                            job.id,
                            e.error
                        );
                    }
                }
                match self
                    .post(t, OutboundBody::Text(digest.clone()), fence)
                    .await
                {
                    Ok((tries, id)) => (Ok(id), tries),
                    Err(e) if e.fenced => return None,
                    Err(e) => (Err(e.error), e.attempts),
                }
            }
        };
        let (delivery, message_id, derr) = match result {
            Ok(None) if digest.is_none() => (Delivery::Skipped, None, None),
            Ok(id) => (Delivery::Delivered, id, None),
            Err(e) => (Delivery::Failed, None, Some(e)),
        };
        match &derr {
            Some(e) => tracing::error!(
                "scheduler: the digest of job {} (run {run_id}) was not delivered to {}: {e}",
                job.id,
                target_label(job)
            ),
            None if delivery == Delivery::Delivered => tracing::info!(
                "scheduler: job {} run {run_id} delivered to {}",
                job.id,
                target_label(job)
            ),
            None => {}
        }
        if let Err(e) = self
            .store
            .record_delivery(
                run_id,
                delivery,
                attempts,
                message_id.as_deref(),
                derr.as_deref(),
            )
            .await
        {
            tracing::error!("scheduler: cannot record the delivery of run {run_id}: {e}");
        }
        Some((delivery, message_id, derr))
    }

    /// Post the stored digest of `run`, which ended but whose claimant died before its
    /// delivery was recorded ([`super::takeover`]); the turn is not run again. With run leases,
    /// the caller took the run's lease, and it is given up here.
    async fn post_stored(&self, run: RunRecord, job: JobRecord) {
        let digest = run
            .output
            .as_deref()
            .and_then(|o| delivery::digest(&job.title, o));
        let fence = (self.leases.as_ref())
            .map(|l| RunFence::new(l.clone(), run.id, CancellationToken::new()));
        tracing::info!(
            "scheduler: posting the stored digest of job {} run {} (its claimant {} died \
             before recording the delivery; the turn is not run again)",
            job.id,
            run.id,
            run.claimed_by
        );
        let target = Target::of(&job);
        self.deliver(
            run.id,
            &job,
            target.as_ref(),
            digest,
            Vec::new(),
            fence.as_ref(),
        )
        .await;
        if let Some(l) = &self.leases {
            l.release(run.id).await;
        }
    }
}

#[async_trait]
impl Execute for JobExecutor {
    async fn deliver_stored(&self, run: RunRecord, job: JobRecord) {
        self.post_stored(run, job).await;
    }

    async fn execute(&self, claim: Claim) -> RunReport {
        let _serial = self.locks.acquire(&claim.job.id).await;
        let job = &claim.job;
        let target = Target::of(job);
        let cancel = CancellationToken::new();
        let fence =
            (self.leases.as_ref()).map(|l| RunFence::new(l.clone(), claim.run_id, cancel.clone()));
        let _hold = (self.leases.as_ref()).map(|l| l.hold(claim.run_id, cancel.clone()));
        let input = self.turn_input(&claim, fence.as_ref());
        let reply = self.agent.run_turn_with_cards(&input, &cancel).await;
        if !self.still_holds(fence.as_ref(), &claim, "it ended").await {
            return RunReport::lost(claim.run_id);
        }
        let (status, answer, error) = match reply.outcome {
            TurnOutcome::Answer(t) => (RunStatus::Ok, t, None),
            TurnOutcome::IterationCap(t) => {
                (RunStatus::Failed, t, Some("tool-iteration cap".to_string()))
            }
            TurnOutcome::Failed {
                user_message,
                detail,
            } => (
                RunStatus::Failed,
                format!("This run failed: {user_message}"),
                Some(detail),
            ),
            TurnOutcome::Stopped => (
                RunStatus::Failed,
                "This run was stopped.".to_string(),
                Some("stopped".to_string()),
            ),
        };
        if let Err(e) = self
            .store
            .finish_run(claim.run_id, status, Some(&answer), error.as_deref())
            .await
        {
            tracing::error!("scheduler: cannot record run {}: {e}", claim.run_id);
        }
        self.metrics
            .scheduler_runs
            .with_label_values(&[status.as_str()])
            .inc();
        let mut report = RunReport {
            run_id: claim.run_id,
            status,
            digest: delivery::digest(&job.title, &answer),
            delivery: Delivery::Skipped,
            message_id: None,
            error,
        };
        let posts = target.is_some() && report.digest.is_some();
        if posts && !self.still_holds(fence.as_ref(), &claim, "its digest").await {
            return RunReport::lost(claim.run_id);
        }
        let digest = report.digest.clone();
        let Some((delivery, message_id, derr)) = self
            .deliver(
                claim.run_id,
                job,
                target.as_ref(),
                digest,
                reply.cards,
                fence.as_ref(),
            )
            .await
        else {
            // Lost the lease while waiting to retry: the run stays undelivered for the
            // replica that takes it over ([`super::takeover`]).
            return RunReport::lost(claim.run_id);
        };
        report.delivery = delivery;
        report.message_id = message_id;
        if report.error.is_none() {
            report.error = derr;
        }
        if let Some(l) = &self.leases {
            l.release(claim.run_id).await;
        }
        report
    }
}
