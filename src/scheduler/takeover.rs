//! Runs whose claimant is gone: found, marked `interrupted` with the reason, and — once — run
//! again.
//!
//! A run is the claimant's while it executes. It is found gone:
//! - on a shared store (PostgreSQL, [`super::lease`]): the run is `running`, it started more
//!   than `store.lease_secs` ago, and nobody holds its lease `job.run:<id>` (the replica that
//!   claimed it died, or was paused or cut off from the database past the lease). Every
//!   replica's scheduler looks; the one that takes the dead run's lease is the only one that
//!   handles it.
//! - on SQLite (one process): the run was claimed on this host by a process that no longer
//!   exists (a crash or kill -9 of the daemon or of `ethan jobs run`).
//!
//! **Retried** means: the dead run is marked `interrupted` (its `error` names the claimant, when
//! it started, and what happens next), then a new run of the same job is claimed with trigger
//! `takeover` — its `scheduled_for` is the moment of the takeover (a run is unique per job and
//! second), and the turn runs for the original slot (same prompt, same trace id, so a call the
//! dead run already made is recognised by the replay guard). A run is retried only when it was
//! the scheduler's (`schedule`: a `manual` run was someone's `ethan jobs run`, a `takeover` run
//! is not retried twice), its slot is still within `scheduler.misfire_grace_secs`, and the job
//! is not paused. The dead run is marked before the new one is claimed, so a taker that dies in
//! between leaves the slot not run again rather than run twice.
//!
//! A run whose claimant died after recording its result (`ok` or `failed`) but before recording
//! its digest's delivery (still `pending`) is found gone by the same signs (started more than a
//! lease ago and its lease free; on SQLite, its process gone) within [`UNDELIVERED_WINDOW`]. Its
//! stored digest is posted once by whoever takes its lease, without running the turn again
//! ([`Scheduler::take_over_undelivered`]), and the delivery is recorded as for any run. The
//! digest is thus delivered at least once: a claimant that died after the platform accepted the
//! post but before recording it leaves it to be posted a second time.

use super::lease::run_lease;
use super::runner::{Claim, Scheduler, Trigger};
use chrono::{DateTime, Utc};
use ethan_core::store::{Delivery, JobRecord, RunRecord, RunStatus};

/// How far back an undelivered run is looked for (a digest older than this is not posted late).
pub const UNDELIVERED_WINDOW: i64 = 24 * 3600;

fn at(ts: i64) -> DateTime<Utc> {
    DateTime::from_timestamp(ts, 0).unwrap_or_default()
}

impl Scheduler {
    /// Mark the runs whose claimant is gone `interrupted` and claim the slots that the rule
    /// runs again (see the module docs); returns the new claims.
    pub async fn take_over_dead(&self, now: DateTime<Utc>) -> Vec<Claim> {
        let runs = match self.store().running_runs().await {
            Ok(r) => r,
            Err(e) => {
                tracing::error!("scheduler: cannot read running runs: {e}");
                return Vec::new();
            }
        };
        if runs.is_empty() {
            return Vec::new();
        }
        let dead = match self.dead_runs(runs, now).await {
            Ok(d) => d,
            Err(e) => {
                tracing::error!("scheduler: cannot read the run leases: {e}");
                return Vec::new();
            }
        };
        let mut claims = Vec::new();
        for (run, why) in dead {
            if let Some(leases) = self.leases() {
                // Another replica handles it, or already did.
                if !leases.take(run.id).await {
                    continue;
                }
            }
            if let Some(c) = self.take_over(&run, &why, now).await {
                claims.push(c);
            }
            if let Some(leases) = self.leases() {
                leases.release(run.id).await;
            }
        }
        claims
    }

    /// The runs that ended but whose digest's delivery is still `pending` and whose claimant is
    /// gone, each with its job, to have their stored digest posted (see the module docs). With
    /// run leases, the lease of each returned run is taken (the poster gives it up).
    pub async fn take_over_undelivered(&self, now: DateTime<Utc>) -> Vec<(RunRecord, JobRecord)> {
        let since = now.timestamp() - UNDELIVERED_WINDOW;
        let runs = match self.store().undelivered_runs(since).await {
            Ok(r) if r.is_empty() => return Vec::new(),
            Ok(r) => r,
            Err(e) => {
                tracing::error!("scheduler: cannot read undelivered runs: {e}");
                return Vec::new();
            }
        };
        let gone = match self.dead_runs(runs, now).await {
            Ok(d) => d,
            Err(e) => {
                tracing::error!("scheduler: cannot read the run leases: {e}");
                return Vec::new();
            }
        };
        let mut taken = Vec::new();
        for (run, _) in gone {
            if let Some(leases) = self.leases() {
                if !leases.take(run.id).await {
                    continue;
                }
            }
            match self.still_undelivered(&run).await {
                Some(job) => taken.push((run, job)),
                None => {
                    if let Some(leases) = self.leases() {
                        leases.release(run.id).await;
                    }
                }
            }
        }
        taken
    }

    /// The job of `run` when its delivery is still `pending` (read again under its lease:
    /// another replica may have posted it since); a removed job's run is recorded as failed.
    async fn still_undelivered(&self, run: &RunRecord) -> Option<JobRecord> {
        match self.store().get_run(run.id).await {
            Ok(Some(r)) if r.delivery == Delivery::Pending => {}
            _ => return None,
        }
        match self.store().get_job(&run.job_id).await {
            Ok(Some(job)) => Some(job),
            Ok(None) => {
                let why = "its claimant died before posting the digest, and the job was removed";
                if let Err(e) = (self.store())
                    .record_delivery(run.id, Delivery::Failed, 0, None, Some(why))
                    .await
                {
                    tracing::error!(
                        "scheduler: cannot record the delivery of run {}: {e}",
                        run.id
                    );
                }
                None
            }
            Err(e) => {
                tracing::error!("scheduler: cannot read job {}: {e}", run.job_id);
                None
            }
        }
    }

    /// The running runs whose claimant is gone, each with why it is thought gone.
    async fn dead_runs(
        &self,
        runs: Vec<RunRecord>,
        now: DateTime<Utc>,
    ) -> Result<Vec<(RunRecord, String)>, ethan_core::store::StoreError> {
        let Some(leases) = self.leases() else {
            return Ok(runs
                .into_iter()
                .filter_map(|r| {
                    let why = super::runner::gone_locally(&r.claimed_by, self.identity())?;
                    Some((r, why))
                })
                .collect());
        };
        let live = leases.live().await?;
        let old = now.timestamp() - leases.secs as i64;
        Ok(runs
            .into_iter()
            .filter(|r| r.started_at <= old && !live.contains(&run_lease(r.id)))
            .map(|r| {
                let why = format!(
                    "{} stopped renewing its lease ({} s) while running it (it died, or was \
                     paused or cut off from the database)",
                    r.claimed_by, leases.secs
                );
                (r, why)
            })
            .collect())
    }

    /// Mark `run` interrupted and, when the rule allows, claim its slot again.
    async fn take_over(&self, run: &RunRecord, why: &str, now: DateTime<Utc>) -> Option<Claim> {
        let job = match self.retry_rule(run, now).await {
            Ok(job) => job,
            Err(not) => {
                self.mark(run, &format!("{why}; not run again: {not}"))
                    .await;
                return None;
            }
        };
        let me = self.identity().to_string();
        self.mark(
            run,
            &format!("{why}; run again by {me} (a `takeover` run) at {now}"),
        )
        .await?;
        let run_id = match self
            .store()
            .claim_run(&job.id, now.timestamp(), Trigger::Takeover.as_str(), &me)
            .await
        {
            Ok(Some(id)) => id,
            Ok(None) => {
                tracing::warn!(
                    "scheduler: run {} of job {} was not run again: a run of it at {now} exists",
                    run.id,
                    job.id
                );
                return None;
            }
            Err(e) => {
                tracing::error!("scheduler: cannot run job {} again: {e}", job.id);
                return None;
            }
        };
        if let Some(leases) = self.leases() {
            if !leases.take(run_id).await {
                return None;
            }
        }
        Some(Claim {
            run_id,
            job,
            scheduled_for: at(run.scheduled_for),
            trigger: Trigger::Takeover,
        })
    }

    /// The job to run again, or why the run is not run again.
    async fn retry_rule(&self, run: &RunRecord, now: DateTime<Utc>) -> Result<JobRecord, String> {
        if run.trigger != Trigger::Schedule.as_str() {
            return Err(format!(
                "it was a `{}` run, not the scheduler's",
                run.trigger
            ));
        }
        let grace = self.options().misfire_grace_secs;
        if now.timestamp() - run.scheduled_for > grace as i64 {
            return Err(format!(
                "its slot is more than {grace} s old (scheduler.misfire_grace_secs)"
            ));
        }
        match self.store().get_job(&run.job_id).await {
            Ok(Some(job)) if job.paused => Err("the job is paused".into()),
            Ok(Some(job)) => Ok(job),
            Ok(None) => Err("the job was removed".into()),
            Err(e) => Err(format!("the job cannot be read: {e}")),
        }
    }

    /// Record `run` as interrupted for `note`; `None` (logged) when the store refuses.
    async fn mark(&self, run: &RunRecord, note: &str) -> Option<()> {
        let note = format!("interrupted: started {}, {note}", at(run.started_at));
        if let Err(e) = self
            .store()
            .finish_run(run.id, RunStatus::Interrupted, None, Some(&note))
            .await
        {
            tracing::error!("scheduler: cannot mark run {} interrupted: {e}", run.id);
            return None;
        }
        tracing::warn!(
            "scheduler: run {} of job {} (slot {}) {note}",
            run.id,
            run.job_id,
            at(run.scheduled_for)
        );
        Some(())
    }
}
