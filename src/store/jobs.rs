//! Scheduled jobs and their run history (tables `jobs` and `job_runs`).
//!
//! A job row holds what to run (the prompt), when (`kind` + `spec`, its time zone, its next fire
//! time `next_run`, an optional end), where the digest goes (channel, chat id, thread) and who
//! created it. A run row is the claim on one slot: `UNIQUE(job_id, scheduled_for)` makes
//! [`Db::claim_run`] succeed for exactly one caller per slot, across connections and
//! processes, before the run starts. The row then records how the run went and whether its digest
//! was delivered.
//!
//! Times are Unix seconds (UTC). This file knows nothing about cron or time zones; the
//! scheduler (`crate::scheduler`) computes the instants.

use super::{now, Ctx, Db, StoreError};
pub use ethan_core::store::{Delivery, JobRecord, JobState, RunRecord, RunStatus};
use rusqlite::{params, OptionalExtension, Row};

const JOB_COLUMNS: &str = "id, title, prompt, kind, spec, timezone, anchor, end_at, allowed_tools, \
     channel, chat_id, chat_kind, thread, creator, created_in, next_run, paused, state, created_at, \
     updated_at, model";

const RUN_COLUMNS: &str =
    "id, job_id, scheduled_for, trigger_kind, claimed_by, status, started_at, \
     finished_at, output, error, delivery, delivery_attempts, delivered_message_id, delivery_error";

fn corrupt(op: &'static str, message: String) -> StoreError {
    StoreError::Corrupt { op, message }
}

/// A row of `jobs`, with the columns of [`JOB_COLUMNS`]; JSON and enums are checked after.
type RawJob = (JobRecord, String, String);

fn job_from_row(r: &Row<'_>) -> rusqlite::Result<RawJob> {
    let job = JobRecord {
        id: r.get(0)?,
        title: r.get(1)?,
        prompt: r.get(2)?,
        kind: r.get(3)?,
        spec: r.get(4)?,
        timezone: r.get(5)?,
        anchor: r.get(6)?,
        end_at: r.get(7)?,
        allowed_tools: Vec::new(),
        channel: r.get(9)?,
        chat_id: r.get(10)?,
        chat_kind: r.get(11)?,
        thread: r.get(12)?,
        creator: r.get(13)?,
        created_in: r.get(14)?,
        next_run: r.get(15)?,
        paused: r.get::<_, i64>(16)? != 0,
        state: JobState::Active,
        created_at: r.get(18)?,
        updated_at: r.get(19)?,
        model: r.get(20)?,
    };
    Ok((job, r.get(8)?, r.get(17)?))
}

fn finish_job(op: &'static str, raw: RawJob) -> Result<JobRecord, StoreError> {
    let (mut job, tools, state) = raw;
    job.allowed_tools = serde_json::from_str(&tools)
        .map_err(|e| corrupt(op, format!("allowed_tools of job {}: {e}", job.id)))?;
    job.state = JobState::parse(&state)
        .ok_or_else(|| corrupt(op, format!("state {state:?} of job {}", job.id)))?;
    Ok(job)
}

type RawRun = (RunRecord, String, String);

fn run_from_row(r: &Row<'_>) -> rusqlite::Result<RawRun> {
    let run = RunRecord {
        id: r.get(0)?,
        job_id: r.get(1)?,
        scheduled_for: r.get(2)?,
        trigger: r.get(3)?,
        claimed_by: r.get(4)?,
        status: RunStatus::Running,
        started_at: r.get(6)?,
        finished_at: r.get(7)?,
        output: r.get(8)?,
        error: r.get(9)?,
        delivery: Delivery::Pending,
        delivery_attempts: r.get::<_, i64>(11)?.clamp(0, i64::from(u32::MAX)) as u32,
        delivered_message_id: r.get(12)?,
        delivery_error: r.get(13)?,
    };
    Ok((run, r.get(5)?, r.get(10)?))
}

fn finish_run_row(op: &'static str, raw: RawRun) -> Result<RunRecord, StoreError> {
    let (mut run, status, delivery) = raw;
    run.status = RunStatus::parse(&status)
        .ok_or_else(|| corrupt(op, format!("status {status:?} of run {}", run.id)))?;
    run.delivery = Delivery::parse(&delivery)
        .ok_or_else(|| corrupt(op, format!("delivery {delivery:?} of run {}", run.id)))?;
    Ok(run)
}

impl Db {
    /// Insert a new job; `Ok(false)` when a job with this id exists already.
    pub fn insert_job(&self, job: &JobRecord) -> Result<bool, StoreError> {
        let tools = serde_json::to_string(&job.allowed_tools)
            .map_err(|e| corrupt("insert job", e.to_string()))?;
        let n = self
            .conn()
            .execute(
                &format!(
                    "INSERT OR IGNORE INTO jobs ({JOB_COLUMNS}) VALUES \
                     (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, \
                      ?18, ?19, ?20, ?21)"
                ),
                params![
                    job.id,
                    job.title,
                    job.prompt,
                    job.kind,
                    job.spec,
                    job.timezone,
                    job.anchor,
                    job.end_at,
                    tools,
                    job.channel,
                    job.chat_id,
                    job.chat_kind,
                    job.thread,
                    job.creator,
                    job.created_in,
                    job.next_run,
                    job.paused as i64,
                    job.state.as_str(),
                    job.created_at,
                    job.updated_at,
                    job.model,
                ],
            )
            .op("insert job")?;
        Ok(n == 1)
    }

    pub fn get_job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        let raw = self
            .conn()
            .query_row(
                &format!("SELECT {JOB_COLUMNS} FROM jobs WHERE id = ?1"),
                [id],
                job_from_row,
            )
            .optional()
            .op("get job")?;
        raw.map(|r| finish_job("get job", r)).transpose()
    }

    /// Every job, oldest first.
    pub fn list_jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs ORDER BY created_at, id"
            ))
            .op("list jobs")?;
        let rows = st
            .query_map([], job_from_row)
            .op("list jobs")?
            .collect::<Result<Vec<_>, _>>()
            .op("list jobs")?;
        rows.into_iter()
            .map(|r| finish_job("list jobs", r))
            .collect()
    }

    /// Active, unpaused jobs whose next slot is at or before `now`.
    pub fn due_jobs(&self, now: i64) -> Result<Vec<JobRecord>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare(&format!(
                "SELECT {JOB_COLUMNS} FROM jobs \
                 WHERE state = 'active' AND paused = 0 AND next_run IS NOT NULL AND next_run <= ?1 \
                 ORDER BY next_run, id"
            ))
            .op("due jobs")?;
        let rows = st
            .query_map([now], job_from_row)
            .op("due jobs")?
            .collect::<Result<Vec<_>, _>>()
            .op("due jobs")?;
        rows.into_iter()
            .map(|r| finish_job("due jobs", r))
            .collect()
    }

    /// The earliest next slot of any active, unpaused job.
    pub fn next_due_at(&self) -> Result<Option<i64>, StoreError> {
        self.conn()
            .query_row(
                "SELECT MIN(next_run) FROM jobs WHERE state = 'active' AND paused = 0",
                [],
                |r| r.get(0),
            )
            .op("next due job")
    }

    /// Delete a job and its run history; `Ok(false)` when there was none.
    pub fn remove_job(&self, id: &str) -> Result<bool, StoreError> {
        let n = self
            .conn()
            .execute("DELETE FROM jobs WHERE id = ?1", [id])
            .op("remove job")?;
        Ok(n == 1)
    }

    /// Pause or resume a job; resuming sets its next slot to `next_run` (computed from now, so
    /// slots that passed while paused are not made up). `Ok(false)` when there is no such job.
    pub fn set_job_paused(
        &self,
        id: &str,
        paused: bool,
        next_run: Option<i64>,
    ) -> Result<bool, StoreError> {
        let n = if paused {
            self.conn()
                .execute(
                    "UPDATE jobs SET paused = 1, updated_at = ?2 WHERE id = ?1",
                    params![id, now()],
                )
                .op("pause job")?
        } else {
            let state = if next_run.is_some() {
                JobState::Active
            } else {
                JobState::Done
            };
            self.conn()
                .execute(
                    "UPDATE jobs SET paused = 0, next_run = ?2, state = ?3, updated_at = ?4 \
                     WHERE id = ?1",
                    params![id, next_run, state.as_str(), now()],
                )
                .op("resume job")?
        };
        Ok(n == 1)
    }

    /// Move a job's next slot from `expected` to `next` (`None`: the job is done). Only applies
    /// when the stored value is still `expected`, so two schedulers advancing the same job do
    /// not step on each other; `Ok(false)` when another one got there first.
    pub fn advance_job(
        &self,
        id: &str,
        expected: Option<i64>,
        next: Option<i64>,
    ) -> Result<bool, StoreError> {
        let state = if next.is_some() {
            JobState::Active
        } else {
            JobState::Done
        };
        let n = self
            .conn()
            .execute(
                "UPDATE jobs SET next_run = ?3, state = ?4, updated_at = ?5 \
                 WHERE id = ?1 AND next_run IS ?2",
                params![id, expected, next, state.as_str(), now()],
            )
            .op("advance job")?;
        Ok(n == 1)
    }

    /// Claim the slot `scheduled_for` of a job for a run that starts now. `Ok(Some(run id))` for
    /// exactly one caller per slot; `Ok(None)` when the slot was claimed before (by this or any
    /// other process). The run is recorded as `running`.
    pub fn claim_run(
        &self,
        job_id: &str,
        scheduled_for: i64,
        trigger: &str,
        claimed_by: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.insert_run(
            job_id,
            scheduled_for,
            trigger,
            claimed_by,
            RunStatus::Running,
            Delivery::Pending,
            None,
        )
    }

    /// Record a slot that was not run (`Missed`), claiming it like a run so it is counted once.
    pub fn record_missed_run(
        &self,
        job_id: &str,
        scheduled_for: i64,
        claimed_by: &str,
        note: &str,
    ) -> Result<Option<i64>, StoreError> {
        self.insert_run(
            job_id,
            scheduled_for,
            "schedule",
            claimed_by,
            RunStatus::Missed,
            Delivery::Skipped,
            Some(note),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn insert_run(
        &self,
        job_id: &str,
        scheduled_for: i64,
        trigger: &str,
        claimed_by: &str,
        status: RunStatus,
        delivery: Delivery,
        error: Option<&str>,
    ) -> Result<Option<i64>, StoreError> {
        let conn = self.conn();
        let finished = (status != RunStatus::Running).then(now);
        let n = conn
            .execute(
                "INSERT OR IGNORE INTO job_runs \
                 (job_id, scheduled_for, trigger_kind, claimed_by, status, started_at, \
                  finished_at, error, delivery) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![
                    job_id,
                    scheduled_for,
                    trigger,
                    claimed_by,
                    status.as_str(),
                    now(),
                    finished,
                    error,
                    delivery.as_str()
                ],
            )
            .op("claim run")?;
        Ok((n == 1).then(|| conn.last_insert_rowid()))
    }

    /// Record how a run ended.
    pub fn finish_run(
        &self,
        run_id: i64,
        status: RunStatus,
        output: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE job_runs SET status = ?2, output = ?3, error = ?4, finished_at = ?5 \
                 WHERE id = ?1",
                params![run_id, status.as_str(), output, error, now()],
            )
            .op("finish run")?;
        Ok(())
    }

    /// Record the delivery of a run's digest.
    pub fn record_delivery(
        &self,
        run_id: i64,
        delivery: Delivery,
        attempts: u32,
        message_id: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.conn()
            .execute(
                "UPDATE job_runs SET delivery = ?2, delivery_attempts = ?3, \
                 delivered_message_id = ?4, delivery_error = ?5 WHERE id = ?1",
                params![run_id, delivery.as_str(), attempts, message_id, error],
            )
            .op("record delivery")?;
        Ok(())
    }

    pub fn get_run(&self, run_id: i64) -> Result<Option<RunRecord>, StoreError> {
        let raw = self
            .conn()
            .query_row(
                &format!("SELECT {RUN_COLUMNS} FROM job_runs WHERE id = ?1"),
                [run_id],
                run_from_row,
            )
            .optional()
            .op("get run")?;
        raw.map(|r| finish_run_row("get run", r)).transpose()
    }

    /// The newest `limit` runs of a job, newest first.
    pub fn job_runs(&self, job_id: &str, limit: usize) -> Result<Vec<RunRecord>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM job_runs WHERE job_id = ?1 \
                 ORDER BY scheduled_for DESC, id DESC LIMIT ?2"
            ))
            .op("job runs")?;
        let rows = st
            .query_map(params![job_id, limit as i64], run_from_row)
            .op("job runs")?
            .collect::<Result<Vec<_>, _>>()
            .op("job runs")?;
        rows.into_iter()
            .map(|r| finish_run_row("job runs", r))
            .collect()
    }

    /// Runs still marked `running` (to find those whose process died).
    pub fn running_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.runs_where("running runs", "status = 'running'", rusqlite::params![])
    }

    /// Ended runs whose digest's delivery is still `pending`, started at or after `since`.
    pub fn undelivered_runs(&self, since: i64) -> Result<Vec<RunRecord>, StoreError> {
        self.runs_where(
            "undelivered runs",
            "status IN ('ok', 'failed') AND delivery = 'pending' AND output IS NOT NULL \
             AND started_at >= ?1",
            rusqlite::params![since],
        )
    }

    fn runs_where(
        &self,
        op: &'static str,
        clause: &str,
        params: impl rusqlite::Params,
    ) -> Result<Vec<RunRecord>, StoreError> {
        let conn = self.conn();
        let mut st = conn
            .prepare(&format!(
                "SELECT {RUN_COLUMNS} FROM job_runs WHERE {clause} ORDER BY id"
            ))
            .op(op)?;
        let rows = st
            .query_map(params, run_from_row)
            .op(op)?
            .collect::<Result<Vec<_>, _>>()
            .op(op)?;
        rows.into_iter().map(|r| finish_run_row(op, r)).collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn job(id: &str, next_run: Option<i64>) -> JobRecord {
        JobRecord {
            id: id.into(),
            title: "Morning news".into(),
            prompt: "summarise the news".into(),
            kind: "cron".into(),
            spec: "0 9 * * *".into(),
            timezone: Some("Europe/Berlin".into()),
            anchor: 1_700_000_000,
            end_at: None,
            allowed_tools: vec!["file_write".into()],
            model: None,
            channel: "telegram".into(),
            chat_id: "42".into(),
            chat_kind: "direct".into(),
            thread: None,
            creator: "telegram:42".into(),
            created_in: "telegram:42".into(),
            next_run,
            paused: false,
            state: JobState::Active,
            created_at: 1_700_000_000,
            updated_at: 1_700_000_000,
        }
    }

    #[test]
    fn jobs_round_trip_and_are_due_by_next_run() {
        let s = Db::open_in_memory().unwrap();
        let j = job("j1", Some(100));
        assert!(s.insert_job(&j).unwrap());
        assert!(!s.insert_job(&j).unwrap(), "ids are unique");
        assert_eq!(s.get_job("j1").unwrap().unwrap(), j);
        assert!(s.due_jobs(99).unwrap().is_empty());
        assert_eq!(s.due_jobs(100).unwrap().len(), 1);
        assert_eq!(s.next_due_at().unwrap(), Some(100));
        s.set_job_paused("j1", true, None).unwrap();
        assert!(s.due_jobs(1000).unwrap().is_empty());
        s.set_job_paused("j1", false, Some(500)).unwrap();
        assert_eq!(s.get_job("j1").unwrap().unwrap().next_run, Some(500));
        assert!(!s.advance_job("j1", Some(100), Some(600)).unwrap(), "stale");
        assert!(s.advance_job("j1", Some(500), None).unwrap());
        let done = s.get_job("j1").unwrap().unwrap();
        assert_eq!(done.state, JobState::Done);
        assert!(s.due_jobs(i64::MAX).unwrap().is_empty());
        assert!(s.remove_job("j1").unwrap());
        assert!(!s.remove_job("j1").unwrap());
    }

    #[test]
    fn a_slot_is_claimed_once_and_runs_are_recorded() {
        let s = Db::open_in_memory().unwrap();
        s.insert_job(&job("j1", Some(100))).unwrap();
        let id = s.claim_run("j1", 100, "schedule", "a:1").unwrap().unwrap();
        assert_eq!(s.claim_run("j1", 100, "schedule", "b:2").unwrap(), None);
        assert!(s
            .record_missed_run("j1", 100, "b:2", "x")
            .unwrap()
            .is_none());
        assert_eq!(s.running_runs().unwrap().len(), 1);
        assert!(s.undelivered_runs(0).unwrap().is_empty(), "still running");
        s.finish_run(id, RunStatus::Ok, Some("digest"), None)
            .unwrap();
        // Ended, its digest not delivered yet; only within the window asked for.
        assert_eq!(s.undelivered_runs(0).unwrap()[0].id, id);
        assert!(s.undelivered_runs(i64::MAX).unwrap().is_empty());
        s.record_delivery(id, Delivery::Delivered, 2, Some("1001"), None)
            .unwrap();
        assert!(s.undelivered_runs(0).unwrap().is_empty(), "delivered");
        let r = s.get_run(id).unwrap().unwrap();
        assert_eq!(r.status, RunStatus::Ok);
        assert_eq!(r.delivery, Delivery::Delivered);
        assert_eq!(r.delivery_attempts, 2);
        assert_eq!(r.delivered_message_id.as_deref(), Some("1001"));
        assert!(s
            .record_missed_run("j1", 200, "a:1", "down")
            .unwrap()
            .is_some());
        let runs = s.job_runs("j1", 10).unwrap();
        assert_eq!(runs.len(), 2);
        assert_eq!(runs[0].status, RunStatus::Missed, "newest first");
        s.remove_job("j1").unwrap();
        assert!(
            s.job_runs("j1", 10).unwrap().is_empty(),
            "history goes with the job"
        );
    }
}
