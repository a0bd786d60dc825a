//! `schedule_remove{job_id}`: delete a scheduled job and its run history. A side effect
//! (owner-only on chat platforms); the approval names the job and its schedule.

use crate::jobs::job;
use crate::tools::schedule_create::{job_error, open_store};
use crate::tools::{Risk, Tool, ToolContext, ToolResult};
use async_trait::async_trait;
use serde_json::{json, Value};

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

/// `` `id` "title" (cron `0 9 * * *`, to telegram:42) ``, or just the id when unknown.
pub(crate) fn job_label(ctx: &ToolContext, id: &str, config_tz: Option<&str>) -> String {
    let found = open_store(ctx)
        .ok()
        .and_then(|s| s.get_job(id).ok().flatten());
    match found {
        Some(j) => format!(
            "`{}` \"{}\" ({}, to {})",
            j.id,
            j.title,
            job::describe_schedule(&j, config_tz),
            job::target_label(&j)
        ),
        None => format!("`{id}`"),
    }
}

#[async_trait]
impl Tool for ScheduleRemove {
    fn name(&self) -> &str {
        "schedule_remove"
    }
    fn description(&self) -> &str {
        "Delete a scheduled job (and its run history) by job_id; schedule_list shows the ids."
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"job_id": {"type": "string"}},
            "required": ["job_id"],
            "additionalProperties": false
        })
    }
    fn risk(&self) -> Risk {
        Risk::Write
    }
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let id = args.get("job_id").and_then(Value::as_str).unwrap_or("");
        Some(format!(
            "remove scheduled job {}",
            job_label(ctx, id, self.config_tz.as_deref())
        ))
    }

    async fn run(&self, args: Value, ctx: &ToolContext) -> ToolResult {
        let id = match crate::tools::args::req_str(&args, "job_id") {
            Ok(i) => i,
            Err(e) => return e,
        };
        let store = match open_store(ctx) {
            Ok(s) => s,
            Err(e) => return e,
        };
        match job::remove(&store, id) {
            Ok(j) => ToolResult::ok(format!(
                "Removed job `{}` (\"{}\"); it will not run again.",
                j.id, j.title
            )),
            Err(e) => job_error(e),
        }
    }
}
