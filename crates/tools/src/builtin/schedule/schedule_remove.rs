//! `schedule_remove{job_id}`: delete a scheduled job and its run history. A side effect
//! (owner-only on chat platforms); the approval names the job and its schedule.

use crate::jobs::job;
use crate::schedule_create::{job_error, store_of};
use crate::{CallPlan, ToolDecl, ToolError, ToolOutput};
use crate::{Tool, ToolContext};
use async_trait::async_trait;
use ethan_core::assessment::Assessment;
use serde_json::{json, Value};
use std::sync::LazyLock;

pub struct ScheduleRemove {
    config_tz: Option<String>,
}

impl ScheduleRemove {
    pub fn new(config_tz: Option<String>) -> Self {
        Self {
            config_tz: config_tz.filter(|t| !t.trim().is_empty()),
        }
    }
}

/// What a pause or removal names in its approval, looked up once per call
/// ([`Tool::assess`]).
pub(crate) struct JobLabel(String);

/// `` `id` "title" (cron `0 9 * * *`, to telegram:42) ``, or just the id when unknown.
pub(crate) async fn job_label(ctx: &ToolContext, id: &str, config_tz: Option<&str>) -> Assessment {
    let found = match store_of(ctx) {
        Ok(s) => s.get_job(id).await.ok().flatten(),
        Err(_) => None,
    };
    Assessment::new(JobLabel(match found {
        Some(j) => format!(
            "`{}` \"{}\" ({}, to {})",
            j.id,
            j.title,
            job::describe_schedule(&j, config_tz),
            job::target_label(&j)
        ),
        None => format!("`{id}`"),
    }))
}

/// The label [`job_label`] found for this call, else the bare id.
pub(crate) fn label_of(ctx: &ToolContext, args: &Value) -> String {
    match ctx.assessment.as_ref().and_then(|a| a.get::<JobLabel>()) {
        Some(JobLabel(l)) => l.clone(),
        None => format!(
            "`{}`",
            args.get("job_id").and_then(Value::as_str).unwrap_or("")
        ),
    }
}

#[async_trait]
impl Tool for ScheduleRemove {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "schedule_remove",
                "Delete a scheduled job (and its run history) by job_id; schedule_list shows the ids.",
                json!({
                    "type": "object",
                    "properties": {"job_id": {"type": "string"}},
                    "required": ["job_id"],
                    "additionalProperties": false
                }),
            )
            // Its output says what it did to the job.
            .not_private()
        });
        &DECL
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            scope: self.consent_scope(args, ctx),
            consent: self.consent_check(args, ctx),
            ..CallPlan::of(self.decl(), args)
        }
    }
    async fn assess(&self, args: &Value, ctx: &ToolContext) -> Option<Assessment> {
        let id = args.get("job_id").and_then(Value::as_str).unwrap_or("");
        Some(job_label(ctx, id, self.config_tz.as_deref()).await)
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let id = crate::args::req_str(&args, "job_id")?;
        let store = store_of(ctx)?;
        match job::remove(&**store, id).await {
            Ok(j) => Ok(ToolOutput::new(format!(
                "Removed job `{}` (\"{}\"); it will not run again.",
                j.id, j.title
            ))),
            Err(e) => Err(job_error(e)),
        }
    }
}

impl ScheduleRemove {
    /// A session grant covers this job only.
    fn consent_scope(&self, args: &Value, _ctx: &ToolContext) -> String {
        let id = args.get("job_id").and_then(Value::as_str).unwrap_or("");
        format!("job:{}", id.trim())
    }
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        Some(format!("remove scheduled job {}", label_of(ctx, args)))
    }
}
