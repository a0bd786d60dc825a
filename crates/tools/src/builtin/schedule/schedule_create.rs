//! `schedule_create{prompt, cron | interval_minutes | at, timezone?, title?, end_date?,
//! deliver_to?, allowed_tools?, job_id?, model?}`: a job that runs the prompt unattended on a schedule
//! and posts the answer as a digest — to the chat it was created in, or to `deliver_to`
//! (`telegram:<chat_id>` / `lark:<chat_id>`, required from the terminal). `model` picks the
//! model its runs ask first: the primary's `model.name` or a `model.fallback` entry's `name`
//! (e.g. a cheaper one for a daily digest).
//!
//! A side effect: on chat platforms only the owner may create jobs, and the approval shows the
//! schedule, the target and the `allowed_tools` the job may use when it runs (fixed now, since
//! nobody can approve anything then). Arguments that do not make a valid job need no approval:
//! the call changes nothing and its result says what is wrong.

use crate::jobs::job::{self, JobError, NewJob, Origin};
use crate::jobs::schedule;
use crate::ToolError;
use crate::{CallPlan, ToolDecl, ToolOutput};
use crate::{ErrorKind, Tool, ToolContext};
use async_trait::async_trait;
use ethan_core::store::StorageRef;
use ethan_core::store::{JobRecord, JobState};
use ethan_tz as tz;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::LazyLock;

pub struct ScheduleCreate {
    /// `timezone` from the config.
    config_tz: Option<String>,
    /// The configured model names (`model.name`, then each `model.fallback` name).
    models: Vec<String>,
}

impl ScheduleCreate {
    pub fn new(config_tz: Option<String>) -> Self {
        Self {
            config_tz: config_tz.filter(|t| !t.trim().is_empty()),
            models: Vec::new(),
        }
    }

    /// The model names a job may pick (`model` argument).
    pub fn with_models(mut self, models: Vec<String>) -> Self {
        self.models = models;
        self
    }

    /// `model` must name a configured model.
    fn check_model(&self, new: &NewJob) -> Result<(), ToolError> {
        match new.model.as_deref().map(str::trim) {
            Some(m) if !m.is_empty() && !self.models.iter().any(|n| n == m) => Err(ToolError::new(
                ErrorKind::Validation,
                format!(
                    "model {m:?} is not configured; the configured models are: {}",
                    self.models.join(", ")
                ),
            )),
            _ => Ok(()),
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Args {
    prompt: String,
    #[serde(default)]
    cron: Option<String>,
    #[serde(default)]
    interval_minutes: Option<u64>,
    #[serde(default)]
    at: Option<String>,
    #[serde(default)]
    timezone: Option<String>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    end_date: Option<String>,
    #[serde(default)]
    deliver_to: Option<String>,
    #[serde(default)]
    allowed_tools: Vec<String>,
    #[serde(default)]
    job_id: Option<String>,
    #[serde(default)]
    model: Option<String>,
}

fn parse(args: &Value) -> Result<NewJob, ToolError> {
    let a: Args = serde_json::from_value(args.clone())
        .map_err(|e| ToolError::new(ErrorKind::Validation, format!("bad arguments: {e}")))?;
    Ok(NewJob {
        job_id: a.job_id,
        prompt: a.prompt,
        cron: a.cron,
        interval_minutes: a.interval_minutes,
        at: a.at,
        timezone: a.timezone,
        title: a.title,
        end_date: a.end_date,
        deliver_to: a.deliver_to,
        allowed_tools: a.allowed_tools,
        model: a.model,
    })
}

/// Where the call was made.
pub(crate) fn origin(ctx: &ToolContext) -> Origin {
    Origin {
        channel: ctx.channel,
        chat: ctx.chat.clone(),
        user_id: ctx.user_id.clone(),
        session_key: ctx.session_key.clone(),
    }
}

/// The daemon's store, from the call's context (the tools never open the database).
pub(crate) fn store_of(ctx: &ToolContext) -> Result<&StorageRef, ToolError> {
    ctx.services.store.as_ref().ok_or_else(|| {
        ToolError::new(
            ErrorKind::Dependency,
            "the job database is not available in this interface",
        )
    })
}

/// The context's clock as a UTC date-time.
pub(crate) fn now_of(ctx: &ToolContext) -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::from_timestamp(ctx.services.clock.unix_secs(), 0).unwrap_or_default()
}

/// A job error as a result for the model.
pub(crate) fn job_error(e: JobError) -> ToolError {
    let kind = match e {
        JobError::Store(_) => ErrorKind::Dependency,
        _ => ErrorKind::Validation,
    };
    ToolError::new(kind, e.to_string())
}

/// `allowed_tools` must name tools this session may use (the owner cannot hand a job more).
fn check_tools(new: &NewJob, ctx: &ToolContext) -> Result<(), ToolError> {
    let unknown: Vec<&str> = new
        .allowed_tools
        .iter()
        .map(|t| t.trim())
        .filter(|t| !ctx.catalog.iter().any(|s| s.name == *t))
        .collect();
    if unknown.is_empty() {
        Ok(())
    } else {
        Err(ToolError::new(
            ErrorKind::Validation,
            format!(
                "allowed_tools names tools that are not available here: {} (available: {})",
                unknown.join(", "),
                ctx.catalog
                    .iter()
                    .map(|s| s.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ))
    }
}

fn tools_text(tools: &[String]) -> String {
    if tools.is_empty() {
        "read-only tools only".to_string()
    } else {
        format!("read-only tools plus {}", tools.join(", "))
    }
}

impl ScheduleCreate {
    fn plan(&self, args: &Value, ctx: &ToolContext) -> Result<JobRecord, ToolError> {
        let new = parse(args)?;
        check_tools(&new, ctx)?;
        self.check_model(&new)?;
        job::plan(
            &new,
            &origin(ctx),
            self.config_tz.as_deref(),
            chrono::Utc::now(),
        )
        .map_err(job_error)
    }
}

/// What a job is, as its approval shows it: its target chat, prompt, schedule and time zone,
/// end, title, model and allowed tools (sorted) — everything but its id and its first run (a
/// digest of them, so a long prompt makes a short key).
fn job_content(job: &JobRecord) -> String {
    use sha2::Digest;
    let mut tools = job.allowed_tools.clone();
    ethan_core::sort::sort(&mut tools);
    tools.dedup();
    let shown = json!([
        job.prompt,
        job.kind,
        job.spec,
        job.timezone,
        job.end_at,
        job.title,
        job.model,
        tools,
    ]);
    let digest = hex::encode(&sha2::Sha256::digest(shown.to_string().as_bytes())[..16]);
    format!("job:{}:{digest}", job::target_label(job))
}

/// What a grant to create `job` is keyed by: everything its approval shows ([`job_content`]),
/// and the id when the call named one. A job that differs in any of them — another chat,
/// prompt, schedule, title or tool — asks again.
fn job_key(job: &JobRecord, args: &Value) -> String {
    let content = job_content(job);
    match args.get("job_id").and_then(Value::as_str) {
        Some(id) if !id.trim().is_empty() => format!("{content}:id:{}", job.id),
        _ => content,
    }
}

/// An active job exactly like `job` (everything its approval shows), if one exists: a second
/// one is a copy nobody was shown, so it is not created.
async fn same_job(store: &StorageRef, job: &JobRecord) -> Result<Option<String>, ToolError> {
    let all = store
        .list_jobs()
        .await
        .map_err(|e| ToolError::new(ErrorKind::Dependency, e.to_string()))?;
    let want = job_content(job);
    Ok(all
        .into_iter()
        .find(|j| j.state == JobState::Active && job_content(j) == want)
        .map(|j| j.id))
}

#[async_trait]
impl Tool for ScheduleCreate {
    fn decl(&self) -> &ToolDecl {
        static DECL: LazyLock<ToolDecl> = LazyLock::new(|| {
            ToolDecl::new(
                "schedule_create",
                "Schedule a job: the prompt runs unattended on a schedule (5-field cron like \
                 '0 9 * * 1-5', interval_minutes, or a one-shot `at` ISO date-time) and the answer is \
                 posted as a digest to this chat (or `deliver_to`: telegram:<chat_id> / lark:<chat_id>, \
                 required from the terminal). allowed_tools lists side-effect tools the job may use.",
                json!({
                    "type": "object",
                    "properties": {
                        "prompt": {"type": "string", "description": "What to do at each run, as a request to you, e.g. 'Summarise today's top AI news in 5 bullets'."},
                        "cron": {"type": "string", "description": "minute hour day-of-month month day-of-week, e.g. '0 9 * * 1-5' (weekdays 09:00); names like mon-fri, jan allowed."},
                        "interval_minutes": {"type": "integer", "minimum": 1, "description": "Run every N minutes from now."},
                        "at": {"type": "string", "description": "Run once at this ISO date-time, e.g. 2025-05-01T09:00 (in the job's time zone) or 2025-05-01T09:00:00+08:00."},
                        "timezone": {"type": "string", "description": "IANA zone such as Asia/Shanghai; default: the configured zone."},
                        "title": {"type": "string", "description": "Shown above each digest."},
                        "end_date": {"type": "string", "description": "No runs after this ISO date (inclusive) or date-time."},
                        "deliver_to": {"type": "string", "description": "telegram:<chat_id> or lark:<chat_id>; default: this chat."},
                        "allowed_tools": {"type": "array", "items": {"type": "string"}, "description": "Side-effect tools the job may use when it runs (e.g. file_write); read-only tools are always available. A job that reads private data (files, shell, knowledge, Lark) and then fetches, searches or sends must also list web_fetch / web_search / lark_message_send."},
                        "job_id": {"type": "string", "description": "Optional id; generated when omitted."},
                        "model": {"type": "string", "description": "The model the job's runs use (a configured model name, e.g. a cheaper one for a digest); default: the main model."}
                    },
                    "required": ["prompt"],
                    "additionalProperties": false
                }),
            )
            // Its output names the job it created, nothing of the owner's.
            .not_private()
        });
        &DECL
    }
    fn describe(&self, args: &Value, ctx: &ToolContext) -> CallPlan {
        CallPlan {
            consent: self.consent_check(args, ctx),
            egress: self.egress(args, ctx),
            scope: self.consent_scope(args, ctx),
            ..CallPlan::of(self.decl(), args)
        }
    }
    async fn run(&self, args: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let new = parse(&args)?;
        check_tools(&new, ctx).and_then(|_| self.check_model(&new))?;
        let store = store_of(ctx)?;
        let now = now_of(ctx);
        if let Ok(planned) = job::plan(&new, &origin(ctx), self.config_tz.as_deref(), now) {
            match same_job(store, &planned).await {
                Ok(Some(id)) => {
                    return Err(ToolError::new(
                        ErrorKind::Validation,
                        format!(
                            "job `{id}` is already exactly this job (the same chat, prompt, \
                             schedule, title and tools); nothing was created"
                        ),
                    ))
                }
                Ok(None) => {}
                Err(e) => return Err(e),
            }
        }
        let job =
            match job::create(&**store, &new, &origin(ctx), self.config_tz.as_deref(), now).await {
                Ok(j) => j,
                Err(e) => return Err(job_error(e)),
            };
        let zone = job::zone_of(&job, self.config_tz.as_deref());
        let next = job
            .next_run
            .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
            .map(|t| tz::display(&zone, t))
            .unwrap_or_else(|| "never".into());
        let sched = job::schedule_of(&job)
            .map(|s| s.describe(&zone))
            .unwrap_or_else(|e: schedule::ScheduleError| e.to_string());
        Ok(ToolOutput::new(format!(
            "Created job `{id}` (\"{title}\"): {sched}, time zone {zone}; next run {next}. Each \
             digest goes to {target}. When it runs it may use {tools}{model}. Change it with \
             schedule_pause or schedule_remove and job_id \"{id}\".",
            id = job.id,
            title = job.title,
            zone = zone.name(),
            target = job::target_label(&job),
            tools = tools_text(&job.allowed_tools),
            model = job
                .model
                .as_deref()
                .map(|m| format!(", and model {m} answers"))
                .unwrap_or_default(),
        ))
        .with_metadata(json!({
            "job_id": job.id,
            "next_run": job.next_run,
            "target": job::target_label(&job),
        })))
    }
}

impl ScheduleCreate {
    /// What the owner approves: schedule, zone, first run, target, prompt and allowed tools.
    /// `None` for arguments that make no valid job (the call then only reports the error).
    #[doc(hidden)]
    pub fn consent_check(&self, args: &Value, ctx: &ToolContext) -> Option<String> {
        let job = self.plan(args, ctx).ok()?;
        let id = match args.get("job_id").and_then(Value::as_str) {
            Some(i) if !i.trim().is_empty() => format!("`{}`", job.id),
            _ => "(new)".to_string(),
        };
        let zone = job::zone_of(&job, self.config_tz.as_deref());
        let first = job
            .next_run
            .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
            .map(|t| tz::display(&zone, t))
            .unwrap_or_default();
        let end = job
            .end_at
            .and_then(|t| chrono::DateTime::from_timestamp(t, 0))
            .map(|t| format!(", until {}", tz::display(&zone, t)))
            .unwrap_or_default();
        Some(format!(
            "create scheduled job {id} \"{title}\": {sched} ({zone}), first run {first}{end}; \
             digest posted to {target}{model}.\nPrompt: {prompt}\nWhen it runs unattended it may use: {tools}.",
            model = job
                .model
                .as_deref()
                .map(|m| format!(", answered by model {m}"))
                .unwrap_or_default(),
            title = job.title,
            sched = job::describe_schedule(&job, self.config_tz.as_deref()),
            zone = zone.name(),
            target = job::target_label(&job),
            // In full: approvals are never cut (one too long to show is refused instead).
            prompt = job.prompt,
            tools = tools_text(&job.allowed_tools),
        ))
    }
    /// A job carries its prompt to the chat its digest is posted to, and runs with its tools
    /// later: after private data entered the session, creating one asks, and a session approval
    /// covers the same job only (everything the approval showed, [`job_key`]).
    #[doc(hidden)]
    pub fn egress(&self, args: &Value, ctx: &ToolContext) -> Option<crate::Egress> {
        let job = self.plan(args, ctx).ok()?;
        let target = job::target_label(&job);
        Some(crate::Egress {
            destination: format!(
                "a scheduled job whose prompt (below) runs unattended and whose digest is posted to {target}"
            ),
            scope: job_key(&job, args),
        })
    }
    /// A session grant covers creating the same job only: the same target chat, prompt,
    /// schedule, title, model and allowed tools; a job that differs in any of them asks again.
    #[doc(hidden)]
    pub fn consent_scope(&self, args: &Value, ctx: &ToolContext) -> String {
        match self.plan(args, ctx) {
            Ok(job) => job_key(&job, args),
            Err(_) => "job:invalid".to_string(),
        }
    }
}
