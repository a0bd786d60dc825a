//! `schedule_list{job_id?}`: the scheduled jobs (id, title, schedule, zone, next run, last run,
//! target), or one job with its recent runs. Read-only.

use crate::jobs::job::{self, JobError};
use crate::schedule_create::{job_error, store_of};
use crate::{ErrorKind, Risk, Tool, ToolContext};
use crate::{ToolDecl, ToolError, ToolOutput};
use async_trait::async_trait;
use ethan_core::store::{JobRecord, JobState, RunRecord};
use ethan_tz as tz;
use serde_json::{json, Value};
use std::sync::LazyLock;

pub struct ScheduleList {
    config_tz: Option<String>,
}

impl ScheduleList {
    pub fn new(config_tz: Option<String>) -> Self {
        Self {
            config_tz: config_tz.filter(|t| !t.trim().is_empty()),
        }
    }
}

/// `ok, delivered (2025-01-01 09:00 CST)`; a run the scheduler did not start at its slot names
/// its trigger: `ok, delivered (2025-01-01 09:00 CST, takeover)`.
pub fn run_summary(r: &RunRecord, zone: &chrono_tz::Tz) -> String {
    let when = chrono::DateTime::from_timestamp(r.scheduled_for, 0)
        .map(|t| tz::display(zone, t))
        .unwrap_or_default();
    // A run the scheduler did not start at its slot says what started it (`manual`, `takeover`).
    let how = if r.trigger == "schedule" {
        String::new()
    } else {
        format!(", {}", r.trigger)
    };
    format!(
        "{}, {} ({when}{how})",
        r.status.as_str(),
        r.delivery.as_str()
    )
}

/// One line per job, as the tool and `ethan jobs list` show it.
pub fn job_line(j: &JobRecord, last: Option<&RunRecord>, config_tz: Option<&str>) -> String {
    let zone = job::zone_of(j, config_tz);
    let next = match (j.state, j.paused, j.next_run) {
        (JobState::Done, _, _) => "done".to_string(),
        (_, true, _) => "paused".to_string(),
        (_, _, Some(t)) => chrono::DateTime::from_timestamp(t, 0)
            .map(|t| tz::display(&zone, t))
            .unwrap_or_default(),
        _ => "none".to_string(),
    };
    format!(
        "- `{}` \"{}\": {} ({}); next: {next}; last: {}; to {}",
        j.id,
        j.title,
        job::describe_schedule(j, config_tz),
        zone.name(),
        last.map(|r| run_summary(r, &zone))
            .unwrap_or_else(|| "never ran".into()),
        job::target_label(j),
    )
}

#[async_trait]
impl Tool for ScheduleList {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "schedule_list",
                "List the scheduled jobs (id, schedule, time zone, next run, last run, target chat); with \
                 job_id, that job's prompt and recent runs.",
                json!({
                    "type": "object",
                    "properties": {
                        "job_id": {"type": "string", "description": "Show this job in detail."}
                    },
                    "additionalProperties": false
                }),
            )
            .risk(Risk::ReadOnly)
            .no_compress()
        });
        &DECL
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let store = store_of(ctx)?;
        let tz = self.config_tz.as_deref();
        if let Some(id) = args.get("job_id").and_then(Value::as_str) {
            let j = match store.get_job(id).await {
                Ok(Some(j)) => j,
                Ok(None) => return Err(job_error(JobError::NotFound(id.to_string()))),
                Err(e) => return Err(ToolError::new(ErrorKind::Dependency, e.to_string())),
            };
            let runs = match store.job_runs(id, 10).await {
                Ok(r) => r,
                Err(e) => return Err(ToolError::new(ErrorKind::Dependency, e.to_string())),
            };
            let zone = job::zone_of(&j, tz);
            let mut out = job_line(&j, runs.first(), tz);
            out.push_str(&format!(
                "\nPrompt: {}\nMay use: {}\nModel: {}\nRecent runs:",
                j.prompt,
                if j.allowed_tools.is_empty() {
                    "read-only tools only".to_string()
                } else {
                    j.allowed_tools.join(", ")
                },
                j.model.as_deref().unwrap_or("the main model"),
            ));
            if runs.is_empty() {
                out.push_str(" none");
            }
            for r in &runs {
                out.push_str(&format!("\n  - {}", run_summary(r, &zone)));
                if let Some(e) = r.error.as_deref().or(r.delivery_error.as_deref()) {
                    out.push_str(&format!(": {e}"));
                }
            }
            return Ok(ToolOutput::new(out));
        }
        let jobs = match store.list_jobs().await {
            Ok(j) => j,
            Err(e) => return Err(ToolError::new(ErrorKind::Dependency, e.to_string())),
        };
        if jobs.is_empty() {
            return Ok(ToolOutput::new("No scheduled jobs."));
        }
        let mut lines = vec![format!("{} scheduled job(s):", jobs.len())];
        for j in &jobs {
            let last = store
                .job_runs(&j.id, 1)
                .await
                .ok()
                .and_then(|mut r| r.pop());
            lines.push(job_line(j, last.as_ref(), tz));
        }
        Ok(ToolOutput::new(lines.join("\n")).with_metadata(json!({"count": jobs.len()})))
    }
}
