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

/// One model call in the usage ledger: the tokens the provider reported for it (or, from a
/// server that reports none, an estimate: `estimated`), and where the call was made. Times are
/// Unix seconds; tokens are counted as [`crate::provider::Usage`] counts them (`input_tokens`
/// includes the cached ones).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageRecord {
    pub created_at: i64,
    /// The model that answered (the provider's name for it, else the configured one).
    pub model: String,
    pub session_key: String,
    /// The channel's name (`telegram`, `lark`, `terminal`, `web`, …).
    pub channel: String,
    pub chat_id: String,
    /// The scheduled job whose run made the call; `None` for a person's turn.
    pub job_id: Option<String>,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// The server reported no counts: the tokens are estimated from the request and the answer.
    pub estimated: bool,
}

/// The day a Unix time (seconds) falls on, as a sortable label (`2026-12-02`), in whichever zone
/// the caller chose.
pub type DayOf = std::sync::Arc<dyn Fn(i64) -> String + Send + Sync>;

/// How [`crate::store::UsageStore::usage_report`] groups the ledger.
#[derive(Clone)]
pub enum UsageGrouping {
    /// By local day; the function names the day of a call (the configured zone's date).
    Day(DayOf),
    /// By the model that answered.
    Model,
    /// By chat: `<channel>:<chat_id>`.
    Chat,
}

impl std::fmt::Debug for UsageGrouping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            UsageGrouping::Day(_) => "Day",
            UsageGrouping::Model => "Model",
            UsageGrouping::Chat => "Chat",
        })
    }
}

/// One group of a usage report: how many model calls and their tokens.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct UsageRow {
    /// The day (`2026-12-02`), the model, or the chat (`telegram:123`).
    pub key: String,
    pub calls: u64,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cache_read_tokens: u64,
    pub cache_write_tokens: u64,
    /// Of `calls`: those whose tokens are estimated ([`UsageRecord::estimated`]).
    pub estimated_calls: u64,
}

impl UsageRow {
    /// Input and output together (what budgets count).
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }

    /// Adds one call's tokens.
    pub fn add_call(&mut self, r: &UsageRecord) {
        self.calls += 1;
        self.input_tokens = self.input_tokens.saturating_add(r.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(r.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(r.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(r.cache_write_tokens);
        self.estimated_calls += u64::from(r.estimated);
    }

    /// Adds another row's counts (for a total row).
    pub fn add_row(&mut self, r: &UsageRow) {
        self.calls = self.calls.saturating_add(r.calls);
        self.input_tokens = self.input_tokens.saturating_add(r.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(r.output_tokens);
        self.cache_read_tokens = self.cache_read_tokens.saturating_add(r.cache_read_tokens);
        self.cache_write_tokens = self.cache_write_tokens.saturating_add(r.cache_write_tokens);
        self.estimated_calls = self.estimated_calls.saturating_add(r.estimated_calls);
    }
}
