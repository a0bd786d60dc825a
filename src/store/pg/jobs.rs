//! Scheduled jobs and their runs on PostgreSQL, as in SQLite (`super::super::jobs`). A run is
//! the claim on one slot: `UNIQUE (job_id, scheduled_for)` with `ON CONFLICT DO NOTHING` makes
//! [`JobStore::claim_run`] succeed for exactly one caller per slot across replicas.

use super::errors::pg_error;
use super::{limit, opt_text, PgStore, StoreError};
use async_trait::async_trait;
use ethan_core::store::{Delivery, JobRecord, JobState, JobStore, RunRecord, RunStatus};
use tokio_postgres::Row;

const JOB_COLUMNS: &str = "id, title, prompt, kind, spec, timezone, anchor, end_at, allowed_tools, \
     channel, chat_id, chat_kind, thread, creator, created_in, next_run, paused, state, created_at, \
     updated_at, model";

const RUN_COLUMNS: &str =
    "id, job_id, scheduled_for, trigger_kind, claimed_by, status, started_at, \
     finished_at, output, error, delivery, delivery_attempts, delivered_message_id, delivery_error";

fn corrupt(op: &'static str, message: String) -> StoreError {
    StoreError::Corrupt { op, message }
}

/// A row of `jobs` with the columns of [`JOB_COLUMNS`].
fn job_from_row(op: &'static str, r: &Row) -> Result<JobRecord, StoreError> {
    let get = |e: tokio_postgres::Error| pg_error(op, &e);
    let id: String = r.try_get(0).map_err(get)?;
    let tools: String = r.try_get(8).map_err(get)?;
    let allowed_tools = serde_json::from_str(&tools)
        .map_err(|e| corrupt(op, format!("allowed_tools of job {id}: {e}")))?;
    let state: String = r.try_get(17).map_err(get)?;
    let state = JobState::parse(&state)
        .ok_or_else(|| corrupt(op, format!("state {state:?} of job {id}")))?;
    Ok(JobRecord {
        title: r.try_get(1).map_err(get)?,
        prompt: r.try_get(2).map_err(get)?,
        kind: r.try_get(3).map_err(get)?,
        spec: r.try_get(4).map_err(get)?,
        timezone: r.try_get(5).map_err(get)?,
        anchor: r.try_get(6).map_err(get)?,
        end_at: r.try_get(7).map_err(get)?,
        allowed_tools,
        channel: r.try_get(9).map_err(get)?,
        chat_id: r.try_get(10).map_err(get)?,
        chat_kind: r.try_get(11).map_err(get)?,
        thread: r.try_get(12).map_err(get)?,
        creator: r.try_get(13).map_err(get)?,
        created_in: r.try_get(14).map_err(get)?,
        next_run: r.try_get(15).map_err(get)?,
        paused: r.try_get(16).map_err(get)?,
        state,
        created_at: r.try_get(18).map_err(get)?,
        updated_at: r.try_get(19).map_err(get)?,
        model: r.try_get(20).map_err(get)?,
        id,
    })
}

/// A row of `job_runs` with the columns of [`RUN_COLUMNS`].
fn run_from_row(op: &'static str, r: &Row) -> Result<RunRecord, StoreError> {
    let get = |e: tokio_postgres::Error| pg_error(op, &e);
    let id: i64 = r.try_get(0).map_err(get)?;
    let status: String = r.try_get(5).map_err(get)?;
    let status = RunStatus::parse(&status)
        .ok_or_else(|| corrupt(op, format!("status {status:?} of run {id}")))?;
    let delivery: String = r.try_get(10).map_err(get)?;
    let delivery = Delivery::parse(&delivery)
        .ok_or_else(|| corrupt(op, format!("delivery {delivery:?} of run {id}")))?;
    let attempts: i64 = r.try_get(11).map_err(get)?;
    let delivery_attempts = u32::try_from(attempts)
        .map_err(|_| corrupt(op, format!("delivery_attempts {attempts} of run {id}")))?;
    Ok(RunRecord {
        id,
        job_id: r.try_get(1).map_err(get)?,
        scheduled_for: r.try_get(2).map_err(get)?,
        trigger: r.try_get(3).map_err(get)?,
        claimed_by: r.try_get(4).map_err(get)?,
        status,
        started_at: r.try_get(6).map_err(get)?,
        finished_at: r.try_get(7).map_err(get)?,
        output: r.try_get(8).map_err(get)?,
        error: r.try_get(9).map_err(get)?,
        delivery,
        delivery_attempts,
        delivered_message_id: r.try_get(12).map_err(get)?,
        delivery_error: r.try_get(13).map_err(get)?,
    })
}

impl PgStore {
    /// Jobs of a `WHERE …`/`ORDER BY …` tail with its parameters.
    async fn select_jobs(
        &self,
        op: &'static str,
        tail: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<JobRecord>, StoreError> {
        let client = self.client(op).await?;
        let rows = client
            .query(&format!("SELECT {JOB_COLUMNS} FROM jobs {tail}"), params)
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter().map(|r| job_from_row(op, r)).collect()
    }

    /// Runs of a `WHERE …`/`ORDER BY …` tail with its parameters.
    async fn select_runs(
        &self,
        op: &'static str,
        tail: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<Vec<RunRecord>, StoreError> {
        let client = self.client(op).await?;
        let rows = client
            .query(
                &format!("SELECT {RUN_COLUMNS} FROM job_runs {tail}"),
                params,
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        rows.iter().map(|r| run_from_row(op, r)).collect()
    }

    #[allow(clippy::too_many_arguments)]
    async fn insert_run(
        &self,
        job_id: &str,
        scheduled_for: i64,
        trigger: &str,
        claimed_by: &str,
        status: RunStatus,
        delivery: Delivery,
        error: Option<&str>,
    ) -> Result<Option<i64>, StoreError> {
        let op = "claim run";
        let client = self.client(op).await?;
        let now = crate::store::now();
        let finished = (status != RunStatus::Running).then_some(now);
        let row = client
            .query_opt(
                "INSERT INTO job_runs (job_id, scheduled_for, trigger_kind, claimed_by, status,
                 started_at, finished_at, error, delivery)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (job_id, scheduled_for) DO NOTHING RETURNING id",
                &[
                    &job_id,
                    &scheduled_for,
                    &trigger,
                    &claimed_by,
                    &status.as_str(),
                    &now,
                    &finished,
                    &opt_text(error),
                    &delivery.as_str(),
                ],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        row.map(|r| r.try_get(0))
            .transpose()
            .map_err(|e| pg_error(op, &e))
    }

    /// An `UPDATE`/`DELETE` of operation `op`; the rows it changed.
    async fn change(
        &self,
        op: &'static str,
        sql: &str,
        params: &[&(dyn tokio_postgres::types::ToSql + Sync)],
    ) -> Result<u64, StoreError> {
        let client = self.client(op).await?;
        client
            .execute(sql, params)
            .await
            .map_err(|e| pg_error(op, &e))
    }
}

#[async_trait]
impl JobStore for PgStore {
    async fn insert_job(&self, job: &JobRecord) -> Result<bool, StoreError> {
        let op = "insert job";
        let tools =
            serde_json::to_string(&job.allowed_tools).map_err(|e| corrupt(op, e.to_string()))?;
        let sql = format!(
            "INSERT INTO jobs ({JOB_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
             $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) ON CONFLICT (id) DO NOTHING"
        );
        let n = self
            .change(
                op,
                &sql,
                &[
                    &job.id,
                    &job.title,
                    &job.prompt,
                    &job.kind,
                    &job.spec,
                    &job.timezone,
                    &job.anchor,
                    &job.end_at,
                    &tools,
                    &job.channel,
                    &job.chat_id,
                    &job.chat_kind,
                    &job.thread,
                    &job.creator,
                    &job.created_in,
                    &job.next_run,
                    &job.paused,
                    &job.state.as_str(),
                    &job.created_at,
                    &job.updated_at,
                    &job.model,
                ],
            )
            .await?;
        Ok(n == 1)
    }

    async fn get_job(&self, id: &str) -> Result<Option<JobRecord>, StoreError> {
        Ok(self
            .select_jobs("get job", "WHERE id = $1", &[&id])
            .await?
            .pop())
    }

    async fn list_jobs(&self) -> Result<Vec<JobRecord>, StoreError> {
        self.select_jobs("list jobs", "ORDER BY created_at, id", &[])
            .await
    }

    async fn due_jobs(&self, now: i64) -> Result<Vec<JobRecord>, StoreError> {
        self.select_jobs(
            "due jobs",
            "WHERE state = 'active' AND NOT paused AND next_run IS NOT NULL AND next_run <= $1 \
             ORDER BY next_run, id",
            &[&now],
        )
        .await
    }

    async fn next_due_at(&self) -> Result<Option<i64>, StoreError> {
        let op = "next due job";
        let client = self.client(op).await?;
        let row = client
            .query_one(
                "SELECT MIN(next_run) FROM jobs WHERE state = 'active' AND NOT paused",
                &[],
            )
            .await
            .map_err(|e| pg_error(op, &e))?;
        row.try_get(0).map_err(|e| pg_error(op, &e))
    }

    async fn remove_job(&self, id: &str) -> Result<bool, StoreError> {
        let n = self
            .change("remove job", "DELETE FROM jobs WHERE id = $1", &[&id])
            .await?;
        Ok(n == 1)
    }

    async fn set_job_paused(
        &self,
        id: &str,
        paused: bool,
        next_run: Option<i64>,
    ) -> Result<bool, StoreError> {
        let now = crate::store::now();
        let n = if paused {
            self.change(
                "pause job",
                "UPDATE jobs SET paused = TRUE, updated_at = $2 WHERE id = $1",
                &[&id, &now],
            )
            .await?
        } else {
            let state = if next_run.is_some() {
                JobState::Active
            } else {
                JobState::Done
            };
            self.change(
                "resume job",
                "UPDATE jobs SET paused = FALSE, next_run = $2, state = $3, updated_at = $4 \
                 WHERE id = $1",
                &[&id, &next_run, &state.as_str(), &now],
            )
            .await?
        };
        Ok(n == 1)
    }

    async fn advance_job(
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
            .change(
                "advance job",
                "UPDATE jobs SET next_run = $3, state = $4, updated_at = $5 \
                 WHERE id = $1 AND next_run IS NOT DISTINCT FROM $2::BIGINT",
                &[&id, &expected, &next, &state.as_str(), &crate::store::now()],
            )
            .await?;
        Ok(n == 1)
    }

    async fn claim_run(
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
        .await
    }

    async fn record_missed_run(
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
        .await
    }

    async fn finish_run(
        &self,
        run_id: i64,
        status: RunStatus,
        output: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.change(
            "finish run",
            "UPDATE job_runs SET status = $2, output = $3, error = $4, finished_at = $5 \
             WHERE id = $1",
            &[
                &run_id,
                &status.as_str(),
                &opt_text(output),
                &opt_text(error),
                &crate::store::now(),
            ],
        )
        .await?;
        Ok(())
    }

    async fn record_delivery(
        &self,
        run_id: i64,
        delivery: Delivery,
        attempts: u32,
        message_id: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError> {
        self.change(
            "record delivery",
            "UPDATE job_runs SET delivery = $2, delivery_attempts = $3, \
             delivered_message_id = $4, delivery_error = $5 WHERE id = $1",
            &[
                &run_id,
                &delivery.as_str(),
                &i64::from(attempts),
                &message_id,
                &opt_text(error),
            ],
        )
        .await?;
        Ok(())
    }

    async fn get_run(&self, run_id: i64) -> Result<Option<RunRecord>, StoreError> {
        Ok(self
            .select_runs("get run", "WHERE id = $1", &[&run_id])
            .await?
            .pop())
    }

    async fn job_runs(&self, job_id: &str, n: usize) -> Result<Vec<RunRecord>, StoreError> {
        self.select_runs(
            "job runs",
            "WHERE job_id = $1 ORDER BY scheduled_for DESC, id DESC LIMIT $2",
            &[&job_id, &limit(n)],
        )
        .await
    }

    async fn running_runs(&self) -> Result<Vec<RunRecord>, StoreError> {
        self.select_runs("running runs", "WHERE status = 'running' ORDER BY id", &[])
            .await
    }

    async fn undelivered_runs(&self, since: i64) -> Result<Vec<RunRecord>, StoreError> {
        self.select_runs("undelivered runs", UNDELIVERED_PG, &[&since])
            .await
    }
}

const UNDELIVERED_PG: &str = "WHERE status IN ('ok', 'failed') AND delivery = 'pending' \
     AND output IS NOT NULL AND started_at >= $1 ORDER BY id";
