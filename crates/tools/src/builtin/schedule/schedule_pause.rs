//! `schedule_pause{job_id, paused}`: pause a scheduled job (`paused: true`) or resume it
//! (`false`; it continues from its next slot after now — slots missed while paused are not
//! made up). A side effect (owner-only on chat platforms).

use crate::args::opt_bool;
use crate::jobs::job;
use crate::schedule_create::{job_error, now_of, store_of};
use crate::schedule_remove::{job_label, label_of};
use crate::{CallPlan, ToolError};
use crate::{Tool, ToolContext};
use crate::{ToolDecl, ToolOutput};
use async_trait::async_trait;
use ethan_core::assessment::Assessment;
use ethan_tz as tz;
use serde_json::{json, Value};
use std::sync::LazyLock;

pub struct SchedulePause {
    config_tz: Option<String>,
}

impl SchedulePause {
    pub fn new(config_tz: Option<String>) -> Self {
        Self {
            config_tz: config_tz.filter(|t| !t.trim().is_empty()),
        }
    }
}

fn paused(args: &Value) -> bool {
    args.get("paused").and_then(Value::as_bool).unwrap_or(true)
}

#[async_trait]
impl Tool for SchedulePause {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "schedule_pause",
                "Pause (paused: true) or resume (paused: false) a scheduled job by job_id.",
                json!({
                    "type": "object",
                    "properties": {
                        "job_id": {"type": "string"},
                        "paused": {"type": "boolean", "default": true}
                    },
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
        let pause = match opt_bool(&args, "paused") {
            Ok(p) => p.unwrap_or(true),
            Err(e) => return Err(e),
        };
        let store = store_of(ctx)?;
        let tz_name = self.config_tz.as_deref();
        match job::set_paused(&**store, id, pause, tz_name, now_of(ctx)).await {
            Ok(j) if pause => Ok(ToolOutput::new(format!(
                "Paused job `{}` (\"{}\").",
                j.id, j.title
            ))),
            Ok(j) => {
                let zone = job::zone_of(&j, tz_name);
                let next = j
                    .next_run
                    .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
                    .map(|t| format!("next run {}", tz::display(&zone, t)))
                    .unwrap_or_else(|| "it has no slots left, so it is done".into());
                Ok(ToolOutput::new(format!(
                    "Resumed job `{}` (\"{}\"); {next}.",
                    j.id, j.title
                )))
            }
            Err(e) => Err(job_error(e)),
        }
    }
}

impl SchedulePause {
    /// A session grant covers this job only.
    fn consent_scope(&self, args: &Value, _ctx: &ToolContext) -> String {
        let id = args.get("job_id").and_then(Value::as_str).unwrap_or("");
        format!("job:{}", id.trim())
    }
    fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        Some(format!(
            "{} scheduled job {}",
            if paused(args) { "pause" } else { "resume" },
            label_of(ctx, args)
        ))
    }
}
