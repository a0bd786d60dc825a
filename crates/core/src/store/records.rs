//! The records the store keeps for the scheduler and the audit log: a job and its state, one
//! run of a job and how its digest was delivered, one audit entry. Plain data; the `as_str` /
//! `parse` pairs are the stored spellings.

use serde::Serialize;

/// Whether a job still has slots to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobState {
    /// Has a next slot (or is paused).
    Active,
    /// A one-shot job that fired, or a job past its end: it never fires again.
    Done,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Active => "active",
            JobState::Done => "done",
        }
    }
    /// The value [`Self::as_str`] gives, back.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "active" => Some(JobState::Active),
            "done" => Some(JobState::Done),
            _ => None,
        }
    }
}

/// A stored job. `kind`/`spec`: `cron` + a 5-field expression, `interval` + minutes, or `at` +
/// an RFC 3339 instant.
#[derive(Debug, Clone, PartialEq)]
pub struct JobRecord {
    pub id: String,
    pub title: String,
    pub prompt: String,
    pub kind: String,
    pub spec: String,
    /// The job's own IANA zone; `None`: the config's `timezone`, else the system zone.
    pub timezone: Option<String>,
    /// Origin of interval slots (creation time).
    pub anchor: i64,
    /// No slot after this instant runs.
    pub end_at: Option<i64>,
    /// Side-effect tools the job may use when it runs (fixed at creation).
    pub allowed_tools: Vec<String>,
    /// The model its runs ask first (the primary's `model.name` or a `model.fallback` name);
    /// `None`: the configured order.
    pub model: Option<String>,
    /// Target channel (`telegram`, `lark`).
    pub channel: String,
    pub chat_id: String,
    /// `direct` or `group`.
    pub chat_kind: String,
    pub thread: Option<String>,
    /// `<channel>:<user id>` of whoever created it.
    pub creator: String,
    /// The session the job was created in.
    pub created_in: String,
    /// The next slot to fire; `None` once done.
    pub next_run: Option<i64>,
    pub paused: bool,
    pub state: JobState,
    pub created_at: i64,
    pub updated_at: i64,
}

/// How a run ended (or that it is still going).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunStatus {
    Running,
    Ok,
    Failed,
    /// The slot passed while no scheduler ran, beyond `scheduler.misfire_grace_secs`.
    Missed,
    /// The process running it died before it finished.
    Interrupted,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Ok => "ok",
            RunStatus::Failed => "failed",
            RunStatus::Missed => "missed",
            RunStatus::Interrupted => "interrupted",
        }
    }
    /// The value [`Self::as_str`] gives, back.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => RunStatus::Running,
            "ok" => RunStatus::Ok,
            "failed" => RunStatus::Failed,
            "missed" => RunStatus::Missed,
            "interrupted" => RunStatus::Interrupted,
            _ => return None,
        })
    }
}

/// Whether the digest of a run reached its chat.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    Pending,
    Delivered,
    Failed,
    /// Nothing to deliver (a missed slot, an empty answer).
    Skipped,
}

impl Delivery {
    pub fn as_str(self) -> &'static str {
        match self {
            Delivery::Pending => "pending",
            Delivery::Delivered => "delivered",
            Delivery::Failed => "failed",
            Delivery::Skipped => "skipped",
        }
    }
    /// The value [`Self::as_str`] gives, back.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "pending" => Delivery::Pending,
            "delivered" => Delivery::Delivered,
            "failed" => Delivery::Failed,
            "skipped" => Delivery::Skipped,
            _ => return None,
        })
    }
}

/// One run of a job (a claimed slot).
#[derive(Debug, Clone, PartialEq)]
pub struct RunRecord {
    pub id: i64,
    pub job_id: String,
    pub scheduled_for: i64,
    /// `schedule` or `manual` (`ethan jobs run`).
    pub trigger: String,
    /// `<host>:<pid>` of the process that claimed it.
    pub claimed_by: String,
    pub status: RunStatus,
    pub started_at: i64,
    pub finished_at: Option<i64>,
    /// The final answer (the digest body).
    pub output: Option<String>,
    pub error: Option<String>,
    pub delivery: Delivery,
    pub delivery_attempts: u32,
    pub delivered_message_id: Option<String>,
    pub delivery_error: Option<String>,
}

/// One audit row. Times are Unix milliseconds.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct AuditEntry {
    pub execution_id: String,
    pub trace_id: String,
    pub session_key: String,
    pub user_id: String,
    pub channel: String,
    /// The tool that ran (alias resolved), or the name the model used when none matched.
    pub tool: String,
    /// Redacted arguments (JSON text, or the raw text when it was not JSON).
    pub args: String,
    pub started_ms: i64,
    pub ended_ms: i64,
    pub ok: bool,
    pub attempt: u32,
    pub error_kind: Option<String>,
    pub error: Option<String>,
    pub output_bytes: u64,
    pub spill_path: Option<String>,
    /// The model that proposed the call; `None` when not known (entries older than the column,
    /// calls made outside a model turn).
    pub model: Option<String>,
}
