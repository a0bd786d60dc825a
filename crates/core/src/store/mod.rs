//! The store traits: what the agent, the tool engine, the tools and the scheduler need from
//! durable storage, independent of the engine behind it (the daemon's SQLite file today).
//!
//! Every method is `async`: an implementation must never block the caller's runtime thread
//! (the SQLite store runs its statements on a connection thread of its own). Each trait is one
//! concern: [`SessionStore`] (session key → current session), [`MessageStore`] (the
//! provider-neutral history), [`KvStore`] (small durable state), [`AuditStore`] (the audit log
//! and the replay guard), [`JobStore`] (scheduled jobs and their runs), [`OwnerStore`]
//! (owners added at run time), [`UsageStore`] (the tokens of every model call) and
//! [`MemoryStore`] (long-term facts, and searching the stored history). [`Storage`] is all of them, the handle the daemon passes around.
//!
//! Times are Unix seconds (UTC) unless a field says otherwise.

pub mod memory;
pub mod records;

pub use memory::{HistoryHit, MemoryFact, MemoryScope, NewFact};

pub use records::{
    AuditEntry, DayOf, Delivery, JobRecord, JobState, RunRecord, RunStatus, UsageGrouping,
    UsageRecord, UsageRow,
};

use crate::message::ChatMessage;
use async_trait::async_trait;
use std::sync::Arc;

/// A storage failure; the text says which operation failed and why.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StoreError {
    /// The engine refused or failed a statement (`message` is its text, with what "busy" or
    /// "read-only" means here).
    #[error("database {op}: {message}")]
    Backend { op: &'static str, message: String },
    /// A stored value could not be read back (bad JSON, an unknown enum value).
    #[error("database {op}: stored data is unreadable: {message}")]
    Corrupt { op: &'static str, message: String },
    /// The database opened only for reading; the daemon must write it.
    #[error(
        "the database {path} is read-only: ethan must be able to write it (check the file's owner \
         and permissions, and that its file system is mounted read-write)"
    )]
    ReadOnly { path: String },
    /// The database's directory could not be created.
    #[error("cannot create {path}: {message}")]
    Io { path: String, message: String },
    /// The store was shut down (its connection thread is gone).
    #[error("database {op}: the store is closed")]
    Closed { op: &'static str },
}

/// Sessions: a session key (`telegram:<chat_id>`, `terminal:<name>`) and its current session.
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// The active session id for `key`, created on first use.
    async fn current_session(&self, key: &str) -> Result<String, StoreError>;
    /// Retire the active session of `key` and start a new one; returns the new id.
    async fn new_session(&self, key: &str) -> Result<String, StoreError>;
    /// What a turn starts from, read in one step (one round trip): the active session id of
    /// `key` (created on first use, as [`SessionStore::current_session`]), the values of the kv
    /// keys `<prefix><session id>`, one per `kv_prefixes`, in order (`None`: not set), and, when
    /// the caller holds a window of that same session (`held`), what was stored after it
    /// ([`WindowDelta`]: at most `limit` messages).
    async fn start_turn(
        &self,
        key: &str,
        kv_prefixes: &[&str],
        held: Option<&HeldWindow>,
        limit: usize,
    ) -> Result<TurnStart, StoreError>;
    /// What a turn leaves, written in one step (one transaction: all of it or nothing): its
    /// messages appended to its session (as [`MessageStore::append_messages`]), the model calls
    /// not in the ledger yet recorded (as [`UsageStore::record_usage`]) and the session's kv
    /// marks set (as [`KvStore::kv_set`]). A store may queue it and answer at once: every later
    /// call of the same store sees it, and a failure to write it is logged by the store.
    async fn end_turn(&self, end: &TurnEnd) -> Result<(), StoreError>;
}

/// What [`SessionStore::end_turn`] writes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TurnEnd {
    pub session_id: String,
    /// Appended in this order.
    pub messages: Vec<ChatMessage>,
    pub usage: Vec<UsageRecord>,
    /// `(key, value)` pairs, each set as [`KvStore::kv_set`] sets it; no key twice.
    pub marks: Vec<(String, String)>,
}

/// A window of a session's history that the caller holds from an earlier read: the ids of its
/// first and last messages (all the session's messages between them are in it) and how many it
/// has.
#[derive(Debug, Clone, PartialEq)]
pub struct HeldWindow {
    pub session_id: String,
    pub first_id: i64,
    pub last_id: i64,
    pub len: u64,
}

/// What [`SessionStore::start_turn`] read.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnStart {
    pub session_id: String,
    /// The kv values, one per prefix asked for.
    pub values: Vec<Option<String>>,
    /// `Some` when a [`HeldWindow`] of `session_id` was given.
    pub delta: Option<WindowDelta>,
}

/// What was stored in a session after a [`HeldWindow`].
#[derive(Debug, Clone, PartialEq)]
pub struct WindowDelta {
    /// The newest `limit` messages after the held window's last one, oldest first, with their
    /// ids; not cut at a user message (they follow the held ones).
    pub after: Vec<(i64, ChatMessage)>,
    /// How many of the session's messages are stored now between the held window's first and
    /// last ids: its `len` when nothing in its range changed.
    pub held_now: u64,
}

/// The conversation of each session, in the provider-neutral form of [`ChatMessage`]
/// (a provider's `opaque` value is kept exactly as given).
#[async_trait]
pub trait MessageStore: Send + Sync {
    /// Append messages to a session atomically (an assistant message and its tool results land
    /// together or not at all).
    async fn append_messages(
        &self,
        session_id: &str,
        msgs: &[ChatMessage],
    ) -> Result<(), StoreError>;
    /// The last `limit` messages of a session, oldest first, starting at a user message so no
    /// tool result or tool call is left without its partner.
    async fn load_window(
        &self,
        session_id: &str,
        limit: usize,
    ) -> Result<Vec<ChatMessage>, StoreError>;
}

/// Small durable key/value state (a channel's offset, a refreshed user token, a session's
/// taint).
#[async_trait]
pub trait KvStore: Send + Sync {
    async fn kv_get(&self, key: &str) -> Result<Option<String>, StoreError>;
    async fn kv_set(&self, key: &str, value: &str) -> Result<(), StoreError>;
    /// Remove `key`; removing a key that is not there is not an error.
    async fn kv_delete(&self, key: &str) -> Result<(), StoreError>;
    /// Delete `key` and return the value it held, in one statement: of two callers taking the
    /// same key at once, one gets the value and the other `None`.
    async fn kv_take(&self, key: &str) -> Result<Option<String>, StoreError>;
    /// Every key that starts with `prefix` (taken literally: `%` and `_` are characters), with
    /// its value, in key order; at most `limit` of them.
    async fn kv_list(
        &self,
        prefix: &str,
        limit: usize,
    ) -> Result<Vec<(String, String)>, StoreError>;
}

/// The audit log (one entry per proposed tool call, arguments already redacted) and the
/// replay-guard keys.
#[async_trait]
pub trait AuditStore: Send + Sync {
    /// Record one entry. A store may queue the write and answer at once: every later call of
    /// the same store sees it, and a failure to write it is logged by the store.
    async fn insert_audit(&self, entry: &AuditEntry) -> Result<(), StoreError>;
    /// The newest `n` entries, newest first, of one session key or of all.
    async fn recent_audit(
        &self,
        n: usize,
        session: Option<&str>,
    ) -> Result<Vec<AuditEntry>, StoreError>;
    /// Whether a replay key was recorded (the call already started running once).
    async fn replay_key_recorded(&self, key: &str) -> Result<bool, StoreError>;
    /// Record a replay key; `false` when it was already recorded (the call is a replay).
    async fn record_replay_key(
        &self,
        key: &str,
        trace_id: &str,
        tool: &str,
    ) -> Result<bool, StoreError>;
}

/// Scheduled jobs and their runs. A run is the claim on one slot: [`JobStore::claim_run`]
/// succeeds for exactly one caller per `(job_id, scheduled_for)`, across processes.
#[async_trait]
pub trait JobStore: Send + Sync {
    /// Insert a job; `false` when its id exists.
    async fn insert_job(&self, job: &JobRecord) -> Result<bool, StoreError>;
    async fn get_job(&self, id: &str) -> Result<Option<JobRecord>, StoreError>;
    async fn list_jobs(&self) -> Result<Vec<JobRecord>, StoreError>;
    /// Active, unpaused jobs whose next slot is at or before `now`.
    async fn due_jobs(&self, now: i64) -> Result<Vec<JobRecord>, StoreError>;
    /// The earliest next slot of any active, unpaused job.
    async fn next_due_at(&self) -> Result<Option<i64>, StoreError>;
    /// Remove a job and its runs; `false` when there was none.
    async fn remove_job(&self, id: &str) -> Result<bool, StoreError>;
    async fn set_job_paused(
        &self,
        id: &str,
        paused: bool,
        next_run: Option<i64>,
    ) -> Result<bool, StoreError>;
    /// Move a job's next slot from `expected` to `next` (`None`: done); `false` when another
    /// process moved it first.
    async fn advance_job(
        &self,
        id: &str,
        expected: Option<i64>,
        next: Option<i64>,
    ) -> Result<bool, StoreError>;
    /// Claim one slot; the new run's id, or `None` when the slot was claimed already.
    async fn claim_run(
        &self,
        job_id: &str,
        scheduled_for: i64,
        trigger: &str,
        claimed_by: &str,
    ) -> Result<Option<i64>, StoreError>;
    /// Record a slot that passed without a scheduler; `None` when it was claimed already.
    async fn record_missed_run(
        &self,
        job_id: &str,
        scheduled_for: i64,
        claimed_by: &str,
        note: &str,
    ) -> Result<Option<i64>, StoreError>;
    async fn finish_run(
        &self,
        run_id: i64,
        status: RunStatus,
        output: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError>;
    async fn record_delivery(
        &self,
        run_id: i64,
        delivery: Delivery,
        attempts: u32,
        message_id: Option<&str>,
        error: Option<&str>,
    ) -> Result<(), StoreError>;
    async fn get_run(&self, run_id: i64) -> Result<Option<RunRecord>, StoreError>;
    /// The newest `limit` runs of a job, newest first.
    async fn job_runs(&self, job_id: &str, limit: usize) -> Result<Vec<RunRecord>, StoreError>;
    /// Runs still marked running (a process died during them, or is running them now).
    async fn running_runs(&self) -> Result<Vec<RunRecord>, StoreError>;
    /// Runs that ended (`ok` or `failed`, with an output) but whose digest's delivery is still
    /// `pending`, started at or after `since` (their claimant may have died while posting).
    async fn undelivered_runs(&self, since: i64) -> Result<Vec<RunRecord>, StoreError>;
}

/// Owners added at run time (`ethan owner add`, a claim code), beside the configured ones.
#[async_trait]
pub trait OwnerStore: Send + Sync {
    /// Add an owner; `false` when already one.
    async fn add_owner(
        &self,
        channel: &str,
        user_id: &str,
        source: &str,
    ) -> Result<bool, StoreError>;
    async fn remove_owner(&self, channel: &str, user_id: &str) -> Result<bool, StoreError>;
    /// `(channel, user_id, source, added_at)` of every stored owner.
    async fn list_owners(&self) -> Result<Vec<(String, String, String, i64)>, StoreError>;
    async fn is_stored_owner(&self, channel: &str, user_id: &str) -> Result<bool, StoreError>;
    async fn has_stored_owner(&self, channel: &str) -> Result<bool, StoreError>;
    /// Keep a one-time claim code until `expires_at`.
    async fn put_claim_code(&self, code: &str, expires_at: i64) -> Result<(), StoreError>;
    /// Use a claim code up; `true` when it existed and had not expired.
    async fn take_claim_code(&self, code: &str) -> Result<bool, StoreError>;
}

/// The usage ledger: one row per model call with the tokens the provider reported, kept for
/// good. Budgets ([`UsageStore::tokens_since`]) and reports ([`UsageStore::usage_report`]) read
/// it.
#[async_trait]
pub trait UsageStore: Send + Sync {
    /// Record one model call; queued as [`AuditStore::insert_audit`] may be.
    async fn record_usage(&self, record: &UsageRecord) -> Result<(), StoreError>;
    /// Input + output tokens of the calls made at or after `since` (Unix seconds), of the whole
    /// ledger or of one chat (`(channel, chat_id)`).
    async fn tokens_since(&self, since: i64, chat: Option<(&str, &str)>)
        -> Result<u64, StoreError>;
    /// The calls made at or after `since` (Unix seconds), grouped by `by`: days in ascending
    /// order; models and chats by total tokens, most first (then by key).
    async fn usage_report(
        &self,
        since: i64,
        by: UsageGrouping,
    ) -> Result<Vec<UsageRow>, StoreError>;
}

/// Long-term memory ([`MemoryFact`]) and the stored history as compaction and search read it.
/// Subjects and scopes are the caller's: the store never decides who may see what.
#[async_trait]
pub trait MemoryStore: Send + Sync {
    /// Store a fact; returns its id. When `fact.replaces` names a current fact of the same
    /// subject, that one is marked superseded by the new one in the same transaction (a
    /// `replaces` of another subject, or of no fact, is ignored).
    async fn save_fact(&self, fact: &NewFact) -> Result<i64, StoreError>;
    /// The facts of one subject, most recently confirmed first (ties: newest id first);
    /// superseded ones only when `with_superseded`.
    async fn facts_of(
        &self,
        subject: &str,
        with_superseded: bool,
    ) -> Result<Vec<MemoryFact>, StoreError>;
    /// Every fact, superseded ones included, by subject then id.
    async fn all_facts(&self) -> Result<Vec<MemoryFact>, StoreError>;
    /// Mark facts as confirmed (saved again, or found by a search) at `at` (Unix seconds).
    async fn confirm_facts(&self, ids: &[i64], at: i64) -> Result<(), StoreError>;
    /// Delete a fact and the facts it superseded (the whole chain), only if it belongs to
    /// `subject` when one is given; `false` when there was no such fact.
    async fn forget_fact(&self, id: i64, subject: Option<&str>) -> Result<bool, StoreError>;
    /// The newest `limit` messages of a session whose id is above `after`, oldest first, with
    /// their ids, cut so the list starts at a user message (as [`MessageStore::load_window`]).
    async fn messages_after(
        &self,
        session_id: &str,
        after: i64,
        limit: usize,
    ) -> Result<Vec<(i64, ChatMessage)>, StoreError>;
    /// The newest `limit` messages of every session of `session_key` (current and retired)
    /// whose text contains `needle`, case-insensitively (ASCII letters), newest first; tool
    /// results only when `with_tool_results`.
    async fn search_history(
        &self,
        session_key: &str,
        needle: &str,
        with_tool_results: bool,
        limit: usize,
    ) -> Result<Vec<HistoryHit>, StoreError>;
}

/// Every store trait: the handle the daemon gives the agent, the tool engine, the tools and the
/// scheduler.
pub trait Storage:
    SessionStore
    + MessageStore
    + KvStore
    + AuditStore
    + JobStore
    + OwnerStore
    + UsageStore
    + MemoryStore
{
}

impl<T> Storage for T where
    T: SessionStore
        + MessageStore
        + KvStore
        + AuditStore
        + JobStore
        + OwnerStore
        + UsageStore
        + MemoryStore
        + ?Sized
{
}

/// A shared store handle.
pub type StorageRef = Arc<dyn Storage>;
