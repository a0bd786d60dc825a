//! What a scheduled job is, below the agent and the scheduler that runs it:
//!
//! - [`schedule`]: cron (5-field POSIX), interval and one-shot `at` schedules, with checks whose
//!   errors say what is wrong;
//! - [`job`]: creating, describing, pausing and removing jobs (used by the `schedule_*` tools
//!   and `ethan jobs`).
//!
//! Time zones are [`crate::tz`]; storage is `crate::store::jobs`; running jobs is
//! `crate::scheduler`.

pub mod job;
pub mod schedule;

use crate::store::Store;

/// The database of the daemon whose home is `home` (tools open it per call).
pub fn open_store(home: &std::path::Path) -> Result<Store, crate::store::StoreError> {
    Store::open(&home.join("ethan.db"))
}
